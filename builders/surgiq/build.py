"""Build SurgiQ (text-only four-option surgical MCQs) in the Hub layout from the user's own files.

    sureon build surgiq --source FILE [FILE ...] --out OUT [--exclude-ids dedupe.txt]

The files are read and validated by :mod:`builders.surgiq.reader` (JSON, JSONL, CSV or parquet, through one declared
:class:`SurgiqColumns` mapping; every row problem raised at once); this module writes what it read.

Configs (names are part of the contract), each one ``test`` split:
``default``  the stored option order, kept fixed (the paper's evaluation set);
``shuffled`` options permuted with a seed from the question id, labels updated (the paper's answer-order robustness
             set, Table A3); ``option_order`` gives each presented option's stored position.

The correct-answer position balance is reported per config (build summary, manifest and card) next to the paper's
(A 26.9 / B 23.8 / C 24.7 / D 24.6 %). ``--exclude-ids`` applies a dedupe list (one id per line, ``#`` comments; see
:mod:`builders.surgiq.near_duplicates`): excluded questions are listed in ``build_manifest.json``, so read = written +
skipped always holds.
"""

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from builders.card import mcq_stats, plot_domain_type_distribution, render_mcq_card
from builders.hub import DEFAULT_MAX_SHARD_BYTES, configs_metadata, write_split
from builders.options import LETTERS, seeded_shuffle
from builders.outputs import staged_output
from builders.schema import text_mcq_features
from builders.surgiq.configs import CONFIGS
from builders.surgiq.reader import (
    NUM_OPTIONS,
    SurgiqColumns,
    SurgiqError,
    read_id_list,
    read_surgiq,
)
from builders.surgiq.vocabulary import (
    DOMAINS,
    QUESTION_TYPES,
    VOCABULARIES,
)


SPLIT = "test"
# The paper's release (section 3.2), in percent.
PAPER_ANSWER_POSITION = {"A": 26.9, "B": 23.8, "C": 24.7, "D": 24.6}


def _extra_schema(records: list[dict], names: list[str]) -> pa.Schema:
    fields = []
    for name in names:
        try:
            fields.append(pa.field(name, pa.array([r["_extras"][name] for r in records]).type))
        except (pa.ArrowInvalid, pa.ArrowTypeError) as err:
            raise SurgiqError(f"column {name!r} mixes value types across rows ({err}); map or drop it") from None
    return pa.schema([f if not pa.types.is_null(f.type) else f.with_type(pa.string()) for f in fields])


def present(record: dict, shuffled: bool) -> dict:
    """The record as a config presents it: the stored order, or a permutation seeded by its id (labels follow)."""
    if not shuffled:
        return record
    order = seeded_shuffle(range(NUM_OPTIONS), "surgiq-shuffled", record["id"])
    return record | {
        "options": [record["options"][i] for i in order],
        "answer_index": order.index(record["answer_index"]),
        "answer": LETTERS[order.index(record["answer_index"])],
        "option_order": order,
    }


@dataclass
class BuildOptions:
    sources: list[Path]
    out: Path
    mapping: SurgiqColumns = field(default_factory=SurgiqColumns)
    aliases: dict[str, dict[str, str]] = field(default_factory=dict)
    exclude_ids: Path | None = None
    configs: list[str] | None = None
    overwrite: bool = False
    max_shard_bytes: int = DEFAULT_MAX_SHARD_BYTES


@dataclass
class ConfigReport:
    name: str
    read: int
    written: int
    skipped: list[dict]
    answer_position: dict[str, float]  # percent per letter

    def line(self) -> str:
        balance = " ".join(f"{letter} {pct:.1f}" for letter, pct in self.answer_position.items())
        return (
            f"{self.name:<10} read {self.read:>6}  written {self.written:>6}  skipped {len(self.skipped):>4}  "
            f"answer position % {balance}"
        )


