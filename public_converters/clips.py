"""Clip sampling for the clip branch (the Sureon paper's C.3), on the normalised segments of one video.

- **Strategic** (default): clips centred on every phase / step transition (the moments of change), plus one clip
  inside every segment at a seeded position (beginning, middle or end of it: the steady states). Lengths are drawn
  between ``min_seconds`` and ``max_seconds``; a video shorter than a clip (an action-clip dataset) is one clip.
- **Grounded**: an 8-frame window slid with a stride of 4 over the video's frame grid (1 fps by default), kept only
  if every requested task (phase, step, action) has one constant label over the whole window, so the answer is
  unambiguous. ``max_per_video`` thins long videos to a seeded subset; the count before thinning is reported.

Every draw is seeded from the source, video and window, so two builds sample the same clips.
"""

from __future__ import annotations

import itertools
import math
import random
from bisect import bisect_right
from dataclasses import dataclass

from builders.options import stable_seed
from public_converters.schema import Segment, Video


POSITIONS = ("beginning", "middle", "end")
GROUNDED_KINDS = ("phase", "step", "action")


@dataclass(frozen=True)
class Clip:
    video_id: str
    start_frame: int
    end_frame: int  # inclusive
    sampling: str  # "strategic" or "grounded"
    anchor: str  # why it was sampled: "transition", "beginning" / "middle" / "end", "whole", "window"
    frames: tuple[int, ...] = ()  # the frames a model sees (grounded windows fix them; else chosen at media time)


@dataclass(frozen=True)
class SamplingConfig:
    min_seconds: float = 8.0
    max_seconds: float = 30.0
    window: int = 8
    stride: int = 4
    grid_fps: float = 1.0
    max_per_video: int | None = 64


class LabelTimeline:
    """Constant-label lookups on one kind's segments of one video (segments may overlap: all labels are kept)."""

    def __init__(self, segments: list[Segment]):
        self.segments = sorted(segments, key=lambda s: (s.start_frame, s.end_frame, s.label))
        self.starts = [s.start_frame for s in self.segments]

    def covering(self, start: int, end: int) -> list[Segment]:
        """Segments overlapping ``[start, end]``."""
        last = bisect_right(self.starts, end)
        return [s for s in self.segments[:last] if s.end_frame >= start]

    def constant_label(self, start: int, end: int) -> str | None:
        """The one label whose single segment covers the whole window; None if the label changes or is missing."""
        found = self.covering(start, end)
        labels = {s.label for s in found}
        if len(labels) != 1:
            return None
        return found[0].label if any(s.start_frame <= start and s.end_frame >= end for s in found) else None


def _clamp(start: int, length: int, total: int) -> tuple[int, int]:
    start = max(0, min(start, total - length))
    return start, min(total - 1, start + length - 1)


def strategic_clips(video: Video, segments: list[Segment], config: SamplingConfig, source: str) -> list[Clip]:
    """Transition-centred and within-segment clips for the video's phase / step segments (actions if it has none)."""
    if not video.fps:
        return []
    total = video.total_frames or max((s.end_frame for s in segments), default=-1) + 1
    kinds = [k for k in ("phase", "step") if any(s.kind == k for s in segments)] or ["action"]
    rng = random.Random(stable_seed("strategic", source, video.video_id))
    low, high = round(config.min_seconds * video.fps), round(config.max_seconds * video.fps)
    if total <= high:
        return [Clip(video.video_id, 0, total - 1, "strategic", "whole")] if total > 0 else []
    clips: dict[tuple[int, int], Clip] = {}
    for kind in kinds:
        ordered = sorted((s for s in segments if s.kind == kind), key=lambda s: (s.start_frame, s.end_frame))
        for before, after in itertools.pairwise(ordered):
            if before.label != after.label and after.start_frame - before.end_frame <= 1:
                length = rng.randint(low, high)
                start, end = _clamp(after.start_frame - length // 2, length, total)
                clips.setdefault((start, end), Clip(video.video_id, start, end, "strategic", "transition"))
        for segment in ordered:
            duration = segment.end_frame - segment.start_frame + 1
            if duration < low:
                continue
            length = min(rng.randint(low, high), duration)
            position = rng.choice(POSITIONS)
            offset = {"beginning": 0, "middle": (duration - length) // 2, "end": duration - length}[position]
            start = segment.start_frame + offset
            clips.setdefault(
                (start, start + length - 1), Clip(video.video_id, start, start + length - 1, "strategic", position)
            )
    return sorted(clips.values(), key=lambda c: (c.start_frame, c.end_frame))


def frame_grid(step: int, total: int, available: list[int] | None) -> list[int]:
    """Every ``step``-th frame of the video, or, for a source that ships frames instead of a video, its available
    frames thinned greedily so that consecutive grid frames are at least ``step`` apart."""
    if available is None:
        return list(range(0, total, step))
    grid: list[int] = []
    for frame in available:
        if not grid or frame - grid[-1] >= step:
            grid.append(frame)
    return grid


def grounded_clips(
    video: Video, segments: list[Segment], config: SamplingConfig, source: str, available: list[int] | None = None
) -> tuple[list[Clip], int]:
    """Windows with a constant label for every task the video has; returns (kept clips, windows that qualified).

    ``available``: the sorted frames a frame-folder source ships (None when frames are decoded from the video); a
    window over them may not span a gap wider than twice its nominal length."""
    kinds = [k for k in GROUNDED_KINDS if any(s.kind == k for s in segments)]
    if not video.fps or not kinds:
        return [], 0
    timelines = {k: LabelTimeline([s for s in segments if s.kind == k]) for k in kinds}
    total = video.total_frames or max(s.end_frame for s in segments) + 1
    step = max(1, round(video.fps / config.grid_fps))
    grid = frame_grid(step, total, available)
    qualified = []
    for first in range(0, len(grid) - config.window + 1, config.stride):
        frames = tuple(grid[first : first + config.window])
        if frames[-1] - frames[0] > 2 * step * (config.window - 1):
            continue
        if all(timelines[k].constant_label(frames[0], frames[-1]) for k in kinds):
            qualified.append(Clip(video.video_id, frames[0], frames[-1], "grounded", "window", frames))
    kept = qualified
    if config.max_per_video is not None and len(qualified) > config.max_per_video:
        rng = random.Random(stable_seed("grounded", source, video.video_id))
        kept = sorted(rng.sample(qualified, config.max_per_video), key=lambda c: c.start_frame)
    return kept, len(qualified)


def spread(frames: list[int], most: int = 8, least: int = 4) -> list[int]:
    """Between ``least`` and ``most`` of ``frames`` (sorted), uniformly: the centre of equal parts. A clip with fewer
    frames than ``least`` repeats them, as the Sureon paper's D.1 clamps to at least 4 (and video models need two or
    more)."""
    if not frames:
        return []
    count = min(most, max(least, len(frames)))
    return [frames[math.floor((i + 0.5) * len(frames) / count)] for i in range(count)]
