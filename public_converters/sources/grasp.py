"""GraSP (Ayobi et al. 2024): 13 robot-assisted radical prostatectomies with phases, steps, instrument masks, actions.

Layout read (``../shared/research/formats_B.md`` §6; the GraSP README's ``GraSP_30fps`` tree), under the GraSP root::

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
import json
import statistics
from collections import Counter
from pathlib import Path

from public_converters.schema import (
    Frame,
    Instance,
    SourceError,
    SourceTables,
    Video,
    normalise_box,
    segments_from_labels,
)
from public_converters.seg_to_box import rle_from_coco
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
    if not path.is_file():
        raise SourceError(path, "file not found", fix="unpack GraSP_30fps/annotations from the release")
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise SourceError(path, f"not valid JSON ({error})", fix="re-download this annotation file") from error
    missing = [key for key in ("images", "annotations") if key not in data]
    if missing:
        raise SourceError(path, f"missing top-level keys {missing}", fix="is this a GraSP annotation file?")
    return data


def _names(data: dict, key: str, kind: str, path: Path, labels) -> dict[int, str]:
    """id -> canonical name from one of the file's category lists."""
    if key not in data:
        raise SourceError(path, f"no {key!r} list", fix="GraSP files carry their category lists")
    return {int(c["id"]): labels.map(kind, c["name"], path, f"{key} id {c['id']}") for c in data[key]}


def _images(data: dict, path: Path) -> dict[int, dict]:
    images = {}
    for number, image in enumerate(data["images"]):
        if not all(key in image for key in ("id", "video_name", "frame_num", "width", "height")):
            raise SourceError(path, f"image entry {image!r} lacks id/video_name/frame_num/width/height", row=number)
        images[image["id"]] = image
    return images


def _category(names: dict[int, str], value, path: Path, row) -> str:
    if value not in names:
        raise SourceError(path, f"category id {value!r} is not in the file's category list", row=row)
    return names[value]


def read_short_term(path: Path, data: dict, labels, frames: dict, instances: list, sizes: dict) -> None:
    tools = _names(data, "categories", "tool", path, labels)
    actions = _names(data, "actions_categories", "action", path, labels)
    images = _images(data, path)
    counts: Counter = Counter()
    for image in images.values():
        case, frame = image["video_name"], int(image["frame_num"])
        if sizes.setdefault(case, (image["width"], image["height"])) != (image["width"], image["height"]):
            raise SourceError(path, f"{case} frames differ in size", row=f"image {image['id']}")
        frames.setdefault((case, frame), {})["tools"] = []
    for annotation in data["annotations"]:
        row = f"annotation {annotation.get('id')}"
        image = images.get(annotation.get("image_id"))
        bbox, segmentation = annotation.get("bbox"), annotation.get("segmentation")
        acted = annotation.get("actions")
        acted = [acted] if isinstance(acted, int) else acted
        if image is None or not (isinstance(bbox, list) and len(bbox) == 4) or not segmentation or not acted:
            raise SourceError(path, "needs a known image_id, a 4-number bbox, a segmentation and actions", row=row)
        width, height = image["width"], image["height"]
        if isinstance(segmentation, dict) and list(segmentation.get("size", [])) != [height, width]:
            raise SourceError(
                path, f"mask size {segmentation.get('size')} is not the image's {[height, width]}", row=row
            )
        tool = _category(tools, annotation.get("category_id", annotation.get("instruments")), path, row)
        done = [_category(actions, value, path, row) for value in sorted(set(acted))]
        key = (image["video_name"], int(image["frame_num"]))
        entry = frames[key]
        entry["tools"] = sorted({*entry["tools"], tool})
        entry["actions"] = sorted({*entry.get("actions", []), *done})
        x, y, w, h = bbox
        box = normalise_box(x, y, x + w, y + h, width, height)
        mask = rle_from_coco(segmentation, height, width)
        instances.append(Instance(*key, "tool", tool, box, mask, counts[key], list(done)))
        counts[key] += 1


def read_long_term(path: Path, data: dict, labels, frames: dict) -> None:
    names = {kind: _names(data, f"{kind}s_categories", kind, path, labels) for kind in ("phase", "step")}
    images = _images(data, path)
    for annotation in data["annotations"]:
        row = f"annotation {annotation.get('id')}"
        image = images.get(annotation.get("image_id"))
        if (
            image is None
            or not isinstance(annotation.get("phases"), int)
            or not isinstance(annotation.get("steps"), int)
        ):
            raise SourceError(path, "needs a known image_id and integer phases and steps", row=row)
        entry = frames.setdefault((image["video_name"], int(image["frame_num"])), {})
        for kind in ("phase", "step"):
            value = _category(names[kind], annotation[f"{kind}s"], path, row)
            if entry.setdefault(kind, value) != value:
                raise SourceError(path, f"two different {kind}s for one frame", row=row)


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
