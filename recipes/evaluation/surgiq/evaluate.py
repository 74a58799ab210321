"""Evaluate a causal LM (or a VLM used text-only) on SurgiQ with the paper's log-likelihood protocol (section 4.2).

    sureon eval surgiq --model Qwen/Qwen2.5-7B-Instruct --dataset build/surgiq --config default --out results/qwen7b
    python -m recipes.evaluation.surgiq.evaluate --model ... --dataset ... --out ...          (the same flags)

The protocol (the fixed prompt, the label variants scored by log-probability, argmax and softmax confidence) is
:mod:`recipes.evaluation.surgiq.scoring`; this module is the command: it loads the model and the build, and writes the
predictions and the report.

With ``--chat-template`` the prompt is one user turn of the model's chat template, after the system prompt the
model was trained with (``recipes/sft.py`` records it with the weights; ``--system-prompt`` replaces it,
``--no-system-prompt`` drops it); the plain protocol has no system turn.

Few-shot (``--shots k``, k = 1..3): the first k questions of the fixed pool of three are shown as solved
demonstrations; the pool is then excluded from scoring (zero-shot scores every question).

Scores are appended to ``OUT/scores/rank-R-of-W.jsonl`` (``rank-0-of-1.jsonl`` for one process) after every batch, so
a killed run resumes where it stopped and a rerun pays nothing; every log there is read, and a run's
``scores_cache.jsonl`` from before sharding. Outputs (written atomically): ``predictions.jsonl`` (one line per
question id), ``report.json``, ``report.md`` and ``reliability.png``.

Under ``torchrun`` / ``accelerate launch`` (``torchrun --nproc-per-node 8 -m sureon eval surgiq ...``) rank r scores
batches r, r + W, r + 2W, ... of the one batch plan on ``cuda:LOCAL_RANK``, and rank 0 gathers the scores and writes
the outputs: the same bytes a one-process run writes (:mod:`recipes.evaluation.ranks`).

A model whose training record shows it was trained on the questions scored is warned about before it loads, and
``report.json`` / ``report.md`` say so (``contamination``, :mod:`recipes.evaluation.contamination`).
"""

import argparse
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from builders.arguments import int_range, positive_int
from builders.errors import InputError, report_mistakes
from builders.outputs import atomic_file, write_atomic
from recipes.evaluation.ranks import ALONE, Ranks, Share, share_timing
from recipes.evaluation.surgiq.calibration import DEFAULT_BINS
from recipes.evaluation.surgiq.scoring import (
    DEFAULT_BATCH_SIZE,
    MAX_SHOTS,
    LabelScorer,
    ScoreCache,
    cache_key,
    fewshot_pool,
    model_fingerprint,
    predictions_from_scores,
    render_prompts,
    score_prompts,
)


REQUIRED_COLUMNS = ("id", "question", "options", "answer_index", "domain", "question_type")
CACHE_FOLDER = "scores"  # one log per rank
CACHE_FILE = "scores_cache.jsonl"  # the one log of a run from before sharding, still read
SURGIQ_BUILD = "SurgiQ is read from a build of `sureon build surgiq` (configs default and shuffled)"


def _accuracy_by(predictions: list[dict], key: str, vocabulary: dict) -> dict[str, dict]:
    from builders.surgiq.vocabulary import in_vocabulary_order

    groups: dict[str, list[bool]] = {}
    for p in predictions:
        groups.setdefault(p[key], []).append(p["correct"])
    return {
        name: {"n": len(groups[name]), "accuracy": float(np.mean(groups[name]))}
        for name in in_vocabulary_order(groups, vocabulary)
    }


def summarize(predictions: list[dict], n_bins: int = DEFAULT_BINS) -> dict:
    """Micro accuracy overall / per domain / per question type, calibration, and the letters predicted."""
    from builders.surgiq.vocabulary import DOMAINS, QUESTION_TYPES
    from recipes.evaluation.surgiq.calibration import calibration_summary

    letters = list(predictions[0]["probabilities"])
    probabilities = [[p["probabilities"][letter] for letter in letters] for p in predictions]
    labels = [letters.index(p["answer"]) for p in predictions]
    calibration = calibration_summary(probabilities, labels, n_bins)
    count = len(predictions)
    return {
        "num_questions": count,
        "accuracy": float(np.mean([p["correct"] for p in predictions])),
        "per_domain": _accuracy_by(predictions, "domain", DOMAINS),
        "per_type": _accuracy_by(predictions, "question_type", QUESTION_TYPES),
        "calibration": {key: value for key, value in calibration.items() if key != "accuracy"},
        "predicted_letters": {x: sum(p["prediction"] == x for p in predictions) / count for x in letters},
        "answer_letters": {x: sum(p["answer"] == x for p in predictions) / count for x in letters},
    }


