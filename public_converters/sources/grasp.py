"""GraSP (Ayobi et al. 2024): 13 robot-assisted radical prostatectomies with phases, steps, instrument masks, actions.

Layout read (``docs/sources/grasp.md``; the GraSP README's ``GraSP_30fps`` tree), under the GraSP root::

    GraSP_30fps/frames/CASE001/000000068.jpg ...    named by the 9-digit frame number of the original video
    GraSP_30fps/annotations/grasp_short-term_{train,test,fold1,fold2}.json   COCO-like: instruments (RLE masks, boxes)
    GraSP_30fps/annotations/grasp_long-term_{train,test,fold1,fold2}.json    phases and steps per keyframe

Confirmed (official README, TAPIS loader): the tree, the 9-digit names equal to ``images[].frame_num`` (TAPIS asserts
it), ``video_name`` = ``CASExxx``, instrument ``category_id`` and ``actions`` 1-based (a list per instance), phases
and steps 0-based, COCO ``[x, y, w, h]`` boxes, RLE segmentations (polygons accepted too), ids restarting in every
file (frames are keyed here by case and frame number). Category names come from each file's ``categories`` /
``actions_categories`` / ``phases_categories`` / ``steps_categories`` lists and are mapped by name.

Time base: ``frame_index`` is the original frame number from the file name and ``Video.fps`` the original rate (45
fps, or 30 for the six cases TAPIS treats as 30-fps originals), so no lossy ``round(n * 30 / 45)`` mapping is needed
and ``1fps_to_30fps_association.json`` (format unknown) is not read. Phase/step segments come from the long-term
keyframes; a run covers its keyframe spacing (the case's median gap), so 1-fps keyframes tile the timeline.
The instance masks come from the JSON RLE; the class-id PNGs under ``segmentations/`` repeat them and are not read.
An instance carries its actions (one or more) in ``Instance.actions``; the frame lists them all in ``Frame.actions``.

Splits (data, validated against which JSON lists each case): official 8 train / 5 test cases; ``fold1`` / ``fold2``
hold out one cross-validation fold of the training cases as validation.
"""

from __future__ import annotations

import itertools
import statistics
from collections import Counter
from pathlib import Path

from public_converters import coco
from public_converters.schema import Frame, Instance, SourceError, SourceTables, Video, segments_from_labels
from public_converters.spec import SourceSpec


