"""Shared by the ITEC Klagenfurt sources (LapGyn4, GynSurg, SurgicalActions160): classification releases that ship
class folders and no split, so the split and, for clip folders, each clip's length must come from elsewhere.

``hashed_split`` puts a patient/case key into train / validation / test (70 / 10 / 20 %) by a sha256 of the source
name and the key: stable across machines and releases, independent of which other cases are present, and every
item of one case lands in one split. ``probe_clip`` reads a clip's frame count and rate from its container header
(no frame is decoded): a class-folder clip is labelled as a whole, so its one segment must end at its last frame.
``probe_or_defer`` leaves a missing or unreadable video to the media check, which lists every one of a source.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

from builders.options import stable_seed
from public_converters.schema import Segment, SourceError, SourceTables, Video


def hashed_split(source: str, key: str) -> str:
    bucket = stable_seed(source, "split", key) % 100
    return "train" if bucket < 70 else "validation" if bucket < 80 else "test"


def probe_clip(path: Path) -> tuple[float, int, int, int]:
    """(fps, frame count, width, height) of a video from its container header."""
    import av

    if not path.is_file():
        raise SourceError(path, "file not found", fix="re-extract the release")
    try:
        with av.open(str(path)) as container:
            stream = container.streams.video[0]
            rate, frames = stream.average_rate, stream.frames
            width, height = stream.codec_context.width, stream.codec_context.height
            if not frames and stream.duration and stream.time_base and rate:
                frames = round(float(stream.duration * stream.time_base * Fraction(rate)))
    except (av.error.FFmpegError, IndexError, OSError) as error:
        raise SourceError(path, f"cannot read the video header ({error})", fix="re-download this clip") from error
    if not rate or not frames:
        raise SourceError(path, f"the header gives {frames} frames at {rate} fps", fix="re-download this clip")
    return round(float(rate), 3), int(frames), int(width), int(height)


def probe_or_defer(path: Path, video_id: str, tables: SourceTables) -> tuple[float, int, int, int] | None:
    """:func:`probe_clip`'s header, or None for a video that is missing or unreadable, left to the media check: it
    names a missing one with the file probably meant, and an unreadable one from ``tables.unreadable``, among every
    media problem of the source, so that one run names them all."""
    if not path.is_file():
        return None
    try:
        return probe_clip(path)
    except SourceError as error:
        tables.unreadable[video_id] = str(error)
        return None


def add_whole_clip(tables: SourceTables, root: Path, clip: Path, video_id: str, split: str, action: str) -> None:
    """A clip labelled as a whole: its own Video (decoded from ``video_path``) and one action segment over it (none
    while its header is unreadable: the media check stops the build on it)."""
    header = probe_or_defer(clip, video_id, tables)
    fps, total, width, height = header or (None, None, None, None)
    relative = clip.relative_to(root).as_posix()
    tables.videos.append(Video(video_id, split, fps, total, width, height, video_path=relative))
    if total:
        tables.segments.append(Segment(video_id, "action", action, 0, total - 1))


def subfolders(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))


def files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))
