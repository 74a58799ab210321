"""``sureon shortcuts surgiq``: the command line of the shortcut baselines
(:mod:`recipes.evaluation.surgiq.shortcuts`, which ``sureon audit`` runs on Sureon too)."""

from pathlib import Path

from recipes.evaluation.surgiq.shortcuts import run_shortcuts


def add_arguments(parser) -> None:
    parser.add_argument("--dataset", required=True, help="a folder built by `sureon build surgiq`, or its Hub id")
    parser.add_argument("--config", default="default")
    parser.add_argument("--split", default="test")
    parser.add_argument("--out", type=Path, help="write shortcuts.md and shortcuts.json here")


def run(args) -> int:
    print(run_shortcuts(args.dataset, args.config, args.split, args.out))
    return 0
