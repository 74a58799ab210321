"""A tiny CholecSeg8k in its native layout: two videos, three frames with watershed masks (one RGBA) that exercise
each seg-to-box policy: a two-part gallbladder (single), two blood pools (components), abdominal wall (semantic)."""

from pathlib import Path

import numpy as np

from public_converters.samples._common import cut, noise_image, remove, rename, shrink, write_image


WIDTH, HEIGHT = 64, 48
FRAMES = {"video01/video01_00080": (80, 81), "video12/video12_00400": (400,)}


def watershed(frame: int) -> np.ndarray:
    """Grey-level class mask: view background 50, a 1-pixel white border, unlabelled 0, and the classes."""
    mask = np.full((HEIGHT, WIDTH), 11, dtype=np.uint8)  # abdominal wall
    mask[:, :6] = 50
    mask[30:40, 40:50] = 0
    mask[4:14, 8:20] = 22  # gallbladder, two parts
    mask[4:14, 24:30] = 22
    mask[20:24, 10:14] = 24  # blood pool, upper
    mask[34:40, 20:28] = 24  # blood pool, lower
    mask[16:28, 40:60] = 21  # liver
    if frame != 400:
        mask[2:12, 50:62] = 31  # grasper
    mask[[0, -1], :] = 255
    mask[:, [0, -1]] = 255
    return mask


def write(root: Path) -> None:
    for clip, frames in FRAMES.items():
        for frame in frames:
            base = root / clip / f"frame_{frame}_endo"
            write_image(base.with_name(base.name + ".png"), noise_image(f"cholecseg8k-{clip}-{frame}"))
            grey = watershed(frame)
            if frame == 81:  # some release masks are RGBA with an opaque alpha channel
                grey = np.dstack([grey, grey, grey, np.full_like(grey, 255)])
            write_image(base.with_name(base.name + "_watershed_mask.png"), grey)
            write_image(base.with_name(base.name + "_mask.png"), np.zeros((HEIGHT, WIDTH), dtype=np.uint8))
            write_image(base.with_name(base.name + "_color_mask.png"), np.zeros((HEIGHT, WIDTH, 3), dtype=np.uint8))


def _unknown(root: Path) -> str:
    path = root / "video12/video12_00400/frame_400_endo_watershed_mask.png"
    grey = watershed(400)
    grey[20:30, 20:30] = 99  # a grey level no class has
    write_image(path, grey)
    return "frame_400_endo_watershed_mask.png"


BAD_INPUTS = {
    "missing_file": remove("video01/video01_00080/frame_81_endo_watershed_mask.png"),
    "truncated_image": cut("video12/video12_00400/frame_400_endo.png"),
    "wrong_mask_size": shrink("video01/video01_00080/frame_80_endo_watershed_mask.png", (WIDTH // 2, HEIGHT // 2)),
    # a frame number outside the clip's 80 frames
    "malformed_row": rename("video01/video01_00080/frame_81_endo.png", "frame_181_endo.png"),
    "unknown_label": _unknown,
}
