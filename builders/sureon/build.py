"""Build the Sureon datasets (Sureon-DB, validation pools, the 340-question benchmark) from the official release.

    sureon build sureon --release DIR [--videos DIR] --out OUT [--configs bench db ...]

Configs (names are part of the contract): ``bench`` (test), ``db`` (train, passing blind curation: Sureon-DB),
``train_all``, ``validation``, ``validation_curated``. Sequence-summary passthroughs (flag null) count as passing.

With ``--videos``, each clip gets its sampled frames (see :mod:`builders.sureon.frames`). Frames of the configs used
for evaluation (``bench``, ``validation``, ``validation_curated``; ``--blur-configs`` changes the list) have on-screen
text and faces blurred before encoding, as the Sureon paper's D.1 does (:mod:`builders.blur`; ``--no-blur`` turns it
off and the card says so); a missing or unreadable video
is handled by ``--on-missing-video``: ``error`` (default: list every missing source video, every unreadable one and
every clip a video is too short for, all in one error, and stop), ``skip`` (leave its questions out and list them in
``build_manifest.json``) or ``annotation-only`` (keep them without frames).
Every config reconciles: read = written + skipped.

``--frames-layout`` sets how the training configs (``db``, ``train_all``) hold frames: ``files`` (default, the public
corpus's layout) writes each sampled frame once as ``media/<source_id>/<frame index>.jpg`` and rows hold those
relative paths, which every reader resolves against the folder or the Hub copy's ``media/``
(:func:`builders.hub.media_root`); ``embedded`` puts the JPEG bytes in every row, so questions sharing a clip each
carry a copy and ``load_dataset`` writes them all again into its Arrow cache. ``bench`` and the validation configs
always embed their frames (small, and read by evaluation and review as they are).
"""

import hashlib
import json
import os
import shutil
from collections import defaultdict
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import pyarrow as pa
from tqdm.auto import tqdm

from builders.blur import BlurSettings, blurrer_for
from builders.card import STAT_FIELDS, plot_category_distribution, render_card, video_qa_stats
from builders.columns import MAX_ERRORS_SHOWN
from builders.errors import InputError
from builders.hub import DEFAULT_MAX_SHARD_BYTES, MEDIA_DIR, configs_metadata, write_split
from builders.outputs import staged_output
from builders.schema import video_qa_features
from builders.sureon.availability import missing_reason, read_availability
from builders.sureon.configs import (
    BLURRED_BY_DEFAULT,
    CONFIGS,
    FRAMES_LAYOUTS,
    MISSING_VIDEO_MODES,
    passes_curation,
    select_configs,
)
from builders.sureon.frames import (
    ClipFrames,
    FrameCache,
    FramePolicy,
    extract_all,
    index_videos,
    resolve_decode_device,
    windows_outside,
)
from builders.sureon.release import ColumnMapping, check_leakage, read_release


def default_cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "sureon" / "frames"


@dataclass
class BuildOptions:
    release: Path
    out: Path
    videos: Path | None = None
    configs: list[str] | None = None
    mapping: ColumnMapping = field(default_factory=ColumnMapping)
    on_missing_video: str = "error"
    policy: FramePolicy = field(default_factory=FramePolicy)
    blur: BlurSettings | None = field(default_factory=BlurSettings)  # None: no config is blurred
    blur_configs: tuple[str, ...] = BLURRED_BY_DEFAULT
    cache_dir: Path = field(default_factory=default_cache_dir)
    num_workers: int = 1
    decode_device: str = "auto"  # "auto" (the GPU when torch sees one), "cpu" or "cuda"
    frames_layout: str = "files"  # the training configs' frames: "files" under media/, or "embedded" in each row
    shuffle_options: bool = False
    overwrite: bool = False
    max_shard_bytes: int = DEFAULT_MAX_SHARD_BYTES


