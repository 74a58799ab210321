"""Build the templated public corpus (the Sureon paper's D_pub) from local copies of the public sources.

    sureon build public --source cholec80=/data/cholec80 --source endoscapes=/data/endoscapes --out build/public

Per source: normalise (reader, vocabulary, seg-to-box; ``normalised/<source>/*.parquet`` is kept in the output so
other projects can reuse the common layer), check its media, make the items (annotated frames for the image branch;
strategic and grounded clips for the clip branch), template them into QAs in two versions (template, instruction),
optionally paraphrase them (the third version), write the frames each record shows (JPEG, once per frame, cached in
``--cache-dir`` so a rerun decodes nothing twice), and write the records in the Hub layout:

    data/<branch>/<source>/<split>-NNNNN-of-NNNNN.parquet     configs: image, clip, image-<source>, clip-<source>
    bench/<config>/test-NNNNN-of-NNNNN.parquet                 configs: bench-<source>-<task>-<mode> (benchmarks.py)
    media/<source>/<video>/<frame>.jpg                         the frames the records' ``frames`` paths name
    normalised/<source>/{videos,frames,...}.parquet, manifest.json, README.md (card with the per-source table)

Everything goes to a staging folder first: a failure (a bad file in any source) leaves no half-written output.
Counts reconcile in ``manifest.json``: every annotated frame is an item or a listed skip (no applicable template,
an unused split), every clip window sampled is an item or counted as thinned, and annotation rows a reader read but
did not keep (e.g. Cholec80 tool rows past the last phase frame) are counted in the source's ``read_counts``. What the
build goes on through but the user must hear about (an annotation file that ends before its video, a source that
yields no record) is a named, counted entry of the source's ``warnings`` and a line of the printed summary; the policy
is in ``build_public``'s docstring and ``docs/sources/README.md``.
"""

from __future__ import annotations

import json
from bisect import bisect_left, bisect_right
from collections import Counter, defaultdict
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from builders.arguments import byte_size, key_values, non_negative_int, positive_float, positive_int
from builders.card import render_public_card, split_infos
from builders.errors import InputError
from builders.hub import DEFAULT_MAX_SHARD_BYTES, write_split
from builders.options import stable_seed
from builders.outputs import staged_output
from builders.schema import PUBLIC_BENCH_FEATURES, PUBLIC_QA_FEATURES
from public_converters.benchmarks import BENCH_FPS, build_benchmarks
from public_converters.clips import SamplingConfig, grounded_clips, spread, strategic_clips
from public_converters.evaluation import write_evaluation_metadata
from public_converters.media import MediaJob, check_media, link_media, media_name, write_media
from public_converters.normalise import Normalised, normalise_source, observed_capabilities
from public_converters.schema import SourceError, write_tables
from public_converters.spec import get_source, registry, resembling
from public_converters.templating import QA, ClipItem, Context, ImageItem, load_templates, render


CLIP_FRAMES = 8
SPLITS = ("train", "validation", "test")


@dataclass
class BuildOptions:
    sources: dict[str, Path]
    out: Path
    cache_dir: Path | None = None
    overwrite: bool = False
    num_proc: int = 1
    split_variants: dict[str, str] = field(default_factory=dict)
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    max_side: int | None = 768
    paraphrase_client: object | None = None  # a builders.llm.LLMClient; None = no paraphrase version
    paraphrase_settings: dict | None = None
    max_shard_bytes: int = DEFAULT_MAX_SHARD_BYTES
    benchmarks: bool = True  # the bench-* configs of the sources that have a public benchmark (D.3)
    bench_fps: float = BENCH_FPS


# ---- items ---------------------------------------------------------------------------------------------------------


