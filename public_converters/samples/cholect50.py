"""A tiny CholecT50 in its native layout: three videos of 1-fps PNG frames and one label JSON each.

VID01 has boxes (as the five bbox videos of the release), VID02 sparse frame keys, VID103 a three-digit id. The
quirks are all there: string frame keys, the ``carlot`` typo, ``null_verb``/``null_target`` triplets, rows of -1 ids,
one tool repeated by two triplets with the same box."""

from pathlib import Path

from public_converters.samples._common import (
    cut,
    edit_json,
    noise_image,
    not_utf8,
    remove,
    rewrite,
    write_image,
    write_json,
)


INSTRUMENTS = ["grasper", "bipolar", "hook", "scissors", "clipper", "irrigator"]
VERBS = ["grasp", "retract", "dissect", "coagulate", "clip", "cut", "aspirate", "irrigate", "pack", "null_verb"]
TARGETS = ["gallbladder", "cystic_plate", "cystic_duct", "cystic_artery", "cystic_pedicle", "blood_vessel", "fluid"]
TARGETS += [
    "abdominal_wall_cavity",
    "liver",
    "adhesion",
    "omentum",
    "peritoneum",
    "gut",
    "specimen_bag",
    "null_target",
]
PHASES = ["preparation", "carlot-triangle-dissection", "clipping-and-cutting", "gallbladder-dissection"]
PHASES += ["gallbladder-packaging", "cleaning-and-coagulation", "gallbladder-extraction"]
# The official triplet ids 0-99, in order: (instrument, verb, targets)
_TRIPLET_GROUPS = [
    ("grasper", "dissect", "cystic_plate gallbladder omentum"),
    ("grasper", "grasp", "cystic_artery cystic_duct cystic_pedicle cystic_plate gallbladder gut liver omentum"),
    ("grasper", "grasp", "peritoneum specimen_bag"),
    ("grasper", "pack", "gallbladder"),
    ("grasper", "retract", "cystic_duct cystic_pedicle cystic_plate gallbladder gut liver omentum peritoneum"),
    ("bipolar", "coagulate", "abdominal_wall_cavity blood_vessel cystic_artery cystic_duct cystic_pedicle"),
    ("bipolar", "coagulate", "cystic_plate gallbladder liver omentum peritoneum"),
    ("bipolar", "dissect", "adhesion cystic_artery cystic_duct cystic_plate gallbladder omentum"),
    ("bipolar", "grasp", "cystic_plate liver specimen_bag"),
    ("bipolar", "retract", "cystic_duct cystic_pedicle gallbladder liver omentum"),
    (
        "hook",
        "coagulate",
        "blood_vessel cystic_artery cystic_duct cystic_pedicle cystic_plate gallbladder liver omentum",
    ),
    ("hook", "cut", "blood_vessel peritoneum"),
    ("hook", "dissect", "blood_vessel cystic_artery cystic_duct cystic_plate gallbladder omentum peritoneum"),
    ("hook", "retract", "gallbladder liver"),
    ("scissors", "coagulate", "omentum"),
    ("scissors", "cut", "adhesion blood_vessel cystic_artery cystic_duct cystic_plate liver omentum peritoneum"),
    ("scissors", "dissect", "cystic_plate gallbladder omentum"),
    ("clipper", "clip", "blood_vessel cystic_artery cystic_duct cystic_pedicle cystic_plate"),
    ("irrigator", "aspirate", "fluid"),
    ("irrigator", "dissect", "cystic_duct cystic_pedicle cystic_plate gallbladder omentum"),
    ("irrigator", "irrigate", "abdominal_wall_cavity cystic_pedicle liver"),
    ("irrigator", "retract", "gallbladder liver omentum"),
    *((tool, "null_verb", "null_target") for tool in INSTRUMENTS),
]
TRIPLETS = [f"{tool},{verb},{target}" for tool, verb, targets in _TRIPLET_GROUPS for target in targets.split()]
NO_BOX = [-1.0] * 4

