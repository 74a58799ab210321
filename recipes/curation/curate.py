"""Stage 3 of the construction (the Sureon paper's 3.1 and B.4): blind-test curation and distractor hardening, the
``sureon curate`` command: the fold rules, the decisions and the report; the guessers and their cached scoring are
:mod:`recipes.curation.guessers`, Algorithm 1 is :mod:`recipes.curation.hardening`.

- A question is removed when any guesser that may score it reaches a consistency S >= tau (default 3/5) over R
  sampled blind answers. Sequence summaries (SM) have no options: they pass through, flagged as passing.
- **Training split**: video-level folds stratified by subject (:func:`builders.sureon.folds.assign_folds`, the function
  the guesser recipe ``recipes/sft.py --fold k`` trains with); fold f is scored only by guessers that held fold f out,
  plus off-the-shelf guessers. The folds are the ones the guessers trained with (each writes its ``folds.json`` next
  to its weights, whatever seed its recipe used; they must agree with each other, :func:`curation_folds`); scoring a
  video a guesser trained on raises :class:`~recipes.curation.guessers.FoldLeakError`.
- **Validation split**: scored by guessers trained on the whole training split (a guesser whose ``folds.json`` names
  a validation video is refused), then hardened (``--harden-guesser``).

Every scoring pass is cached (``OUT.cache/scores.jsonl`` by default): an interrupted run resumes where it stopped.
"""

import json
import logging
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from builders.arguments import int_range, positive_float, positive_int, seed
from builders.errors import InputError
from builders.sureon.folds import assign_folds
from recipes.curation.guessers import (
    DEFAULT_SAMPLING,
    DEFAULT_TAU,
    DEFAULT_TEMPERATURE,
    DEFAULT_TRIALS,
    TAU,
    FoldLeakError,
    Guesser,
    Sampling,
    ScoreCache,
    blind_accuracy,
    cache_label,
    check_guesser_names,
    check_guesser_spec,
    is_scored,
    load_guesser,
    score_records,
)
from recipes.curation.hardening import HARDENING_ATTEMPTS, HARDENING_SEED, harden


logger = logging.getLogger(__name__)

SUREON_BUILD = "curation reads a Sureon build (`sureon build sureon`: train_all or validation)"


@dataclass
class Curation:
    """Per-question decisions: ``scores[question_id][guesser] = S``; ``passes[question_id]``; ``fold`` when used."""

    scores: dict[str, dict[str, float]] = field(default_factory=dict)
    passes: dict[str, bool] = field(default_factory=dict)
    folds: dict[str, int] | None = None


def check_fold_rule(guesser: Guesser, fold: int, source_ids: set[str]) -> None:
    """Refuse to score fold ``fold`` with a guesser that trained on it (or on any of its videos)."""
    if guesser.held_out_fold is None:
        if guesser.trained_folds:
            raise FoldLeakError(
                f"guesser {guesser.name} was trained on folds (it has a folds.json) but declares no held-out fold: "
                "pass fold=K in its spec"
            )
        return
    if guesser.held_out_fold != fold:
        raise FoldLeakError(
            f"guesser {guesser.name} trained on fold {fold}; it may only score fold {guesser.held_out_fold}"
        )
    if guesser.trained_folds is not None:
        leaked = sorted(s for s in source_ids if s in guesser.trained_folds and guesser.trained_folds[s] != fold)
        if leaked:
            raise FoldLeakError(
                f"guesser {guesser.name} trained on {len(leaked)} video(s) of fold {fold} "
                f"(e.g. {', '.join(leaked[:3])}): its folds.json disagrees with the curation's folds; "
                "the guessers were trained on another split or with other folds"
            )


def check_validation_rule(guesser: Guesser, source_ids: set[str]) -> None:
    if guesser.held_out_fold is not None:
        raise FoldLeakError(
            f"guesser {guesser.name} was trained holding out fold {guesser.held_out_fold}: validation is scored by "
            "guessers trained on the whole training split"
        )
    leaked = sorted(source_ids & set(guesser.trained_folds or {}))
    if leaked:
        raise FoldLeakError(f"guesser {guesser.name} trained on validation video(s) {', '.join(leaked[:3])}")