def image_items(normalised: Normalised) -> tuple[list[ImageItem], Counter]:
    """Annotated frames that have an image (a file, or a frame of the video to decode); every other frame is counted
    by why it is not an item."""
    tables, source = normalised.tables, normalised.spec.name
    videos = {v.video_id: v for v in tables.videos}
    instances, relations = defaultdict(list), defaultdict(list)
    for instance in tables.instances:
        instances[(instance.video_id, instance.frame_index)].append(instance)
    for relation in tables.relations:
        relations[(relation.video_id, relation.frame_index)].append(relation)
    items, skipped = [], Counter()
    for frame in tables.frames:
        key = (frame.video_id, frame.frame_index)
        annotated = any(
            value is not None
            for value in (frame.phase, frame.step, frame.actions, frame.tools, frame.anatomy, frame.cvs)
        )
        from_video = normalised.spec.video_frames_as_images and videos[frame.video_id].video_path
        if not frame.image_path and not from_video:
            skipped["frame without an image"] += 1
        elif not (annotated or instances[key] or relations[key]):
            skipped["frame without annotations"] += 1
        elif videos[frame.video_id].split not in SPLITS:
            skipped["video outside the split variant"] += 1
        else:
            items.append(ImageItem(source, videos[frame.video_id], frame, instances[key], relations[key]))
    return items, skipped


def frames_by_video(normalised: Normalised) -> dict[str, list[int]]:
    """The sorted frames with an image file, per video (what a clip of a frame-folder source can show)."""
    found = defaultdict(list)
    for frame in normalised.tables.frames:
        if frame.image_path:
            found[frame.video_id].append(frame.frame_index)
    return {video: sorted(frames) for video, frames in found.items()}


def clip_items(normalised: Normalised, config: SamplingConfig) -> tuple[list[ClipItem], Counter]:
    tables, source = normalised.tables, normalised.spec.name
    segments = defaultdict(list)
    for segment in tables.segments:
        segments[segment.video_id].append(segment)
    available = frames_by_video(normalised)
    items, counts = [], Counter()
    for video in tables.videos:
        if video.split not in SPLITS:
            counts["videos outside the split variant"] += 1
            continue
        own = segments[video.video_id]
        kinds = frozenset(s.kind for s in own)
        shipped = None if video.video_path else available.get(video.video_id, [])
        grounded, qualified = grounded_clips(video, own, config, source, shipped)
        counts["grounded windows qualified"] += qualified
        counts["grounded windows thinned"] += qualified - len(grounded)
        for clip in [*strategic_clips(video, own, config, source), *grounded]:
            overlapping = [s for s in own if s.end_frame >= clip.start_frame and s.start_frame <= clip.end_frame]
            items.append(ClipItem(source, video, clip, overlapping, kinds))
    return items, counts


def clip_frames(item: ClipItem, available: dict[str, list[int]]) -> list[int]:
    """The frames a clip shows: the grounded window's own, else 8 spread over the clip (over its image frames when
    the source ships frames instead of a video; none if the clip falls between them)."""
    if item.clip.frames:
        return list(item.clip.frames)
    if item.video.video_path:
        span = list(range(item.clip.start_frame, item.clip.end_frame + 1))
    else:
        frames = available.get(item.video.video_id, [])
        span = frames[bisect_left(frames, item.clip.start_frame) : bisect_right(frames, item.clip.end_frame)]
    return spread(span, CLIP_FRAMES)


# ---- records ------------------------------------------------------------------------------------------------------


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


def context_for(normalised: Normalised) -> Context:
    spec, tables = normalised.spec, normalised.tables
    vocabulary = {kind: sorted(set(table.values())) for kind, table in spec.labels.items()}
    boxable = defaultdict(set)
    for instance in tables.instances:
        if instance.box is not None:
            boxable[instance.kind].add(instance.label)
    return Context(spec.name, spec.procedure, vocabulary, dict(boxable))


@dataclass
class SourceBuild:
    records: list[dict]
    jobs: list[MediaJob]
    manifest: dict


def build_source(normalised: Normalised, options: BuildOptions) -> SourceBuild:
    """Items -> QAs -> records (template + instruction versions) and the media jobs they need."""
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
            items, skipped = clip_items(normalised, options.sampling)
        rendered = template_items(items, branch, ctx, capabilities, options.num_proc)
        sampling = {k: v for k, v in skipped.items() if k.startswith("grounded windows")}
        if sampling:
            manifest["clip sampling"] = sampling
        manifest["skipped"][branch] = {k: v for k, v in skipped.items() if k not in sampling}
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


# ---- the build ----------------------------------------------------------------------------------------------------