@dataclass
class ConfigReport:
    name: str
    split: str
    read: int
    written: int
    skipped: list[dict]

    def line(self) -> str:
        return (
            f"{self.name:<20} {self.split:<11} read {self.read:>7}  written {self.written:>7}  "
            f"skipped {len(self.skipped):>6}"
        )


@dataclass
class BuildReport:
    out: Path
    configs: list[ConfigReport]
    warnings: list[str]
    unknown_categories: dict[str, int]

    def summary(self) -> str:
        lines = [f"Built {self.out}", *(c.line() for c in self.configs)]
        if self.unknown_categories:
            lines.append(f"categories outside the ten, kept under their own name: {self.unknown_categories}")
        if any(c.skipped for c in self.configs):
            lines.append(f"skipped questions and why: {self.out / 'build_manifest.json'}")
        if self.warnings:
            lines.append(f"{len(self.warnings)} warning(s) (see build_manifest.json), first: {self.warnings[0]}")
        return "\n".join(lines)


Failures = dict[tuple[str, float, float], str]  # (source_id, start, end) -> why that clip has no frames


@dataclass
class ClipFrameStore:
    """Where each record's frames come from after sampling: the cache, or the reason there are none."""

    videos: dict[str, Path]
    missing: dict[str, str]  # source_id -> why it has no video (availability.json's reason, when fetched)
    failures: Failures
    cache: FrameCache
    policy: FramePolicy
    device: str

    def lookup(self, record: dict) -> tuple[ClipFrames | None, str | None]:
        source, window = record["source_id"], (record["start"], record["end"])
        if source in self.missing:
            return None, self.missing[source]
        if (source, *window) in self.failures:
            return None, self.failures[(source, *window)]
        frames = self.cache.get(self.cache.key(self.videos[source], *window, self.policy, self.device))
        if frames is None:
            raise RuntimeError(f"frames of {record['clip_id']} vanished from the cache {self.cache.root} mid-build")
        return frames, None


@dataclass(frozen=True)
class CheckedVideos:
    """What the videos' headers say of the clips of a build, before anything is decoded."""

    videos: dict[str, Path]  # source_id -> its file
    missing: dict[str, str]  # source_id -> why it has no video (availability.json's reason, when fetched)
    failures: Failures  # the clips their video cannot hold (unreadable, too short, before a downloaded section)


def check_videos(opts: BuildOptions, records: list[dict]) -> CheckedVideos:
    """Find every video of ``records`` and check every clip window against its file's header; under
    ``--on-missing-video error`` any problem stops the build, all of them listed in one error."""
    videos = index_videos(opts.videos)
    availability = read_availability(opts.videos)
    missing = {
        source: missing_reason(availability.get(source))
        for source in sorted({r["source_id"] for r in records} - set(videos))
    }
    windows: dict[Path, set[tuple[float, float]]] = defaultdict(set)
    for record in records:
        if record["source_id"] in videos:
            windows[videos[record["source_id"]]].add((record["start"], record["end"]))
    failures: Failures = {}
    for video, found in windows.items():
        failures.update({(video.stem, *window): why for window, why in windows_outside(video, sorted(found)).items()})
    refuse_unsampled(failures, opts, decoded=False, missing=missing)
    return CheckedVideos(videos, missing, failures)


def sample_frames(
    opts: BuildOptions, records: list[dict], policy: FramePolicy, checked: CheckedVideos
) -> ClipFrameStore:
    """Decode (or find cached) the frames of every clip of ``records`` that ``checked`` found sampleable, one decoder
    per source video."""
    jobs: dict[Path, list[tuple[float, float]]] = defaultdict(list)
    for record in records:
        window = (record["start"], record["end"])
        if record["source_id"] in checked.videos and (record["source_id"], *window) not in checked.failures:
            jobs[checked.videos[record["source_id"]]].append(window)
    failures = dict(checked.failures)
    device = resolve_decode_device(opts.decode_device)
    with tqdm(total=len(jobs), desc=f"sampling frames ({device})", unit="video", disable=None) as progress:
        for video, outcome in extract_all(jobs, policy, opts.cache_dir, opts.num_workers, device):
            failures.update({(video.stem, *window): error for window, error in outcome.items() if error})
            progress.update()
    refuse_unsampled(failures, opts, decoded=True)
    return ClipFrameStore(checked.videos, checked.missing, failures, FrameCache(opts.cache_dir), policy, device)