def video_subjects(records: list[dict]) -> dict[str, str]:
    missing = [r["question_id"] for r in records if not r.get("source_id")]
    if missing:
        raise InputError(f"{len(missing)} question(s) lack source_id (e.g. {missing[0]}): folds are video-level")
    return {r["source_id"]: r.get("subject") or "unknown" for r in records}


def curation_folds(
    records: list[dict], guessers: list[Guesser], num_folds: int, fold_seed: int | None = None
) -> dict[str, int]:
    """The training split's folds: the assignment the fold guessers were trained with (each ``folds.json`` records
    it, whatever seed their recipe used), which must be one assignment for all of them; without such guessers,
    :func:`assign_folds` with ``fold_seed`` (default 42). A ``fold_seed`` given explicitly must agree with the
    guessers' folds, since it then says what the user believes they were trained with."""
    recorded = [g for g in guessers if g.trained_folds]
    if not recorded:
        return assign_folds(video_subjects(records), num_folds=num_folds, seed=42 if fold_seed is None else fold_seed)
    reference = recorded[0]
    for other in recorded[1:]:
        shared = reference.trained_folds.keys() & other.trained_folds.keys()
        differ = sorted(v for v in shared if reference.trained_folds[v] != other.trained_folds[v])
        if differ or reference.trained_folds.keys() != other.trained_folds.keys():
            example = differ[0] if differ else min(reference.trained_folds.keys() ^ other.trained_folds.keys())
            raise FoldLeakError(
                f"guessers {reference.name} and {other.name} were trained on different folds (e.g. video {example}): "
                "train every fold guesser with the same --num_folds, seed and training split"
            )
    folds = dict(reference.trained_folds)
    count = len(set(folds.values()))
    if count != num_folds:
        raise FoldLeakError(
            f"the guessers were trained with {count} folds (their folds.json), not --num-folds {num_folds}"
        )
    missing = sorted({r["source_id"] for r in records if r.get("source_id")} - folds.keys())
    if missing:
        raise FoldLeakError(
            f"{len(missing)} video(s) of the split are in no guesser's folds.json (e.g. {missing[0]}): the guessers "
            "were trained on another training split"
        )
    if fold_seed is not None:
        expected = assign_folds(video_subjects(records), num_folds=num_folds, seed=fold_seed)
        if any(expected[v] != folds[v] for v in expected):
            raise FoldLeakError(
                f"--fold-seed {fold_seed} gives other folds than the guessers were trained with (their folds.json); "
                "leave --fold-seed out to use the guessers' own folds"
            )
    return folds


def decide(curation: Curation, records: list[dict], scores_by_guesser: dict[str, dict], tau: float) -> None:
    for record in records:
        qid = record["question_id"]
        scores = {name: scores[qid]["consistency"] for name, scores in scores_by_guesser.items() if qid in scores}
        curation.scores[qid] = curation.scores.get(qid, {}) | scores
        curation.passes[qid] = all(s < tau for s in curation.scores[qid].values())


def curate(
    records: list[dict],
    guessers: list[Guesser],
    cache: ScoreCache,
    *,
    sampling: Sampling = DEFAULT_SAMPLING,
    tau: float = DEFAULT_TAU,
    num_folds: int | None = None,
    fold_seed: int | None = None,
) -> Curation:
    """Score every eligible question and decide. ``num_folds`` set: training-split curation by cross-validation;
    ``None``: every guesser scores every question (validation), after checking none trained on these videos."""
    if not guessers:
        raise InputError("blind curation needs at least one guesser")
    scored = [r for r in records if is_scored(r)]
    curation = Curation(passes={r["question_id"]: True for r in records if not is_scored(r)})
    if num_folds is None:
        source_ids = {r.get("source_id") for r in scored} - {None}
        for guesser in guessers:
            check_validation_rule(guesser, source_ids)
        decide(curation, scored, {g.name: score_records(g, scored, sampling, cache) for g in guessers}, tau)
        return curation
    curation.folds = curation_folds(records, guessers, num_folds, fold_seed)
    for fold in range(num_folds):
        in_fold = [r for r in scored if curation.folds[r["source_id"]] == fold]
        eligible = [g for g in guessers if g.held_out_fold in (None, fold)]
        if not any(g.held_out_fold == fold for g in eligible):
            logger.warning("fold %d: no guesser held it out; only off-the-shelf guessers score it", fold)
        if not eligible:
            raise InputError(f"fold {fold}: no guesser may score it (none held it out, none is off-the-shelf)")
        source_ids = {r["source_id"] for r in in_fold}
        for guesser in eligible:
            check_fold_rule(guesser, fold, source_ids)
        decide(curation, in_fold, {g.name: score_records(g, in_fold, sampling, cache) for g in eligible}, tau)
    return curation


