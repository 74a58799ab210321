"""EndoVis2018 Robotic Scene Segmentation (Allan et al. 2020): porcine nephrectomy frames with RGB class masks.

Layout read (``docs/sources/endovis2018.md``; a third-party loader that audited the real download)::

    miccai_challenge_2018_release_1/[miccai_challenge_2018_release_1/]labels.json, seq_1 .. seq_4/
    miccai_challenge_release_2/ seq_5 .. seq_7      release_3: seq_9 .. seq_12 (there is no seq_8)
    miccai_challenge_release_4/ seq_13 .. seq_16
        seq_N/left_frames/frameNNN.png, labels/frameNNN.png (RGB class colours), right_frames/ (not read)
    repairs/seq_N_frameNNN.png                      corrected training masks, used instead of labels/frameNNN.png
    test_data/labels.json, seq_N-<timestamp>-001/seq_N/left_frames, labels     (4 other procedures)

Confirmed (third-party): the release folders and their double nesting, ``__MACOSX`` junk (ignored: only
``seq_N`` folders and ``frameNNN.png`` names are read), the missing seq_8, the repairs, the two ``labels.json``
schemas (releases: a list of ``{name, color: [R, G, B], classid}`` naming only the classes of that release, so the
palette is their union; test: ``{"classes": [... color: [R, G, B, A] ...]}``, alpha dropped), 1280x1024 frames. Masks
are decoded by exact RGB; a colour no ``labels.json`` names is an error. Test ``seq_1..4`` are not training
``seq_1..4``: video ids carry the split (``train_seq_1``, ``test_seq_1``). Frames are 0-based file numbers of a
subsampled sequence (no video, ``fps=None``). A test sequence without ``labels/`` is read as unannotated frames.

Class names differ between the releases' ``labels.json`` files: one names colour (124, 155, 5) ``intestine`` where
the others say ``small-intestine`` (or ``small intestine``). Names are compared after folding case and separators
(spaces, underscores -> hyphens) and the known aliases (``ALIASES``), so every spelling is the one vocabulary label
and the same colour is not a conflict between two files; an unknown name is still an error naming its file.

A ``labels/`` folder that ends before its ``left_frames/`` (test sequence 3: 250 frames, 249 labels) is a named
warning (``LabelsEndEarly``: the folder, both counts, the unlabelled frames), not an error: the labelled frames are
right. The frames past the last mask are kept as unlabelled frames (no mask, no presence: the build counts each as
"frame without annotations"), and ``read_counts`` records how many, per folder, so frames in = labelled +
unlabelled. A mask missing before the last one is still an error (a gap is damage, not a shorter annotation).

Seg-to-box policies (choices): kidney parenchyma and covered kidney ``single``; small intestine ``semantic``;
instrument parts, clamps, suturing needle, thread, suction instrument and ultrasound probe ``components``.
Splits: official (15 training, 4 test sequences); ``validation-2-5-9-15`` holds out the community's validation.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

from public_converters.coco import read_json
from public_converters.schema import Frame, SemanticMask, SourceError, SourceTables, Video
from public_converters.seg_to_box import image_size
from public_converters.spec import SourceSpec


TOOLS = {
    "instrument-shaft": "instrument shaft",
    "instrument-clasper": "instrument clasper",
    "instrument-wrist": "instrument wrist",
    "thread": "thread",
    "clamps": "clamp",
    "suturing-needle": "suturing needle",
    "suction-instrument": "suction irrigator",
    "ultrasound-probe": "ultrasound probe",
}
ANATOMY = {
    "kidney-parenchyma": "kidney parenchyma",
    "covered-kidney": "covered kidney",
    "small-intestine": "small intestine",
}
BACKGROUND = "background-tissue"
ALIASES = {"intestine": "small-intestine"}  # folded name in some release's labels.json -> the name in TOOLS/ANATOMY
MASK_POLICIES = {
    **dict.fromkeys(TOOLS, "components"),
    "kidney-parenchyma": "single",
    "covered-kidney": "single",
    "small-intestine": "semantic",
}
TRAIN_SEQUENCES = (*range(1, 8), *range(9, 17))
TEST_SEQUENCES = (1, 2, 3, 4)


def _splits(validation: tuple[int, ...]) -> dict[str, str]:
    train = {f"train_seq_{n}": "validation" if n in validation else "train" for n in TRAIN_SEQUENCES}
    return train | {f"test_seq_{n}": "test" for n in TEST_SEQUENCES}


SPLITS = {"official": _splits(()), "validation-2-5-9-15": _splits((2, 5, 9, 15))}
RELEASE = re.compile(r"^miccai_challenge_(2018_)?release_\d$")
SEQUENCE = re.compile(r"^seq_(\d+)(-.+)?$")
FRAME = re.compile(r"^frame(\d{3})\.png$")
REPAIR = re.compile(r"^(seq_\d+)_frame(\d{3})\.png$")


class LabelsEndEarly(UserWarning):
    """A sequence's ``labels/`` ends before its ``left_frames/``: the frames after the last mask are unlabelled."""


