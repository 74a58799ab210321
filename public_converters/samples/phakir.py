"""A tiny PhaKIR in its native layout: two 25-fps videos, per-frame phases, class-colour masks every 25th frame, the
frames as the official split script writes them (1000-frame buckets), and a cut file.

Video_07 runs past frame 1000 so its last masks and frames sit in bucket ``1000``; Video_01 has a cut inside a phase.
"""

from pathlib import Path

import numpy as np

from public_converters.samples._common import (
    cut,
    cut_lines,
    misname_video,
    noise_image,
    not_utf8,
    remove,
    remove_video,
    rewrite,
    shrink,
    write_image,
    write_text,
    write_video,
)
from public_converters.sources.phakir import MASK_STEP, PALETTE, bucket_path


FPS = 25
SIZE = (64, 48)
COLOURS = {label: colour for colour, label in PALETTE.items() if label}  # first colour per class
# video -> ([(phase, frames)], cut frames)
VIDEOS = {
    "Video_01": ([("Preparation", 30), ("CalotTriangleDissection", 50)], [60]),
    "Video_07": ([("CalotTriangleDissection", 400), ("ClippingCutting", 300), ("GallbladderDissection", 330)], []),
}


def _mask(video: str, frame: int) -> np.ndarray:
    """Two grasper jaws apart, a hook on some frames, nothing on the first frame, the dummy Drainage colour once."""
    pixels = np.zeros((SIZE[1], SIZE[0], 3), dtype=np.uint8)
    if frame == 0:
        return pixels
    pixels[5:15, 4:20] = COLOURS["Grasper"]
    pixels[30:40, 40:60] = COLOURS["Grasper"]
    if (frame // MASK_STEP) % 2:
        pixels[20:28, 24:36] = COLOURS["Dissection-Hook"]
    if video == "Video_07" and frame == 1025:
        pixels[42:46, 2:10] = (255, 0, 0)
    return pixels


def write(root: Path) -> None:
    for video, (phases, cuts) in VIDEOS.items():
        names = [name for name, count in phases for _ in range(count)]
        write_video(root / f"{video}.mp4", len(names), FPS, SIZE)
        folder = root / video
        rows = "".join(f"{frame},{name}\n" for frame, name in enumerate(names))
        write_text(folder / f"{video}_Phases.csv", "Frame,Phase\n" + rows)
        write_text(folder / f"{video}_Cuts.csv", "Frame\n" + "".join(f"{cut}\n" for cut in cuts))
        for frame in range(0, len(names), MASK_STEP):
            write_image(folder / f"{video}_Masks" / bucket_path(frame), _mask(video, frame))
            image = f"Frames/{video}/{bucket_path(frame)}"
            write_image(root / image, noise_image(image, SIZE))


BAD_INPUTS = {
    "missing_file": remove("Video_07/Video_07_Masks/1000/frame_001000.png"),
    "truncated_image": cut("Frames/Video_01/0/frame_000050.png", 0.3),
    "wrong_mask_size": shrink("Video_01/Video_01_Masks/0/frame_000025.png", names="Video_01_Masks/0/frame_000025.png"),
    "malformed_row": rewrite("Video_01/Video_01_Phases.csv", "\n12,Preparation\n", "\n12,Preparation,x\n"),
    "unknown_label": rewrite("Video_07/Video_07_Phases.csv", ",ClippingCutting\n", ",ClipingCutting\n", 3),
    "not_utf8": not_utf8("Video_01/Video_01_Phases.csv"),
    # 500 of Video_07's 1,030 frames: its masks every 25th frame run on past them, and the error names the phase file
    "short_annotation": cut_lines("Video_07/Video_07_Phases.csv", 1 + 500),
    "missing_video": remove_video("Video_07.mp4"),
    "misnamed_video": misname_video("Video_01.mp4", "video_01.mp4"),
}
