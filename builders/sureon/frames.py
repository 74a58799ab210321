"""Sample clip frames from local source videos: seek, never decode from the start; cache every clip on disk.

Sampling follows the Sureon paper's D.1: for a clip ``[start, end]`` take the frames the video actually holds in the
window (at its own frame rate) and pick up to ``max_frames`` of them uniformly (the centre of ``n`` equal parts), at
least ``min_frames`` (a window with fewer frames repeats them). Timestamps are the decoded frames' own presentation
times, in absolute seconds of the source video.

Indices are planned at the video's average frame rate: exact for constant-rate videos (the norm for lecture
uploads); for a variable-rate file the stored timestamps are still the decoded frames' own, so they stay true even
where they sit slightly off the window.

Decoding uses torchcodec (FFmpeg) with exact seeking, one decoder per source video and FFmpeg's threads. All the
clips of a video are sampled in one pass (:func:`sample_clips`): the union of their frames is decoded once each, in
time order, so clips that overlap or sit in the same keyframe interval share the decoding (torchcodec decodes forward
to a frame in the keyframe interval it is in and seeks to reach a later one: per video, the cheaper of a seek per
frame and one forward decode of the spans, as ``benchmarks/frames.py`` measures). On the CPU, FFmpeg scales each
frame to the stored size while converting it to RGB; every frame then becomes a JPEG in one place,
:func:`encode_jpeg` (which also scales frames that arrive larger, e.g. from the GPU). Scaling is bilinear with
antialiasing, FFmpeg's and torchvision's alike. With a GPU, decoding runs on torchcodec's CUDA device
(``decode_device="auto"``); NVDEC's colour conversion is not FFmpeg's, so such frames can differ slightly from
CPU-decoded ones and the cache keeps them apart.

For the evaluation configs, on-screen text and faces are blurred in :func:`encode_jpeg` before encoding (the Sureon
paper's D.1, :mod:`builders.blur`), on the frame at its stored size, the frames of each decoded chunk on a thread per
core (detection is most of a blurred build's time). A video downloaded as a section of its source
(``sureon videos fetch --sections``) has a sidecar saying where it starts (:mod:`builders.sureon.sections`): frames are
planned on the source's frame grid and read at their place in the file, so frames and timestamps equal those of the
whole video.

A clip's window must lie inside the user's copy of its video: a copy shorter than the release's (a re-upload, a cut
download) would otherwise give a clip whose frames all come from before the window's end while ``start``/``end``
still claim the whole window. :func:`windows_outside` checks every window against the video's header before anything
is decoded, with :data:`WINDOW_TOLERANCE_S` of slack (a container's duration rounding, a trailing frame a re-encode
dropped); the build refuses, skips or keeps such clips without frames as ``--on-missing-video`` says.
:func:`plan_frame_indices` refuses them too, on the decoder's exact frame count.

Each clip's JPEG frames are cached in one file keyed by the video's identity (size, mtime), the window, the sampling
policy (blur settings and detector versions included) and the decoding device, so an interrupted build resumes without
decoding anything twice.
"""

import hashlib
import io
import json
import math
import os
from collections import defaultdict
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import asdict, dataclass
from multiprocessing import get_context
from pathlib import Path

from PIL import Image

from builders.blur import BlurSettings, blurrer_for
from builders.errors import InputError
from builders.outputs import write_atomic
from builders.prompt import PROTOCOL_FRAMES
from builders.sureon.sections import Section, read_section
from builders.video import VIDEO_EXTENSIONS, header_end_seconds, open_decoder, probe_header, probe_size


_CACHE_MAGIC = b"SUREONFRAMES1\n"
DECODE_DEVICES = ("auto", "cpu", "cuda")
# Frames per decoder call: bounds the RGB frames held at once (32 at 1280x720 = 88 MB) without extra seeks, since
# the decoder keeps its position between calls.
DECODE_CHUNK = 32
# How far a clip's window may run past the last frame of the user's copy of its video (see the module docstring)
WINDOW_TOLERANCE_S = 0.5
Window = tuple[float, float]


