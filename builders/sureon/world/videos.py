"""A world's source videos: each one its questions' clips back to back, drawn frame by frame and encoded as H.264.

Laying the clips out is what gives each question its window (``start``, ``end``), so the rows are written after it.
"""

from pathlib import Path

import numpy as np

from builders.outputs import atomic_file
from builders.sureon.world.config import WorldConfig
from builders.sureon.world.drawing import BACKGROUND, draw_frame
from builders.sureon.world.planning import Question
from builders.sureon.world.vocabulary import COLOURS


def segment_frames(config: WorldConfig, q: Question, count: int):
    """The ``count`` frames of ``q``'s clip: its square along its motion, or its three phases in turn."""
    size = config.frame_size
    for index in range(count):
        progress = index / max(1, count - 1)
        if "phases" in q.scene:
            phase = q.scene["phases"][min(2, index * 3 // count)]
            yield draw_frame(size, colour=COLOURS[phase])
        else:
            colour = COLOURS[q.scene["colour"]]
            yield draw_frame(
                size, colour=colour, motion=q.scene["motion"], pattern=q.scene["pattern"], progress=progress
            )


def write_video(path: Path, frames: list[np.ndarray], fps: int) -> None:
    """H.264 mp4 (yuv420p, every 8th frame a keyframe), written to a temporary name then moved into place."""
    import av

    with atomic_file(path) as partial, av.open(str(partial), mode="w") as container:
        stream = container.add_stream("libx264", rate=fps)
        stream.width, stream.height = frames[0].shape[1], frames[0].shape[0]
        stream.pix_fmt = "yuv420p"
        stream.gop_size = 8
        # deterministic output: one thread, no timing-dependent rate control
        stream.options = {"crf": "10", "preset": "veryfast", "threads": "1"}
        for frame in frames:
            container.mux(stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")))
        container.mux(stream.encode())


def lay_out_videos(config: WorldConfig, questions: list[Question]) -> dict[str, list[np.ndarray]]:
    """Each video is its questions' segments back to back, a blank second between them; each window spans exactly
    its segment's frames (from its first frame to its last), so no sampled frame belongs to another question."""
    fps = config.fps
    blank = draw_frame(config.frame_size, colour=BACKGROUND)
    videos: dict[str, list[np.ndarray]] = {}
    for q in questions:
        frames = videos.setdefault(q.source_id, [])
        frames.extend([blank] * fps)
        seconds = config.long_seconds if q.code in ("F", "TO", "SM") else config.short_seconds
        count = round(seconds * fps)
        q.start = len(frames) / fps
        frames.extend(segment_frames(config, q, count))
        q.end = (len(frames) - 1) / fps
    for frames in videos.values():
        frames.extend([blank] * fps)
    return videos
