"""Media: the checks before templating (every frame image decodes, every clip video opens and is as long as its
labels), and the JPEG frames the QA records show, written once per frame into a resumable cache.

A truncated PNG or a cut download should stop the build with the file's name before anything is written, not surface
as a broken record in the dataset. Images are decoded in full (PIL ``load``); videos are opened with torchcodec and
their frame count compared with the last labelled frame, and labels sampled below the video's rate are clipped at
its last frame (``fit_to_video``).

Every video a source's annotations call for must be there under the name the reader expects: a reader lists each
annotated video with that name whether or not the file is there, and this check names a missing one, with the file
that is probably it under another name (``VIDEO41.MP4``, ``video41.avi``, ``Videos/video41.mp4`` for
``videos/video41.mp4``: :func:`near_misses`), so that a video is never left out of the corpus and its benchmarks
without a word. Every media problem of a source (missing, misnamed, unreadable, cut short) is listed in one error.

The other direction, labels that end before the video does, is read from the same frame count (no second decode):
where a reader says its annotation file labels every frame of the video (``SourceTables.coverage``), a file that
stops a label period or more before the video's end (cut at a line boundary, a copy of part of the video) is a named,
counted warning, ``SHORT_ANNOTATION`` in the source's ``warnings``: the labels that are there are right and build,
the unlabelled rest of the video is left out, and the printed summary names the file.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image
from pycocotools import mask as mask_utils
from scipy import ndimage

from builders.errors import InputError
from builders.outputs import atomic_file
from builders.video import VIDEO_EXTENSIONS
from public_converters.normalise import Normalised
from public_converters.schema import Segment, SourceError, Video, sort_tables
from public_converters.seg_to_box import load_image
from public_converters.spec import looks_like


def _check_images(args) -> list[str]:
    root, items = args
    problems = []
    for relative, size in items:
        try:
            image = load_image(root / relative)
        except SourceError as error:
            problems.append(str(error))
            continue
        if size is not None and image.size != size:
            problems.append(
                f"{root / relative}: image is {image.size[0]}x{image.size[1]}, expected {size[0]}x{size[1]}"
            )
    return problems


def _decoder_reason(error: Exception, path: Path) -> str:
    """FFmpeg's reason from a torchcodec error, without the C++ source location and the path already named."""
    text = " ".join(str(error).split())
    text = re.split(r"\.cpp:\d+,\s*", text)[-1]
    return text.replace(f"{path} ", "").replace(str(path), "").strip(" :") or type(error).__name__


# a file name's ending that a second copy of a download gets: "video41 (1).mp4", "video41 copy.mp4"
DUPLICATE_MARK = re.compile(r"(?:\s*\(\d+\)|[\s_-]*copy)$", re.IGNORECASE)


def _named_alike(name: str, expected: str) -> bool:
    """``name`` is probably the video file ``expected`` under another spelling: the same but for case, separators,
    a letter that looks like a digit, one typo or a duplicate mark (``spec.looks_like``), with any video extension;
    or ``expected`` with more after it (``video41.mp4.part``, an unfinished download)."""
    if name.lower().startswith(expected.lower()):
        return True
    stem, suffix = Path(name).stem, Path(name).suffix.lower()
    expected_stem = Path(expected).stem
    if suffix not in VIDEO_EXTENSIONS:
        return False
    stem = DUPLICATE_MARK.sub("", stem)
    return stem.lower() == expected_stem.lower() or looks_like(stem, expected_stem)


def near_misses(path: Path) -> list[Path]:
    """The files that are probably the missing video ``path`` under another name (:func:`_named_alike`): beside
    it, or in a folder named like its folder (``Videos/`` for ``videos/``) when its own folder is not there."""
    folder = path.parent
    if folder.is_dir():
        folders = [folder]
    elif folder.parent.is_dir():
        folders = [
            p
            for p in sorted(folder.parent.iterdir())
            if p.is_dir() and (p.name.lower() == folder.name.lower() or looks_like(p.name, folder.name))
        ]
    else:
        folders = []
    return [
        candidate
        for where in folders
        for candidate in sorted(where.iterdir())
        if candidate.is_file() and not candidate.name.startswith(".") and _named_alike(candidate.name, path.name)
    ]


def missing_video(root: Path, video: Video) -> str:
    """The problem of an annotated video whose file is not where the reader expects it: the expected file, and the
    near misses found instead (rename one), or, with none, that the video is annotated and must be added."""
    path = root / video.video_path
    found = near_misses(path)
    if found:
        shown = ", ".join(str(p.relative_to(root)) if p.is_relative_to(root) else str(p) for p in found[:3])
        return f"{path}: not found, but {shown} is there: if it is this video, rename it to {path.name}"
    return (
        f"{path}: not found, and {video.video_id} is annotated: add the video (an annotated video is never left out "
        "of the corpus and its benchmarks)"
    )


