"""CholecT50 (Nwoye et al. 2022): 50 cholecystectomy videos, 1-fps frames with instrument-verb-target triplets,
phases, and instrument boxes in a few videos.

Layout read (``docs/sources/cholect50.md``)::

    videos/VID01/000000.png ...   1-fps frames (854x480), 6-digit 0-based frame number; VIDnn with 2+ digits
    labels/VID01.json             {"categories": {kind: {id: name}}, "fps": 1, "num_frames", "annotations"}

``annotations`` maps a frame number *string* to a list of 15-element rows: ``[triplet, instrument, score, x, y, w, h,
verb, target, score, tx, ty, tw, th, phase]`` with ids into ``categories`` and -1 for "none"; the box is normalised
to [0, 1] as (x, y, w, h). Confirmed (official ``dataloader_pth.py``, a real challenge-val file): the row slices,
``categories`` as a dict of string ids, sparse frame keys (never ``range(num_frames)``), the phase typo
``carlot-triangle-dissection``, the official splits. Inferred: a frame without a triplet has a row of -1 ids (the
loader skips -1); the target box (always -1 in the files seen) is not read.

Choices: the frame index is the PNG number and ``Video.fps`` is 1 (the release ships 1-fps frames, not videos).
Every row with an instrument gives tool presence, and a box where it has one (the same box repeated by several
triplets of one tool is one instance). A row is a relation only with a real verb and target: the six
``<tool>,null_verb,null_target`` triplets say "tool present, no action", so they count as tool presence only. The
triplet id must agree with the row's instrument, verb and target ids (checked against ``categories["triplet"]``).

Splits: every variant of ``dataloader_pth.py`` as data; the default is the loader's own (``cholect50-crossval``
fold 1, "recommended"), where validation is the last 5 videos of the concatenated training folds.
"""

from __future__ import annotations

import re
from pathlib import Path

from public_converters.coco import read_json
from public_converters.schema import (
    Frame,
    Instance,
    Relation,
    SourceError,
    SourceTables,
    Video,
    finite_number,
    normalise_box,
    segments_from_labels,
)
from public_converters.spec import SourceSpec


NULLS = {"verb": "null_verb", "target": "null_target"}
TOOLS = {
    "grasper": "grasper",
    "bipolar": "bipolar forceps",
    "hook": "electrocautery hook",
    "scissors": "scissors",
    "clipper": "clip applier",
    "irrigator": "irrigator",
}
VERBS = {v: v for v in ("grasp", "retract", "dissect", "coagulate", "clip", "cut", "aspirate", "irrigate", "pack")}
TARGETS = {
    **{t: t.replace("_", " ") for t in ("gallbladder", "cystic_plate", "cystic_duct", "cystic_artery")},
    **{t: t.replace("_", " ") for t in ("cystic_pedicle", "blood_vessel", "fluid", "liver", "adhesion", "omentum")},
    "abdominal_wall_cavity": "abdominal wall",
    "peritoneum": "peritoneum",
    "gut": "gastrointestinal tract",
    "specimen_bag": "specimen bag",
}
_PHASE_NAMES = ("preparation", "clipping-and-cutting", "gallbladder-dissection", "gallbladder-packaging")
PHASES = {name: name.replace("-", " ") for name in (*_PHASE_NAMES, "cleaning-and-coagulation")} | {
    "carlot-triangle-dissection": "calot triangle dissection",  # sic in the release
    "gallbladder-extraction": "gallbladder retraction",  # Cholec80's name for the same phase
}
KINDS = {"instrument": "tool", "verb": "verb", "target": "target", "phase": "phase"}
CROSSVAL = {
    1: [79, 2, 51, 6, 25, 14, 66, 23, 50, 111],
    2: [80, 32, 5, 15, 40, 47, 26, 48, 70, 96],
    3: [31, 57, 36, 18, 52, 68, 10, 8, 73, 103],
    4: [42, 29, 60, 27, 65, 75, 22, 49, 12, 110],
    5: [78, 43, 62, 35, 74, 1, 56, 4, 13, 92],
}
RENDEZVOUS = {
    "train": [1, 15, 26, 40, 52, 65, 79, 2, 18, 27, 43, 56, 66, 92, 4, 22, 31, 47, 57, 68, 96, 5, 23, 35, 48, 60, 70]
    + [103, 13, 25, 36, 49, 62, 75, 110],
    "validation": [8, 12, 29, 50, 78],
    "test": [6, 51, 10, 73, 14, 74, 32, 80, 42, 111],
}
CHALLENGE = {
    "train": [1, 15, 26, 40, 52, 79, 2, 27, 43, 56, 66, 4, 22, 31, 47, 57, 68, 23, 35, 48, 60, 70, 13, 25, 49, 62, 75]
    + [8, 12, 29, 50, 78, 6, 51, 10, 73, 14, 32, 80, 42],
    "validation": [5, 18, 36, 65, 74],
    "test": [92, 96, 103, 110, 111],
}


