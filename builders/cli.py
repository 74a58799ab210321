"""The ``sureon`` command line.

    sureon build sureon --release DIR [--videos DIR] --out OUT [--configs bench db ...]
    sureon push OUT --repo-id ORG/NAME [--private]
    sureon eval sureon --model PATH_OR_ID --dataset DIR_OR_ID --mode visual|blind|both --out DIR
    sureon report sureon PRED... --out DIR [--human PRED]
    sureon report public PRED... --out DIR [--exclude-videos BENCHMARK:MODE=FILE]

Each builder registers its own sub-command here; heavy imports happen inside the handlers so ``--help`` is fast.
"""

import argparse
import sys
from pathlib import Path


def _size(text: str) -> int:
    units = {"KB": 1024, "MB": 1024**2, "GB": 1024**3}
    for unit, factor in units.items():
        if text.upper().endswith(unit):
            return int(float(text[: -len(unit)]) * factor)
    return int(text)


def add_build_sureon(builds) -> None:
    from builders.frames import FramePolicy
    from builders.sureon import CONFIGS, MISSING_VIDEO_MODES

    parser = builds.add_parser(
        "sureon",
        help="Sureon-DB, validation pools and the benchmark from the official release (+ local videos)",
        description="Build the Sureon configs in the Hub layout from the official annotation-only release.",
    )
    parser.add_argument("--release", required=True, type=Path, help="the downloaded release folder (parquet files)")
    parser.add_argument("--videos", type=Path, help="folder of source videos named <source_id>.<ext>")
    parser.add_argument("--out", required=True, type=Path, help="output folder (Hub layout)")
    parser.add_argument(
        "--configs", nargs="+", choices=list(CONFIGS), help="configs to build (default: all available)"
    )
    parser.add_argument("--column", action="append", metavar="FIELD=COLUMN", help="map a field to a release column")
    parser.add_argument("--columns-file", help="YAML file of field: column mappings")
    parser.add_argument("--on-missing-video", choices=MISSING_VIDEO_MODES, default="error")
    parser.add_argument("--max-frames", type=int, default=FramePolicy.max_frames)
    parser.add_argument("--min-frames", type=int, default=FramePolicy.min_frames)
    parser.add_argument("--max-side", type=int, default=FramePolicy.max_side, help="longest JPEG side (0: keep)")
    parser.add_argument("--jpeg-quality", type=int, default=FramePolicy.jpeg_quality)
    parser.add_argument("--cache-dir", type=Path, help="frame cache (default: ~/.cache/sureon/frames)")
    parser.add_argument("--num-workers", type=int, default=1, help="videos decoded in parallel")
    parser.add_argument(
        "--shuffle-options", action="store_true", help="reorder stored options with a seed from question_id"
    )
    parser.add_argument("--max-shard-size", type=_size, default="500MB", help="parquet shard size, e.g. 500MB")
    parser.add_argument("--overwrite", action="store_true", help="replace OUT if it exists")
    parser.set_defaults(handler=run_build_sureon)


def run_build_sureon(args) -> int:
    from builders.frames import FramePolicy
    from builders.release import ColumnMapping
    from builders.sureon import BuildOptions, build_sureon, default_cache_dir

    options = BuildOptions(
        release=args.release,
        out=args.out,
        videos=args.videos,
        configs=args.configs,
        mapping=ColumnMapping.from_cli(args.column, args.columns_file),
        on_missing_video=args.on_missing_video,
        policy=FramePolicy(args.max_frames, args.min_frames, args.max_side or None, args.jpeg_quality),
        cache_dir=args.cache_dir or default_cache_dir(),
        num_workers=args.num_workers,
        shuffle_options=args.shuffle_options,
        overwrite=args.overwrite,
        max_shard_bytes=args.max_shard_size,
    )
    report = build_sureon(options)
    print(report.summary())
    print(f'Load it with: datasets.load_dataset("{args.out}", "{report.configs[0].name}")')
    return 0


def add_push(commands) -> None:
    parser = commands.add_parser("push", help="upload a built folder to the Hub as a dataset repo")
    parser.add_argument("folder", type=Path)
    parser.add_argument("--repo-id", required=True, help="ORG/NAME")
    parser.add_argument("--private", action="store_true")
    parser.set_defaults(handler=run_push)


def run_push(args) -> int:
    from builders.hub import push_folder

    url = push_folder(args.folder, args.repo_id, private=args.private)
    print(f"Pushed {args.folder} to {url}")
    return 0


def add_eval_sureon(evals) -> None:
    from recipes.evaluate_sureon import add_arguments

    parser = evals.add_parser(
        "sureon",
        help="a model on the Sureon benchmark, visual and blind (predictions.jsonl + summary.json)",
        description="Evaluate a model on the Sureon benchmark (see recipes/evaluate_sureon.py).",
    )
    add_arguments(parser)
    parser.set_defaults(handler=run_eval_sureon)


def run_eval_sureon(args) -> int:
    from recipes.evaluate_sureon import run

    return run(args)


def add_report_sureon(reports) -> None:
    from recipes.report_sureon import add_arguments

    parser = reports.add_parser(
        "sureon",
        help="Sureon leaderboard report (Table 3 layout, CIs, pairwise McNemar) from prediction files",
        description="Report of the Sureon benchmark from any number of models' predictions.jsonl files.",
    )
    add_arguments(parser)
    parser.set_defaults(handler=run_report_sureon)


def run_report_sureon(args) -> int:
    from recipes.report_sureon import main

    print(f"Wrote {main(args) / 'report.md'}")
    return 0


def add_report_public(reports) -> None:
    from recipes.report_public import add_arguments

    parser = reports.add_parser(
        "public",
        help="public perception benchmarks report (video-averaged F1, CVS accuracy, mAP50) from prediction files",
        description="Report of the public perception benchmarks (seed D.3) from JSONL prediction files.",
    )
    add_arguments(parser)
    parser.set_defaults(handler=run_report_public)


def run_report_public(args) -> int:
    from recipes.report_public import main

    print(f"Wrote {main(args) / 'report.md'}")
    return 0


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sureon", description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="build a dataset in the Hub layout")
    builds = build.add_subparsers(dest="dataset", required=True)
    add_build_sureon(builds)
    add_push(commands)
    evaluate = commands.add_parser("eval", help="evaluate a model on a benchmark")
    evals = evaluate.add_subparsers(dest="benchmark", required=True)
    add_eval_sureon(evals)
    report = commands.add_parser("report", help="render evaluation reports from prediction files")
    reports = report.add_subparsers(dest="benchmark", required=True)
    add_report_sureon(reports)
    add_report_public(reports)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = make_parser().parse_args(argv)
    try:
        return args.handler(args)
    except (ValueError, FileNotFoundError, FileExistsError, RuntimeError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