ANNOTATIONS = "GraSP_30fps/annotations"
FRAMES = "GraSP_30fps/frames"
THIRTY_FPS_CASES = {"CASE021", "CASE041", "CASE047", "CASE050", "CASE051", "CASE053"}
TRAIN = ("CASE001", "CASE002", "CASE003", "CASE004", "CASE007", "CASE014", "CASE015", "CASE021")
TEST = ("CASE041", "CASE047", "CASE050", "CASE051", "CASE053")
FOLDS = {"fold1": TRAIN[:4], "fold2": TRAIN[4:]}
OFFICIAL = {**dict.fromkeys(TRAIN, "train"), **dict.fromkeys(TEST, "test")}
SPLITS = {
    "official": OFFICIAL,
    **{fold: {**OFFICIAL, **dict.fromkeys(cases, "validation")} for fold, cases in FOLDS.items()},
}
PHASES = {
    "Idle": "idle",
    "LPIL": "left pelvic isolated lymphadenectomy",
    "RPIL": "right pelvic isolated lymphadenectomy",
    "Retzius_Space": "developing the space of retzius",
    "Dorsal_Venous_Complex": "ligation of the deep dorsal venous complex",
    "Id_Bladder_Neck": "bladder neck identification and transection",
    "Seminal_Vesicles": "seminal vesicle dissection",
    "Denonvilliers_Fascia": "development of the plane between prostate and rectum",
    "Pedicle_Control": "prostatic pedicle control",
    "Severing_Prostate_Urethra": "severing of the prostate from the urethra",
    "Bladder_Neck_Rec": "bladder neck reconstruction",
}
STEPS = {
    "Idle": "idle",
    "Id_Illiac_Vein_Artery": "identification of iliac vein and artery",
    "Dissection_Illiac_Lymph_Nodes": "dissection of iliac lymph nodes",
    "Dissection_Obturator_Lymph_Nodes": "dissection of obturator lymph nodes",
    "Pack_Lymph_Nodes": "pack lymph nodes",
    "Prevessical_Dissection": "prevesical dissection",
    "Ligation_Dorsal_Venous_Complex": "ligation of dorsal venous complex",
    "Prostate_Dissection": "prostate dissection",
    "Seminal_Vessicle_Dissection": "seminal vesicle dissection",
    "Denon_Dissection": "denonvilliers dissection",
    "Cut_Prostate": "cut prostate",
    "Hold_Prostate": "hold prostate",
    "Pack_Prostate": "pack prostate",
    "Pass_Suture_Urethra": "pass suture through urethra",
    "Pass_Suture_Neck": "pass suture through bladder neck",
    "Pull_Suture": "pull suture",
    "Tie_Suture": "tie suture",
    "Suction": "suction",
    "Cut": "cut",
    "Cut_Bladder": "cut bladder",
    "Clip_Pedicles": "clip pedicles",
}
TOOLS = {
    "Bipolar Forceps": "bipolar forceps",
    "Prograsp Forceps": "prograsp forceps",
    "Large Needle Driver": "large needle driver",
    "Monopolar Curved Scissors": "monopolar curved scissors",
    "Suction Instrument": "suction irrigator",
    "Clip Applier": "clip applier",
    "Laparoscopic Grasper": "grasper",
}
ACTIONS = {
    name: name.lower()
    for name in ("Cauterize", "Close", "Cut", "Grasp", "Hold", "Open", "Open Something", "Pull", "Push")
    + ("Release", "Still", "Suction", "Travel", "Other")
}


def _load(path: Path) -> dict:
    return coco.load(path, ("images", "annotations"), fix="unpack GraSP_30fps/annotations from the release")


def _names(data: dict, key: str, kind: str, path: Path, labels) -> dict[int, str]:
    """id -> canonical name from one of the file's category lists."""
    native = coco.index_categories(data, path, key)
    return {i: labels.map(kind, name, path, f"{key} id {i}") for i, name in native.items()}


def _images(data: dict, path: Path) -> dict:
    """image id -> ((case, frame number), record); ids restart in every file, the key does not."""

    def frame_of(image: dict, row: str) -> tuple[str, int]:
        try:
            return str(image["video_name"]), int(image["frame_num"])
        except (TypeError, ValueError) as error:
            raise SourceError(path, f"frame_num {image['frame_num']!r} is not a frame number", row=row) from error

    return coco.index_images(data, path, frame_of, ("video_name", "frame_num"))


def read_short_term(path: Path, data: dict, labels, frames: dict, instances: list, sizes: dict) -> None:
    tools = _names(data, "categories", "tool", path, labels)
    actions = _names(data, "actions_categories", "action", path, labels)
    images = _images(data, path)
    counts: Counter = Counter()
    for index, ((case, frame), image) in enumerate(images.values()):
        if sizes.setdefault(case, (image["width"], image["height"])) != (image["width"], image["height"]):
            raise SourceError(path, f"{case} frames differ in size", row=f"images[{index}]")
        frames.setdefault((case, frame), {})["tools"] = []
    for annotation in coco.annotations(data, path, images, tools, ("category_id", "instruments")):
        acted = annotation.record.get("actions")
        acted = [acted] if isinstance(acted, int) else acted
        if not isinstance(acted, list) or not acted or any(value not in actions for value in acted):
            raise SourceError(path, f"actions {acted!r} are not ids of actions_categories", row=annotation.row)
        done = sorted({actions[value] for value in acted})
        entry = frames[annotation.key]
        entry["tools"] = sorted({*entry["tools"], annotation.category})
        entry["actions"] = sorted({*entry.get("actions", []), *done})
        box, mask = coco.geometry(annotation, path, with_mask=True)
        instances.append(
            Instance(*annotation.key, "tool", annotation.category, box, mask, counts[annotation.key], done)
        )
        counts[annotation.key] += 1