def native_name(name: str) -> str:
    """The one spelling of a ``labels.json`` class name: ``Small Intestine`` / ``small_intestine`` ->
    ``small-intestine``; ``intestine`` -> ``small-intestine`` (``ALIASES``)."""
    folded = re.sub(r"[\s_-]+", "-", name.strip().lower())
    return ALIASES.get(folded, folded)


def _unnest(folder: Path) -> Path:
    """Releases are sometimes extracted twice into themselves: descend to the folder holding ``labels.json``."""
    while not (folder / "labels.json").is_file() and (folder / folder.name).is_dir():
        folder = folder / folder.name
    return folder


def _palette(path: Path, labels, palette: dict) -> None:
    """Add one ``labels.json`` (either schema) to the colour -> class-name palette."""
    payload = read_json(path, fix="every release folder ships its labels.json")
    classes = payload.get("classes") if isinstance(payload, dict) else payload
    for row, entry in enumerate(classes if isinstance(classes, list) else [None]):
        color = entry.get("color") if isinstance(entry, dict) else None
        if not isinstance(color, list) or len(color) not in (3, 4) or not isinstance(entry.get("name"), str):
            raise SourceError(
                path, f"malformed class {entry!r}", row=row, fix="expected {name, color: [R, G, B(, A)]}"
            )
        name, rgb = native_name(entry["name"]), tuple(int(value) for value in color[:3])
        if name != BACKGROUND:
            labels.map(labels.kind_of(name) or "anatomy", name, path, row)
        known = palette.setdefault(rgb, None if name == BACKGROUND else name)
        if known != (None if name == BACKGROUND else name):
            raise SourceError(path, f"colour {rgb} is {name!r} here but {known!r} in another labels.json", row=row)


def _sequences(folder: Path) -> list[tuple[int, Path]]:
    """(number, folder) of the ``seq_N`` folders; the test set wraps each in a ``seq_N-<timestamp>-001`` folder."""
    found = []
    for path in sorted(p for p in folder.iterdir() if p.is_dir()):
        match = SEQUENCE.match(path.name)
        if match:
            inner = path / f"seq_{match.group(1)}"
            found.append((int(match.group(1)), inner if match.group(2) and inner.is_dir() else path))
    return sorted(found)


def _unlabelled_tail(root: Path, folder: Path, images: list[str], labels: list[str]) -> list[str]:
    """The left frames after the last label mask (warned about, kept unlabelled); [] when labels cover them all."""
    last = labels[-1] if labels else ""
    tail = [name for name in images if name > last]
    if tail:
        relative = (folder / "labels").relative_to(root)
        warnings.warn(
            LabelsEndEarly(
                f"{folder / 'labels'}: {len(labels)} label masks for {len(images)} left frames; "
                f"{tail[0][:-4]}..{tail[-1][:-4]} have no mask and are kept as unlabelled frames "
                f"(read_counts: 'left frames after the last label mask: {relative}')"
            ),
            stacklevel=3,
        )
    return tail


