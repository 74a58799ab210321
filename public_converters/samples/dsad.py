"""A tiny DSAD in its native layout: structure folders of surgeries with imageNN/maskNN pairs (0/255 and 0/1 masks),
``weak_labels.csv`` with and without a header (11 or 12 columns), per-annotator folders, and the multilabel folder
with ``maskNN_<structure>.png`` files (one name holding an underscore)."""

from pathlib import Path

import numpy as np
from PIL import Image

from public_converters.samples._common import (
    cut,
    noise_image,
    not_utf8,
    remove,
    rename,
    rewrite,
    shrink,
    write_image,
    write_text,
)
from public_converters.sources.dsad import PAPER_COLUMNS


WIDTH, HEIGHT = 64, 48
# (structure folder, surgery) -> per image: {mask file suffix ("" = maskNN.png): (x, y, w, h) rectangles}, visible
FOLDERS = {
    ("abdominal_wall", "03"): [({"": [(0, 0, 64, 20)]}, ["abdominal_wall", "colon"])],
    ("colon", "01"): [({"": [(5, 30, 30, 10)]}, ["colon"]), ({"": [(40, 10, 20, 30)]}, ["colon", "small_intestine"])],
    ("liver", "03"): [({"": [(10, 5, 20, 10)]}, ["liver"]), ({"": [(30, 20, 10, 20)]}, ["liver", "stomach"])],
    ("multilabel", "07"): [
        ({"_stomach": [(8, 8, 20, 16)], "_abdominal_wall": [(0, 40, 64, 8)]}, ["abdominal_wall", "stomach"]),
        ({}, []),  # nothing visible: no mask file at all
    ],
}
# weak_labels.csv layouts: header with the 11 paper columns, header with uterus (12), or no header (11)
HEADERS = {"abdominal_wall": (*PAPER_COLUMNS, "uterus"), "liver": None}


def _mask(rectangles: list[tuple[int, int, int, int]], value: int) -> np.ndarray:
    mask = np.zeros((HEIGHT, WIDTH), dtype=np.uint8)
    for x, y, w, h in rectangles:
        mask[y : y + h, x : x + w] = value
    return mask


def write(root: Path) -> None:
    for (structure, surgery), images in FOLDERS.items():
        folder = root / structure / surgery
        columns = HEADERS.get(structure, PAPER_COLUMNS)
        rows = [",".join(("image", *columns))] if columns else []
        for number, (masks, visible) in enumerate(images):
            write_image(folder / f"image{number:02d}.png", noise_image(f"dsad/{structure}/{surgery}/{number}"))
            for suffix, rectangles in masks.items():
                path = folder / f"mask{number:02d}{suffix}.png"
                if structure == "liver":  # a 1-bit mask: values 0/1 once decoded
                    path.parent.mkdir(parents=True, exist_ok=True)
                    Image.fromarray(_mask(rectangles, 255)).convert("1").save(path)
                else:
                    write_image(path, _mask(rectangles, 255))
                if structure == "colon":  # per-annotator and merged masks beside the final one
                    for annotator in ("anno_1", "anno_2", "anno_3", "merged"):
                        write_image(folder / annotator / path.name, _mask(rectangles, 255))
            values = ["1" if name in visible else "0" for name in columns or PAPER_COLUMNS]
            rows.append(",".join((f"image{number:02d}.png" if columns else str(number), *values)))
        write_text(folder / "weak_labels.csv", "\n".join(rows) + "\n")


BAD_INPUTS = {
    "missing_file": remove("liver/03/mask01.png", names="liver/03/mask01.png"),
    "truncated_image": cut("multilabel/07/image00.png", 0.3, names="multilabel/07/image00.png"),
    "wrong_mask_size": shrink("colon/01/mask01.png", names="colon/01/mask01.png"),
    "not_utf8": not_utf8("colon/01/weak_labels.csv", names="colon/01/weak_labels.csv"),
    "malformed_row": rewrite(
        "colon/01/weak_labels.csv", "image01.png,0,1", "image01.png,0,2", names="colon/01/weak_labels.csv"
    ),
    "unknown_label": rename(
        "multilabel/07/mask00_stomach.png", "mask00_stomack.png", names="multilabel/07/mask00_stomack.png"
    ),
}