@dataclass
class BuildReport:
    out: Path
    configs: list[ConfigReport]
    warnings: list[str]

    def summary(self) -> str:
        paper = " ".join(f"{letter} {pct:.1f}" for letter, pct in PAPER_ANSWER_POSITION.items())
        lines = [f"Built {self.out}", *(c.line() for c in self.configs), f"(the paper's release: {paper})"]
        if any(c.skipped for c in self.configs):
            lines.append(f"excluded questions: {self.out / 'build_manifest.json'}")
        lines += [f"warning: {w}" for w in self.warnings]
        return "\n".join(lines)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def build_surgiq(opts: BuildOptions) -> BuildReport:
    """Read, validate and write the requested configs; see the module docstring."""
    names = opts.configs or list(CONFIGS)
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        raise SurgiqError(f"unknown config(s) {unknown}; choose from {list(CONFIGS)}")
    specs = [CONFIGS[n] for n in CONFIGS if n in names]
    listed = read_id_list(opts.exclude_ids) if opts.exclude_ids is not None else []  # a bad list fails first
    records, extras = read_surgiq(opts.sources, opts.mapping, opts.aliases)
    warnings: list[str] = []
    excluded: set[str] = set()
    if opts.exclude_ids is not None:
        known = {r["id"] for r in records}
        excluded = set(listed) & known
        stale = [i for i in listed if i not in known]
        if stale:
            warnings.append(f"{len(stale)} id(s) of {opts.exclude_ids} are not in the sources: {stale[:10]}")
    kept = [r for r in records if r["id"] not in excluded]
    if not kept:  # an empty split would be written, and its `load_dataset` line would then fail
        raise SurgiqError(
            f"all {len(records)} questions of the sources are listed in --exclude-ids {opts.exclude_ids}: nothing "
            "would be built; is it the list meant for these sources?"
        )
    skipped = [
        {"id": r["id"], "where": r["_where"], "reason": f"listed in {Path(opts.exclude_ids).name}"}
        for r in records
        if r["id"] in excluded
    ]
    features = text_mcq_features(_extra_schema(records, extras) if extras else None)

    reports, card_configs, stats, infos = [], [], {}, {}
    with staged_output(opts.out, opts.overwrite) as staging:
        for spec in specs:
            rows = [
                {k: v for k, v in present(r, spec.shuffled).items() if not k.startswith("_")} | r["_extras"]
                for r in kept
            ]
            written = write_split(rows, features, staging / spec.name, SPLIT, opts.max_shard_bytes)
            if len(records) != written.num_examples + len(skipped):
                raise RuntimeError(f"{spec.name}: read {len(records)} != written {written.num_examples} + skipped")
            infos[spec.name] = written.info(features)
            stats[spec.name] = mcq_stats(rows, NUM_OPTIONS)
            reports.append(
                ConfigReport(spec.name, len(records), written.num_examples, skipped, stats[spec.name]["answer_pct"])
            )
            card_configs.append({"name": spec.name, "split": SPLIT, "description": spec.description})
        first = stats[specs[0].name]
        plot_domain_type_distribution(first, DOMAINS, QUESTION_TYPES, staging / "assets" / "domain_type.png")
        metadata = configs_metadata({spec.name: [SPLIT] for spec in specs}, default=specs[0].name)
        (staging / "README.md").write_text(
            render_mcq_card(
                card_configs,
                metadata,
                infos,
                stats,
                vocabularies=VOCABULARIES,
                paper_answer_position=PAPER_ANSWER_POSITION,
                extra_columns=extras,
            )
        )
        manifest = {
            "sources": {str(p): _sha256(Path(p)) for p in opts.sources},
            "exclude_ids": str(opts.exclude_ids) if opts.exclude_ids else None,
            "configs": {r.name: {"read": r.read, "written": r.written, "skipped": r.skipped} for r in reports},
            "stats": stats,
            "paper_answer_position": PAPER_ANSWER_POSITION,
            "warnings": warnings,
        }
        (staging / "build_manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return BuildReport(opts.out, reports, warnings)
