"""Blind-answerability audit of any multiple-choice dataset: can it be answered without the video (or at all from
the text's surface)?

    sureon audit --dataset DIR_OR_ID [--config C] [--split S] --guesser SPEC [--guesser SPEC ...] --out DIR

Reads Sureon builds and releases, SurgiQ builds, or any dataset with ``question`` / ``options`` / ``answer`` (or
``answer_index``) columns; options in any layout :func:`builders.options.read_options` accepts. It reports:

- per guesser, the consistency S over R sampled blind answers (exactly the curation's scoring,
  :func:`recipes.curation.guessers.score_records`, cached and resumable), its distribution, and the questions with
  S >= tau;
- the shortcut baselines of :mod:`recipes.evaluation.surgiq.shortcuts` (longest option, lexical overlap, unique
  tokens);
- option-position balance of the answers (counts per letter, chi-square against uniform, scipy);
- the correct-vs-distractor length gap in words (the Sureon paper's Fig. 9 as a plot).

Questions without options or an event order (SM summaries, open answers) are counted and listed as not audited.
Writes ``audit.md``, ``audit.json``, ``flagged.jsonl`` and ``length_gap.png``, ``consistency.png``, ``positions.png``.

Not sharded over ranks as ``sureon eval`` is (:mod:`recipes.evaluation.ranks`): its sampling is
:func:`recipes.curation.guessers.score_records`, shared with ``sureon curate``, which cuts its batches over the
questions its cache does not hold yet and seeds each batch's sampling from the batch's question ids, and its cache is
the one file ``--cache`` names, which ``sureon curate`` reads too. Ranks would need their own logs beside that file
and one batch plan computed alike on every rank: a change to curation's scoring and cache for both commands, not to
the audit alone. A guesser behind an endpoint (``backend=openai``) already sends its requests concurrently.
"""

import argparse
import json
from collections import Counter
from pathlib import Path

from builders.arguments import positive_float, positive_int, seed
from builders.errors import InputError
from builders.options import LETTERS, OptionError, parse_order, read_options, resolve_answer
from builders.plots import pyplot, save_figure
from recipes.curation.guessers import (
    DEFAULT_TAU,
    DEFAULT_TEMPERATURE,
    DEFAULT_TRIALS,
    TAU,
    Sampling,
    ScoreCache,
    cache_label,
    check_guesser_names,
    check_guesser_spec,
    is_scored,
    load_guesser,
    score_records,
)


def category_of(row: dict) -> str:
    from builders.sureon.categories import resolve_category

    if row.get("category"):
        return resolve_category(str(row["category"]))[0]
    return str(row.get("question_type") or row.get("domain") or "all")


def normalise_row(row: dict, position: int, source: str) -> dict:
    """One row of any MCQ schema -> the fields the blind prompt and the audit read."""
    if not str(row.get("question") or "").strip():
        raise InputError(f"{source} row {position}: empty question")
    try:
        options, flagged = read_options(row.get("options"))
        index = row.get("answer_index")
        if options and not (isinstance(index, int) and 0 <= index < len(options)):
            index = resolve_answer(str(row.get("answer") or ""), options, flagged)
    except OptionError as err:
        raise InputError(f"{source} row {position}: {err}; fix the row's options/answer columns") from None
    record = {
        "question_id": str(row.get("question_id") or row.get("id") or f"row-{position}"),
        "question": str(row["question"]),
        "options": options,
        "answer": options[index] if options else str(row.get("answer") or ""),
        "answer_index": index if options else -1,
        "answer_order": list(row.get("answer_order") or []),
        "answer_format": row.get("answer_format"),
        "category": category_of(row),
    }
    if record["category"] == "TO" and not options and not record["answer_order"]:  # a release row: "C,A,B"
        try:
            record["answer_order"] = parse_order(record["answer"])
        except OptionError as err:
            raise InputError(f"{source} row {position}: {err}") from None
    for key in ("start", "end", "source_id"):
        if row.get(key) is not None:
            record[key] = row[key]
    return record


def load_mcq(dataset: str, config: str | None, split: str) -> list[dict]:
    """The split's rows in the audit's fields, frames left out (every check is blind, so a build's frames, embedded
    or stored as files, are never read)."""
    from builders.build_loading import load_build

    ds = load_build(dataset, config, split)
    ds = ds.remove_columns([c for c in ("frames", "frame_timestamps") if c in ds.column_names])
    if "question" not in ds.column_names or not {"options", "answer_order"} & set(ds.column_names):
        raise InputError(f"{dataset} ({config}/{split}) needs question and options (or answer_order) columns")
    source = f"{dataset} ({config or 'default'}/{split})"
    return [normalise_row(row, i, source) for i, row in enumerate(ds)]


# ------------------------------------------------------------------------------------------------------------ checks


def word_count(text: str) -> int:
    return len(str(text).split())


