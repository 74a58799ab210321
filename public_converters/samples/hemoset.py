"""A tiny HemoSet in its native layout: pig folders of 6-digit frame PNGs and ``_mask.png`` blood masks, in the three
encodings loaders report (RGB #800000, a VOC-palette PNG with index 1, grey 255) and both the flat and the nested
(``imgs/imgs``, ``labels/labels``) extraction."""

from pathlib import Path

import numpy as np
from PIL import Image

from public_converters.samples._common import noise_image, resize_image, truncate, write_image


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


def _missing(root: Path) -> str:
    (root / "pig2/labels/labels/000030_mask.png").unlink()
    return "pig2/labels/labels/000030_mask.png"


def _truncated(root: Path) -> str:
    truncate(root / "pig10/imgs/000090.png", 0.3)
    return "pig10/imgs/000090.png"


def _wrong_mask_size(root: Path) -> str:
    resize_image(root / "pig1/labels/000030_mask.png", (32, 24))
    return "pig1/labels/000030_mask.png"


def _malformed(root: Path) -> str:
    """A mask whose name does not carry the 6-digit frame number."""
    (root / "pig1/labels/000030_mask.png").rename(root / "pig1/labels/00030_mask.png")
    return "pig1/labels/00030_mask.png"


def _unknown(root: Path) -> str:
    """A second class colour (VOC index 2, green) where only blood is known."""
    path = root / "pig1/labels/000000_mask.png"
    rgb = np.asarray(Image.open(path).convert("RGB")).copy()
    rgb[:4, :4] = (0, 128, 0)
    Image.fromarray(rgb).save(path)
    return "pig1/labels/000000_mask.png"


BAD_INPUTS = {
    "missing_file": _missing,
    "truncated_image": _truncated,
    "wrong_mask_size": _wrong_mask_size,
    "malformed_row": _malformed,
    "unknown_label": _unknown,
}