@dataclass
class EvalOptions:
    model: str
    dataset: str
    out: Path
    config: str = "default"
    split: str = "test"
    shots: int = 0
    batch_size: int = DEFAULT_BATCH_SIZE
    revision: str | None = None
    dtype: str | None = None
    attn_implementation: str | None = None
    device: str | None = None
    chat_template: bool = False
    system_prompt: str | None = None
    no_system_prompt: bool = False
    limit: int | None = None
    n_bins: int = DEFAULT_BINS


@dataclass
class EvalResult:
    out: Path
    report: dict
    batches_run: int
    from_cache: int
    ranks: list[dict] = field(default_factory=list)  # each rank's share: questions, scored, cached, seconds, batches

    def summary(self) -> str:
        r = self.report
        cal = r["calibration"]
        text = (
            f"SurgiQ {r['config']} {r['shots']}-shot, {r['model']}: accuracy {100 * r['accuracy']:.2f}% on "
            f"{r['num_questions']} questions; ECE {cal['ece']:.3f} ({cal['n_bins']} bins), Brier {cal['brier']:.3f}, "
            f"gap {cal['gap']:+.3f}\n{self.batches_run} batch(es) scored, {self.from_cache} question(s) from the "
            f"cache; wrote {self.out}/predictions.jsonl, report.json, report.md, reliability.png"
        )
        if len(self.ranks) > 1:
            shares = ", ".join(
                f"rank {s['rank']} {s['batches']} batch(es) in {s['seconds']:.1f} s" for s in self.ranks
            )
            text += f"\n{len(self.ranks)} ranks: {shares}"
        return text


def load_surgiq(dataset: str, config: str, split: str) -> list[dict]:
    from builders.build_loading import load_build

    ds = load_build(dataset, config, split, expected=SURGIQ_BUILD)
    missing = [c for c in REQUIRED_COLUMNS if c not in ds.column_names]
    if missing:
        raise InputError(
            f"{dataset} ({config}/{split}) lacks column(s) {missing}: build it with `sureon build surgiq`"
        )
    return [{key: row[key] for key in (*REQUIRED_COLUMNS, "source_type") if key in row} for row in ds]


def write_outputs(out: Path, predictions: list[dict], report: dict) -> None:
    from recipes.evaluation.surgiq.calibration import plot_reliability

    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "predictions.jsonl", "".join(json.dumps(p, sort_keys=True) + "\n" for p in predictions))
    write_atomic(out / "report.json", json.dumps(report, indent=2, sort_keys=True) + "\n")
    write_atomic(out / "report.md", report_markdown(report))
    title = f"{report['model']} on SurgiQ {report['config']} ({report['shots']}-shot)"
    with atomic_file(out / "reliability.png") as partial:
        plot_reliability(report["calibration"]["bins"], partial, title)


def _pct(value: float) -> str:
    return f"{100 * value:.2f}"