def length_gap(records: list[dict]) -> dict:
    """Correct-answer minus mean-distractor length in words, overall and per category, and how often the correct
    option is strictly the longest (against 1 / options expected without a length cue)."""
    gaps: dict[str, list[float]] = {}
    longest = 0
    for record in records:
        correct = word_count(record["answer"])
        distractors = [word_count(o) for i, o in enumerate(record["options"]) if i != record["answer_index"]]
        gaps.setdefault(record["category"], []).append(correct - sum(distractors) / len(distractors))
        longest += correct > max(distractors)
    everything = [g for values in gaps.values() for g in values]
    return {
        "mean_gap_words": sum(everything) / len(everything),
        "correct_is_longest": longest / len(records),
        "per_category": {c: sum(v) / len(v) for c, v in sorted(gaps.items())},
    }


def position_balance(records: list[dict]) -> dict:
    """Answer positions per option count, with a chi-square test against uniform positions."""
    from scipy.stats import chisquare

    result = {}
    for size in sorted({len(r["options"]) for r in records}):
        group = [r["answer_index"] for r in records if len(r["options"]) == size]
        counts = Counter(group)
        observed = [counts[i] for i in range(size)]
        p_value = float(chisquare(observed).pvalue) if len(group) >= size else None
        result[str(size)] = {"counts": dict(zip(LETTERS[:size], observed, strict=True)), "chi2_p": p_value}
    return result


def consistency_summary(records: list[dict], scores: dict[str, dict], sampling: Sampling, tau: float) -> dict:
    values = [scores[r["question_id"]]["consistency"] for r in records]
    histogram = Counter(round(v * sampling.trials) for v in values)
    flagged = [r for r in records if scores[r["question_id"]]["consistency"] >= tau]
    per_category: dict[str, list[int]] = {}
    for record in records:
        per_category.setdefault(record["category"], []).append(scores[record["question_id"]]["consistency"] >= tau)
    return {
        "mean_consistency": sum(values) / len(values),
        "histogram": {f"{k}/{sampling.trials}": histogram[k] for k in range(sampling.trials + 1)},
        "flagged": len(flagged),
        "flagged_rate": len(flagged) / len(records),
        "flagged_per_category": {c: sum(v) / len(v) for c, v in sorted(per_category.items())},
    }


# ------------------------------------------------------------------------------------------------------------- plots


def plot_length_gap(records: list[dict], path: Path) -> None:
    """Word-count distributions of correct answers and distractors (the Sureon paper's Fig. 9)."""
    plt = pyplot()
    correct = [word_count(r["answer"]) for r in records]
    distractors = [word_count(o) for r in records for i, o in enumerate(r["options"]) if i != r["answer_index"]]
    fig, ax = plt.subplots(figsize=(6, 3.5), dpi=100)
    bins = range(max(correct + distractors) + 2)
    ax.hist(distractors, bins=bins, density=True, alpha=0.6, label="distractors")
    ax.hist(correct, bins=bins, density=True, alpha=0.6, label="correct answers")
    ax.set_xlabel("words per option")
    ax.set_ylabel("density")
    ax.legend()
    save_figure(fig, path)


def plot_consistency(summaries: dict[str, dict], tau: float, path: Path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.5), dpi=100)
    width = 0.8 / max(1, len(summaries))
    for i, (name, summary) in enumerate(summaries.items()):
        labels = list(summary["histogram"])
        ax.bar([x + i * width for x in range(len(labels))], list(summary["histogram"].values()), width, label=name)
    ax.set_xticks([x + 0.4 - width / 2 for x in range(len(labels))], labels)
    ax.set_xlabel(f"consistency S (flagged when S >= {tau:.2f})")
    ax.set_ylabel("questions")
    ax.legend(fontsize=8)
    save_figure(fig, path)


def plot_positions(balance: dict, path: Path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.5), dpi=100)
    for size, row in balance.items():
        total = sum(row["counts"].values())
        ax.plot(list(row["counts"]), [n / total for n in row["counts"].values()], marker="o", label=f"{size} options")
        ax.axhline(1 / int(size), linestyle=":", color="grey")
    ax.set_xlabel("answer position")
    ax.set_ylabel("share of questions")
    ax.legend(fontsize=8)
    save_figure(fig, path)


# -------------------------------------------------------------------------------------------------------------- run


def audit(records: list[dict], guessers: list, cache: ScoreCache, sampling: Sampling, tau: float) -> tuple[dict, list]:
    """The audit report and the flagged questions (one row per guesser and question with S >= tau)."""
    from recipes.evaluation.surgiq.shortcuts import shortcut_accuracy

    audited = [r for r in records if is_scored(r)]
    mcq = [r for r in audited if r["options"]]
    report: dict = {
        "num_questions": len(records),
        "audited": len(audited),
        "not_audited": sorted(r["question_id"] for r in records if not is_scored(r)),
        "settings": {
            "trials": sampling.trials,
            "temperature": sampling.temperature,
            "seed": sampling.seed,
            "tau": tau,
        },
        "guessers": {},
        "system_prompts": {guesser.name: guesser.system_prompt for guesser in guessers},
    }
    flagged = []
    for guesser in guessers:
        scores = score_records(guesser, audited, sampling, cache, stage="audit")
        report["guessers"][guesser.name] = consistency_summary(audited, scores, sampling, tau) if audited else {}
        flagged += [
            {"guesser": guesser.name, "question_id": r["question_id"], "category": r["category"]}
            | {"consistency": scores[r["question_id"]]["consistency"], "outputs": scores[r["question_id"]]["outputs"]}
            for r in audited
            if scores[r["question_id"]]["consistency"] >= tau
        ]
    if mcq:
        report["shortcuts"] = shortcut_accuracy(mcq, group_key="category")
        report["positions"] = position_balance(mcq)
        report["length_gap"] = length_gap(mcq)
    return report, flagged