@dataclass(frozen=True)
class FramePolicy:
    max_frames: int = PROTOCOL_FRAMES
    min_frames: int = 4
    max_side: int | None = 768
    jpeg_quality: int = 90
    blur: BlurSettings | None = None  # text / faces blurred before encoding (builders/blur.py); None: untouched

    def __post_init__(self):
        if not 1 <= self.min_frames <= self.max_frames:
            raise InputError(f"need 1 <= min_frames ({self.min_frames}) <= max_frames ({self.max_frames})")
        if self.max_side is not None and self.max_side < 16:
            raise InputError(f"max_side {self.max_side} is too small")

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
    if not (math.isfinite(start) and math.isfinite(end) and 0 <= start <= end):
        raise ClipError(f"window [{start}, {end}] is not a span of finite, non-negative seconds")
    first = math.ceil(start * fps - 1e-6)
    last = min(math.floor(end * fps + 1e-6), num_frames - 1)
    if first > num_frames - 1:
        raise ClipError(f"window starts at {start:.2f}s, after the video ends ({num_frames / fps:.2f}s)")
    if end > num_frames / fps + WINDOW_TOLERANCE_S:
        raise ClipError(past_end(start, end, num_frames / fps))
    if last < first:  # a window shorter than one frame interval: the frame on screen at `start`
        first = last = min(math.floor(start * fps), num_frames - 1)
    available = last - first + 1
    count = min(policy.max_frames, max(policy.min_frames, available))
    return [first + math.floor((i + 0.5) * available / count) for i in range(count)]


def past_end(start: float, end: float, video_end: float) -> str:
    return (
        f"window [{start:.2f}s, {end:.2f}s] runs past the end of this copy of the video ({video_end:.2f}s): the "
        "copy is shorter than the release's (a re-upload, a cut download); fetch the release's version"
    )


def windows_outside(video: Path, windows: list[Window]) -> dict[Window, str]:
    """The windows of ``video`` that the file cannot hold, each with the reason, judged from the file's header (and
    its section sidecar) alone: a window running past the end (beyond :data:`WINDOW_TOLERANCE_S`), or starting
    before the downloaded section. An unreadable header makes every window fail with that reason."""
    try:
        section = read_section(video)
        file_end = header_end_seconds(probe_header(video))
    except (RuntimeError, ValueError, OSError) as err:  # FFmpeg could not open or parse the file
        return {window: f"unreadable video {video.name}: {err}" for window in windows}
    if section is not None:  # the section holds the source's frames from section.start to section.end
        begin, end = section.start, section.end + 1 / section.fps
    else:
        begin, end = 0.0, file_end
    outside = {}
    for window in windows:
        if end is not None and window[1] > end + WINDOW_TOLERANCE_S:
            outside[window] = f"{video.name}: {past_end(*window, end)}"
        elif section is not None and window[0] < begin - WINDOW_TOLERANCE_S:
            outside[window] = (
                f"{video.name}: window starts at {window[0]:.2f}s, before the downloaded section ({begin:.2f}s)"
            )
    return outside