def report_markdown(report: dict) -> str:
    from recipes.evaluation.contamination import describe

    cal = report["calibration"]
    lines = [
        f"# SurgiQ evaluation: {report['model']}",
        "",
        f"Dataset `{report['dataset']}`, config `{report['config']}`, split `{report['split']}`, "
        f"{report['shots']}-shot, {report['num_questions']} questions scored"
        + (f" (few-shot pool excluded: {', '.join(report['excluded_from_scoring'])})" if report["shots"] else "")
        + ".",
        "",
        *(
            ["**Trained on the evaluated questions**: " + "; ".join(map(describe, report["contamination"])) + ".", ""]
            if report.get("contamination")
            else []
        ),
        "| metric | value |",
        "| --- | --- |",
        f"| accuracy (%) | {_pct(report['accuracy'])} |",
        f"| ECE (top-label, {cal['n_bins']} equal-width bins) | {cal['ece']:.4f} |",
        f"| Brier score (4 options) | {cal['brier']:.4f} |",
        f"| confidence - accuracy gap | {cal['gap']:+.4f} |",
        f"| mean confidence | {cal['mean_confidence']:.4f} |",
        "",
    ]
    for title, key in (("Accuracy per question type", "per_type"), ("Accuracy per domain", "per_domain")):
        lines += [f"## {title}", "", "| group | questions | accuracy (%) |", "| --- | --- | --- |"]
        lines += [f"| {name} | {g['n']} | {_pct(g['accuracy'])} |" for name, g in report[key].items()]
        lines.append("")
    letters = list(report["predicted_letters"])
    lines += [
        "## Answer letters",
        "",
        "| | " + " | ".join(letters) + " |",
        "| --- |" + " --- |" * len(letters),
        "| predicted (%) | " + " | ".join(_pct(report["predicted_letters"][x]) for x in letters) + " |",
        "| correct (%) | " + " | ".join(_pct(report["answer_letters"][x]) for x in letters) + " |",
        "",
        "![Reliability diagram](reliability.png)",
        "",
        (
            f"Labels scored: {', '.join(repr(v) for variants in report['labels'].values() for v in variants)} "
            "(max over the variants of each letter); confidence is the softmax over the four label scores."
        ),
        "",
    ]
    return "\n".join(lines)