def report_markdown(report: dict, title: str) -> str:
    settings = report["settings"]
    lines = [f"# Blind-answerability audit: {title}", ""]
    lines.append(
        f"{report['num_questions']} questions, {report['audited']} audited "
        f"({len(report['not_audited'])} without options or order are not). "
        f"R = {settings['trials']} trials at T = {settings['temperature']}; flagged when S >= {settings['tau']:.2f}."
    )
    lines += [
        "",
        "## Guessers",
        "",
        "| guesser | mean S | flagged | flagged (%) | S histogram |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, g in report["guessers"].items():
        if g:
            histogram = ", ".join(f"{k}: {v}" for k, v in g["histogram"].items())
            rate = 100 * g["flagged_rate"]
            lines.append(f"| {name} | {g['mean_consistency']:.3f} | {g['flagged']} | {rate:.1f} | {histogram} |")
    if "shortcuts" in report:
        from recipes.evaluation.surgiq.shortcuts import shortcuts_markdown

        lines += [
            "",
            shortcuts_markdown(report["shortcuts"], "shortcut baselines per category").replace("# ", "## ", 1),
        ]
        gap = report["length_gap"]
        lines += ["## Length gap (Fig. 9: length_gap.png)", ""]
        lines.append(
            f"Correct answers are {gap['mean_gap_words']:+.2f} words longer than the mean distractor; the correct "
            f"option is strictly the longest in {100 * gap['correct_is_longest']:.1f}% of questions."
        )
        lines += [
            "",
            "## Answer positions (positions.png)",
            "",
            "| options | counts | chi-square p |",
            "| --- | --- | --- |",
        ]
        for size, row in report["positions"].items():
            p_value = "-" if row["chi2_p"] is None else f"{row['chi2_p']:.3g}"
            lines.append(f"| {size} | {', '.join(f'{k}: {v}' for k, v in row['counts'].items())} | {p_value} |")
    return "\n".join(lines) + "\n"


def run(args) -> int:
    from builders.outputs import staged_output

    check_guesser_names([("--guesser", spec) for spec in args.guesser])
    for spec in args.guesser:
        check_guesser_spec(spec)
    cache = ScoreCache(args.cache or Path(f"{args.out}.cache") / "scores.jsonl", label=cache_label(args.cache))
    records = load_mcq(args.dataset, args.config, args.split)
    sampling = Sampling(args.trials, args.temperature, args.seed)
    guessers = [load_guesser(s, cache_dir=cache.path.parent, max_new_tokens=args.max_new_tokens) for s in args.guesser]
    report, flagged = audit(records, guessers, cache, sampling, args.tau)
    title = f"{args.dataset} ({args.config or 'default'}/{args.split})"
    markdown = report_markdown(report, title)
    with staged_output(args.out, args.overwrite) as staging:
        (staging / "audit.json").write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
        (staging / "audit.md").write_text(markdown)
        (staging / "flagged.jsonl").write_text("".join(json.dumps(f, ensure_ascii=False) + "\n" for f in flagged))
        if report["guessers"] and report["audited"]:
            plot_consistency(report["guessers"], args.tau, staging / "consistency.png")
        if "positions" in report:
            mcq = [r for r in records if is_scored(r) and r["options"]]
            plot_length_gap(mcq, staging / "length_gap.png")
            plot_positions(report["positions"], staging / "positions.png")
    print(markdown)
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("--dataset", required=True, help="a built folder, a Hub id, or any question/options dataset")
    parser.add_argument("--config", help="dataset config (e.g. bench, validation; SurgiQ: default)")
    parser.add_argument("--split", default="test")
    parser.add_argument(
        "--guesser",
        action="append",
        required=True,
        metavar="SPEC",
        help="model=PATH_OR_ID[,backend=transformers|vllm|openai][,name=...][,system_prompt_file=PATH]; repeatable",
    )
    parser.add_argument("--trials", type=positive_int, default=DEFAULT_TRIALS, help="R answers per question")
    parser.add_argument("--temperature", type=positive_float, default=DEFAULT_TEMPERATURE, help="sampling")
    parser.add_argument("--tau", type=TAU, default=DEFAULT_TAU, help="flagged when S >= tau (0 < tau <= 1)")
    parser.add_argument("--seed", type=seed, default=0)
    parser.add_argument("--max-new-tokens", type=positive_int, default=32)
    parser.add_argument("--cache", type=Path, help="score cache (default: OUT.cache/scores.jsonl)")
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--overwrite", action="store_true")
    return parser


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], epilog=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    return add_arguments(parser)


def main(argv: list[str] | None = None) -> int:
    return run(make_parser().parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
