"""``sureon near-duplicates surgiq``: the command line of the near-duplicate search
(:mod:`builders.surgiq.near_duplicates`); the source files are read as ``sureon build surgiq`` reads them.

The search (numpy, scipy, the SurgiQ reader) loads when the command runs, so the options left out take the search's
own defaults then, and the settings written beside the flagged pairs are the ones used.
"""

from pathlib import Path

from builders.arguments import float_range, non_negative_int, positive_int
from builders.surgiq.build_command import add_source_arguments, source_reading


def add_arguments(parser) -> None:
    add_source_arguments(parser)
    parser.add_argument("--against", required=True, nargs="+", type=Path, help="external question files")
    parser.add_argument("--out", required=True, type=Path, help="folder for flagged_pairs.csv and dedupe_ids.txt")
    parser.add_argument("--threshold", type=float_range(0, 1, low_open=True), help="overlap to flag a pair")
    parser.add_argument("--ngram", type=positive_int, help="words per n-gram")
    parser.add_argument(
        "--max-df", type=non_negative_int, help="n-grams in more SurgiQ questions nominate no pairs (0: all)"
    )
    parser.add_argument("--external-question-column", help="question column of the external files")


def run(args) -> int:
    from builders.surgiq.near_duplicates import (
        DEFAULT_MAX_DF,
        DEFAULT_THRESHOLD,
        NGRAM,
        find_near_duplicates,
        write_near_duplicates,
    )
    from builders.surgiq.reader import read_surgiq

    given = {"threshold": args.threshold, "ngram": args.ngram, "max_df": args.max_df}
    defaults = {"threshold": DEFAULT_THRESHOLD, "ngram": NGRAM, "max_df": DEFAULT_MAX_DF}
    settings = {name: defaults[name] if value is None else value for name, value in given.items()}
    mapping, aliases = source_reading(args)
    records, _ = read_surgiq(args.source, mapping, aliases)
    matches, counts, texts = find_near_duplicates(
        records,
        args.against,
        threshold=settings["threshold"],
        n=settings["ngram"],
        max_df=settings["max_df"],
        question_column=args.external_question_column,
    )
    print(write_near_duplicates(args.out, records, matches, counts, texts, settings).summary())
    return 0
