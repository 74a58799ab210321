"""A tiny HemoSet in its native layout: pig folders of 6-digit frame PNGs and ``_mask.png`` blood masks, in the three
encodings loaders report (RGB #800000, a VOC-palette PNG with index 1, grey 255) and both the flat and the nested
(``imgs/imgs``, ``labels/labels``) extraction."""

from pathlib import Path

import numpy as np
from PIL import Image

from public_converters.samples._common import cut, noise_image, remove, rename, shrink, write_image


WIDTH, HEIGHT = 64, 48
# pig -> (nested, encoding, {frame number: blood rectangles (x, y, w, h)})
PIGS = {
    "pig1": (False, "rgb", {0: [(4, 4, 10, 8), (40, 30, 12, 10)], 30: [(20, 20, 16, 12)]}),
    "pig2": (True, "voc", {0: [(0, 30, 30, 18)], 30: [(50, 2, 8, 8)]}),
    "pig10": (False, "grey", {60: [], 90: [(10, 10, 20, 20)]}),
}


def _voc_palette() -> list[int]:
    """The PASCAL VOC colour map (index 1 = (128, 0, 0)), as the masks of VOC-style tools carry it."""
    palette = []
    for index in range(256):
        r = g = b = 0
        value = index
        for shift in range(7, -1, -1):
            r |= (value & 1) << shift
            g |= ((value >> 1) & 1) << shift
            b |= ((value >> 2) & 1) << shift
            value >>= 3
        palette += [r, g, b]
    return palette


def _write_mask(path: Path, rectangles: list, encoding: str) -> None:
    blood = np.zeros((HEIGHT, WIDTH), dtype=bool)
    for x, y, w, h in rectangles:
        blood[y : y + h, x : x + w] = True
    path.parent.mkdir(parents=True, exist_ok=True)
    if encoding == "voc":
        image = Image.fromarray(blood.astype(np.uint8), mode="P")
        image.putpalette(_voc_palette())
        image.save(path)
    elif encoding == "rgb":
        rgb = np.zeros((HEIGHT, WIDTH, 3), dtype=np.uint8)
        rgb[blood] = (128, 0, 0)
        write_image(path, rgb)
    else:
        write_image(path, blood.astype(np.uint8) * 255)


def write(root: Path) -> None:
    for pig, (nested, encoding, frames) in PIGS.items():
        images = root / pig / "imgs" / ("imgs" if nested else "")
        labels = root / pig / "labels" / ("labels" if nested else "")
        for number, rectangles in frames.items():
            write_image(images / f"{number:06d}.png", noise_image(f"hemoset/{pig}/{number}"))
            _write_mask(labels / f"{number:06d}_mask.png", rectangles, encoding)


def _unknown(root: Path) -> str:
    """A second class colour (VOC index 2, green) where only blood is known."""
    path = root / "pig1/labels/000000_mask.png"
    rgb = np.asarray(Image.open(path).convert("RGB")).copy()
    rgb[:4, :4] = (0, 128, 0)
    Image.fromarray(rgb).save(path)
    return "pig1/labels/000000_mask.png"


BAD_INPUTS = {
    "missing_file": remove("pig2/labels/labels/000030_mask.png", names="pig2/labels/labels/000030_mask.png"),
    "truncated_image": cut("pig10/imgs/000090.png", 0.3, names="pig10/imgs/000090.png"),
    "wrong_mask_size": shrink("pig1/labels/000030_mask.png", names="pig1/labels/000030_mask.png"),
    # a mask whose name does not carry the 6-digit frame number
    "malformed_row": rename("pig1/labels/000030_mask.png", "00030_mask.png", names="pig1/labels/00030_mask.png"),
    "unknown_label": _unknown,
}
