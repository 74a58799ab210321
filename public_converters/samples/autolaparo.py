"""A tiny AutoLaparo in its native layout: two Task 1 videos with 1-fps phase files (neither a whole number of
seconds long), two Task 2 motion clips (10 s and 9.6 s) with their label file, and three Task 3 frames with
grey-level masks (tool manipulator + shaft, uterus)."""

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


FPS = 25
# video number -> 1-based phase per second
WORKFLOW = {"01": [1] * 4 + [2] * 5 + [3] * 3, "15": [5] * 3 + [6] * 6 + [7] * 2}
# clip number -> (motion id, phase column, frames): clip 228 is 0.4 s short of the nominal 10 s
MOTION = {1: (5, 2, 250), 228: (0, 6, 240)}
SHORT_OF_WHOLE_SECONDS = 15  # the Task 1 videos end 15 frames into their last labelled second
SIZE = (64, 48)


def _mask(clip: int, frame: int) -> np.ndarray:
    """Grey levels: 20/40 grasping forceps manipulator/shaft (touching), 160 two hook shafts, 180 a split uterus."""
    mask = np.zeros((SIZE[1], SIZE[0]), dtype=np.uint8)
    if (clip, frame) == (1, 1):
        mask[5:10, 5:12] = 20
        mask[10:20, 10:14] = 40
        mask[30:34, 2:8] = 160
        mask[40:44, 50:60] = 160
        mask[25:35, 30:40] = 180
        mask[36:40, 42:46] = 180
    elif (clip, frame) == (1, 125):
        mask[0:6, 0:64] = 80
    return mask  # clip 228 frame 50: nothing but background


def write(root: Path) -> None:
    task1 = root / "AutoLaparo_Task1"
    for number, phases in WORKFLOW.items():
        write_video(task1 / "videos" / f"{number}.mp4", FPS * len(phases) - SHORT_OF_WHOLE_SECONDS, FPS)
        rows = "".join(f"{second}\t{phase}\n" for second, phase in enumerate(phases, 1))
        write_text(task1 / "labels" / f"label_{number}.txt", "Frame\tPhase\n" + rows)
    task2 = root / "AutoLaparo_Task2"
    for clip, (_, _, frames) in MOTION.items():
        write_video(task2 / "clips" / f"{clip:03d}.mp4", frames, FPS)
    rows = "".join(f"{clip}\t{motion}\t{phase}\n" for clip, (motion, phase, _) in MOTION.items())
    write_text(task2 / "laparoscope_motion_label.txt", "Clip\tLabel\tPhase\n" + rows)
    task3 = root / "AutoLaparo_Task3"
    for clip, frame in ((1, 1), (1, 125), (228, 50)):
        name = f"{clip:03d}{frame:03d}"
        write_image(task3 / "imgs" / f"{name}.jpg", noise_image(f"autolaparo-{name}", SIZE))
        grey = _mask(clip, frame)
        write_image(task3 / "masks" / f"{name}.png", np.repeat(grey[..., None], 3, axis=2))  # R=G=B


BAD_INPUTS = {
    "missing_file": remove("AutoLaparo_Task1/labels/label_15.txt"),
    "truncated_image": cut("AutoLaparo_Task3/imgs/001125.jpg"),
    "wrong_mask_size": shrink("AutoLaparo_Task3/masks/228050.png"),
    "malformed_row": rewrite("AutoLaparo_Task2/laparoscope_motion_label.txt", "228\t0\t6", "228 0 6"),
    "unknown_label": rewrite("AutoLaparo_Task1/labels/label_01.txt", "\n12\t3\n", "\n12\t8\n"),
    "not_utf8": not_utf8("AutoLaparo_Task2/laparoscope_motion_label.txt"),
    "missing_video": remove_video("AutoLaparo_Task2/clips/228.mp4"),
    "misnamed_video": misname_video("AutoLaparo_Task1/videos/15.mp4", "15.MP4"),
}
# video 01's label file cut after 6 of its 12 seconds
WARNED_INPUTS = {"short_annotation": cut_lines("AutoLaparo_Task1/labels/label_01.txt", 1 + 6)}