# video -> frame -> [(instrument, verb, target, box or None)] (None = a row of -1 ids), phase per frame
VIDEOS = {
    "VID01": {
        0: ("preparation", [None]),
        1: ("preparation", [("grasper", "null_verb", "null_target", [0.1, 0.2, 0.3, 0.4])]),
        2: ("preparation", [("grasper", "grasp", "gallbladder", [0.5, 0.25, 0.25, 0.5])]),
        3: (
            "carlot-triangle-dissection",
            [
                ("grasper", "retract", "gallbladder", [0.5, 0.25, 0.25, 0.5]),
                ("grasper", "grasp", "liver", [0.5, 0.25, 0.25, 0.5]),
                ("hook", "dissect", "cystic_duct", [0.0, 0.6, 0.45, 0.4]),
            ],
        ),
        4: ("carlot-triangle-dissection", [("grasper", "retract", "gallbladder", [0.5, 0.25, 0.25, 0.5])]),
        5: ("carlot-triangle-dissection", [("grasper", "retract", "gallbladder", [0.5, 0.25, 0.25, 0.5])]),
    },
    "VID02": {
        0: ("clipping-and-cutting", [("clipper", "clip", "cystic_artery", None)]),
        1: ("clipping-and-cutting", [("clipper", "clip", "cystic_duct", None)]),
        2: ("clipping-and-cutting", [("scissors", "cut", "cystic_duct", None)]),
        6: ("clipping-and-cutting", [("grasper", "retract", "gallbladder", None)]),
        7: ("gallbladder-dissection", [("hook", "dissect", "gallbladder", None)]),
    },
    "VID103": {
        10: ("gallbladder-packaging", [("grasper", "pack", "gallbladder", None)]),
        11: (
            "cleaning-and-coagulation",
            [("bipolar", "coagulate", "liver", None), ("irrigator", "aspirate", "fluid", None)],
        ),
        12: ("gallbladder-extraction", [("grasper", "grasp", "specimen_bag", None)]),
    },
}
EXTRA_PNGS = {"VID01": 2, "VID02": 0, "VID103": 1}  # unlabelled frames after the last labelled one


def _row(instance, phase: str) -> list:
    if instance is None:
        return [-1, -1, -1.0, *NO_BOX, -1, -1, -1.0, *NO_BOX, PHASES.index(phase)]
    tool, verb, target, box = instance
    return [
        TRIPLETS.index(f"{tool},{verb},{target}"),
        INSTRUMENTS.index(tool),
        1.0,
        *(box or NO_BOX),
        VERBS.index(verb),
        TARGETS.index(target),
        1.0,
        *NO_BOX,
        PHASES.index(phase),
    ]


def _categories() -> dict:
    tables = {"instrument": INSTRUMENTS, "verb": VERBS, "target": TARGETS, "triplet": TRIPLETS, "phase": PHASES}
    return {kind: {str(i): name for i, name in enumerate(names)} for kind, names in tables.items()}


def write(root: Path) -> None:
    for video, frames in VIDEOS.items():
        annotations = {str(frame): [_row(i, phase) for i in rows] for frame, (phase, rows) in frames.items()}
        write_json(
            root / "labels" / f"{video}.json",
            {
                "info": {"bbox format": "[x1,y1,bw,bh] == [top_left_x, top_left_y, box_width, box_height]"},
                "licenses": [],
                "categories": _categories(),
                "video": int(video[3:]),
                "fps": 1,
                "num_frames": len(frames),
                "annotations": annotations,
            },
        )
        last = max(frames)
        for frame in [*frames, *range(last + 1, last + 1 + EXTRA_PNGS[video])]:
            write_image(root / "videos" / video / f"{frame:06d}.png", noise_image(f"{video}/{frame}"))


def _short_row(labels: dict) -> None:
    """Cut one instance row to 14 elements (the release's rows have 15)."""
    del labels["annotations"]["11"][1][14:]


def _nan_box(labels: dict) -> None:
    """Write NaN (JSON ``NaN``, which Python's json reads) as the width of the first tool box."""
    rows = (row for frame in labels["annotations"].values() for row in frame)
    row = next(row for row in rows if row[3:7] != [-1.0] * 4)
    row[5] = float("nan")


BAD_INPUTS = {
    "missing_file": remove("labels/VID02.json", names="labels/VID02.json"),
    "truncated_image": cut("videos/VID01/000003.png", names="VID01/000003.png"),
    "malformed_row": edit_json("labels/VID103.json", _short_row, names="labels/VID103.json"),
    "unknown_label": rewrite(
        "labels/VID01.json", '"carlot-triangle-dissection"', '"carlot-triangle-disection"', names="labels/VID01.json"
    ),
    "not_utf8": not_utf8("labels/VID02.json", names="labels/VID02.json"),
    "bad_number": edit_json("labels/VID01.json", _nan_box, names="labels/VID01.json"),
}
