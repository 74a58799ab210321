"""One source's items templated into QA records (the template and instruction versions) and the media jobs that
write the frames those records show.

Apart from the build (``build.py``: the order of the sources, the output layout, the manifest) because this is the
part that is per source and pure: the same normalised source gives the same records and jobs, whatever else the
build holds, in however many processes it is templated.
"""

from __future__ import annotations

from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

from builders.options import stable_seed
from public_converters.clips import SamplingConfig
from public_converters.items import (
    ClipItem,
    Context,
    clip_frames,
    clip_items,
    context_for,
    frames_by_video,
    image_items,
)
from public_converters.media import MediaJob, media_name
from public_converters.normalise import Normalised, observed_capabilities
from public_converters.templating import QA, load_templates, render


def _record(qa: QA, item, version: str, frames: list[str], timestamps: list[float], normalised: Normalised) -> dict:
    base = f"{stable_seed('public-qa', qa.item_id, qa.template.id, str(qa.index)):016x}"[:16]
    clip = isinstance(item, ClipItem)
    fps = item.video.fps
    return {
        "qa_id": f"{base}-{version[0]}",
        "item_id": qa.item_id,
        "source": item.source,
        "branch": "clip" if clip else "image",
        "split": item.video.split,
        "procedure": normalised.spec.procedure,
        "video_id": item.video.video_id,
        "file": (item.frame.image_path if not clip else None) or item.video.video_path,
        "frame_index": None if clip else item.frame.frame_index,
        "start_frame": item.clip.start_frame if clip else None,
        "end_frame": item.clip.end_frame if clip else None,
        "start": round(item.clip.start_frame / fps, 6) if clip else None,
        "end": round((item.clip.end_frame + 1) / fps, 6) if clip else None,
        "qa_type": qa.template.qa_type,
        "question_type": qa.template.question_type,
        "template_id": qa.template.id,
        "grounded": qa.template.grounded,
        "version": version,
        "question": qa.question if version == "template" else qa.instruction,
        "answer": qa.answer,
        "answer_format": "json" if qa.template.grounded else "open",
        "reasoning": "",
        "frames": frames,
        "frame_timestamps": timestamps,
    }


def _template_chunk(args) -> list[list[QA]]:
    items, branch, ctx, capabilities = args
    templates = load_templates(branch)
    return [render(item, templates, ctx, capabilities) for item in items]


def template_items(items: list, branch: str, ctx: Context, capabilities: set[str], num_proc: int) -> list[list[QA]]:
    """Render every item (in ``num_proc`` processes); the output does not depend on ``num_proc``."""
    if not items:
        return []
    size = max(1, -(-len(items) // (num_proc * 4)))
    jobs = [(items[i : i + size], branch, ctx, capabilities) for i in range(0, len(items), size)]
    if num_proc > 1 and len(jobs) > 1:
        with ProcessPoolExecutor(num_proc) as pool:
            chunks = list(pool.map(_template_chunk, jobs))
    else:
        chunks = [_template_chunk(job) for job in jobs]
    return [qas for chunk in chunks for qas in chunk]


@dataclass
class SourceBuild:
    records: list[dict]
    jobs: list[MediaJob]
    manifest: dict


def build_source(normalised: Normalised, sampling: SamplingConfig, num_proc: int = 1) -> SourceBuild:
    """Items -> QAs -> records (template + instruction versions) and the media jobs they need; clips are sampled
    with ``sampling``, items templated in ``num_proc`` processes."""
    spec, tables = normalised.spec, normalised.tables
    ctx, capabilities = context_for(normalised), observed_capabilities(tables)
    records, manifest = [], {"skipped": {}, "items": {}}
    frames_needed: dict[str, dict[int, str | None]] = defaultdict(dict)
    outlines: dict[str, list] = defaultdict(list)
    images = {(f.video_id, f.frame_index): f.image_path for f in tables.frames if f.image_path}
    available = frames_by_video(normalised)
    for branch in spec.branches:
        if branch == "image":
            items, skipped = image_items(normalised)
        else:
            items, skipped = clip_items(normalised, sampling)
        rendered = template_items(items, branch, ctx, capabilities, num_proc)
        windows = {k: v for k, v in skipped.items() if k.startswith("grounded windows")}
        if windows:
            manifest["clip sampling"] = windows
        manifest["skipped"][branch] = {k: v for k, v in skipped.items() if k not in windows}
        without = frameless = 0
        for item, qas in zip(items, rendered, strict=True):
            if not qas:
                without += 1
                continue
            video = item.video.video_id
            if branch == "image":
                frame_list = [item.frame.frame_index]
                frames_needed[video][item.frame.frame_index] = item.frame.image_path
            else:
                frame_list = clip_frames(item, available)
                if not frame_list:
                    frameless += 1
                    continue
                for frame_index in frame_list:
                    frames_needed[video][frame_index] = (
                        images.get((video, frame_index)) if not item.video.video_path else None
                    )
            fps = item.video.fps
            timestamps = [round(f / fps, 6) if fps else 0.0 for f in frame_list]
            plain = [media_name(spec.name, video, f) for f in frame_list]
            for qa in qas:
                shown = plain
                if qa.overlay is not None:
                    suffix = (
                        f"_outline_{qa.overlay.kind}_{qa.overlay.label.replace(' ', '-')}_{qa.overlay.instance_id}"
                    )
                    shown = [media_name(spec.name, video, item.frame.frame_index, suffix)]
                    outlines[video].append((item.frame.frame_index, item.frame.image_path, qa.overlay.mask, shown[0]))
                for version in ("template", "instruction"):
                    records.append(_record(qa, item, version, shown, timestamps, normalised))
        manifest["items"][branch] = len(items) - without - frameless
        manifest["skipped"][branch]["items without an applicable template"] = without
        if frameless:
            manifest["skipped"][branch]["clips between the frames a frame-folder source ships"] = frameless
    videos = {v.video_id: v for v in tables.videos}
    jobs = [
        MediaJob(
            spec.name,
            video,
            normalised.root,
            videos[video].video_path,
            tuple(sorted(frames.items())),
            tuple(sorted({o[3]: o for o in outlines[video]}.values(), key=lambda o: o[3])),
        )
        for video, frames in sorted(frames_needed.items())
    ]
    return SourceBuild(records, jobs, manifest)


def merge_jobs(jobs: list[MediaJob], extra: dict[str, dict[int, str | None]], normalised: Normalised) -> list:
    """The source's media jobs with ``extra`` frames (video -> frame -> image path) added, one job per video, so a
    frame the corpus and a benchmark both show is written once (from its image file when it has one)."""
    frames = defaultdict(dict)
    outlines = {}
    for job in jobs:
        frames[job.video_id].update(dict(job.frames))
        outlines[job.video_id] = job.outlines
    for video, wanted in extra.items():
        for frame_index, image_path in wanted.items():
            frames[video][frame_index] = frames[video].get(frame_index) or image_path
    videos = {v.video_id: v for v in normalised.tables.videos}
    return [
        MediaJob(
            normalised.spec.name,
            video,
            normalised.root,
            videos[video].video_path,
            tuple(sorted(own.items())),
            outlines.get(video, ()),
        )
        for video, own in sorted(frames.items())
    ]