def _configs(written: dict[tuple[str, str], list]) -> tuple[list[dict], dict]:
    """``configs:`` entries and their ``dataset_info``: one per branch (all its sources) and one per branch and
    source, over the same files."""
    entries, infos = [], {}
    branches = sorted({branch for branch, _ in written})
    for branch in branches:
        parts = [part for (b, _), own in written.items() if b == branch for part in own]
        splits = sorted({part.split for part in parts}, key=SPLITS.index)
        infos[branch] = split_infos(PUBLIC_QA_FEATURES, parts)
        entries.append(
            {
                "config_name": branch,
                "data_files": [{"split": s, "path": f"data/{branch}/*/{s}-*.parquet"} for s in splits],
                **({"default": True} if branch == branches[0] else {}),
            }
        )
    for (branch, source), parts in sorted(written.items()):
        splits = [part.split for part in parts]
        infos[f"{branch}-{source}"] = split_infos(PUBLIC_QA_FEATURES, parts)
        entries.append(
            {
                "config_name": f"{branch}-{source}",
                "data_files": [{"split": s, "path": f"data/{branch}/{source}/{s}-*.parquet"} for s in splits],
            }
        )
    return entries, infos


def summarise(records: list[dict]) -> dict:
    """What the card reports for one source and branch: QA counts by version, QA type and question type."""
    return {
        "qas": len(records),
        "items": len({r["item_id"] for r in records}),
        "versions": dict(sorted(Counter(r["version"] for r in records).items())),
        "qa_types": dict(sorted(Counter(r["qa_type"] for r in records).items())),
        "question_types": dict(sorted(Counter(r["question_type"] for r in records).items())),
        "splits": dict(sorted(Counter(r["split"] for r in records).items())),
    }


def write_records(records: list[dict], folder: Path, max_shard_bytes: int) -> list:
    """One source's records of one branch, a parquet split each, in a stable order; returns the written splits."""
    by_split = defaultdict(list)
    for record in sorted(records, key=lambda r: (r["item_id"], r["template_id"], r["qa_id"])):
        by_split[record["split"]].append(record)
    return [write_split(by_split[s], PUBLIC_QA_FEATURES, folder, s, max_shard_bytes) for s in SPLITS if by_split[s]]


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


NOTHING_WRITTEN = "no QA record written (no config for this source)"


def _why_nothing(source_manifest: dict) -> str:
    """Why a source wrote no record, from its manifest's counts of what was skipped."""
    skipped = [
        f"{branch} {reason}: {count}"
        for branch, counts in source_manifest.get("skipped", {}).items()
        for reason, count in counts.items()
        if count
    ]
    return "; ".join(skipped) or "no annotated frame or clip to template"


