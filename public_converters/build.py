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

The items are made in ``items.py`` and templated into records, with the media jobs their frames need, in
``records.py`` (the wording: ``templating.py`` and ``fillers/``); the ``--source`` / ``--source-root`` folders are
resolved in ``source_folders.py``. This module holds the order of the work, the output layout, the manifest and the
command line.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from builders.card import render_public_card, split_infos
from builders.errors import InputError
from builders.hub import DEFAULT_MAX_SHARD_BYTES, write_split
from builders.outputs import staged_output
from builders.schema import PUBLIC_BENCH_FEATURES, PUBLIC_QA_FEATURES
from public_converters.benchmarks import BENCH_FPS, build_benchmarks
from public_converters.clips import SamplingConfig
from public_converters.evaluation import write_evaluation_metadata
from public_converters.items import (
    SPLITS,
)
from public_converters.media import check_media, link_media, write_media
from public_converters.normalise import normalise_source
from public_converters.records import build_source, merge_jobs
from public_converters.schema import SourceError, write_tables
from public_converters.spec import get_source, resembling


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
    is written, with the file (and row) named; so does an annotated video that is missing or there under another
    name (``media.missing_video``: the file expected and the near miss found), which would otherwise shrink the
    corpus and its benchmarks without a word. Two cases keep the data that is right and say what is missing, as
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
            built = build_source(normalised, options.sampling, options.num_proc)
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
