"""EndoVis2017 Robotic Instrument Segmentation (Allan et al. 2019): da Vinci porcine frames, one mask per instrument.

Layout read (``docs/sources/endovis2017.md``; third-party loaders agree)::

    instrument_1_4_training/instrument_dataset_N/left_frames/frame000.png .. frame224.png   (1920x1080)
    instrument_1_4_training/instrument_dataset_N/ground_truth/<Instrument folder>/frameNNN.png
    instrument_5_8_training/...            instrument_{1_4,5_8,9_10}_testing/instrument_dataset_N/left_frames/
    instrument_2017_test/[instrument_2017_test/]instrument_dataset_N/[gt/]TypeSegmentation/frameNNN.png

What the release holds (the challenge's Data page: frames "sampled from 30 Hz video at 2 Hz", each "hand labelled"
into the articulated parts of the instruments, "a rigid shaft, an articulated wrist and claspers", plus a
miscellaneous class for other instruments such as a drop-in ultrasound probe; Allan et al. 2019, "2017 Robotic
Instrument Segmentation Challenge", arXiv 1902.06426): training: each ``ground_truth`` folder is ONE instrument
instance; its grey mask holds the instrument's parts (10 shaft, 20 wrist, 30 claspers, 40 probe; 0 background;
3-channel copies read from channel 0). The folder names vary per sequence (``Left_Prograsp_Forceps_labels``,
``Large_Needle_Driver_Left_labels``, ``Prograsp_Forceps``, ``Right_Vessel_Sealer``): the type is the name without
``Left``/``Right`` and ``_labels``; ``Maryland Bipolar Forceps`` is a bipolar forceps and ``Other`` the miscellaneous
class (a drop-in ultrasound probe in sequence 1). Every part value maps to the folder's instrument type.

One box per instrument: the real masks leave unlabelled lines of 3-4 px between the parts of one instrument (shaft,
wrist, claspers; measured on a real frame of a third-party derived release of merged masks, each the sum of one
sequence's per-instrument part masks, which therefore have the same seams), and boxing each connected region gave
3-7 boxes for a frame that shows 3 instruments. A folder's mask IS one instrument, so it is boxed as one instance
around all its pixels (``seg_to_box.FileMask`` with policy ``single``), seams and occlusion splits included. The test
labels are merged type maps (two instruments of one type share a value), so there the type keeps the ``components``
policy with pieces at most ``SEAM_PX`` (4) pixels apart joined (``FileMask.max_gap``): on that real frame, joining
pieces at most 2 px apart left 4 boxes for its 3 instruments and at most 4 px left 3. Instruments further apart stay
two boxes; the price of reading a merged map is that two of one type within 4 px become one, and that an instrument
cut by occlusion into pieces further apart (~15 px on real frames) stays two boxes. The parts are not made labels here
(EndoVis2018 has them).

Test: sequences 1-8 continue the training recordings (frames 225-299), 9-10 are new (frames 0-299); the labels are
the later ``instrument_2017_test`` release, read from ``TypeSegmentation`` (type id 1-7 per pixel; its Parts masks
use 30/100/255, a different code, and are not read). Video ids carry the split (``train_seq_1``, ``test_seq_1``).
Frames are 2-Hz samples of 30-Hz video (the Data page), kept with their file numbers and ``fps=None``.
Splits: ``official`` (train 1-8, test all ten test parts); ``unseen-9-10`` tests only on the two new recordings,
since the test frames of 1-8 directly follow training frames of the same procedure.
"""

from __future__ import annotations

import re
from pathlib import Path

from public_converters.schema import Frame, SourceError, SourceTables, Video
from public_converters.seg_to_box import FileMask, image_size
from public_converters.spec import SourceSpec


TYPE_IDS = (
    "Bipolar Forceps",
    "Prograsp Forceps",
    "Large Needle Driver",
    "Vessel Sealer",
    "Grasping Retractor",
    "Monopolar Curved Scissors",
    "Other",
)
TOOLS = {
    "Bipolar Forceps": "bipolar forceps",
    "Maryland Bipolar Forceps": "bipolar forceps",
    "Prograsp Forceps": "prograsp forceps",
    "Large Needle Driver": "large needle driver",
    "Vessel Sealer": "vessel sealer",
    "Grasping Retractor": "grasping retractor",
    "Monopolar Curved Scissors": "monopolar curved scissors",
    "Other": "other instrument",
}
MASK_POLICIES = dict.fromkeys(TOOLS, "components")
PART_VALUES = (10, 20, 30, 40)  # shaft, wrist, claspers, probe
SEAM_PX = 4  # the widest unlabelled line between two parts of one instrument in the real (merged) masks: 3-4 px
INSTRUMENT_MASK = {"policy": "single"}  # a ground_truth folder's mask shows one instrument: one box
MERGED_MASK = {"max_gap": SEAM_PX}  # a merged type map: components, seams closed
TYPE_PALETTE = {0: None, **{number: name for number, name in enumerate(TYPE_IDS, start=1)}}
SPLITS = {
    "official": {f"train_seq_{n}": "train" for n in range(1, 9)} | {f"test_seq_{n}": "test" for n in range(1, 11)},
    "unseen-9-10": {f"train_seq_{n}": "train" for n in range(1, 9)} | {"test_seq_9": "test", "test_seq_10": "test"},
}
PART = re.compile(r"^instrument_\d+_\d+_(training|testing)$")
SEQUENCE = re.compile(r"^instrument_dataset_(\d+)$")
FRAME = re.compile(r"^frame(\d{3})\.png$")


