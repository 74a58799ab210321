"""Sample clip frames from local source videos: seek, never decode from the start; cache every clip on disk.

Sampling follows the seed's D.1: for a clip ``[start, end]`` take the frames the video actually holds in the window
(at its own frame rate) and pick up to ``max_frames`` of them uniformly (the centre of ``n`` equal parts), at least
``min_frames`` (a window with fewer frames repeats them). Timestamps are the decoded frames' own presentation times,
in absolute seconds of the source video.

Indices are planned at the video's average frame rate: exact for constant-rate videos (the norm for lecture
uploads); for a variable-rate file the stored timestamps are still the decoded frames' own, so they stay true even
where they sit slightly off the window.

Decoding uses torchcodec (FFmpeg) with exact seeking; one decoder is opened per source video and its windows are read
in time order. Each clip's JPEG frames are cached in one file keyed by the video's identity (size, mtime), the window
and the sampling policy, so an interrupted build resumes without decoding anything twice.
"""

import hashlib
import io
import json
import math
import os
import tempfile
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from multiprocessing import get_context
from pathlib import Path

from PIL import Image

from builders.blur import BlurSettings, blurrer_for
from builders.sureon.sections import Section, read_section
from builders.video import VIDEO_EXTENSIONS, open_decoder


_CACHE_MAGIC = b"SUREONFRAMES1\n"


@dataclass(frozen=True)
class FramePolicy:
    max_frames: int = 8
    min_frames: int = 4
    max_side: int | None = 768
    jpeg_quality: int = 90
    blur: BlurSettings | None = None  # text / faces blurred before encoding (builders/blur.py); None: untouched

    def __post_init__(self):
        if not 1 <= self.min_frames <= self.max_frames:
            raise ValueError(f"need 1 <= min_frames ({self.min_frames}) <= max_frames ({self.max_frames})")
        if self.max_side is not None and self.max_side < 16:
            raise ValueError(f"max_side {self.max_side} is too small")

    def identity(self) -> dict:
        """What the encoded frames depend on (the cache key): sizes, quality, and the blur with its detectors."""
        identity = {k: v for k, v in asdict(self).items() if k != "blur"}
        if self.blur is not None:
            identity["blur"] = blurrer_for(self.blur).fingerprint()
        return identity


@dataclass
class ClipFrames:
    jpegs: list[bytes]
    timestamps: list[float]
    indices: list[int]
    blurred_regions: list[list[dict]] | None = None  # per frame: {"detector", "box" (0-1000 grid)}; None: no blur

    def __post_init__(self):
        if self.blurred_regions is None:
            self.blurred_regions = [[] for _ in self.jpegs]


class ClipError(RuntimeError):
    """A clip that cannot be sampled (video unreadable, window outside the video)."""


def plan_frame_indices(start: float, end: float, fps: float, num_frames: int, policy: FramePolicy) -> list[int]:
    """Indices of the frames to sample for ``[start, end]`` in a video of ``num_frames`` frames at ``fps``."""
    if num_frames <= 0 or fps <= 0:
        raise ClipError(f"the video reports {num_frames} frames at {fps} fps")
    first = math.ceil(start * fps - 1e-6)
    last = min(math.floor(end * fps + 1e-6), num_frames - 1)
    if first > num_frames - 1:
        raise ClipError(f"window starts at {start:.2f}s, after the video ends ({num_frames / fps:.2f}s)")
    if last < first:  # a window shorter than one frame interval: the frame on screen at `start`
        first = last = min(math.floor(start * fps), num_frames - 1)
    available = last - first + 1
    count = min(policy.max_frames, max(policy.min_frames, available))
    return [first + math.floor((i + 0.5) * available / count) for i in range(count)]


def encode_jpeg(frame_chw, policy: FramePolicy) -> tuple[bytes, list[dict]]:
    """A decoded uint8 CHW tensor -> (JPEG bytes, the regions blurred), longest side capped at ``policy.max_side``.

    The one place a decoded frame becomes a JPEG: blurring happens here, at the decoded resolution, before resizing.
    """
    pixels, regions = frame_chw.permute(1, 2, 0).numpy(), []
    if policy.blur is not None:
        pixels, regions = blurrer_for(policy.blur).apply(pixels)
    image = Image.fromarray(pixels)
    if policy.max_side and max(image.size) > policy.max_side:
        scale = policy.max_side / max(image.size)
        size = (max(1, round(image.width * scale)), max(1, round(image.height * scale)))
        image = image.resize(size, Image.Resampling.BICUBIC)
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=policy.jpeg_quality)
    return buffer.getvalue(), regions