def _frame_count(root: Path, video: Video) -> tuple[int | None, str | None]:
    """(frames in the video, None) or (None, the problem) for one video the clip branch decodes."""
    from builders.video import open_decoder

    path = root / video.video_path
    if not path.is_file():
        return None, missing_video(root, video)
    try:
        metadata = open_decoder(path).metadata
    except (RuntimeError, ValueError, OSError) as error:
        return None, f"{path}: cannot open the video ({_decoder_reason(error, path)}); re-download it"
    if not metadata.num_frames:
        return None, f"{path}: the container reports no frames; re-download it"
    return metadata.num_frames, None


SHORT_ANNOTATION = "annotation files that end before their video"


def short_annotation(video_id: str, coverage, frame_count: int) -> dict | None:
    """The warning (``file`` relative to the source root, ``message``) for an annotation file that ends a period or
    more before its video, else None."""
    missing = frame_count - coverage.frames
    if missing < coverage.period:
        return None
    covered = f"cover frames 0-{coverage.frames - 1}" if coverage.frames > 0 else "cover no frame"
    message = (
        f"{coverage.what} {covered} of {video_id}'s {frame_count}; the last {missing} frames have no label and are "
        "left out (is the file complete?)"
    )
    return {"file": coverage.path, "video": video_id, "message": message}


def fit_to_video(
    video: Video, frame_indices: list[int], segments: list[Segment], frame_count: int
) -> tuple[Video, list[Segment], str | None]:
    """The video and its segments clipped at its last frame, or a problem if its labels need frames past the end.

    A label sampled below the video's rate covers ``period`` frames from its sample, so the last one of a video whose
    length is not a multiple of the period runs past the end (Cholec80's 1-fps tools on a 1,010-frame video end at
    frame 1024): that overrun is clipped. A sample itself past the end (a frame row, or a segment whose last sample
    lies beyond the last frame) means the file is short: a truncated video is still an error."""
    last = frame_count - 1
    needed = max([*frame_indices, *(max(s.start_frame, s.end_frame - s.period + 1) for s in segments)], default=0)
    if needed > last:
        return video, segments, f"{frame_count} frames, but labels run to frame {needed}; is the video truncated?"
    fitted = [dataclasses.replace(s, end_frame=last) if s.end_frame > last else s for s in segments]
    return dataclasses.replace(video, total_frames=min(video.total_frames or frame_count, frame_count)), fitted, None