def build_public(options: BuildOptions) -> dict:
    """Build the corpus; returns the manifest (also written to ``manifest.json``).

    Policy on bad input (no flag changes it): a bad file, row or video of any source stops the build before anything
    is written, with the file (and row) named. Two cases keep the data that is right and say what is missing, as
    named, counted ``warnings`` in each source's manifest entry and lines of the printed summary: an annotation file
    that ends before its video (``media.SHORT_ANNOTATION``: the labelled part builds, the rest is left out) and a
    source that yields no QA record (``NOTHING_WRITTEN``: no empty config is written). A build where no source
    yields a record is refused, so every ``load_dataset`` line the command prints loads."""
    specs = {name: get_source(name) for name in sorted(options.sources)}  # every name checked before any work
    for name in specs:  # and every folder: a typo in the last source must not cost the build of the others first
        if not Path(options.sources[name]).is_dir():
            raise SourceError(options.sources[name], "source folder not found", fix=f"pass --source {name}=<folder>")
    for name, variant in sorted(options.split_variants.items()):  # a typo here would silently build the default
        if name not in specs:
            like = " or ".join(repr(s) for s in resembling(name) if s in specs)
            hint = f" (did you mean {like}?)" if like else ""
            raise InputError(
                f"--split-variant {name}={variant}: {name!r} is not a source of this build{hint}; the sources are: "
                f"{', '.join(specs)}"
            )
        if variant not in specs[name].split_variants:
            known = ", ".join(specs[name].split_variants) or "none"
            raise InputError(
                f"--split-variant {name}={variant}: {name} has no split variant {variant!r}; known: {known}"
            )
    cache_dir = Path(options.cache_dir or options.out.with_name(f"{options.out.name}.cache"))
    manifest: dict = {"sources": {}}
    written: dict[tuple[str, str], list] = {}
    bench_written: dict[str, object] = {}
    with staged_output(options.out, options.overwrite) as staging:
        for name, spec in specs.items():
            root = options.sources[name]
            normalised = normalise_source(
                spec, root, split_variant=options.split_variants.get(name), num_proc=options.num_proc
            )
            normalised = check_media(normalised, options.num_proc)  # labels fitted to the videos' lengths
            write_tables(normalised.tables, normalised.info(), staging / "normalised" / name)
            built = build_source(normalised, options)
            records = built.records
            source_manifest = {**normalised.info(), **built.manifest}
            if options.paraphrase_client is not None:
                from public_converters.paraphrase import DEFAULT_SETTINGS, paraphrase

                terms = {
                    name: sorted({t for table in spec.labels.values() for t in table.values()} | {spec.procedure})
                }
                settings = options.paraphrase_settings or DEFAULT_SETTINGS
                extra, stats = paraphrase(records, options.paraphrase_client, terms, settings)
                records = records + extra
                source_manifest["paraphrase"] = dict(sorted(stats.items()))
            bench = build_benchmarks(normalised, options.bench_fps) if options.benchmarks else None
            jobs = merge_jobs(built.jobs, bench.frames, normalised) if bench else built.jobs
            write_media(jobs, cache_dir, options.max_side, options.num_proc)
            shown = {path for record in records for path in record["frames"]}
            if bench:
                shown |= {path for rows in bench.rows.values() for row in rows for path in row["frames"]}
                source_manifest["benchmarks"] = bench.manifest
                for config, rows in bench.rows.items():
                    ordered = sorted(rows, key=lambda r: r["question_id"])
                    bench_written[config] = write_split(
                        ordered,
                        PUBLIC_BENCH_FEATURES,
                        staging / "bench" / config,
                        "test",
                        options.max_shard_bytes,
                    )
            link_media(shown, cache_dir, staging)
            source_manifest["branches_written"] = {}
            for branch in spec.branches:
                own = [r for r in records if r["branch"] == branch]
                if own:
                    folder = staging / "data" / branch / name
                    written[(branch, name)] = write_records(own, folder, options.max_shard_bytes)
                    source_manifest["branches_written"][branch] = summarise(own)
            if not source_manifest["branches_written"]:
                source_manifest["warnings"][NOTHING_WRITTEN] = {
                    "count": 1,
                    "cases": [{"file": None, "message": _why_nothing(source_manifest)}],
                }
            manifest["sources"][name] = source_manifest
        if not written and not bench_written:  # a dataset without a config: the printed load_dataset line would fail
            reasons = "; ".join(f"{name}: {_why_nothing(info)}" for name, info in manifest["sources"].items())
            reasons = reasons if len(reasons) < 400 else reasons[:400] + " ..."
            raise InputError(
                f"nothing to write: no source gave a QA record ({reasons}); check the sources' folders and "
                "--split-variant (a variant that leaves every video out of train/validation/test writes nothing)"
            )
        manifest["configs"], infos = _configs(written)
        for config, part in sorted(bench_written.items()):
            infos[config] = split_infos(PUBLIC_BENCH_FEATURES, [part])
            manifest["configs"].append(
                {
                    "config_name": config,
                    "data_files": [{"split": "test", "path": f"bench/{config}/test-*.parquet"}],
                }
            )
        manifest["evaluation"] = write_evaluation_metadata(staging / "evaluation")
        (staging / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        licenses = {name: get_source(name).license for name in options.sources}
        paper = json.loads((Path(__file__).parent / "paper_table13.json").read_text())
        (staging / "README.md").write_text(render_public_card(manifest, licenses, paper, infos))
    return manifest


# ---- command line (``sureon build public``) ------------------------------------------------------------------------


def _root_folders(source_root: Path, given: set[str]) -> tuple[dict[str, Path], list[str]]:
    """(source -> folder) of the sub-folders of ``--source-root`` named exactly after a source, and the names of the
    others. A sub-folder that is a near miss of a source (``Cholec80``, ``cholec_80``, ``Cholec8O``) is refused,
    alone (the source would silently be absent) or beside the exact one (which of the two is the data?), unless
    ``--source NAME=DIR`` says which folder that source is."""
    if not source_root.exists():
        raise InputError(
            f"--source-root {source_root} does not exist: give the folder holding one sub-folder per source, named "
            f"as the source (e.g. {source_root / 'cholec80'})"
        )
    if not source_root.is_dir():
        raise InputError(
            f"--source-root {source_root} is a file, not a folder: give the folder holding one sub-folder per "
            "source, or --source NAME=DIR"
        )
    folders = sorted(p for p in source_root.iterdir() if p.is_dir() and not p.name.startswith("."))
    known = registry()
    exact = {p.name: p for p in folders if p.name in known}
    problems, others = [], []
    for folder in folders:
        if folder.name in known:
            continue
        others.append(folder.name)
        for source in resembling(folder.name):
            if source in given:
                continue  # --source NAME=DIR chose that source's folder
            if source in exact:
                problems.append(
                    f"folder {folder.name!r} looks like the source {source!r}, whose folder {source!r} is there too: "
                    f"only {source!r} would be read; move or rename {folder.name!r} (or choose one with "
                    f"--source {source}=DIR)"
                )
            else:
                problems.append(
                    f"folder {folder.name!r} looks like the source {source!r} but is not named {source!r}, so "
                    f"{source} would be left out of the build: rename the folder to {source!r} (source folders are "
                    "named exactly as the source)"
                )
    if problems:
        raise InputError(f"--source-root {source_root}: " + "; ".join(problems))
    return exact, others


def source_folders(pairs: list[str] | None, source_root: Path | None) -> dict[str, Path]:
    """``--source NAME=DIR`` pairs plus every sub-folder of ``--source-root`` named after a known source (a
    ``--source`` pair wins over the root's folder of the same name); every folder must exist."""
    sources = {name: Path(folder) for name, folder in key_values(pairs, "--source", "cholec80=/data/cholec80").items()}
    for name, folder in sources.items():
        get_source(name)  # an unknown name (with a suggestion) before any folder is looked at
        if not folder.is_dir():
            what = "is a file, not a folder" if folder.exists() else "does not exist"
            raise InputError(f"--source {name}={folder}: {folder} {what}; give the folder of the {name} release")
    others: list[str] = []
    if source_root is not None:
        found, others = _root_folders(source_root, set(sources))
        for name, folder in found.items():
            sources.setdefault(name, folder)
    if not sources:
        if source_root is None:
            raise InputError("no sources: give --source NAME=DIR (repeatable) or --source-root DIR")
        listed = ", ".join(others[:8]) + (", ..." if len(others) > 8 else "")
        detail = f"none of its sub-folders ({listed}) is named after a source" if others else "it has no sub-folder"
        raise InputError(
            f"no sources in --source-root {source_root}: {detail}; name each source's folder exactly as the source, "
            f"one of: {', '.join(registry())}"
        )
    return sources


SHOWN_WARNINGS = 5  # cases of a warning printed per source (the manifest lists them all)


def add_arguments(parser) -> None:
    defaults = SamplingConfig()
    parser.add_argument(
        "--source",
        action="append",
        metavar="NAME=DIR",
        help=f"a source and its local folder, repeatable; NAME is one of: {', '.join(registry())}",
    )
    parser.add_argument(
        "--source-root", type=Path, help="a folder whose sub-folders are named after sources (each one is built)"
    )
    parser.add_argument("--out", required=True, type=Path, help="output folder (Hub layout)")
    parser.add_argument("--split-variant", action="append", metavar="NAME=VARIANT", help="an official split variant")
    parser.add_argument(
        "--num-proc", type=positive_int, default=1, help="processes for seg-to-box, templating and media"
    )
    parser.add_argument("--cache-dir", type=Path, help="media cache (default: OUT.cache next to OUT)")
    parser.add_argument(
        "--max-side", type=non_negative_int, default=768, help="longest side of the written JPEGs (0: keep)"
    )
    parser.add_argument(
        "--min-clip-seconds", type=positive_float, default=defaults.min_seconds, help="shortest strategic clip"
    )
    parser.add_argument(
        "--max-clip-seconds", type=positive_float, default=defaults.max_seconds, help="longest strategic clip"
    )
    parser.add_argument(
        "--grid-fps", type=positive_float, default=defaults.grid_fps, help="frame grid of grounded windows"
    )
    parser.add_argument(
        "--max-grounded-per-video",
        type=non_negative_int,
        default=defaults.max_per_video,
        help="grounded windows kept per video (a seeded subset; 0: none)",
    )
    parser.add_argument("--paraphrase", action="store_true", help="add the LLM paraphrase version (C.4)")
    parser.add_argument("--base-url", help="OpenAI-compatible endpoint for --paraphrase (default: $OPENAI_BASE_URL)")
    parser.add_argument("--image-model", default="Qwen/Qwen3.5-9B", help="paraphraser of image QAs")
    parser.add_argument("--clip-model", default="Qwen/Qwen3-VL-8B-Instruct", help="paraphraser of clip QAs")
    parser.add_argument("--max-concurrency", type=positive_int, default=64, help="paraphrase requests in flight")
    parser.add_argument("--llm-cache", type=Path, help="SQLite paraphrase cache (default: OUT.llm_cache.sqlite)")
    parser.add_argument(
        "--max-shard-size",
        type=byte_size,
        default=DEFAULT_MAX_SHARD_BYTES,
        help="parquet shard size, e.g. 500MB (or a number of bytes)",
    )
    parser.add_argument(
        "--no-benchmarks", action="store_true", help="do not write the bench-* configs (public benchmarks, D.3)"
    )
    parser.add_argument(
        "--bench-fps",
        type=positive_float,
        default=BENCH_FPS,
        help="frame grid of the benchmark configs (the Sureon paper: 1 fps)",
    )
    parser.add_argument("--overwrite", action="store_true", help="replace OUT if it exists")


def run(args) -> int:
    from dataclasses import replace

    if args.min_clip_seconds > args.max_clip_seconds:
        raise InputError(
            f"--min-clip-seconds {args.min_clip_seconds:g} is more than --max-clip-seconds {args.max_clip_seconds:g}: "
            "the shortest clip cannot be longer than the longest; swap them or raise --max-clip-seconds"
        )
    sources = source_folders(args.source, args.source_root)
    client, settings = None, None
    if args.paraphrase:
        from builders.llm import LLMClient
        from public_converters.paraphrase import DEFAULT_SETTINGS

        cache = args.llm_cache or args.out.with_name(f"{args.out.name}.llm_cache.sqlite")
        client = LLMClient(base_url=args.base_url, cache=cache, max_concurrency=args.max_concurrency, progress=True)
        settings = {
            "image": replace(DEFAULT_SETTINGS["image"], model=args.image_model),
            "clip": replace(DEFAULT_SETTINGS["clip"], model=args.clip_model),
        }
    options = BuildOptions(
        sources=sources,
        out=args.out,
        cache_dir=args.cache_dir,
        overwrite=args.overwrite,
        num_proc=args.num_proc,
        split_variants=key_values(args.split_variant, "--split-variant", "hemoset=third-party"),
        sampling=SamplingConfig(
            args.min_clip_seconds,
            args.max_clip_seconds,
            grid_fps=args.grid_fps,
            max_per_video=args.max_grounded_per_video,
        ),
        max_side=args.max_side or None,
        paraphrase_client=client,
        paraphrase_settings=settings,
        max_shard_bytes=args.max_shard_size,
        benchmarks=not args.no_benchmarks,
        bench_fps=args.bench_fps,
    )
    manifest = build_public(options)
    for name, info in manifest["sources"].items():
        counts = ", ".join(f"{b}: {w['items']} items, {w['qas']} QAs" for b, w in info["branches_written"].items())
        print(f"{name}: {counts or 'nothing written'}")
        for config, entry in info.get("benchmarks", {}).items():
            print(
                f"  {config}: {entry.get('rows', 0)} rows"
                + (f" ({entry['not written']})" if "not written" in entry else "")
            )
        for kind, entry in info.get("warnings", {}).items():
            if entry["count"] == 1 and not entry["cases"][0]["file"]:
                print(f"  warning: {kind}: {entry['cases'][0]['message']}")
                continue
            print(f"  warning: {kind}: {entry['count']} (manifest.json lists them under 'warnings')")
            for case in entry["cases"][:SHOWN_WARNINGS]:
                where = f"{options.sources[name] / case['file']}: " if case["file"] else ""
                print(f"    {where}{case['message']}")
            if entry["count"] > SHOWN_WARNINGS:
                print(f"    ... and {entry['count'] - SHOWN_WARNINGS} more")
    if client is not None:
        print(client.ledger.summary())
    print(f'Load it with: datasets.load_dataset("{args.out}", "{manifest["configs"][0]["config_name"]}")')
    return 0