def apply_curation(records: list[dict], curation: Curation) -> list[dict]:
    """The records with ``passes_blind_curation`` set and ``blind_consistency`` (the highest S, None if unscored)."""
    flagged = []
    for record in records:
        scores = curation.scores.get(record["question_id"]) or {}
        flagged.append(
            record
            | {
                "passes_blind_curation": curation.passes[record["question_id"]],
                "blind_consistency": max(scores.values()) if scores else None,
            }
        )
    return flagged


# ----------------------------------------------------------------------------------------------------------- reports


def survival_table(stages: dict[str, list[dict]], reference: list[dict]) -> dict[str, dict[str, dict]]:
    """Counts per category after each stage with the rate against ``reference`` (the Sureon paper's Table 11)."""
    from builders.sureon.categories import BY_CODE

    totals = Counter(r.get("category") or "unknown" for r in reference)
    order = [c for c in BY_CODE if c in totals] + sorted(set(totals) - set(BY_CODE))
    table = {}
    for stage, records in stages.items():
        counts = Counter(r.get("category") or "unknown" for r in records)
        rows = {c: {"count": counts[c], "rate": counts[c] / totals[c]} for c in order}
        rows["Total"] = {"count": len(records), "rate": len(records) / len(reference) if reference else 0.0}
        table[stage] = rows
    return table


def fold_tables(records: list[dict], folds: dict[str, int]) -> dict:
    """Videos and questions per fold (Table 9) and questions per category and fold (Table 10)."""
    from builders.sureon.folds import fold_table

    per_category = fold_table(records, folds)
    videos = Counter(folds[s] for s in {r["source_id"] for r in records})
    return {
        str(fold): {"videos": videos[fold], "questions": sum(counts.values()), "categories": dict(counts)}
        for fold, counts in per_category.items()
    }


def report_markdown(report: dict) -> str:
    lines = [f"# Blind-test curation: {report['dataset']}", ""]
    settings = report["settings"]
    guessers = ", ".join(f"{g['name']} ({g['kind']}, held-out fold {g['held_out_fold']})" for g in report["guessers"])
    lines.append(
        f"R = {settings['trials']} trials at T = {settings['temperature']}, tau = {settings['tau']:.3f}; "
        f"guessers: {guessers}."
    )
    if report.get("folds"):
        lines += [
            "",
            "## Folds (Tables 9-10)",
            "",
            "| fold | videos | questions | categories |",
            "| --- | --- | --- | --- |",
        ]
        for fold, row in report["folds"].items():
            categories = ", ".join(f"{c} {n}" for c, n in sorted(row["categories"].items()))
            lines.append(f"| {fold} | {row['videos']} | {row['questions']} | {categories} |")
    stages = list(report["survival"])
    lines += ["", "## Survival per category (Table 11)", ""]
    lines.append("| category | " + " | ".join(f"{s} (n) | {s} (%)" for s in stages) + " |")
    lines.append("| --- |" + " --- | --- |" * len(stages))
    for category in report["survival"][stages[0]]:
        cells = [
            f"{report['survival'][s][category]['count']} | {100 * report['survival'][s][category]['rate']:.1f}"
            for s in stages
        ]
        lines.append(f"| {category} | " + " | ".join(cells) + " |")
    if report.get("blind_accuracy"):
        lines += ["", "## Blind accuracy before / after hardening", "", "| guesser | before (%) | after (%) |"]
        lines.append("| --- | --- | --- |")
        for name, row in report["blind_accuracy"].items():
            cells = ["-" if row[k] is None else f"{100 * row[k]:.1f}" for k in ("before", "after")]
            lines.append(f"| {name} | {cells[0]} | {cells[1]} |")
    if report.get("hardening"):
        h = report["hardening"]
        lines += [
            "",
            f"Hardening: {h['kept']} kept, {h['discarded']} discarded after at most {h['attempts']} attempts;",
        ]
        lines.append(f"attempts of the kept: {json.dumps(h['attempt_histogram'])}.")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------------------------- run