def check_media(normalised: Normalised, num_proc: int = 1) -> Normalised:
    """Raise one error listing every unreadable or mis-sized image and every missing, misnamed, short or unreadable
    video; return the source with each video's labels fitted to its real length (``fit_to_video``)."""
    tables, root = normalised.tables, normalised.root
    sizes = {v.video_id: (v.width, v.height) if v.width and v.height else None for v in tables.videos}
    images = sorted({(f.image_path, sizes[f.video_id]) for f in tables.frames if f.image_path})
    chunk = max(1, -(-len(images) // (4 * max(1, num_proc))))
    jobs = [(root, images[i : i + chunk]) for i in range(0, len(images), chunk)]
    if num_proc > 1 and len(jobs) > 1:
        with ProcessPoolExecutor(num_proc) as pool:
            problems = [p for found in pool.map(_check_images, jobs) for p in found]
    else:
        problems = [p for job in jobs for p in _check_images(job)]
    frame_indices, segments = defaultdict(list), defaultdict(list)
    for frame in tables.frames:
        frame_indices[frame.video_id].append(frame.frame_index)
    for segment in tables.segments:
        segments[segment.video_id].append(segment)
    videos, short = [], []
    for video in tables.videos:
        if video.video_id in tables.unreadable:  # the reader could not read its header (a rate it needed)
            problems.append(tables.unreadable[video.video_id])
        elif video.video_path:
            frame_count, problem = _frame_count(root, video)
            if frame_count is not None:
                coverage = tables.coverage.get(video.video_id)
                warning = coverage and short_annotation(video.video_id, coverage, frame_count)
                video, segments[video.video_id], problem = fit_to_video(
                    video, frame_indices[video.video_id], segments[video.video_id], frame_count
                )
                problem = problem and f"{root / video.video_path}: {problem}"
                if warning and not problem:
                    short.append(warning)
            if problem:
                problems.append(problem)
        videos.append(video)
    if len(problems) == 1:
        raise SourceError(root, f"a media problem: {problems[0]}")
    if problems:
        shown = "\n  ".join(problems[:20])
        more = f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""
        raise SourceError(root, f"{len(problems)} media problems:\n  {shown}{more}")
    fitted = [s for video in tables.videos for s in segments[video.video_id]]
    warnings = {key: value for key, value in normalised.warnings.items() if key != SHORT_ANNOTATION}
    if short:
        warnings[SHORT_ANNOTATION] = sorted(short, key=lambda w: (w["file"], w["video"]))
    return dataclasses.replace(
        normalised,
        tables=sort_tables(dataclasses.replace(tables, videos=videos, segments=fitted)),
        warnings=warnings,
    )


# ---- writing the frames the QA records show -----------------------------------------------------------------------

OUTLINE_RGB = (0, 255, 0)


@dataclass(frozen=True)
class MediaJob:
    """The frames one video contributes: plain frames (from an image file or decoded from the video) and outlines."""

    source: str
    video_id: str
    root: Path
    video_path: str | None
    frames: tuple[tuple[int, str | None], ...]  # (frame index, image path or None = decode from the video)
    outlines: tuple[tuple[int, str, dict, str], ...] = ()  # (frame index, image path, RLE, media name)


def media_name(source: str, video_id: str, frame_index: int, suffix: str = "") -> str:
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", video_id)
    return f"media/{source}/{safe}/{frame_index:08d}{suffix}.jpg"


def _save_jpeg(image: Image.Image, path: Path, max_side: int | None) -> None:
    if max_side and max(image.size) > max_side:
        scale = max_side / max(image.size)
        image = image.resize(
            (max(1, round(image.width * scale)), max(1, round(image.height * scale))), Image.Resampling.BICUBIC
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(path) as partial:
        image.convert("RGB").save(partial, format="JPEG", quality=90)


def outline(image: Image.Image, rle: dict) -> Image.Image:
    """The image with the mask's contour drawn in green (the Sureon paper's rendered contour overlays)."""
    mask = mask_utils.decode({"size": rle["size"], "counts": rle["counts"].encode("ascii")}).astype(bool)
    if mask.shape != (image.height, image.width):
        raise InputError(f"mask {mask.shape[::-1]} does not match image {image.size}")
    width = max(1, min(mask.shape) // 120)
    edge = mask & ~ndimage.binary_erosion(mask, iterations=width)
    pixels = np.array(image.convert("RGB"))
    pixels[edge] = OUTLINE_RGB
    return Image.fromarray(pixels)


def write_job(job: MediaJob, cache_dir: Path, max_side: int | None) -> int:
    """Write the job's missing JPEGs into ``cache_dir``; returns how many were written (0 on a resumed run). Each
    image file is decoded once for its plain frame and all its outlines."""
    targets: dict[str, list[tuple[Path, dict | None]]] = defaultdict(list)  # image path -> (JPEG, outline RLE)
    decode = []
    for frame_index, image_path in job.frames:
        target = cache_dir / media_name(job.source, job.video_id, frame_index)
        if target.exists():
            continue
        if image_path is None:
            decode.append(frame_index)
        else:
            targets[image_path].append((target, None))
    for _frame_index, image_path, rle, name in job.outlines:
        if not (cache_dir / name).exists():
            targets[image_path].append((cache_dir / name, rle))
    for image_path, wanted in targets.items():
        image = load_image(job.root / image_path, "RGB")
        for target, rle in wanted:
            _save_jpeg(image if rle is None else outline(image, rle), target, max_side)
    if decode:
        from builders.video import open_decoder

        decoder = open_decoder(job.root / job.video_path)
        batch = decoder.get_frames_at(sorted(decode))
        for position, frame_index in enumerate(sorted(decode)):
            image = Image.fromarray(batch.data[position].permute(1, 2, 0).numpy())
            _save_jpeg(image, cache_dir / media_name(job.source, job.video_id, frame_index), max_side)
    return sum(len(wanted) for wanted in targets.values()) + len(decode)


def _run_job(args) -> int:
    return write_job(*args)


def write_media(jobs: list[MediaJob], cache_dir: Path, max_side: int | None = 768, num_proc: int = 1) -> int:
    """Every job's frames, one video per task, in ``num_proc`` processes (cached: a rerun writes nothing)."""
    tasks = [(job, cache_dir, max_side) for job in jobs]
    if num_proc > 1 and len(tasks) > 1:
        with ProcessPoolExecutor(num_proc) as pool:
            return sum(pool.map(_run_job, tasks))
    return sum(map(_run_job, tasks))


def link_media(names: set[str], cache_dir: Path, out: Path) -> None:
    """Hard-link (or copy, across file systems) the used media from the cache into the dataset folder."""
    for name in sorted(names):
        target = out / name
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(cache_dir / name, target)
        except OSError:
            shutil.copy2(cache_dir / name, target)
