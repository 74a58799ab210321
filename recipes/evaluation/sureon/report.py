"""Leaderboard report of the Sureon benchmark from any number of models' prediction files (the Sureon paper, Tables 3,
14-18).

    sureon report sureon results/qwen3vl-8b/predictions.jsonl "Sureon-VLM=results/sureon-vlm/predictions.jsonl" \
        --human human_baseline.jsonl --out results/table3

A file may hold several models (named by its ``model`` field) or be named on the command line (``NAME=PATH``).
VLMEvalKit's prediction tables of the datasets ``sureon export vlmevalkit`` writes (``MODEL/MODEL_Sureon.xlsx`` or
``.tsv``) are read as well: each row's output is parsed and scored as ``sureon eval sureon`` scores it
(``recipes/evaluation/prediction_tables.py``), the model named after the file unless ``NAME=PATH`` says otherwise.
The human baseline is a prediction file too (visual mode, no sequence summaries). The report folder holds
``report.md`` (the Table 3 layout, confidence-interval tables in the style of Tables 14-17, the pairwise McNemar
table in the style of Table 18, sequence summaries, unparseable answers, the runs' settings), ``report.json`` (every
number, unrounded) and ``accuracy.png`` / ``multimodal_gain.png``.

Table 3 shows the Sureon paper's printed rows (``--paper``, default ``paper_results/sureon_paper_table3.json``;
``--no-paper`` leaves them out) beside ours, a "numbers from" column telling them apart: the paper's Random and Human
rows first, then each paper model followed by the runs of its preset (a ``summary.json`` next to a predictions file
names the preset and the paper row it reproduces, as ``sureon eval sureon --preset`` writes it), then the other runs.
The paper's numbers are shown as printed (MG included), ours are computed from the predictions.

    sureon report sureon --accuracies recipes/evaluation/paper_results/sureon_paper_table14.json --out results/table14

renders a Table 14 from stated accuracies alone (a 0/1 bootstrap depends only on the count correct), next to the
printed intervals: the consistency check of our interval code against the Sureon paper's.

This module is the command; the numbers are :mod:`recipes.evaluation.sureon.report_statistics`'s, their tables and
plots :mod:`recipes.evaluation.sureon.report_rendering`'s.
"""

import argparse
import json
from pathlib import Path

from builders.arguments import float_range, non_negative_int, positive_int
from builders.errors import InputError
from recipes.evaluation.reporting import load_run_settings, write_report
from recipes.evaluation.stats import N_RESAMPLES
from recipes.evaluation.sureon.report_rendering import (
    headline,
    plot_accuracy,
    plot_gain,
    render_accuracies,
    render_markdown,
    table3,
)
from recipes.evaluation.sureon.report_statistics import (
    PAPER_TABLE3,
    accuracies_report,
    build_report,
    load_models,
    load_paper_table3,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("predictions", nargs="*", metavar="PRED", help="predictions.jsonl, or NAME=predictions.jsonl")
    parser.add_argument("--out", required=True, type=Path, help="report folder")
    parser.add_argument("--human", metavar="PRED", help="human baseline predictions (named 'Human' unless NAME=)")
    parser.add_argument(
        "--accuracies", type=Path, help="render a Table 14 from stated accuracies (JSON rows of model, n, accuracy)"
    )
    parser.add_argument("--resamples", type=positive_int, default=N_RESAMPLES, help="bootstrap resamples over items")
    parser.add_argument(
        "--mcnemar-exact-below",
        type=non_negative_int,
        metavar="N",
        help="chi-square McNemar once a pair has N or more discordant items (default: exact for every pair)",
    )
    parser.add_argument(
        "--alpha",
        type=float_range(0.0, 1.0, low_open=True),
        default=0.05,
        help="family-wise level of the Holm correction",
    )
    parser.add_argument(
        "--paper", type=Path, default=PAPER_TABLE3, help="the Sureon paper's Table 3 rows (JSON) printed beside ours"
    )
    parser.add_argument("--no-paper", action="store_true", help="print our rows only")
    parser.add_argument("--overwrite", action="store_true", help="replace OUT if it exists")


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    return parser


def report_from_arguments(args: argparse.Namespace) -> Path:
    """The report folder the command's arguments ask for, written; its path."""
    if bool(args.predictions or args.human) == bool(args.accuracies):
        raise InputError("give prediction files (and/or --human) or --accuracies, not both and not neither")
    if args.accuracies:
        data = accuracies_report(args.accuracies, args.resamples)
        return write_report(args.out, render_accuracies(data), data, args.overwrite)
    models, human = load_models(args.predictions, args.human)
    paper = None if getattr(args, "no_paper", False) else load_paper_table3(args.paper)
    runs = load_run_settings(args.predictions)
    data = build_report(models, human, args.resamples, args.mcnemar_exact_below, args.alpha, paper, runs)
    plots = [("accuracy.png", lambda path: plot_accuracy(data, path))]
    if any(model["multimodal_gain"] for model in data["models"]):
        plots.append(("multimodal_gain.png", lambda path: plot_gain(data, path)))
    return write_report(args.out, render_markdown(data), data, args.overwrite, plots)


def run(args: argparse.Namespace) -> int:
    out = report_from_arguments(args)
    if not args.accuracies:
        data = json.loads((out / "report.json").read_text(encoding="utf-8"))
        print("## Results (Table 3 layout)\n\n" + table3(data) + "\n" + headline(data))
    print(f"Wrote {out / 'report.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(run(make_parser().parse_args()))
