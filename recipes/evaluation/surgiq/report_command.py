"""``sureon report surgiq``: the command line of the SurgiQ tables (:mod:`recipes.evaluation.surgiq.report`), apart
from them so that the parser loads nothing heavy; the report and its readers load when the command runs."""

from pathlib import Path

from builders.arguments import positive_int


def add_arguments(parser) -> None:
    parser.add_argument("runs", nargs="+", type=Path, help="run folders or their predictions.jsonl")
    parser.add_argument("--labels", nargs="+", help="model names, one per run (default: the model in report.json)")
    parser.add_argument("--bins", type=positive_int, default=10, help="ECE bins")
    parser.add_argument("--out", type=Path, help="write surgiq_tables.md and surgiq_tables.json here")


def run(args) -> int:
    from recipes.evaluation.surgiq.report import build_report, load_runs, report_markdown, write_report

    report = build_report(load_runs(args.runs, args.labels), args.bins)
    if args.out:
        write_report(report, args.out)
    print(report_markdown(report))
    return 0
