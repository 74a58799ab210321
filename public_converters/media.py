"""Media: the checks before templating (every frame image decodes, every clip video opens and is as long as its
labels), and the JPEG frames the QA records show, written once per frame into a resumable cache.

A truncated PNG or a cut download should stop the build with the file's name before anything is written, not surface
as a broken record in the dataset. Images are decoded in full (PIL ``load``); videos are opened with torchcodec and
their frame count compared with the last labelled frame.
"""

from __future__ import annotations

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

from public_converters.schema import SourceError
from public_converters.seg_to_box import load_image


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


def _check_video(root: Path, relative: str, last_frame: int) -> str | None:
    from builders.video import open_decoder

    path = root / relative
    if not path.is_file():
        return f"{path}: file not found (the clip branch decodes frames from it)"
    try:
        metadata = open_decoder(path).metadata
    except (RuntimeError, ValueError, OSError) as error:
        return f"{path}: cannot open the video ({error}); re-download it"
    if metadata.num_frames is None or metadata.num_frames <= last_frame:
        return f"{path}: {metadata.num_frames} frames, but labels run to frame {last_frame}; is the video truncated?"
    return None


def check_media(normalised, num_proc: int = 1) -> None:
    """Raise one error listing every unreadable or mis-sized image and every short or unreadable video."""
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
    last = {}
    for row in [*tables.frames, *tables.segments]:
        end = getattr(row, "end_frame", getattr(row, "frame_index", 0))
        last[row.video_id] = max(last.get(row.video_id, 0), end)
    for video in tables.videos:
        if video.video_path:
            problem = _check_video(root, video.video_path, last.get(video.video_id, 0))
            if problem:
                problems.append(problem)
    if problems:
        shown = "\n  ".join(problems[:20])
        more = f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""
        raise SourceError(root, f"{len(problems)} media problem(s):\n  {shown}{more}")


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
    partial = path.with_suffix(".partial.jpg")
    image.convert("RGB").save(partial, format="JPEG", quality=90)
    os.replace(partial, path)


def outline(image: Image.Image, rle: dict) -> Image.Image:
    """The image with the mask's contour drawn in green (the seed's rendered contour overlays)."""
    mask = mask_utils.decode({"size": rle["size"], "counts": rle["counts"].encode("ascii")}).astype(bool)
    if mask.shape != (image.height, image.width):
        raise ValueError(f"mask {mask.shape[::-1]} does not match image {image.size}")
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