def refuse_unsampled(
    failures: Failures,
    opts: BuildOptions,
    decoded: bool,
    missing: dict[str, str] | None = None,
) -> None:
    """Under ``--on-missing-video error``, stop on source videos that are ``missing`` (source -> why) and clips that
    cannot be sampled, listing them all in one error, so that one run names every video to fetch or fix."""
    missing = missing or {}
    if not (failures or missing) or opts.on_missing_video != "error":
        return
    parts = []
    if missing:
        parts.append(
            f"{len(missing)} source video(s) not found in {opts.videos} (expected <source_id>.<ext>): "
            + ", ".join(f"{source} ({reason})" for source, reason in missing.items())
        )
    if failures:
        reasons = sorted(set(failures.values()))
        shown = "\n  ".join(reasons[:MAX_ERRORS_SHOWN])
        more = f"\n  ... and {len(reasons) - MAX_ERRORS_SHOWN} more" if len(reasons) > MAX_ERRORS_SHOWN else ""
        resumes = " (frames decoded so far are cached; a rerun resumes)" if decoded else " (nothing was decoded)"
        parts.append(
            f"{len(failures)} clip(s) cannot be sampled from the videos in {opts.videos}{resumes}:\n  {shown}{more}"
        )
    fix = " and fix the others" if failures else ""
    fetch = f"Fetch the missing videos (`sureon videos fetch`){fix}" if missing else "Fix the videos"
    raise InputError(
        "\n".join(parts) + f"\n{fetch}, or pass --on-missing-video skip (leave their questions out, listed in "
        "build_manifest.json) or annotation-only (keep them without frames)."
    )


def sample_configs(
    opts: BuildOptions, selected: dict[str, list[dict]], policies: dict[str, FramePolicy]
) -> dict[FramePolicy, ClipFrameStore]:
    """The frames of every config, sampled once per frame policy (blurred and plain configs differ) for the union of
    the configs' questions under it, after every config's videos are checked (one error names them all)."""
    every = {r["question_id"]: r for rows in selected.values() for r in rows}
    checked = check_videos(opts, list(every.values()))
    stores = {}
    for policy in dict.fromkeys(policies.values()):
        names = [name for name, p in policies.items() if p == policy]
        unique = {r["question_id"]: r for name in names for r in selected[name]}
        stores[policy] = sample_frames(opts, list(unique.values()), policy, checked)
    return stores


def blur_stats(kept: list[dict]) -> dict:
    """Frames written and frames with at least one blurred region, overall and per detector."""
    per_frame = [regions for row in kept for regions in row.get("blurred_regions") or []]
    by_detector: dict[str, int] = defaultdict(int)
    for regions in per_frame:
        for detector in sorted({region["detector"] for region in regions}):
            by_detector[detector] += 1
    return {"frames": len(per_frame), "frames_blurred": sum(1 for r in per_frame if r), "by_detector": by_detector}


def blur_card(opts: BuildOptions, counts: dict[str, dict]) -> dict | None:
    """What the card and manifest say of blurring (``counts``: per blurred config); None when none was blurred."""
    if not counts:
        return None
    return {
        "configs": sorted(counts),
        "frames": counts,
        "settings": asdict(opts.blur),
        "detectors": blurrer_for(opts.blur).fingerprint()["detectors"],
    }