def resolve_decode_device(requested: str = "auto") -> str:
    """``auto`` -> ``cuda`` when torch sees a GPU, else ``cpu``."""
    if requested not in DECODE_DEVICES:
        raise InputError(f"decode device must be one of {DECODE_DEVICES}, got {requested!r}")
    if requested != "auto":
        return requested
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def decode_threads(num_workers: int = 1) -> int:
    """FFmpeg threads per decoder: the cores this process may use, shared among ``num_workers`` decoding workers."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, cores // max(1, num_workers))


def stored_size(width: int, height: int, policy: FramePolicy) -> tuple[int, int]:
    """``(width, height)`` of a stored frame: the longest side capped at ``policy.max_side``, the aspect kept."""
    if not policy.max_side or max(width, height) <= policy.max_side:
        return width, height
    scale = policy.max_side / max(width, height)
    return max(1, round(width * scale)), max(1, round(height * scale))


def open_clip_decoder(video: Path, policy: FramePolicy, device: str = "cpu", num_threads: int = 1):
    """A decoder for sampling ``video``; on the CPU its frames come out already at :func:`stored_size`."""
    if device != "cpu":
        return open_decoder(video, device=device, num_threads=num_threads)
    width, height = probe_size(video)
    size = stored_size(width, height, policy)
    resize = (size[1], size[0]) if size != (width, height) else None
    return open_decoder(video, device=device, num_threads=num_threads, size=resize)


def encode_jpeg(frame_chw, policy: FramePolicy) -> tuple[bytes, list[dict]]:
    """A decoded uint8 CHW tensor (CPU or GPU) -> (JPEG bytes at :func:`stored_size`, the regions blurred): the one
    place where a decoded frame becomes a stored image."""
    height, width = frame_chw.shape[-2:]
    size = stored_size(width, height, policy)
    if size != (width, height):
        from torchvision.transforms.v2.functional import resize

        frame_chw = resize(frame_chw, [size[1], size[0]], antialias=True)  # on the frame's device
    pixels, regions = frame_chw.permute(1, 2, 0).cpu().numpy(), []
    if policy.blur is not None:
        pixels, regions = blurrer_for(policy.blur).apply(pixels)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="JPEG", quality=policy.jpeg_quality)
    return buffer.getvalue(), regions


def decode_in_order(decoder, indices: list[int]) -> Iterator[list[tuple[int, object, float]]]:
    """Chunks of ``(index, CHW frame, pts seconds)`` for the sorted, distinct ``indices``, decoded in time order."""
    for begin in range(0, len(indices), DECODE_CHUNK):
        chunk = indices[begin : begin + DECODE_CHUNK]
        batch = decoder.get_frames_at(chunk)
        yield [(index, batch.data[i], round(float(batch.pts_seconds[i]), 6)) for i, index in enumerate(chunk)]


def sample_clips(
    decoder, plans: dict[Window, list[int]], policy: FramePolicy, first_index: int = 0, threads: int = 1
) -> Iterator[tuple[Window, ClipFrames]]:
    """Sample every planned clip of one video in one pass; yield each clip as soon as its last frame is encoded.

    ``plans`` maps a window to its frame indices (:func:`plan_frame_indices`) on the source's frame grid; the file
    holds source frame ``i`` at ``i - first_index`` (non-zero for a section download). A frame shared by several clips
    is decoded and encoded once; its JPEG is dropped as soon as no clip still waiting needs it. The frames of each
    decoded chunk are blurred and encoded on ``threads`` threads at once, a frame each (onnxruntime, OpenCV and PIL's
    JPEG encoder release the GIL), so that blurring uses every core; the output does not depend on ``threads``."""
    users: dict[int, list[Window]] = defaultdict(list)
    for window, indices in plans.items():
        for index in set(indices):
            users[index].append(window)
    waiting = {window: len(set(indices)) for window, indices in plans.items()}
    still_needed = {index: len(windows) for index, windows in users.items()}
    encoded: dict[int, tuple[bytes, list[dict], float]] = {}
    with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
        for chunk in decode_in_order(decoder, [index - first_index for index in sorted(users)]):
            jpegs = pool.map(lambda item: encode_jpeg(item[1], policy), chunk)
            for (file_index, _, pts), (jpeg, regions) in zip(chunk, jpegs, strict=True):
                index = file_index + first_index
                encoded[index] = (jpeg, regions, pts)
                for window in users[index]:
                    waiting[window] -= 1
                    if waiting[window]:
                        continue
                    indices = plans[window]
                    regions = [encoded[i][1] for i in indices] if policy.blur is not None else None
                    yield (
                        window,
                        ClipFrames(
                            [encoded[i][0] for i in indices], [encoded[i][2] for i in indices], indices, regions
                        ),
                    )
                    for done in set(indices):
                        still_needed[done] -= 1
                        if not still_needed[done]:
                            del encoded[done]


def plan_in_file(decoder, start: float, end: float, policy: FramePolicy, section: Section | None = None) -> list[int]:
    """:func:`plan_frame_indices` on the source's frame grid; ``section``: the file holds only part of the source."""
    metadata = decoder.metadata
    fps, first, total = metadata.average_fps, 0, metadata.num_frames
    if section is not None:  # source frame i is the file's frame i - first_index (builders/sureon/sections.py)
        fps, first, total = section.fps, section.first_index, section.first_index + metadata.num_frames
    indices = plan_frame_indices(start, end, fps, total, policy)
    if indices[0] < first:
        raise ClipError(f"window starts at {start:.2f}s, before the downloaded section ({section.start:.2f}s)")
    return indices


