"""Where a downloaded section of a source video sits in that video: the ``<source_id>.section.json`` sidecar.

``sureon videos fetch --sections`` downloads only the span a release's clips need. yt-dlp cuts such a span with
FFmpeg by input seeking and stream copy (``-ss START -i URL -c copy``), so the file starts at the keyframe before
START, not at START [yt-dlp ``downloader/external.py``, ``FFmpegFD``; yt-dlp issues #4216, #9537]. The fetcher keeps
the source's own timestamps (FFmpeg ``-copyts``), measures the file's first frame and frame rate, and records them
here; the frame sampler then maps the source's frame ``i`` to the file's frame ``i - first_index``, so frames and
``frame_timestamps`` equal those of a whole-video download.

Assumes the source's timestamps start at 0 and run at a constant rate (the norm for lecture uploads); the fetcher
checks that the section's first frame lies on that frame grid and rejects the file otherwise.
"""

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from builders.errors import InputError
from builders.outputs import write_atomic


SUFFIX = ".section.json"


@dataclass(frozen=True)
class Section:
    """The file holds the source's frames from ``first_index`` on, at ``fps``; ``start``, ``end``: first, last."""

    source_id: str
    first_index: int
    fps: float
    start: float
    end: float
    requested: tuple[float, float]


def sidecar_path(video: Path) -> Path:
    return video.with_name(video.stem + SUFFIX)


def read_section(video: Path) -> Section | None:
    """The section ``video`` holds, or None when it is a whole video (no sidecar)."""
    path = sidecar_path(video)
    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    try:
        return Section(
            data["source_id"],
            int(data["first_index"]),
            float(data["fps"]),
            float(data["start"]),
            float(data["end"]),
            tuple(data["requested"]),
        )
    except (KeyError, TypeError, ValueError) as err:
        raise InputError(f"{path}: not a section sidecar ({err}); delete it and the video, then fetch again") from err


def write_section(video: Path, section: Section) -> None:
    write_atomic(sidecar_path(video), json.dumps(asdict(section), indent=2, sort_keys=True))