class MediaFiles:
    """Frames written once each under ``media/<source_id>/<frame index>.jpg`` of the dataset folder, whichever clips
    and questions use them; a frame met again with other bytes (a cache mixing two samplings) is an error."""

    def __init__(self, out: Path, folder: str = MEDIA_DIR):
        self.out, self.folder = out, folder  # blurred frames of a training config get their own folder
        self.digests: dict[str, bytes] = {}

    def paths(self, source_id: str, frames: ClipFrames) -> list[str]:
        if not source_id or "/" in source_id or "\\" in source_id or source_id.startswith("."):
            raise InputError(f"source_id {source_id!r} cannot name a media folder")
        names = []
        for index, jpeg in zip(frames.indices, frames.jpegs, strict=True):
            name = f"{self.folder}/{source_id}/{index:07d}.jpg"
            digest = hashlib.blake2b(jpeg, digest_size=16).digest()
            known = self.digests.setdefault(name, digest)
            if known != digest:
                raise RuntimeError(
                    f"frame {index} of {source_id} came out of the frame cache with two different contents; "
                    "clear --cache-dir and rebuild"
                )
            path = self.out / name
            if not path.exists():
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(jpeg)  # inside the staging folder: the whole output appears at once or not at all
            names.append(name)
        return names


def config_rows(
    records: list[dict],
    store: ClipFrameStore | None,
    skip_missing: bool,
    kept: list,
    skipped: list,
    media: MediaFiles | None = None,
):
    """Output rows of one config; records without frames are skipped (listed in ``skipped``) or kept frameless.
    With ``media``, frames are written there and rows hold their relative paths."""
    for record in records:
        row = {k: v for k, v in record.items() if not k.startswith("_")} | record["_extras"]
        if store is not None:
            frames, reason = store.lookup(record)
            if reason and skip_missing:
                skipped.append({key: record[key] for key in ("question_id", "source_id")} | {"reason": reason})
                continue
            if not frames:
                row["frames"] = []
            elif media is not None:
                row["frames"] = media.paths(record["source_id"], frames)
            else:
                row["frames"] = [{"bytes": jpeg, "path": None} for jpeg in frames.jpegs]
            row["frame_timestamps"] = frames.timestamps if frames else []
            row["blurred_regions"] = frames.blurred_regions if frames else []
        stats = {k: row[k] for k in STAT_FIELDS}  # frames stream to disk, not into memory
        if "blurred_regions" in row:
            stats["blurred_regions"] = row["blurred_regions"]
        kept.append(stats)
        yield row