def load_records(dataset: str, config: str | None, split: str) -> tuple[list[dict], object]:
    """The split's rows without frames (guessers are blind: a build's frames, embedded or stored as files, are never
    read), and its features."""
    from builders.build_loading import load_build

    ds = load_build(dataset, config, split, expected=SUREON_BUILD)
    ds = ds.remove_columns([c for c in ("frames", "frame_timestamps") if c in ds.column_names])
    missing = [c for c in ("question_id", "question", "answer", "category") if c not in ds.column_names]
    if missing:
        raise InputError(
            f"{dataset} ({config}/{split}) lacks column(s) {missing}: build it with `sureon build sureon`"
        )
    return ds.to_list(), ds.features


def write_records(records: list[dict], features, folder: Path, split: str, extra: dict):
    """One config of the output through the project's writer; returns its ``dataset_info``."""
    from datasets import Features

    from builders.hub import write_split

    features = Features(dict(features) | extra)
    return write_split(records, features, folder, split).info(features)


def write_card(staging: Path, split: str, infos: dict, report_markdown_text: str) -> None:
    """A README whose YAML header declares the configs (so ``load_dataset(OUT, config)`` works) and their
    ``dataset_info``, followed by the curation report."""
    from datasets.info import DatasetInfosDict
    from huggingface_hub import DatasetCard, DatasetCardData

    from builders.hub import configs_metadata

    card_data = DatasetCardData(configs=configs_metadata({name: [split] for name in infos}, default=next(iter(infos))))
    DatasetInfosDict(infos).to_dataset_card_data(card_data)
    card = DatasetCard(f"---\n{card_data.to_yaml()}\n---\n\n{report_markdown_text}")
    (staging / "README.md").write_text(str(card))