def _unnest(folder: Path) -> Path:
    """Some copies extract a zip's folder into itself."""
    while (folder / folder.name).is_dir():
        folder = folder / folder.name
    return folder


def _frames(folder: Path) -> dict[int, Path]:
    """frame number -> file of a folder of ``frameNNN.png``; any other file name is an error."""
    if not folder.is_dir():
        raise SourceError(folder, "folder not found", fix="the sequence is incomplete")
    found = {}
    for path in sorted(folder.iterdir()):
        match = FRAME.match(path.name)
        if not match and not path.name.startswith("."):
            raise SourceError(path, "unexpected file name", fix="expected frameNNN.png")
        if match:
            found[int(match.group(1))] = path
    return found


def instrument_type(folder_name: str) -> str:
    """``Large_Needle_Driver_Left_labels`` -> ``Large Needle Driver``."""
    words = re.sub(r"_labels$", "", folder_name).split("_")
    return " ".join(word for word in words if word not in ("Left", "Right"))


def _masks(root: Path, video_id: str, images: dict, gt: list[tuple[Path, dict, dict]], size) -> list[FileMask]:
    """Each label folder's mask of each left frame; ``grouping`` says how its pixels group into instruments."""
    masks = []
    for folder, palette, grouping in gt:
        found = _frames(folder)
        for frame in sorted(set(images) | set(found)):
            path = found.get(frame, folder / f"frame{frame:03d}.png")
            if frame not in images:
                raise SourceError(path, f"labels frame {frame}, which has no left_frames image")
            if frame not in found:
                raise SourceError(path, "file not found", fix="every left frame needs a mask in each label folder")
            masks.append(FileMask(video_id, frame, str(path.relative_to(root)), palette, size, **grouping))
    return masks


def read_sequence(root: Path, folder: Path, video_id: str, gt: list[tuple[Path, dict, dict]]):
    images = _frames(folder / "left_frames")
    if not images:
        raise SourceError(folder / "left_frames", "no frameNNN.png images", fix="the sequence is incomplete")
    width, height = image_size(images[min(images)])
    frames = [Frame(video_id, n, image_path=str(path.relative_to(root))) for n, path in sorted(images.items())]
    masks = _masks(root, video_id, images, gt, (height, width))
    return Video(video_id, SPLITS["official"][video_id], None, None, width, height), frames, masks


def _test_labels(root: Path, number: int) -> list[tuple[Path, dict, dict]]:
    """The merged type masks of one test sequence, if the test labels release is there."""
    release = root / "instrument_2017_test"
    if not release.is_dir():
        return []
    sequence = _unnest(release) / f"instrument_dataset_{number}"
    for folder in (sequence / "gt" / "TypeSegmentation", sequence / "TypeSegmentation"):
        if folder.is_dir():
            return [(folder, TYPE_PALETTE, MERGED_MASK)]
    raise SourceError(sequence, "no [gt/]TypeSegmentation folder", fix="the test labels release is incomplete")


def read(root: Path, labels) -> SourceTables:
    parts = [(p, PART.match(p.name).group(1)) for p in sorted(root.iterdir()) if p.is_dir() and PART.match(p.name)]
    if not parts:
        raise SourceError(root, "no instrument_N_M_training/testing folders", fix="point at the extracted zips")
    tables = SourceTables()
    for part, kind in parts:
        for folder in sorted(_unnest(part).iterdir()):
            match = SEQUENCE.match(folder.name)
            if not match:
                continue
            number, split = int(match.group(1)), "train" if kind == "training" else "test"
            video_id = f"{split}_seq_{number}"
            if video_id not in SPLITS["official"]:
                raise SourceError(folder, f"no {split} sequence {number} in EndoVis2017", fix="check the folder")
            if split == "test":
                gt = _test_labels(root, number)
            else:
                instruments = sorted(p for p in (folder / "ground_truth").glob("*") if p.is_dir())
                if not instruments:
                    raise SourceError(folder / "ground_truth", "no instrument label folders", fix="re-extract it")
                gt = []
                for path in instruments:
                    native = instrument_type(path.name)
                    labels.map("tool", native, path)
                    gt.append((path, {0: None, **dict.fromkeys(PART_VALUES, native)}, INSTRUMENT_MASK))
            video, frames, masks = read_sequence(root, folder, video_id, gt)
            tables.videos.append(video)
            tables.frames += frames
            tables.masks += masks
    labels.raise_if_unmapped()  # name the label folder rather than a mask inside it
    return tables


SPEC = SourceSpec(
    name="endovis2017",
    title="EndoVis2017",
    procedure="robot-assisted surgery (porcine)",
    branches=("image",),
    capabilities=frozenset({"has_tool_presence", "has_tool_bbox", "has_masks"}),
    labels={"tool": TOOLS},
    read=read,
    mask_policies=MASK_POLICIES,
    split_variants=SPLITS,
    default_split_variant="official",
    homepage="https://endovissub2017-roboticinstrumentsegmentation.grand-challenge.org",
    license="unknown (challenge registration required; mirrors say CC BY-NC 4.0)",
    unconfirmed=(
        "license",
        "test labels nesting (instrument_2017_test twice, gt/ level optional): resolved by trying both",
        "training masks hold only 0/10/20/30/40 (another value is an error naming the mask)",
        "test label file names equal the test image names (frame225-299 for sequences 1-8)",
        "the part/type JSON files (mappings.json or parts_mapping.json; not read: values and types are data here)",
        "what 'Other' shows in test sequences 9-10 (mapped to 'other instrument')",
        "merged test masks: one instrument's seams are at most 4 px (3-4 px on a third-party merged release)",
    ),
)
