"""A tiny GraSP in its native layout: three cases (two 45-fps originals, one 30-fps), 1-fps long-term keyframes,
short-term keyframes with RLE instrument masks and multi-label actions, fold files, ids restarting in every file."""

from pathlib import Path

import numpy as np

from public_converters.samples._common import cut, edit_json, noise_image, remove, rewrite, write_image, write_json
from public_converters.seg_to_box import encode_rle
from public_converters.sources.grasp import ACTIONS, PHASES, STEPS, TOOLS


SIZE = (64, 48)
# case -> (fps of the original video, [(phase id, step id)] one per second)
LONG_TERM = {
    "CASE001": (45, [(0, 0), (0, 0), (1, 1), (1, 1), (1, 2), (2, 3)]),
    "CASE007": (45, [(3, 5), (3, 5), (4, 6), (4, 6)]),
    "CASE041": (30, [(9, 10), (9, 10), (10, 14), (10, 15), (10, 16)]),
}
# case -> frame number -> [(instrument id, action ids, (x, y, w, h))]; 68 is not a 1-fps keyframe, 45 has no tool
SHORT_TERM = {
    "CASE001": {68: [(7, [4, 5], (2, 3, 20, 10))], 90: [(1, [1], (30, 20, 16, 12)), (7, [11], (0, 0, 10, 8))]},
    "CASE007": {45: []},
    "CASE041": {60: [(4, [3, 8], (10, 30, 40, 18))]},
}
FOLDS = {"train": ("CASE001", "CASE007"), "test": ("CASE041",), "fold1": ("CASE001",), "fold2": ("CASE007",)}


def _categories(names, first: int) -> list[dict]:
    return [{"id": first + i, "name": name, "supercategory": "none"} for i, name in enumerate(names)]


CATEGORIES = {
    "categories": _categories(TOOLS, 1),
    "actions_categories": _categories(ACTIONS, 1),
    "phases_categories": _categories(PHASES, 0),
    "steps_categories": _categories(STEPS, 0),
}


def _image(image_id: int, case: str, frame: int) -> dict:
    name = f"{case}/{frame:09d}.jpg"
    return {"id": image_id, "file_name": name, "video_name": case, "frame_num": frame, "width": 64, "height": 48}


def _mask(box: tuple[int, int, int, int]) -> dict:
    x, y, w, h = box
    mask = np.zeros((SIZE[1], SIZE[0]), dtype=bool)
    mask[y : y + h, x : x + w] = True
    return encode_rle(mask)


def _short_term(cases) -> dict:
    images, annotations = [], []
    for case in cases:
        for frame, tools in SHORT_TERM[case].items():
            images.append(_image(len(images) + 1, case, frame))
            for tool, actions, box in tools:
                annotation = {
                    "id": len(annotations) + 1,
                    "image_id": len(images),
                    "image_name": images[-1]["file_name"],
                }
                annotation |= {"bbox": list(box), "segmentation": _mask(box), "category_id": tool, "actions": actions}
                annotations.append(annotation | {"area": box[2] * box[3], "iscrowd": 0})
    return {"info": {"description": "GraSP short-term"}, "images": images, "annotations": annotations, **CATEGORIES}


def _long_term(cases) -> dict:
    images, annotations = [], []
    for case in cases:
        fps, labels = LONG_TERM[case]
        for second, (phase, step) in enumerate(labels):
            images.append(_image(len(images) + 1, case, second * fps))
            annotations.append({"id": len(annotations) + 1, "image_id": len(images), "phases": phase, "steps": step})
    return {"info": {"description": "GraSP long-term"}, "images": images, "annotations": annotations, **CATEGORIES}


def write(root: Path) -> None:
    base = root / "GraSP_30fps"
    frames = {(c, s * fps) for c, (fps, labels) in LONG_TERM.items() for s in range(len(labels))}
    frames |= {(case, frame) for case, annotated in SHORT_TERM.items() for frame in annotated}
    for case, frame in sorted(frames):
        write_image(base / "frames" / case / f"{frame:09d}.jpg", noise_image(f"grasp-{case}-{frame}", SIZE))
    for part, cases in FOLDS.items():
        write_json(base / "annotations" / f"grasp_short-term_{part}.json", _short_term(cases))
        write_json(base / "annotations" / f"grasp_long-term_{part}.json", _long_term(cases))


ANNOTATIONS = "GraSP_30fps/annotations"


BAD_INPUTS = {
    "missing_file": remove(f"{ANNOTATIONS}/grasp_long-term_test.json"),
    "truncated_image": cut("GraSP_30fps/frames/CASE001/000000090.jpg"),
    "wrong_mask_size": edit_json(
        f"{ANNOTATIONS}/grasp_short-term_test.json",
        lambda coco: coco["annotations"][0]["segmentation"].update(size=[48, 60]),
    ),
    "malformed_row": edit_json(
        f"{ANNOTATIONS}/grasp_short-term_train.json",
        lambda coco: coco["annotations"][0].update(bbox=coco["annotations"][0]["bbox"][:3]),
    ),
    "unknown_label": rewrite(f"{ANNOTATIONS}/grasp_long-term_train.json", '"LPIL"', '"LPIL_v2"'),
    "bad_number": edit_json(  # JSON NaN as a box corner
        f"{ANNOTATIONS}/grasp_short-term_train.json",
        lambda coco: coco["annotations"][0]["bbox"].__setitem__(0, float("nan")),
    ),
}
