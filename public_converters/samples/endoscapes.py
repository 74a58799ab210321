"""A tiny Endoscapes2023 in its native layout: real JPEGs in ``all/``, split folders of symlinks with the COCO files
(BBox201 boxes, CVS ``ds`` with its causal fill on non-keyframes), a Seg50 folder with ``iscrowd: 0`` RLE masks,
the ``*_vids.txt`` split lists (numpy ``savetxt`` floats, as copies of the release hold them, for train and val;
integers for test) and ``all_metadata.csv``; image ids by the release's rule, ``int(f"{vid}0{frame}")``."""

import os
from pathlib import Path

import numpy as np
from pycocotools import mask as mask_utils

from public_converters.samples._common import (
    cut,
    edit_json,
    noise_image,
    not_utf8,
    remove,
    rewrite,
    write_image,
    write_json,
    write_text,
)


WIDTH, HEIGHT = 64, 48
CATEGORIES = ["cystic_plate", "calot_triangle", "cystic_artery", "cystic_duct", "gallbladder", "tool"]
THIRD = 1 / 3
# folder -> video -> frame -> (is_det_keyframe, is_ds_keyframe, ds, [(category, x, y, w, h)])
DET = {
    "train": {
        "1": {
            29375: (True, True, [THIRD, THIRD, 0.0], [("gallbladder", 10, 8, 30, 20), ("tool", 40, 30, 20, 15)]),
            29400: (
                True,
                False,
                [THIRD, THIRD, 0.0],
                [("cystic_duct", 20, 20, 10, 6), ("calot_triangle", 5, 5, 8, 8)],
            ),
        }
    },
    "val": {
        "121": {1000: (True, True, [1.0, 1.0, 2 * THIRD], [("tool", 0, 0, 64, 48), ("cystic_plate", 30, 2, 4, 4)])}
    },
    "test": {"162": {500: (True, True, [0.0, 0.0, 0.0], [])}},
}
# CVS keyframes every 5 s (125 frames); the first repeats a detection keyframe
DS = {
    "train": {"1": {29375: [THIRD, THIRD, 0.0], 29500: [2 * THIRD, 1.0, 0.0], 29625: [1.0, 1.0, 1.0]}},
    "val": {"121": {1000: [1.0, 1.0, 2 * THIRD], 1125: [1.0, 1.0, 1.0]}},
    "test": {"162": {500: [0.0, 0.0, 0.0]}},
}
# Seg50: one frame of video 1 with masks (rectangles) that replace its BBox201 boxes
SEG = {"train": {("1", 29375): [("gallbladder", 12, 10, 24, 18), ("cystic_artery", 44, 4, 6, 12)]}}
VIDS = {"train": ["1"], "val": ["121"], "test": ["162"]}


def _image_record(video: str, frame: int, det: bool, keyframe: bool, ds: list[float]) -> dict:
    return {
        "file_name": f"{video}_{frame}.jpg",
        "height": HEIGHT,
        "width": WIDTH,
        "id": int(f"{video}0{frame}"),  # the release's rule: video, a literal 0, frame (1_29375 -> 1029375)
        "is_det_keyframe": det,
        "is_ds_keyframe": keyframe,
        "ds": [round(v, 3) for v in ds],
        "video_id": int(video),
    }


def _rle(x: int, y: int, w: int, h: int) -> dict:
    mask = np.zeros((HEIGHT, WIDTH), dtype=np.uint8, order="F")
    mask[y : y + h, x : x + w] = 1
    rle = mask_utils.encode(mask)
    return {"size": [HEIGHT, WIDTH], "counts": rle["counts"].decode("ascii")}


