"""A tiny GynSurg in its native layout: 3-second 30-fps action clips in class folders (one name with ``:``, one with
the ``_`` substitute, a skipped side-effect set) and COCO polygon files for instruments and anatomy with their frames
under ``insseg/INSSEG_xx/0.mp4_/`` and ``ganseg/GANSEG_xx/0.mp4_/`` (64x48 instead of 750x480 to stay small)."""

from pathlib import Path

from public_converters.samples._common import (
    cut,
    edit_json,
    noise_image,
    remove,
    rename,
    rewrite,
    shrink,
    write_image,
    write_json,
    write_video,
)


FPS, CLIP_FRAMES = 30, 90
CLIPS = (
    "GynSurg_Action_3sec/GynSurg_action_dataset/Coagulation/V12_00:01:03.mp4",
    "GynSurg_Action_3sec/GynSurg_action_dataset/Needle_passing/V12_00_01_05.mp4",
    "GynSurg_Action_3sec/GynSurg_action_dataset/Rest/V40_00:10:00.mp4",
    "GynSurg_Action_3sec/GynSurg_bleeding_dataset/Bleeding/V12_00:02:00.mp4",
)
# raw ids as the official mask scripts use them
CATEGORIES = [
    {"id": 2, "name": "grasper"},
    {"id": 5, "name": "bipolar forcep"},
    {"id": 7, "name": "sealer-divider"},
    {"id": 9, "name": "thread"},
    {"id": 19, "name": "organ"},
    {"id": 20, "name": "uterus"},
    {"id": 22, "name": "fallopian_tube"},
]
INSTRUMENT_IMAGES = (
    "insseg/INSSEG_01/0.mp4_/frame_000120.jpg",
    "insseg/INSSEG_01/0.mp4_/frame_000150.jpg",
    "insseg/INSSEG_02/0.mp4_/frame_000030.jpg",  # annotated, no instrument in view
)
ANATOMY_IMAGES = ("ganseg/GANSEG_01/0.mp4_/frame_000060.jpg",)
# (image index, category id, polygon in pixels)
INSTRUMENT_POLYGONS = (
    (1, 2, [2, 30, 20, 30, 20, 46, 2, 46]),  # two graspers, lower-left first in the file
    (1, 2, [40, 2, 60, 2, 60, 12, 40, 12]),
    (2, 7, [10, 10, 30, 10, 20, 30]),
    (2, 9, [32, 20, 50, 20, 50, 24, 32, 24]),
)
ANATOMY_POLYGONS = (
    (1, 20, [8, 8, 40, 8, 40, 40, 8, 40]),
    (1, 22, [44, 10, 60, 10, 60, 20]),
    (1, 19, [0, 0, 6, 0, 6, 6]),
)


def _coco(images: tuple[str, ...], polygons: tuple) -> dict:
    return {
        "images": [
            {"id": i, "path": path, "file_name": Path(path).name, "width": 64, "height": 48}
            for i, path in enumerate(images, start=1)
        ],
        "annotations": [
            {"id": n, "image_id": image, "category_id": category, "segmentation": [polygon], "iscrowd": 0}
            for n, (image, category, polygon) in enumerate(polygons, start=1)
        ],
        "categories": CATEGORIES,
    }


def write(root: Path) -> None:
    for relative in CLIPS:
        write_video(root / relative, CLIP_FRAMES, FPS)
    for relative in INSTRUMENT_IMAGES + ANATOMY_IMAGES:
        write_image(root / relative, noise_image(relative))
    write_json(root / "instruments.json", _coco(INSTRUMENT_IMAGES, INSTRUMENT_POLYGONS))
    write_json(root / "anatomy.json", _coco(ANATOMY_IMAGES, ANATOMY_POLYGONS))


BAD_INPUTS = {
    "missing_file": remove(INSTRUMENT_IMAGES[1], names=INSTRUMENT_IMAGES[1]),
    "truncated_image": cut(INSTRUMENT_IMAGES[0], names=INSTRUMENT_IMAGES[0]),
    "wrong_mask_size": shrink(ANATOMY_IMAGES[0], (80, 60), names=ANATOMY_IMAGES[0]),
    "malformed_row": edit_json(  # two points: not a polygon
        "anatomy.json", lambda coco: coco["annotations"][1].update(segmentation=[[44, 10, 60, 10]])
    ),
    "unknown_label": rewrite("instruments.json", '"name": "sealer-divider"', '"name": "sealer-devider"'),
    "misnamed_video": rename(CLIPS[2], "V40_00:10:00.mov"),
}