def sample_clip(decoder, start: float, end: float, policy: FramePolicy, section: Section | None = None) -> ClipFrames:
    """Frames of ``[start, end]`` (source seconds); ``section``: the file holds only part of the source."""
    metadata = decoder.metadata
    fps, first, total = metadata.average_fps, 0, metadata.num_frames
    if section is not None:  # source frame i is the file's frame i - first_index (builders/sureon/sections.py)
        fps, first, total = section.fps, section.first_index, section.first_index + metadata.num_frames
    indices = plan_frame_indices(start, end, fps, total, policy)
    if indices[0] < first:
        raise ClipError(f"window starts at {start:.2f}s, before the downloaded section ({section.start:.2f}s)")
    unique = sorted(set(indices))
    batch = decoder.get_frames_at([index - first for index in unique])
    by_index = {
        index: (*encode_jpeg(batch.data[i], policy), round(float(batch.pts_seconds[i]), 6))
        for i, index in enumerate(unique)
    }
    return ClipFrames(
        jpegs=[by_index[i][0] for i in indices],
        timestamps=[by_index[i][2] for i in indices],
        indices=indices,
        blurred_regions=[by_index[i][1] for i in indices] if policy.blur is not None else None,
    )


class FrameCache:
    """One file per clip: a JSON header line (timestamps, indices, JPEG sizes) followed by the JPEG bytes."""

    def __init__(self, root: str | Path):
        self.root = Path(root)

    def key(self, video: Path, start: float, end: float, policy: FramePolicy) -> str:
        stat = video.stat()
        identity = {
            "video": video.name,
            "size": stat.st_size,
            "mtime_ns": stat.st_mtime_ns,
            "start": round(start, 6),
            "end": round(end, 6),
            "policy": policy.identity(),
        }
        return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.frames"

    @staticmethod
    def _read_header(handle) -> dict | None:
        """The clip's header, or None when the file is not a complete cache entry (then it is recomputed)."""
        if handle.readline() != _CACHE_MAGIC:
            return None
        header = json.loads(handle.readline())
        size = os.fstat(handle.fileno()).st_size
        return header if handle.tell() + sum(header["sizes"]) == size else None

    def has(self, key: str) -> bool:
        """A complete entry exists; reads only its header, so checking a large cache costs no JPEG I/O."""
        try:
            with self._path(key).open("rb") as handle:
                return self._read_header(handle) is not None
        except FileNotFoundError:
            return False

    def get(self, key: str) -> ClipFrames | None:
        try:
            with self._path(key).open("rb") as handle:
                header = self._read_header(handle)
                jpegs = [handle.read(size) for size in header["sizes"]] if header else None
        except FileNotFoundError:
            return None
        if header is None:
            return None
        return ClipFrames(jpegs, header["timestamps"], header["indices"], header.get("blurred_regions"))

    def put(self, key: str, frames: ClipFrames) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        header = {"timestamps": frames.timestamps, "indices": frames.indices, "sizes": [len(j) for j in frames.jpegs]}
        if any(frames.blurred_regions):
            header["blurred_regions"] = frames.blurred_regions
        payload = _CACHE_MAGIC + json.dumps(header).encode() + b"\n" + b"".join(frames.jpegs)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
        os.replace(tmp, path)


def index_videos(videos_dir: str | Path) -> dict[str, Path]:
    """``source_id -> video path`` for every ``<source_id>.<ext>`` under ``videos_dir`` (searched recursively)."""
    root = Path(videos_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"videos folder {root} does not exist")
    found: dict[str, Path] = {}
    duplicates = []
    for path in sorted(root.rglob("*")):
        if path.suffix.lower() in VIDEO_EXTENSIONS and path.is_file() and not path.name.startswith("."):
            if path.stem in found:
                duplicates.append(f"{found[path.stem]} and {path}")
            found[path.stem] = path
    if duplicates:
        raise ValueError(f"several files for the same source_id: {'; '.join(duplicates)}; keep one of each")
    return found


def extract_video_clips(
    video: Path, windows: list[tuple[float, float]], policy: FramePolicy, cache_dir: str | Path
) -> dict[tuple[float, float], str | None]:
    """Sample and cache every window of one video; return ``window -> None`` (cached) or an error message."""
    cache = FrameCache(cache_dir)
    todo = [w for w in sorted(set(windows)) if not cache.has(cache.key(video, *w, policy))]
    outcome: dict[tuple[float, float], str | None] = {w: None for w in windows}
    if not todo:
        return outcome
    try:
        decoder = open_decoder(video)
        section = read_section(video)
    except (RuntimeError, ValueError, OSError) as err:  # FFmpeg could not open or parse the file
        return {w: f"unreadable video {video.name}: {err}" for w in windows}
    for window in todo:
        try:
            cache.put(cache.key(video, *window, policy), sample_clip(decoder, *window, policy, section))
        except (RuntimeError, ValueError, IndexError, OSError) as err:  # reported per clip; the build decides
            outcome[window] = f"{video.name} [{window[0]:.2f}s, {window[1]:.2f}s]: {err}"
    return outcome


def extract_all(
    jobs: dict[Path, list[tuple[float, float]]], policy: FramePolicy, cache_dir: str | Path, num_workers: int = 1
):
    """Yield ``(video, outcome)`` for each video, decoding videos in parallel when ``num_workers > 1``."""
    if num_workers <= 1:
        for video, windows in jobs.items():
            yield video, extract_video_clips(video, windows, policy, cache_dir)
        return
    with ProcessPoolExecutor(max_workers=num_workers, mp_context=get_context("spawn")) as pool:
        futures = {
            video: pool.submit(extract_video_clips, video, windows, policy, cache_dir)
            for video, windows in jobs.items()
        }
        for video, future in futures.items():
            yield video, future.result()
