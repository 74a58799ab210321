"""A tiny CholecInstanceSeg in its native layout: three sequences (one per split and partition family) of LabelMe
JSON files with their frames in ``img_dir/`` (64x48 here; 854x480 in the release).

Quirks written: two polygons sharing a group_id (one instance), two graspers told apart by group_id, int and float
points, an absolute Windows ``imagePath``, an empty frame without ``imageHeight``/``imageWidth``, a frame with
shapes but without them (rasterised at the image's size), the seg8k ``videoNN`` file names."""

from pathlib import Path

from public_converters.samples._common import (
    cut,
    edit_json,
    noise_image,
    remove,
    rewrite,
    shrink,
    write_image,
    write_json,
)


SIZE = (64, 48)
# sequence folder -> [(file stem, [(label, group_id, points)], states its size)]
SEQUENCES = {
    "train/VID01_t50_full": [
        ("t50_VID01_000000", [("grasper", 1, [[4, 4], [20, 4], [20, 16], [4, 16]])], True),
        (
            "t50_VID01_000001",
            [
                ("grasper", 1, [[4.0, 4.0], [20.0, 4.0], [20.0, 16.0], [4.0, 16.0]]),
                ("grasper", 1, [[30.0, 30.0], [40.0, 30.0], [40.0, 40.0]]),  # second part of the same grasper
                ("grasper", 2, [[50, 2], [62, 2], [62, 10], [50, 10]]),
                ("hook", 1, [[10, 30], [25, 30], [25, 46], [10, 46]]),
            ],
            True,
        ),
        ("t50_VID01_000002", [], False),
    ],
    "val/VID03_t80_sparse": [
        ("t80_VID03_000000", [], True),
        ("t80_VID03_000030", [("clipper", 1, [[0, 0], [32, 0], [32, 24], [0, 24]])], True),
        (
            "t80_VID03_000060",
            [("snare", 3, [[40, 20], [60, 20], [60, 40]]), ("scissors", 1, [[2, 40], [8, 40], [8, 47]])],
            True,
        ),
    ],
    "test/VID09_seg8k": [
        ("seg8k_video09_28660", [("grasper", 1, [[10, 10], [30, 10], [30, 20]])], False),
        (
            "seg8k_video09_28661",
            [("irrigator", 1, [[5, 5], [15, 5], [15, 15]]), ("bipolar", 2, [[40, 5], [50, 5], [50, 15]])],
            True,
        ),
    ],
}


def write(root: Path) -> None:
    for sequence, frames in SEQUENCES.items():
        for stem, shapes, sized in frames:
            document = {
                "version": "1.0.0",
                "flags": {},
                "shapes": [
                    {
                        "label": label,
                        "points": points,
                        "group_id": group,
                        "description": "",
                        "shape_type": "polygon",
                        "flags": None,
                    }
                    for label, group, points in shapes
                ],
                "imagePath": f"C:/Users/annotator\\{stem}.png" if stem.startswith("t50") else f"img_dir/{stem}.png",
            }
            if sized:
                document |= {"imageHeight": SIZE[1], "imageWidth": SIZE[0]}
            write_json(root / sequence / "ann_dir" / f"{stem}.json", document)
            write_image(root / sequence / "img_dir" / f"{stem}.png", noise_image(stem, SIZE))


BAD_INPUTS = {
    "missing_file": remove("val/VID03_t80_sparse/img_dir/t80_VID03_000030.png", names="img_dir/t80_VID03_000030.png"),
    "truncated_image": cut("train/VID01_t50_full/img_dir/t50_VID01_000001.png"),
    "wrong_mask_size": shrink("test/VID09_seg8k/img_dir/seg8k_video09_28661.png"),
    "malformed_row": edit_json(
        "val/VID03_t80_sparse/ann_dir/t80_VID03_000060.json",
        lambda document: document["shapes"][1].update(points=[[2, 40], [8]]),
    ),
    "unknown_label": rewrite("test/VID09_seg8k/ann_dir/seg8k_video09_28661.json", '"bipolar"', '"bipolar grasper"'),
    "bad_number": edit_json(  # JSON Infinity as a polygon coordinate
        "val/VID03_t80_sparse/ann_dir/t80_VID03_000060.json",
        lambda document: document["shapes"][0]["points"][0].__setitem__(1, float("inf")),
    ),
}
