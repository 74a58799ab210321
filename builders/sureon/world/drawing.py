"""One frame of a world's clip: a square of one colour and fill pattern, placed and sized by its motion, on a plain
background.

Apart from the videos it fills (:mod:`builders.sureon.world.videos`) because it knows nothing of questions or files:
numpy only, and most of a world's CPU time.
"""

import numpy as np

from builders.errors import InputError


STILL_HALF = 0.45  # half the side of a still object, in frame sizes
BACKGROUND = (28, 28, 32)


def _square(frame: np.ndarray, centre: tuple[float, float], half: float, colour, pattern: str = "solid") -> None:
    size = frame.shape[0]
    cx, cy = centre
    x0, x1 = max(0, round(cx - half)), min(size, round(cx + half))
    y0, y1 = max(0, round(cy - half)), min(size, round(cy + half))
    if x1 <= x0 or y1 <= y0:
        return
    w, h = x1 - x0, y1 - y0
    v, u = np.ogrid[0:h, 0:w]  # row and column within the square, broadcast against each other
    border = max(2, w // 6)
    masks = {  # only the asked pattern's is computed: drawing is most of a world's CPU time
        "solid": lambda: np.ones((h, w), dtype=bool),
        "hollow": lambda: (u < border) | (u >= w - border) | (v < border) | (v >= h - border),
        "horizontal stripes": lambda: (v // 4) % 2 == 0,
        "vertical stripes": lambda: (u // 4) % 2 == 0,
        "checkers": lambda: ((u // 6) + (v // 6)) % 2 == 0,
        "top half": lambda: v < h // 2,
        "dot": lambda: (abs(u - w / 2) < w / 5) & (abs(v - h / 2) < h / 5),
    }
    frame[y0:y1, x0:x1][np.broadcast_to(masks[pattern](), (h, w))] = colour


def draw_frame(size: int, *, colour, motion: str = "still", pattern: str = "solid", progress: float = 0.5):
    """One frame: a square of ``colour`` / ``pattern`` whose place and size follow ``motion`` at ``progress`` in
    [0, 1] of its segment."""
    frame = np.empty((size, size, 3), dtype=np.uint8)
    frame[:] = BACKGROUND
    travel = size * 0.3
    # a still object fills most of the view; a moving one leaves room to travel. Measured on the tiny recipe: with
    # the still object as small as a moving one, its colour questions stayed at chance for 300 to 1,000+ steps
    # (seed-dependent); filling the view, it leaves the plateau within 200
    centre, half = [size / 2, size / 2], size * (STILL_HALF if motion == "still" else 0.22)
    offset = (progress - 0.5) * 2 * travel
    if motion == "right":
        centre[0] += offset
    elif motion == "left":
        centre[0] -= offset
    elif motion == "up":
        centre[1] -= offset
    elif motion == "down":
        centre[1] += offset
    elif motion in ("grow", "shrink"):
        scale = progress if motion == "grow" else 1 - progress
        half = size * (0.1 + 0.25 * scale)
    elif motion != "still":
        raise InputError(f"unknown motion {motion!r}")
    _square(frame, tuple(centre), half, colour, pattern)
    return frame