def build_sureon(opts: BuildOptions) -> BuildReport:
    """Read, validate and write the requested configs; see the module docstring."""
    if opts.on_missing_video not in MISSING_VIDEO_MODES:
        raise InputError(f"--on-missing-video must be one of {MISSING_VIDEO_MODES}, got {opts.on_missing_video!r}")
    if opts.frames_layout not in FRAMES_LAYOUTS:
        raise InputError(f"--frames-layout must be one of {FRAMES_LAYOUTS}, got {opts.frames_layout!r}")
    release = read_release(opts.release, opts.mapping, opts.shuffle_options)
    check_leakage(release)
    specs = select_configs(release, opts.configs)
    selected = {
        spec.name: [r for r in release.splits[spec.split].records if not spec.curated_only or passes_curation(r)]
        for spec in specs
    }
    with_frames = opts.videos is not None
    unknown = sorted(set(opts.blur_configs) - set(CONFIGS))
    if unknown:
        raise InputError(f"--blur-configs names unknown config(s) {unknown}; choose from {list(CONFIGS)}")
    blurred = {spec.name for spec in specs if with_frames and opts.blur is not None and spec.name in opts.blur_configs}
    policies = {
        spec.name: replace(opts.policy, blur=opts.blur) if spec.name in blurred else opts.policy for spec in specs
    }
    if blurred:
        blurrer_for(opts.blur)  # loads every detector now: a bad detector file fails before any decoding
    reports, card_configs, written_stats, dataset_infos, extra_columns, blur_counts = [], [], {}, {}, [], {}
    layouts = {spec.name: spec.frames_layout(opts.frames_layout) for spec in specs} if with_frames else {}
    written_specs, empty = [], []
    inputs = {"--release": opts.release, "--videos": opts.videos, "--cache-dir": opts.cache_dir}
    # staged from here on, frame sampling included: an interrupted build leaves nothing behind
    with staged_output(opts.out, opts.overwrite, inputs) as staging:
        stores = sample_configs(opts, selected, policies) if with_frames else {}
        media, blurred_media = MediaFiles(staging), MediaFiles(staging, f"{MEDIA_DIR}/blurred")
        for spec in specs:
            extra_schema = release.splits[spec.split].extra_fields
            as_files = layouts.get(spec.name) == "files"
            features = video_qa_features(with_frames, pa.schema(extra_schema) if extra_schema else None, as_files)
            kept: list[dict] = []
            skipped: list[dict] = []
            store = stores.get(policies[spec.name])
            files = (blurred_media if spec.name in blurred else media) if as_files else None
            rows = config_rows(selected[spec.name], store, opts.on_missing_video == "skip", kept, skipped, files)
            written = write_split(rows, features, staging / spec.name, spec.split, opts.max_shard_bytes)
            dataset_infos[spec.name] = written.info(features)
            report = ConfigReport(spec.name, spec.split, len(selected[spec.name]), written.num_examples, skipped)
            if report.read != report.written + len(report.skipped):
                raise RuntimeError(
                    f"{spec.name}: read {report.read} != written {report.written} + skipped {len(skipped)}"
                )
            reports.append(report)
            if not report.written:  # a config without rows would not load (datasets: "corresponds to no data")
                shutil.rmtree(staging / spec.name)
                del dataset_infos[spec.name]
                why = f"all {report.read} skipped" if report.read else "no question selected"
                empty.append(f"config {spec.name} has no rows ({why})")
                continue
            written_specs.append(spec)
            written_stats[spec.name] = video_qa_stats(kept)
            if spec.name in blurred:
                blur_counts[spec.name] = blur_stats(kept)
            card_configs.append(
                {
                    "name": spec.name,
                    "split": spec.split,
                    "description": spec.description,
                    "stats": written_stats[spec.name],
                    "blur": blur_counts.get(spec.name),
                }
            )
            extra_columns += [f.name for f in extra_schema if f.name not in extra_columns]

        if not written_specs:
            reasons = sorted({skip["reason"] for report in reports for skip in report.skipped})
            why = f" (skipped: {'; '.join(reasons[:3])}{'; ...' if len(reasons) > 3 else ''})" if reasons else ""
            raise InputError(f"nothing to write from {opts.release}: {'; '.join(empty)}{why}; pass other --configs")
        warnings = release.warnings + [f"{line}: not written" for line in empty]
        plot_category_distribution(written_stats, staging / "assets" / "category_distribution.png")
        metadata = configs_metadata({s.name: [s.split] for s in written_specs}, default=written_specs[0].name)
        blur = blur_card(opts, blur_counts)
        card = render_card(
            card_configs,
            metadata,
            dataset_infos,
            with_frames,
            extra_columns,
            blur,
            frames_as_files=[name for name, layout in layouts.items() if layout == "files"],
        )
        (staging / "README.md").write_text(card)
        manifest = {
            "configs": {
                r.name: {"split": r.split, "read": r.read, "written": r.written, "skipped": r.skipped} for r in reports
            },
            "stats": written_stats,
            "unknown_categories": release.unknown_categories,
            "warnings": warnings,
            "frames": {
                "with_frames": with_frames,
                "policy": asdict(opts.policy),
                "blur": blur,
                "layout": layouts,
                "media_files": len(media.digests) + len(blurred_media.digests),
            }
            if with_frames
            else {"with_frames": False},
        }
        (staging / "build_manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return BuildReport(opts.out, reports, warnings, release.unknown_categories)