def _vid(number: int) -> str:
    return f"VID{number:02d}"


def _crossval(fold: int, folds: dict[int, list[int]]) -> dict[str, str]:
    train = [n for k, videos in folds.items() if k != fold for n in videos]
    lists = {"train": train[:-5], "validation": train[-5:], "test": folds[fold]}
    return {_vid(n): split for split, numbers in lists.items() for n in numbers}


SPLITS = {
    "cholect50": {_vid(n): split for split, numbers in RENDEZVOUS.items() for n in numbers},
    "cholect50-challenge": {_vid(n): split for split, numbers in CHALLENGE.items() for n in numbers},
    **{f"cholect50-crossval-fold{k}": _crossval(k, CROSSVAL) for k in CROSSVAL},
    **{f"cholect45-crossval-fold{k}": _crossval(k, {f: v[:-1] for f, v in CROSSVAL.items()}) for k in CROSSVAL},
}
DEFAULT_SPLIT = "cholect50-crossval-fold1"
VIDEO_NAME = re.compile(r"^VID(\d{2,})$")


def _int(value, path: Path, row: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or int(value) != value:
        raise SourceError(path, f"expected an integer id, got {value!r}", row=row)
    return int(value)


def _categories(data: dict, path: Path, labels) -> dict[str, dict[int, str]]:
    """kind -> id -> native name; every name except the null verb/target is mapped (unknown names reported)."""
    categories = data.get("categories")
    if not isinstance(categories, dict) or not all(isinstance(categories.get(k), dict) for k in KINDS):
        raise SourceError(path, f"'categories' must map each of {sorted(KINDS)} to {{id: name}}", fix="re-download")
    names = {kind: categories.get(kind, {}) for kind in (*KINDS, "triplet")}
    bad = [f"{kind}/{i}" for kind, table in names.items() for i in table if not str(i).lstrip("-").isdigit()]
    if bad:
        raise SourceError(path, f"category ids {bad[:3]} are not numbers", row="categories")
    names = {kind: {int(i): str(n) for i, n in table.items()} for kind, table in names.items()}
    for kind, table in names.items():
        for i, name in table.items():
            if kind != "triplet" and name != NULLS.get(kind):
                labels.map(KINDS[kind], name, path, f"categories/{kind}/{i}")
    return names


def _name(names: dict, kind: str, value, path: Path, row: str) -> str | None:
    number = _int(value, path, row)
    if number == -1:
        return None
    if number not in names[kind]:
        raise SourceError(path, f"{kind} id {number} is not in 'categories'", row=row)
    return names[kind][number]


def _frame(video_id: str, frame: int, rows: list, names: dict, path: Path, labels, row: str):
    tools, phases, boxes, relations = set(), set(), {}, []
    for entry in rows:
        if not isinstance(entry, list) or len(entry) != 15:
            raise SourceError(path, f"instance {entry!r} is not a 15-element list", row=row, fix="re-download")
        triplet = _int(entry[0], path, row)
        tool, verb, target = (
            _name(names, k, entry[i], path, row) for k, i in (("instrument", 1), ("verb", 7), ("target", 8))
        )
        phases.add(_name(names, "phase", entry[14], path, row))
        if triplet != -1 and names["triplet"] and names["triplet"].get(triplet) != f"{tool},{verb},{target}":
            raise SourceError(path, f"triplet {triplet} does not match ids {entry[1]},{entry[7]},{entry[8]}", row=row)
        if tool is None:
            continue
        tool = labels.map("tool", tool, path, row)
        tools.add(tool)
        box = [finite_number(v, path, row, "box value") for v in entry[3:7]]
        if box != [-1.0] * 4:
            x, y, w, h = box
            if min(box) < 0:
                raise SourceError(path, f"box {box} is neither -1 nor (x, y, w, h) in [0, 1]", row=row)
            boxes.setdefault((tool, tuple(normalise_box(x, y, x + w, y + h, 1, 1))), None)
        if triplet != -1 and (verb, target) != tuple(NULLS.values()):
            if verb in NULLS.values() or target in NULLS.values():
                raise SourceError(path, f"triplet {triplet} has only one of verb/target null", row=row)
            verb, target = labels.map("verb", verb, path, row), labels.map("target", target, path, row)
            relations.append(Relation(video_id, frame, tool, verb, target))
    phases.discard(None)
    if len(phases) > 1:
        raise SourceError(path, f"instances of one frame disagree on the phase: {sorted(phases)}", row=row)
    phase = labels.map("phase", phases.pop(), path, row) if phases else None
    counts: dict[str, int] = {}
    instances = []
    for tool, box in boxes:
        counts[tool] = counts.get(tool, -1) + 1
        instances.append(Instance(video_id, frame, "tool", tool, list(box), instance_id=counts[tool]))
    image = f"videos/{video_id}/{frame:06d}.png"
    return Frame(video_id, frame, image, phase=phase, tools=sorted(tools)), instances, relations


def read_video(root: Path, video_id: str, labels, tables: SourceTables) -> None:
    path = root / "labels" / f"{video_id}.json"
    data = read_json(path, fix=f"every videos/{video_id}/ folder needs its label file, as in the release")
    if not isinstance(data, dict) or not isinstance(data.get("annotations"), dict):
        raise SourceError(path, "no 'annotations' dict of frame -> instances", fix="is this a CholecT50 label file?")
    if data.get("fps", 1) != 1:
        raise SourceError(path, f"fps is {data['fps']}, expected 1 (frame keys are 1-fps PNG numbers)")
    names = _categories(data, path, labels)
    phases = []
    for key, rows in sorted(data["annotations"].items(), key=lambda item: int(item[0]) if item[0].isdigit() else -1):
        if not key.isdigit() or not isinstance(rows, list):
            raise SourceError(path, f"frame key {key!r} is not a frame number with a list of rows", row=key)
        frame, instances, relations = _frame(video_id, int(key), rows, names, path, labels, key)
        tables.frames.append(frame)
        tables.instances += instances
        tables.relations += relations
        phases.append((frame.frame_index, frame.phase))
    tables.segments += segments_from_labels(video_id, "phase", phases)
    pngs = [int(p.stem) for p in (root / "videos" / video_id).glob("*.png") if p.stem.isdigit()]
    total = max([*pngs, *(f for f, _ in phases), -1]) + 1
    split = SPLITS[DEFAULT_SPLIT].get(video_id, "unused")
    tables.videos.append(Video(video_id, split, 1.0, total))


def read(root: Path, labels) -> SourceTables:
    video_dir, label_dir = root / "videos", root / "labels"
    for folder in (video_dir, label_dir):
        if not folder.is_dir():
            raise SourceError(folder, "folder not found", fix="point --source cholect50= at the CholecT50/ folder")
    videos = sorted(p.name for p in video_dir.iterdir() if p.is_dir() and VIDEO_NAME.match(p.name))
    for path in sorted(label_dir.glob("VID*.json")):
        if path.stem not in videos:
            raise SourceError(
                video_dir / path.stem, "frame folder not found", fix=f"extract the frames of {path.name}"
            )
    tables = SourceTables()
    for video_id in videos:
        read_video(root, video_id, labels, tables)
    if not tables.videos:
        raise SourceError(video_dir, "no VIDnn folders", fix="the videos/ folder of the release is empty")
    return tables


SPEC = SourceSpec(
    name="cholect50",
    title="CholecT50",
    procedure="laparoscopic cholecystectomy",
    branches=("image",),
    capabilities=frozenset({"has_phase", "has_tool_presence", "has_tool_bbox", "has_triplets"}),
    labels={"phase": PHASES, "tool": TOOLS, "verb": VERBS, "target": TARGETS},
    read=read,
    split_variants=SPLITS,
    default_split_variant=DEFAULT_SPLIT,
    homepage="https://github.com/CAMMA-public/cholect50 (request form)",
    license="CC BY-NC-SA 4.0 (non-commercial, via request form)",
    unconfirmed=(
        "the row of a frame without any triplet in the full release (read as -1 ids)",
        "target boxes (idx 10-13, always -1 in the files seen) are not read",
        "frame size (854x480 per the README; not read)",
    ),
)