def read_long_term(path: Path, data: dict, labels, frames: dict) -> None:
    names = {kind: _names(data, f"{kind}s_categories", kind, path, labels) for kind in ("phase", "step")}
    for annotation in coco.annotations(data, path, _images(data, path)):
        entry = frames.setdefault(annotation.key, {})
        for kind in ("phase", "step"):
            value = annotation.record.get(f"{kind}s")
            if not isinstance(value, int) or value not in names[kind]:
                raise SourceError(path, f"{kind}s {value!r} is not an id of {kind}s_categories", row=annotation.row)
            if entry.setdefault(kind, names[kind][value]) != names[kind][value]:
                raise SourceError(path, f"two different {kind}s for one frame", row=annotation.row)


def _check_split(path: Path, data: dict, expected: tuple[str, ...]) -> None:
    cases = sorted({str(image.get("video_name")) for image in data["images"]})
    if not set(cases) <= set(expected):
        raise SourceError(
            path,
            f"lists cases {cases}, expected a subset of {list(expected)}",
            fix="update TRAIN/TEST/FOLDS in grasp.py",
        )


def read(root: Path, labels) -> SourceTables:
    frames: dict[tuple[str, int], dict] = {}
    instances: list[Instance] = []
    sizes: dict[str, tuple[int, int]] = {}
    expected = {"train": TRAIN, "test": TEST, **FOLDS}
    for part, cases in expected.items():
        short, long = (root / ANNOTATIONS / f"grasp_{term}-term_{part}.json" for term in ("short", "long"))
        short_data, long_data = _load(short), _load(long)
        _check_split(short, short_data, cases)
        _check_split(long, long_data, cases)
        if part not in FOLDS:  # the fold files repeat training frames: only their case lists are used
            read_short_term(short, short_data, labels, frames, instances, sizes)
            read_long_term(long, long_data, labels, frames)
    tables = SourceTables(instances=instances)
    for case in sorted({case for case, _ in frames}):
        width, height = sizes.get(case, (None, None))
        tables.videos.append(
            Video(case, OFFICIAL[case], 30.0 if case in THIRTY_FPS_CASES else 45.0, None, width, height)
        )
        keyed = sorted((frame, entry) for (name, frame), entry in frames.items() if name == case)
        for frame, entry in keyed:
            tables.frames.append(Frame(case, frame, f"{FRAMES}/{case}/{frame:09d}.jpg", **entry))
        timed = [(frame, entry) for frame, entry in keyed if "phase" in entry]
        gaps = [b - a for (a, _), (b, _) in itertools.pairwise(timed)]
        spacing = max(1, round(statistics.median(gaps))) if gaps else 1
        for kind in ("phase", "step"):
            tables.segments += segments_from_labels(case, kind, [(f, e[kind]) for f, e in timed], step=spacing)
    return tables


SPEC = SourceSpec(
    name="grasp",
    title="GraSP",
    procedure="robot-assisted radical prostatectomy",
    branches=("image", "clip"),
    capabilities=frozenset(
        {"has_phase", "has_step", "has_actions", "has_tool_presence", "has_tool_bbox", "has_masks"}
    ),
    labels={"phase": PHASES, "step": STEPS, "tool": TOOLS, "action": ACTIONS},
    read=read,
    split_variants=SPLITS,
    default_split_variant="official",
    homepage="https://github.com/BCV-Uniandes/GraSP (Google Drive link)",
    license="unknown (code MIT; no data licence found)",
    unconfirmed=(
        "the train/test case lists and the fold1/fold2 membership (validated against the JSON files)",
        "original frame rate per case (45 fps except the six cases TAPIS treats as 30 fps; CASE014 irregular)",
        "long-term JSON field names phases/steps and the category name spellings",
        "1fps_to_30fps_association.json format (not read)",
    ),
)