def read_sequence(root: Path, folder: Path, video_id: str, split: str, palette: dict, repairs: dict):
    """Video, frames and masks of one ``seq_N`` folder, and how many left frames come after its last label mask."""
    names = {
        name: sorted(p.name for p in (folder / name).glob("frame*.png") if FRAME.match(p.name))
        for name in ("left_frames", "labels")
    }
    labelled = (folder / "labels").is_dir()
    if not names["left_frames"]:
        raise SourceError(folder / "left_frames", "no frameNNN.png images", fix="the sequence is incomplete")
    width, height = image_size(folder / "left_frames" / names["left_frames"][0])
    tail = set(_unlabelled_tail(root, folder, names["left_frames"], names["labels"]) if labelled else ())
    frames, masks = [], []
    for name in sorted(set(names["left_frames"]) | set(names["labels"])):
        number = int(FRAME.match(name).group(1))
        image, label = folder / "left_frames" / name, folder / "labels" / name
        with_label = labelled and name not in tail
        for path in (image, label) if with_label else (image,):
            if not path.is_file():
                raise SourceError(path, "file not found", fix="every frame needs its left image and its label mask")
        frames.append(Frame(video_id, number, image_path=str(image.relative_to(root))))
        if with_label:
            mask = repairs.pop((folder.name, number), label) if split == "train" else label
            masks.append(SemanticMask(video_id, number, str(mask.relative_to(root)), palette, (height, width)))
    return Video(video_id, split, None, len(frames), width, height), frames, masks, len(tail)


def read(root: Path, labels) -> SourceTables:
    releases = [_unnest(p) for p in sorted(root.iterdir()) if p.is_dir() and RELEASE.match(p.name)]
    test = _unnest(root / "test_data") if (root / "test_data").is_dir() else None
    if not releases and test is None:
        raise SourceError(
            root, "no miccai_challenge_*release_N or test_data folders", fix="point at the extracted data"
        )
    palette: dict = {}
    for folder in [*releases, *([test] if test else [])]:
        _palette(folder / "labels.json", labels, palette)
    labels.raise_if_unmapped()  # every class name is in a labels.json: report them with that file
    repairs = {}
    for path in sorted((root / "repairs").glob("*.png")) if (root / "repairs").is_dir() else []:
        match = REPAIR.match(path.name)
        if not match:
            raise SourceError(path, "unexpected repair file name", fix="expected seq_N_frameNNN.png")
        repairs[match.group(1), int(match.group(2))] = path
    tables = SourceTables()
    parts = [("train", folder) for folder in releases] + ([("test", test)] if test else [])
    for split, release in parts:
        for number, folder in _sequences(release):
            video_id = f"{split}_seq_{number}"
            if video_id not in SPLITS["official"]:
                raise SourceError(folder, f"{split} sequence {number} is not in the release", fix="check the folder")
            video, frames, masks, unlabelled = read_sequence(root, folder, video_id, split, palette, repairs)
            if unlabelled:
                key = f"left frames after the last label mask: {(folder / 'labels').relative_to(root)}"
                tables.read_counts[key] = unlabelled
            tables.videos.append(video)
            tables.frames += frames
            tables.masks += masks
    if repairs:
        (seq, frame), path = min(repairs.items())
        raise SourceError(path, f"repairs a frame that is not in the release ({seq} frame {frame})")
    return tables


SPEC = SourceSpec(
    name="endovis2018",
    title="EndoVis2018",
    procedure="robot-assisted partial nephrectomy (porcine)",
    branches=("image",),
    capabilities=frozenset(
        {"has_tool_presence", "has_anatomy_presence", "has_tool_bbox", "has_anatomy_bbox", "has_masks"}
    ),
    labels={"tool": TOOLS, "anatomy": ANATOMY},
    read=read,
    mask_policies=MASK_POLICIES,
    split_variants=SPLITS,
    default_split_variant="official",
    homepage="https://endovissub2018-roboticscenesegmentation.grand-challenge.org",
    license="unknown (challenge registration required)",
    unconfirmed=(
        "license",
        "test_data nesting seq_N-<timestamp>-001/seq_N (third-party audit) and whether test labels ship with it",
        "validation split 2, 5, 9, 15 is community practice, not official",
        "class-name spellings beyond case/separators and the 'intestine' alias",
    ),
)
