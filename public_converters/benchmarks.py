"""The public perception benchmarks as datasets (the Sureon paper's D.3 and Table 5): ``bench-<task>-<mode>`` configs.

``sureon build public`` writes one config per benchmark whose source it builds (``--no-benchmarks`` turns them
off), each a ``test`` split of queries with their ground truth, in ``PUBLIC_BENCH_FEATURES``:

- ``bench-cholec80-phase-frame``, ``bench-heichole-phase-frame``, ``bench-heichole-action-frame``: every frame of
  the official test videos on a 1-fps grid (the Sureon paper's extraction rate; ``--bench-fps``), frames ``round(k *
  fps / bench_fps)``, one row each, labelled by the segment that covers it. A grid frame no segment covers is counted,
  not written. HeiChole's actions overlap (several instruments act at once) while D.3 scores a single label: a frame
  with no action is ``none``, one with exactly one action is that action, and one with several is counted as
  skipped (``frames with several simultaneous actions``) [our choice; the Sureon paper does not say].
- ``bench-cholec80-phase-clip``, ``bench-heichole-phase-clip``: the online clip of each grid keyframe, 8 grid frames
  at stride 4 ending on the keyframe (28 s at 1 fps). D.3's window is fixed: near a video's start, where fewer
  frames precede the keyframe, the earliest frame of the window repeats to fill it (the first keyframe is its own
  frame 8 times; ``clip_window(..., pad=True)`` of the report's metrics), so a video model always gets 8 frames and
  never invented context. Timestamps are absolute (seconds in the source video), repeated with their frame. The 17
  Cholec80 test videos of ``evaluation/cholec80_excluded_videos.txt`` are left out of clip mode only (counted).
- ``bench-endoscapes-cvs-frame``: each Endoscapes test keyframe (a frame with CVS scores) asked three independent
  yes/no questions, C1, C2, C3. A criterion is met ("yes") when its score (the mean over Endoscapes' three raters)
  is at least 0.5, i.e. by majority vote [our reading of the averaged scores].
- ``bench-<source>-tools-frame``: the test frames with tool boxes, for every built source whose test split has
  them (the manifest's ``benchmarks`` lists each config with its counts). Of the 22 readers, those with tool boxes
  and a test split are AutoLaparo, CholecInstanceSeg, CholecSeg8k (Scheikl et al.'s split: it has no official one),
  CholecT50, Endoscapes, EndoVis2017, EndoVis2018, GraSP and GynSurg; HeiCo reads every surgery as train and
  Phakir's test videos are not public, so they have none. A frame without any tool box is not a query: the sources
  do not say whether such a frame was annotated as empty.

A benchmark without a row is not written; its manifest entry (printed by ``sureon build public``) says why, from
what the build read (``why_empty``): none of the test videos its split names is in the copy, the split names none, or
the test videos there gave no row, with the counts of what was skipped.

Prompts are in ``templates/benchmarks.yaml`` (ours; the Sureon paper's Fig. 18 is not in our copy): each lists the
closed label set and asks for a JSON answer that ``grounded.parse_answer`` reads (``answer_shape``, ``answer_key``);
the row's ``answer`` is the reference in that format. Frames are the corpus's own media (``media/<source>/...``).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from builders.errors import InputError
from public_converters.evaluation import cholec80_overlap
from public_converters.grounded import dump, parse_answer
from public_converters.media import media_name
from public_converters.normalise import Normalised


BENCH_FPS = 1.0
CLIP_FRAMES = 8
CLIP_STRIDE = 4
CVS_THRESHOLD = 0.5
NO_ACTION = "none"
# source -> (task, input modes) of the Sureon paper's Table 5; tool localisation is added for any source with test
# boxes
RECOGNITION = {
    "cholec80": (("phase", ("frame", "clip")),),
    "heichole": (("phase", ("frame", "clip")), ("action", ("frame",))),
}
CVS_SOURCES = ("endoscapes",)
CVS_CRITERIA = ("C1", "C2", "C3")
TEMPLATES = Path(__file__).parent / "templates" / "benchmarks.yaml"


def load_prompts(path: Path = TEMPLATES) -> dict:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def config_name(source: str, task: str, mode: str) -> str:
    return f"bench-{source}-{'tools' if task == 'tool_localization' else task}-{mode}"


@dataclass
class BenchBuild:
    """One source's benchmark rows per config, the frames they show (video -> frame -> image path or None =
    decode), and the counts that reconcile them."""

    rows: dict[str, list[dict]] = field(default_factory=dict)
    frames: dict[str, dict[int, str | None]] = field(default_factory=lambda: defaultdict(dict))
    manifest: dict = field(default_factory=dict)


def grid(video, fps: float) -> list[int]:
    """The frames of a video on the ``fps`` grid: ``round(k * video_fps / fps)`` for every k inside the video."""
    if not video.fps or not video.video_path or not video.total_frames:
        raise InputError(f"{video.video_id}: the {fps}-fps benchmark grid needs the video, its frame rate and length")
    step = video.fps / fps
    points = (round(k * step) for k in range(int(video.total_frames / step) + 2))
    return sorted({frame for frame in points if frame < video.total_frames})


def window(keyframes: list[int], position: int, size: int = CLIP_FRAMES, stride: int = CLIP_STRIDE) -> list[int]:
    """The online window of the keyframe at ``position``: ``size`` grid frames ``stride`` apart, keyframe last; near
    the start the earliest one repeats (``recipes.evaluation.public.metrics.clip_window`` with ``pad=True``)."""
    found = [keyframes[p] for p in range(position, -1, -stride)][:size][::-1]
    return [found[0]] * (size - len(found)) + found


def _labels_at(segments: list, frame: int) -> set[str]:
    return {s.label for s in segments if s.start_frame <= frame <= s.end_frame}


def _row(normalised: Normalised, task: str, mode: str, video, keyframe: int, frames: list[int], **fields) -> dict:
    source, fps = normalised.spec.name, video.fps or 0.0
    criterion = fields.get("criterion")
    key = "/".join(p for p in (source, task, mode, video.video_id, f"{keyframe:08d}", criterion) if p)
    timestamps = [round(f / fps, 6) if fps else 0.0 for f in frames]
    return {
        "question_id": key,
        "benchmark": source,
        "source": source,
        "task": task,
        "input_mode": mode,
        "split": "test",
        "procedure": normalised.spec.procedure,
        "video_id": video.video_id,
        "frame_index": keyframe,
        "timestamp": timestamps[-1],
        "start": timestamps[0] if mode == "clip" else None,
        "end": round((frames[-1] + 1) / fps, 6) if mode == "clip" and fps else None,
        "frame_indices": frames,
        "frame_timestamps": timestamps,
        "frames": [media_name(source, video.video_id, f) for f in frames],
        "criterion": criterion,
        "answer_format": "json",
        "reference_boxes": [],
        **fields,
    }


def _prompted(row: dict, prompts: dict, labels: list[str], reference: str | None, answer) -> dict:
    entry = prompts[row["task"]]
    text = entry[row["input_mode"]].format(
        procedure=row["procedure"],
        labels=", ".join(labels),
        criterion_question=entry.get("criteria", {}).get(row.get("criterion") or "", ""),
    )
    answer_text = dump(answer)
    vocabulary = {entry["key"]: set(labels)}
    parse_answer(entry["shape"], answer_text, vocabulary, entry["key"])  # the reference is what the parser reads
    return row | {
        "question": text,
        "answer_shape": entry["shape"],
        "answer_key": entry["key"],
        "labels": labels,
        "answer": answer_text,
        "reference": reference,
    }


def build_benchmarks(normalised: Normalised, fps: float = BENCH_FPS, prompts: dict | None = None) -> BenchBuild:
    """Every benchmark config this source has, from its normalised tables (test videos of the built variant)."""
    prompts = prompts or load_prompts()
    spec, tables = normalised.spec, normalised.tables
    source = spec.name
    built = BenchBuild()
    tests = [v for v in tables.videos if v.split == "test"]
    segments, images = defaultdict(lambda: defaultdict(list)), defaultdict(dict)
    for segment in tables.segments:
        segments[segment.video_id][segment.kind].append(segment)
    for frame in tables.frames:
        if frame.image_path:
            images[frame.video_id][frame.frame_index] = frame.image_path
    vocabulary = {kind: sorted(set(table.values())) for kind, table in spec.labels.items()}

    def show(video, frames: list[int]) -> None:
        for f in frames:  # an image file when the source ships one, else decoded from the video
            built.frames[video.video_id][f] = (
                images[video.video_id].get(f) if video.video_path else images[video.video_id][f]
            )

    for task, modes in RECOGNITION.get(source, ()):
        labels = vocabulary[task] + ([NO_ACTION] if task == "action" else [])
        excluded = set(cholec80_overlap()) if source == "cholec80" else set()
        for mode in modes:
            rows, counts = [], Counter()
            for video in tests:
                if mode == "clip" and video.video_id in excluded:
                    counts["videos excluded from clip mode (cholec80_excluded_videos.txt)"] += 1
                    continue
                keyframes = grid(video, fps)
                own = segments[video.video_id][task]
                counts["grid frames"] += len(keyframes)
                for position, keyframe in enumerate(keyframes):
                    found = _labels_at(own, keyframe)
                    if task == "phase" and not found:
                        counts["grid frames without a phase label"] += 1
                        continue
                    if task == "phase" and len(found) > 1:
                        raise InputError(f"{source} {video.video_id} frame {keyframe}: two phases {sorted(found)}")
                    if len(found) > 1:
                        counts["frames with several simultaneous actions"] += 1
                        continue
                    label = found.pop() if found else NO_ACTION
                    frames = window(keyframes, position) if mode == "clip" else [keyframe]
                    row = _row(normalised, task, mode, video, keyframe, frames)
                    rows.append(_prompted(row, prompts, labels, label, {task: label}))
                    show(video, frames)
            counts["rows"] = len(rows)
            _keep(built, normalised, config_name(source, task, mode), rows, counts, tests)

    if source in CVS_SOURCES:
        rows, counts = [], Counter()
        by_video = {v.video_id: v for v in tests}
        for frame in sorted(tables.frames, key=lambda f: (f.video_id, f.frame_index)):
            if frame.video_id not in by_video or frame.cvs is None:
                continue
            video = by_video[frame.video_id]
            counts["keyframes"] += 1
            for criterion, score in zip(CVS_CRITERIA, frame.cvs, strict=True):
                answer = "yes" if score >= CVS_THRESHOLD else "no"
                row = _row(normalised, "cvs", "frame", video, frame.frame_index, [frame.frame_index])
                row["criterion"] = criterion
                row["question_id"] += f"/{criterion}"
                rows.append(_prompted(row, prompts, ["yes", "no"], answer, {"answer": answer}))
            show(video, [frame.frame_index])
        counts["rows"] = len(rows)
        _keep(built, normalised, config_name(source, "cvs", "frame"), rows, counts, tests)

    boxes = defaultdict(list)
    test_ids = {v.video_id for v in tests}
    for instance in tables.instances:
        if instance.kind == "tool" and instance.box is not None and instance.video_id in test_ids:
            boxes[(instance.video_id, instance.frame_index)].append(instance)
    if boxes:
        rows, by_video = [], {v.video_id: v for v in tests}
        labels = vocabulary.get("tool", [])
        for (video_id, frame_index), found in sorted(boxes.items()):
            video = by_video[video_id]
            if not video.video_path and frame_index not in images[video_id]:
                raise InputError(f"{source} {video_id} frame {frame_index}: tool boxes but no image file")
            found = sorted(found, key=lambda i: (i.box[1], i.box[0], i.label, i.instance_id))
            reference = [{"label": i.label, "bbox": [float(v) for v in i.box]} for i in found]
            answer = [{"index": n, "label": b["label"], "box": b["bbox"]} for n, b in enumerate(reference, start=1)]
            row = _row(normalised, "tool_localization", "frame", video, frame_index, [frame_index])
            row = _prompted(row, prompts, labels, None, answer)
            rows.append(row | {"reference_boxes": reference})
            show(video, [frame_index])
        counts = Counter(
            {"frames with tool boxes": len(rows), "boxes": sum(map(len, boxes.values())), "rows": len(rows)}
        )
        _keep(built, normalised, config_name(source, "tool_localization", "frame"), rows, counts, tests)
    return built


def why_empty(normalised: Normalised, counts: Counter, tests: list) -> str:
    """Why a benchmark has no row, from what this build read: its test videos gave none (the counts say why), or it
    has no test video (none of those its split names is in this copy, or its split names none)."""
    if tests:
        found = "; ".join(f"{what}: {count}" for what, count in sorted(counts.items()) if what != "rows" and count)
        return f"its {len(tests)} test video(s) give no row ({found or 'no frame carries the task labels'})"
    variant = normalised.split_variant
    listed = sorted(v for v, split in normalised.spec.split_variants.get(variant or "", {}).items() if split == "test")
    if listed:
        shown = f"{listed[0]} ... {listed[-1]}" if len(listed) > 1 else listed[0]
        return f"none of the {len(listed)} test videos of the {variant} split ({shown}) is in this copy"
    return f"the {variant} split has no test video" if variant else "no video of this copy is in the test split"


def _keep(
    built: BenchBuild, normalised: Normalised, name: str, rows: list[dict], counts: Counter, tests: list
) -> None:
    """Keep a config's rows, or say why it has none (:func:`why_empty`)."""
    entry = {"test_videos": len(tests), **dict(sorted(counts.items()))}
    if rows:
        built.rows[name] = rows
    else:
        entry["not written"] = why_empty(normalised, counts, tests)
    built.manifest[name] = entry
