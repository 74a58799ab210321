"""Media checks before templating: every frame image decodes, every clip video opens and is as long as its labels.

A truncated PNG or a cut download should stop the build with the file's name before anything is written, not surface
as a broken record in the dataset. Images are decoded in full (PIL ``load``); videos are opened with torchcodec and
their frame count compared with the last labelled frame.
"""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

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
    from builders.frames import open_decoder

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