def sample_clip(decoder, start: float, end: float, policy: FramePolicy, section: Section | None = None) -> ClipFrames:
    """Frames of one window ``[start, end]`` (source seconds)."""
    indices = plan_in_file(decoder, start, end, policy, section)
    first = section.first_index if section is not None else 0
    return next(sample_clips(decoder, {(start, end): indices}, policy, first))[1]


class FrameCache:
    """One file per clip: a JSON header line (timestamps, indices, JPEG sizes) followed by the JPEG bytes."""

    def __init__(self, root: str | Path):
        self.root = Path(root)

    def key(self, video: Path, start: float, end: float, policy: FramePolicy, device: str = "cpu") -> str:
        stat = video.stat()
        identity = {
            "device": device,
            "scaling": "bilinear-antialias",  # frames cached before scaling moved into the decoder are not reused
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
        write_atomic(path, payload)


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
        raise InputError(f"several files for the same source_id: {'; '.join(duplicates)}; keep one of each")
    return found


def extract_video_clips(
    video: Path,
    windows: list[Window],
    policy: FramePolicy,
    cache_dir: str | Path,
    device: str = "cpu",
    num_threads: int = 1,
) -> dict[Window, str | None]:
    """Sample and cache every window of one video; return ``window -> None`` (cached) or an error message."""
    cache = FrameCache(cache_dir)
    todo = [w for w in sorted(set(windows)) if not cache.has(cache.key(video, *w, policy, device))]
    outcome: dict[Window, str | None] = {w: None for w in windows}
    if not todo:
        return outcome
    try:
        decoder = open_clip_decoder(video, policy, device, num_threads)
    except (RuntimeError, ValueError, OSError) as err:  # FFmpeg could not open or parse the file
        hint = "; decode on the CPU with --decode-device cpu" if device == "cuda" else ""
        return {w: f"unreadable video {video.name} on {device}: {err}{hint}" for w in windows}

    def failed(window: Window, err: Exception) -> str:
        return f"{video.name} [{window[0]:.2f}s, {window[1]:.2f}s]: {err}"

    section, plans = read_section(video), {}
    first = section.first_index if section is not None else 0
    for window in todo:
        try:
            plans[window] = plan_in_file(decoder, *window, policy, section)
        except ClipError as err:
            outcome[window] = failed(window, err)
    try:
        for window, frames in sample_clips(decoder, plans, policy, first, num_threads):
            cache.put(cache.key(video, *window, policy, device), frames)
    except (RuntimeError, ValueError, IndexError, OSError):  # some frame failed: retry clip by clip to name which
        for window in plans:
            if cache.has(cache.key(video, *window, policy, device)):
                continue
            try:
                frames = next(sample_clips(decoder, {window: plans[window]}, policy, first))[1]
                cache.put(cache.key(video, *window, policy, device), frames)
            except (RuntimeError, ValueError, IndexError, OSError) as err:  # reported per clip; the build decides
                outcome[window] = failed(window, err)
    return outcome


def extract_all(
    jobs: dict[Path, list[Window]],
    policy: FramePolicy,
    cache_dir: str | Path,
    num_workers: int = 1,
    device: str = "cpu",
):
    """Yield ``(video, outcome)`` for each video, decoding videos in parallel when ``num_workers > 1`` (each worker's
    decoder gets its share of the cores as FFmpeg threads; on ``cuda`` the workers share the GPU)."""
    threads = decode_threads(num_workers)
    if num_workers <= 1:
        for video, windows in jobs.items():
            yield video, extract_video_clips(video, windows, policy, cache_dir, device, threads)
        return
    with ProcessPoolExecutor(max_workers=num_workers, mp_context=get_context("spawn")) as pool:
        futures = {
            video: pool.submit(extract_video_clips, video, windows, policy, cache_dir, device, threads)
            for video, windows in jobs.items()
        }
        for video, future in futures.items():
            yield video, future.result()