def evaluate(opts: EvalOptions, ranks: Ranks = ALONE) -> EvalResult | None:
    """Load the model and dataset, score every question (resuming from the cache), write the outputs; over ranks,
    each scores its batches and rank 0 writes (the others return None)."""
    from recipes.evaluation.contamination import find_contamination, warn
    from recipes.model_io.model_folder import check_model_path
    from recipes.model_io.modeling import load_model, load_processor, resolve_system_prompt, tokenizer_of

    if not 0 <= opts.shots <= MAX_SHOTS:
        raise InputError(f"--shots must be 0..{MAX_SHOTS}, got {opts.shots}")
    for flag, value in (("--batch-size", opts.batch_size), ("--bins", opts.n_bins)):
        if value < 1:
            raise InputError(f"{flag} {value}: give a positive number")
    check_model_path(opts.model, "--model", opts.revision)
    records = load_surgiq(opts.dataset, opts.config, opts.split)
    pool = fewshot_pool(records) if opts.shots else []
    pool_ids = {r["id"] for r in pool}
    scored = [r for r in records if r["id"] not in pool_ids][: opts.limit]
    if not scored:
        raise InputError(f"{opts.dataset} ({opts.config}/{opts.split}) has no question left to score")
    contamination = []
    if ranks.writes:
        contamination = find_contamination(
            opts.model, opts.revision, str(opts.dataset), opts.config, opts.split, [r["id"] for r in scored], "id"
        )
        warn(opts.model, contamination, "report.json")

    processor = load_processor(opts.model, revision=opts.revision, padding_side="left")
    tokenizer = tokenizer_of(processor)
    model = load_model(
        opts.model, revision=opts.revision, dtype=opts.dtype, attn_implementation=opts.attn_implementation
    )
    model.to(opts.device or ranks.device())
    scorer = LabelScorer(model, tokenizer, chat_template=opts.chat_template)
    fingerprint = model_fingerprint(opts.model, model, scorer.labels, opts.chat_template, opts.revision)
    system_prompt = None
    if opts.chat_template:
        system_prompt = resolve_system_prompt(
            opts.model, override=opts.system_prompt, disabled=opts.no_system_prompt, revision=opts.revision
        )
    elif opts.system_prompt:
        raise InputError("--system-prompt needs --chat-template: the plain SurgiQ prompt has no system turn")
    prompts = render_prompts(scored, pool[: opts.shots], processor if opts.chat_template else None, system_prompt)
    cache = ranks.cache(ScoreCache, opts.out / CACHE_FOLDER, earlier=[opts.out / CACHE_FILE])
    ids, started = [r["id"] for r in scored], time.monotonic()
    cached = {qid for qid, prompt in zip(ids, prompts, strict=True) if cache_key(fingerprint, prompt) in cache.entries}
    scores, batches_run = score_prompts(
        scorer, ids, prompts, cache, fingerprint, opts.batch_size, progress=True, ranks=ranks
    )
    from_cache = len(cached & scores.keys())
    timing = share_timing(ranks, len(scores), len(scores) - from_cache, from_cache, started) | {"batches": batches_run}
    merged = ranks.gather(Share(scores, timing=timing))
    if merged is None:
        return None  # rank 0 writes the outputs
    predictions = predictions_from_scores(scored, merged.results)
    report = {
        "benchmark": "surgiq",
        "model": opts.model,
        "revision": opts.revision,
        "dataset": opts.dataset,
        "config": opts.config,
        "split": opts.split,
        "shots": opts.shots,
        "fewshot_pool": [r["id"] for r in pool] if opts.shots else [],
        "demonstrations": [r["id"] for r in pool[: opts.shots]],
        "excluded_from_scoring": sorted(pool_ids),
        "chat_template": opts.chat_template,
        "system_prompt": system_prompt,
        "labels": {letter: list(variants) for letter, variants in scorer.labels.items()},
        "dtype": str(model.dtype),
        **summarize(predictions, opts.n_bins),
    }
    if contamination:
        report["contamination"] = contamination  # trained on the questions scored
    write_outputs(opts.out, predictions, report)
    shares = merged.timing["ranks"]
    batches = sum(share["batches"] for share in shares)
    return EvalResult(opts.out, report, batches, sum(share["cached"] for share in shares), shares)


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("--model", required=True, help="Hub id or local folder of a causal LM or a VLM (text-only)")
    parser.add_argument("--dataset", required=True, help="a folder built by `sureon build surgiq`, or its Hub id")
    parser.add_argument("--config", default="default", help="default (stored order) or shuffled")
    parser.add_argument("--split", default="test")
    parser.add_argument("--shots", type=int_range(0, MAX_SHOTS), default=0, help="few-shot demonstrations")
    parser.add_argument("--out", required=True, type=Path, help="output folder (also holds the score cache)")
    parser.add_argument("--batch-size", type=positive_int, default=DEFAULT_BATCH_SIZE)
    parser.add_argument("--revision", help="model revision (branch, tag or commit)")
    parser.add_argument("--dtype", help="auto (default), bfloat16, float16 or float32")
    parser.add_argument("--attn-implementation", help="sdpa, flash_attention_2, eager (default: best available)")
    parser.add_argument("--device", help="cuda, cuda:1, cpu (default: cuda when available)")
    parser.add_argument("--chat-template", action="store_true", help="wrap the prompt in the model's chat template")
    prompt = parser.add_mutually_exclusive_group()
    prompt.add_argument(
        "--system-prompt",
        help="with --chat-template: the system turn (default: the one the model was trained with, read from the "
        "training_complete.json stored with its weights)",
    )
    prompt.add_argument("--no-system-prompt", action="store_true", help="with --chat-template: no system turn")
    parser.add_argument("--limit", type=positive_int, help="score only the first N questions (smoke runs)")
    parser.add_argument("--bins", type=positive_int, default=DEFAULT_BINS, help="ECE / reliability-diagram bins")
    return parser


def run(args: argparse.Namespace) -> int:
    from recipes.evaluation.runner import check_counts

    ranks = Ranks.of_launch()
    ranks.check_same_arguments(args)
    check_counts(limit=args.limit)
    options = EvalOptions(
        model=args.model,
        dataset=args.dataset,
        out=args.out,
        config=args.config,
        split=args.split,
        shots=args.shots,
        batch_size=args.batch_size,
        revision=args.revision,
        dtype=args.dtype,
        attn_implementation=args.attn_implementation,
        device=args.device,
        chat_template=args.chat_template,
        system_prompt=args.system_prompt,
        no_system_prompt=args.no_system_prompt,
        limit=args.limit,
        n_bins=args.bins,
    )
    result = evaluate(options, ranks)
    if result is not None:
        print(result.summary())
    return 0


def make_parser() -> argparse.ArgumentParser:
    return add_arguments(argparse.ArgumentParser(description=__doc__.splitlines()[0]))


def main(argv: list[str] | None = None) -> int:
    """The module run directly (``torchrun -m recipes.evaluation.surgiq.evaluate``): a mistake is one line per rank."""
    args = make_parser().parse_args(argv)
    return report_mistakes(lambda: run(args))


if __name__ == "__main__":
    raise SystemExit(main())