def run(args) -> int:
    from datasets import Value

    from builders.outputs import staged_output

    hardening = [("--harden-guesser", args.harden_guesser)] if args.harden_guesser else []
    hardening += [("--held-out-guesser", spec) for spec in args.held_out_guesser or []]
    check_guesser_names([("--guesser", spec) for spec in args.guesser])
    check_guesser_names(hardening)  # reported side by side: blind accuracy before / after hardening
    for spec in args.guesser:
        check_guesser_spec(spec)
    for option, spec in hardening:
        check_guesser_spec(spec, option)
    cache = ScoreCache(args.cache or Path(f"{args.out}.cache") / "scores.jsonl", label=cache_label(args.cache))
    records, features = load_records(args.dataset, args.config, args.split)
    sampling = Sampling(args.trials, args.temperature, args.seed)

    def load(spec: str) -> Guesser:
        return load_guesser(spec, cache_dir=cache.path.parent, max_new_tokens=args.max_new_tokens)

    guessers = [load(spec) for spec in args.guesser]
    curation = curate(
        records, guessers, cache, sampling=sampling, tau=args.tau, num_folds=args.num_folds, fold_seed=args.fold_seed
    )
    flagged = apply_curation(records, curation)
    retained = [r for r in flagged if r["passes_blind_curation"]]
    config = args.config or "default"
    report: dict = {
        "dataset": f"{args.dataset} ({config}/{args.split})",
        "settings": {"trials": args.trials, "temperature": args.temperature, "tau": args.tau, "seed": args.seed}
        | {"num_folds": args.num_folds, "fold_seed": args.fold_seed},
        "guessers": [
            {"name": g.name, "kind": g.kind, "held_out_fold": g.held_out_fold, "system_prompt": g.system_prompt}
            for g in guessers
        ],
        "counts": {"input": len(records), "retained": len(retained), "removed": len(records) - len(retained)},
    }
    if curation.folds is not None:
        report["folds"] = fold_tables(records, curation.folds)
    stages = {"after curation": retained}
    hardened, discarded = None, []
    if args.harden_guesser:
        hardener = load(args.harden_guesser)
        check_validation_rule(hardener, {r.get("source_id") for r in retained} - {None})
        hardened, discarded = harden(
            retained,
            hardener,
            cache,
            sampling=sampling,
            tau=args.tau,
            attempts=args.attempts,
            seed=args.hardening_seed,
        )
        stages["after hardening"] = hardened
        attempts = Counter(r["hardening_attempts"] for r in hardened)
        report["hardening"] = {"kept": len(hardened), "discarded": len(discarded), "attempts": args.attempts}
        report["hardening"]["attempt_histogram"] = {str(k): attempts[k] for k in sorted(attempts)}
        report["blind_accuracy"] = {
            g.name: {
                "before": blind_accuracy(g, retained, cache, sampling),
                "after": blind_accuracy(g, hardened, cache, sampling),
            }
            for g in [hardener, *map(load, args.held_out_guesser or [])]
        }
    report["survival"] = survival_table(stages, records)
    with staged_output(args.out, args.overwrite) as staging:
        extra = {"blind_consistency": Value("float64")}
        infos = {config: write_records(flagged, features, staging / config, args.split, extra)}
        if hardened is not None:
            extra["hardening_attempts"] = Value("int32")
            infos[f"{config}_hardened"] = write_records(
                hardened, features, staging / f"{config}_hardened", args.split, extra
            )
            (staging / "hardening_discarded.jsonl").write_text("".join(json.dumps(d) + "\n" for d in discarded))
        write_card(staging, args.split, infos, report_markdown(report))
        decisions = [
            {
                "question_id": qid,
                "fold": (curation.folds or {}).get(r.get("source_id")),
                "passes": curation.passes[qid],
            }
            | {"scores": curation.scores.get(qid, {})}
            for r in records
            for qid in [r["question_id"]]
        ]
        (staging / "decisions.jsonl").write_text("".join(json.dumps(d) + "\n" for d in decisions))
        (staging / "curation_report.json").write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
        (staging / "curation_report.md").write_text(report_markdown(report))
    print(report_markdown(report))
    return 0


def add_arguments(parser) -> None:
    parser.add_argument("--dataset", required=True, help="a folder built by `sureon build sureon`, or its Hub id")
    parser.add_argument("--config", default="train_all", help="train_all (folds) or validation")
    parser.add_argument("--split", default="train")
    parser.add_argument(
        "--guesser",
        action="append",
        required=True,
        metavar="SPEC",
        help="model=PATH_OR_ID[,backend=transformers|vllm|openai][,fold=K][,type=...][,name=...]"
        "[,system_prompt_file=PATH]; repeatable",
    )
    parser.add_argument(
        "--num-folds", type=int_range(2), help="cross-validated training curation (4 in the Sureon paper)"
    )
    parser.add_argument(
        "--fold-seed",
        type=seed,
        help="folds for guessers without a folds.json (default 42); by default the fold guessers' own folds.json "
        "(what their --fold runs trained with, whatever their seed) decides",
    )
    parser.add_argument("--trials", type=positive_int, default=DEFAULT_TRIALS, help="R answers per question")
    parser.add_argument("--temperature", type=positive_float, default=DEFAULT_TEMPERATURE, help="sampling")
    parser.add_argument(
        "--tau", type=TAU, default=DEFAULT_TAU, help="removed when any guesser's S >= tau (0 < tau <= 1)"
    )
    parser.add_argument("--seed", type=seed, default=0, help="sampling seed")
    parser.add_argument("--max-new-tokens", type=positive_int, default=32)
    parser.add_argument("--harden-guesser", metavar="SPEC", help="run Algorithm 1 with this guesser (validation)")
    parser.add_argument("--held-out-guesser", action="append", metavar="SPEC", help="also report its blind accuracy")
    parser.add_argument("--attempts", type=positive_int, default=HARDENING_ATTEMPTS, help="M configurations at most")
    parser.add_argument("--hardening-seed", type=int, default=HARDENING_SEED)
    parser.add_argument("--cache", type=Path, help="score cache (default: OUT.cache/scores.jsonl)")
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--overwrite", action="store_true")