def _coco(images: list[dict], boxes: dict[int, list], seg: bool) -> dict:
    annotations = []
    for image in images:
        for category, x, y, w, h in boxes.get(image["id"], []):
            annotation = {
                "id": len(annotations) + 1,
                "image_id": image["id"],
                "category_id": CATEGORIES.index(category) + 1,
                "bbox": [float(x), float(y), float(w), float(h)],
                "area": float(w * h),
                "iscrowd": 0,  # with an RLE segmentation: the Seg50 trap
            }
            if seg:
                annotation["segmentation"] = _rle(x, y, w, h)
            annotations.append(annotation)
    categories = [{"id": i + 1, "name": name, "supercategory": ""} for i, name in enumerate(CATEGORIES)]
    return {"images": images, "annotations": annotations, "categories": categories}


def _link(root: Path, folder: str, name: str) -> None:
    """The release's split folders hold symlinks into ``all/``."""
    if not (root / "all" / name).exists():
        write_image(root / "all" / name, noise_image(name, (WIDTH, HEIGHT)))
    link = root / folder / name
    link.parent.mkdir(parents=True, exist_ok=True)
    if not link.is_symlink():
        os.symlink(Path("..") / "all" / name, link)


def write(root: Path) -> None:
    metadata = ["vid,frame,avg_cvs,C1,C2,C3,is_ds_keyframe,cvs_annotator_1,cvs_annotator_2,cvs_annotator_3"]
    for folder, videos in DET.items():
        images, boxes = [], {}
        for video, frames in videos.items():
            for frame, (det, keyframe, ds, annotations) in frames.items():
                images.append(_image_record(video, frame, det, keyframe, ds))
                if not keyframe:  # a 1-fps row without a CVS label
                    metadata.append(f"{video},{frame},,,,,False,,,")
                boxes[images[-1]["id"]] = annotations
                _link(root, folder, images[-1]["file_name"])
        write_json(root / folder / "annotation_coco.json", _coco(images, boxes, seg=False))
        ds_images = []
        for video, frames in DS[folder].items():
            for frame, ds in frames.items():
                ds_images.append(_image_record(video, frame, frame in videos[video], True, ds))
                _link(root, folder, ds_images[-1]["file_name"])
                cells = [f"{v:.3f}" for v in ds]
                metadata.append(f"{video},{frame},{sum(ds) / 3:.3f},{','.join(cells)},True,,,")
        write_json(root / folder / "annotation_ds_coco.json", _coco(ds_images, {}, seg=False))
        listed = VIDS[folder] if folder == "test" else [f"{int(video):.18e}" for video in VIDS[folder]]
        write_text(root / f"{folder}_vids.txt", "\n".join(listed) + "\n")
    for folder, frames in SEG.items():
        images, boxes = [], {}
        for (video, frame), annotations in frames.items():
            images.append(_image_record(video, frame, True, True, DET[folder][video][frame][2]))
            boxes[images[-1]["id"]] = annotations
            _link(root, f"{folder}_seg", images[-1]["file_name"])
        write_json(root / f"{folder}_seg" / "annotation_coco.json", _coco(images, boxes, seg=True))
    write_text(root / "all_metadata.csv", "\n".join(metadata) + "\n")


BAD_INPUTS = {
    "missing_file": remove("val/annotation_ds_coco.json", names="val/annotation_ds_coco.json"),
    "truncated_image": cut("all/121_1125.jpg", 0.3, names="all/121_1125.jpg"),
    "wrong_mask_size": edit_json(
        "train_seg/annotation_coco.json",
        lambda coco: coco["annotations"][0]["segmentation"].update(size=[HEIGHT, WIDTH * 2]),
        names="train_seg/annotation_coco.json",
    ),
    "malformed_row": rewrite("all_metadata.csv", "\n121,1125,", "\n121,frame1125,"),
    "unknown_label": rewrite(
        "val/annotation_coco.json", '"cystic_plate"', '"cystic_plates"', names="val/annotation_coco.json"
    ),
    "not_utf8": not_utf8("all_metadata.csv"),
    "bad_number": edit_json(  # a negative box width
        "val/annotation_coco.json",
        lambda coco: coco["annotations"][0]["bbox"].__setitem__(2, -12.5),
        names="val/annotation_coco.json",
    ),
}
