"""The ``sureon`` command line.

    sureon build sureon --release DIR [--videos DIR] --out OUT [--configs bench db ...]
    sureon build surgiq --source FILE [FILE ...] --out OUT [--exclude-ids dedupe_ids.txt]
    sureon videos fetch --release DIR --out VIDEOS_DIR [--configs bench ...] [--sections] [--on-rate-limit stop|wait]
    sureon push OUT --repo-id ORG/NAME [--private]
    sureon eval sureon --model PATH_OR_ID --dataset DIR_OR_ID --mode visual|blind|both --out DIR
    sureon eval public --model PATH_OR_ID --dataset PUBLIC_BUILD --benchmark bench-... [...] --out DIR
    sureon eval surgiq --model PATH_OR_ID --dataset DIR_OR_ID [--config default|shuffled] [--shots 0..3] --out DIR
    sureon report sureon PRED... --out DIR [--human PRED]
    sureon report public PRED... --out DIR [--exclude-videos BENCHMARK:MODE=FILE]
    sureon report surgiq RUN [RUN ...] [--out DIR]
    sureon near-duplicates surgiq --source FILE --against EXTERNAL [...] --out DIR
    sureon shortcuts surgiq --dataset DIR_OR_ID [--config default] [--out DIR]
    sureon export lm-eval --dataset SURGIQ_BUILD --out DIR
    sureon export lmms-eval --dataset SUREON_BUILD --out DIR
    sureon export vlmevalkit [--dataset SUREON_BUILD] [--public PUBLIC_BUILD] --out DIR
    sureon export sft --format swift|llava --dataset BUILD [--config db] --out FILE
    sureon pipeline split|stage1|stage2 ...  (the construction pipeline, see sureon/pipeline.py)
    sureon curate --dataset DIR_OR_ID --config train_all|validation --guesser SPEC [...] --out DIR
    sureon audit --dataset DIR_OR_ID --guesser SPEC [--guesser SPEC ...] --out DIR
    sureon review add-user|remove-user|assign|serve|backup|export|agreement --db review.sqlite ...
    sureon world --out DIR [--config world.yaml] [--shortcut train:length=0.5 ...]
    sureon reproduce --out DIR [--release DIR --videos DIR --shortcuts FILE]
    sureon plan --config RECIPE.yaml [--num-gpus 4] [--gpu-memory 141] [--synthetic-frames 768x432]

Each builder registers its own sub-command here; heavy imports happen inside the handlers so ``--help`` is fast.

A mistake is one line (``error: ...``, exit 2) and a bug a traceback (:func:`builders.errors.report_mistakes`);
``sureon --debug ...`` or ``SUREON_DEBUG=1`` shows the traceback of a mistake too. Before any command runs, its
``--out`` is checked against every path among its arguments: no command writes over, inside or around its own
inputs (:func:`builders.outputs.check_output_location`), and ``--out`` must be writable.
"""

import argparse
import importlib
import sys
from pathlib import Path

from builders.arguments import (
    byte_size,
    float_range,
    fraction,
    int_range,
    non_negative_int,
    positive_float,
    positive_int,
)


def add_build_sureon(builds) -> None:
    from builders.sureon.build import BLURRED_BY_DEFAULT, CONFIGS, FRAMES_LAYOUTS, MISSING_VIDEO_MODES
    from builders.sureon.frames import DECODE_DEVICES, FramePolicy

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
    parser.add_argument("--max-frames", type=positive_int, default=FramePolicy.max_frames)
    parser.add_argument("--min-frames", type=positive_int, default=FramePolicy.min_frames)
    parser.add_argument(
        "--max-side", type=non_negative_int, default=FramePolicy.max_side, help="longest JPEG side (0: keep)"
    )
    parser.add_argument("--jpeg-quality", type=int_range(1, 100), default=FramePolicy.jpeg_quality)
    parser.add_argument(
        "--blur",
        default="text,faces",
        help="blur before encoding: text (OCR), faces, detector=PATH (YOLO weights); default text,faces",
    )
    parser.add_argument(
        "--blur-configs",
        nargs="+",
        choices=list(CONFIGS),
        default=list(BLURRED_BY_DEFAULT),
        help="configs whose frames are blurred (default: the evaluation configs)",
    )
    parser.add_argument("--no-blur", action="store_true", help="blur nothing (the card then says so)")
    parser.add_argument("--cache-dir", type=Path, help="frame cache (default: ~/.cache/sureon/frames)")
    parser.add_argument("--num-workers", type=positive_int, default=1, help="videos decoded in parallel")
    parser.add_argument(
        "--decode-device",
        choices=DECODE_DEVICES,
        default="auto",
        help="decode on torchcodec's CUDA device or the CPU (auto: the GPU when torch sees one)",
    )
    parser.add_argument(
        "--frames-layout",
        choices=FRAMES_LAYOUTS,
        default="files",
        help="frames of the training configs (db, train_all): JPEG files under media/, each stored once, rows holding "
        "relative paths (default), or embedded in every row; bench and the validation configs always embed",
    )
    parser.add_argument(
        "--shuffle-options", action="store_true", help="reorder stored options with a seed from question_id"
    )
    parser.add_argument("--max-shard-size", type=byte_size, default="500MB", help="parquet shard size, e.g. 500MB")
    parser.add_argument("--overwrite", action="store_true", help="replace OUT if it exists")
    parser.set_defaults(handler=run_build_sureon)


def run_build_sureon(args) -> int:
    from builders.blur import BlurSettings
    from builders.sureon.build import BuildOptions, build_sureon, default_cache_dir
    from builders.sureon.frames import FramePolicy
    from builders.sureon.release import ColumnMapping

    options = BuildOptions(
        release=args.release,
        out=args.out,
        videos=args.videos,
        configs=args.configs,
        mapping=ColumnMapping.from_cli(args.column, args.columns_file),
        on_missing_video=args.on_missing_video,
        policy=FramePolicy(args.max_frames, args.min_frames, args.max_side or None, args.jpeg_quality),
        blur=None if args.no_blur else BlurSettings.parse(args.blur),
        blur_configs=tuple(args.blur_configs),
        cache_dir=args.cache_dir or default_cache_dir(),
        num_workers=args.num_workers,
        decode_device=args.decode_device,
        frames_layout=args.frames_layout,
        shuffle_options=args.shuffle_options,
        overwrite=args.overwrite,
        max_shard_bytes=args.max_shard_size,
    )
    report = build_sureon(options)
    print(report.summary())
    loadable = next(config.name for config in report.configs if config.written)
    print(f'Load it with: datasets.load_dataset("{args.out}", "{loadable}")')
    return 0


def _add_surgiq_source_arguments(parser) -> None:
    parser.add_argument("--source", required=True, nargs="+", type=Path, help="JSON, JSONL, CSV or parquet file(s)")
    parser.add_argument("--column", action="append", metavar="FIELD=COLUMN", help="map a field to a source column")
    parser.add_argument("--columns-file", help="YAML file of field: column mappings")
    parser.add_argument(
        "--alias", action="append", metavar="FIELD:VALUE=CANONICAL", help="accept another spelling of a value"
    )


def _surgiq_source(args):
    from builders.surgiq.build import SurgiqColumns, parse_aliases

    return SurgiqColumns.from_cli(args.column, args.columns_file), parse_aliases(args.alias)


def add_build_surgiq(builds) -> None:
    parser = builds.add_parser(
        "surgiq",
        help="SurgiQ text MCQs (configs default and shuffled) from your JSON / JSONL / CSV / parquet files",
        description="Build SurgiQ in the Hub layout: configs default (stored option order) and shuffled.",
    )
    _add_surgiq_source_arguments(parser)
    parser.add_argument("--out", required=True, type=Path, help="output folder (Hub layout)")
    parser.add_argument("--exclude-ids", type=Path, help="dedupe list: ids to leave out (one per line, # comments)")
    parser.add_argument(
        "--configs", nargs="+", choices=["default", "shuffled"], help="configs to build (default: both)"
    )
    parser.add_argument("--max-shard-size", type=byte_size, default="500MB", help="parquet shard size, e.g. 500MB")
    parser.add_argument("--overwrite", action="store_true", help="replace OUT if it exists")
    parser.set_defaults(handler=run_build_surgiq)


def run_build_surgiq(args) -> int:
    from builders.surgiq.build import BuildOptions, build_surgiq

    mapping, aliases = _surgiq_source(args)
    report = build_surgiq(
        BuildOptions(
            sources=args.source,
            out=args.out,
            mapping=mapping,
            aliases=aliases,
            exclude_ids=args.exclude_ids,
            configs=args.configs,
            overwrite=args.overwrite,
            max_shard_bytes=args.max_shard_size,
        )
    )
    print(report.summary())
    print(f'Load it with: datasets.load_dataset("{args.out}", "default", split="test")')
    return 0


def add_near_duplicates(commands) -> None:
    from builders.surgiq.near_duplicates import DEFAULT_MAX_DF, DEFAULT_THRESHOLD, NGRAM

    group = commands.add_parser("near-duplicates", help="n-gram overlap of a benchmark against external questions")
    datasets = group.add_subparsers(dest="dataset", required=True)
    parser = datasets.add_parser(
        "surgiq",
        help="flag SurgiQ questions that overlap external question banks (MedQA-, MedMCQA-style files)",
        description="Normalised 5-gram overlap of every SurgiQ question against external question files.",
    )
    _add_surgiq_source_arguments(parser)
    parser.add_argument("--against", required=True, nargs="+", type=Path, help="external question files")
    parser.add_argument("--out", required=True, type=Path, help="folder for flagged_pairs.csv and dedupe_ids.txt")
    parser.add_argument(
        "--threshold", type=float_range(0, 1, low_open=True), default=DEFAULT_THRESHOLD, help="overlap to flag a pair"
    )
    parser.add_argument("--ngram", type=positive_int, default=NGRAM, help="words per n-gram")
    parser.add_argument(
        "--max-df",
        type=non_negative_int,
        default=DEFAULT_MAX_DF,
        help="n-grams in more SurgiQ questions nominate no pairs (0: all)",
    )
    parser.add_argument("--external-question-column", help="question column of the external files")
    parser.set_defaults(handler=run_near_duplicates)


def run_near_duplicates(args) -> int:
    from builders.surgiq.build import read_surgiq
    from builders.surgiq.near_duplicates import find_near_duplicates, write_near_duplicates

    mapping, aliases = _surgiq_source(args)
    records, _ = read_surgiq(args.source, mapping, aliases)
    settings = {"threshold": args.threshold, "ngram": args.ngram, "max_df": args.max_df}
    matches, counts, texts = find_near_duplicates(
        records,
        args.against,
        threshold=args.threshold,
        n=args.ngram,
        max_df=args.max_df,
        question_column=args.external_question_column,
    )
    print(write_near_duplicates(args.out, records, matches, counts, texts, settings).summary())
    return 0


def add_report_surgiq(reports) -> None:
    parser = reports.add_parser(
        "surgiq",
        help="the SurgiQ paper's tables (4, 5, 6, A3) from several `sureon eval surgiq` runs",
        description="Accuracy, calibration, answer-order robustness and per-domain tables across models.",
    )
    parser.add_argument("runs", nargs="+", type=Path, help="run folders or their predictions.jsonl")
    parser.add_argument("--labels", nargs="+", help="model names, one per run (default: the model in report.json)")
    parser.add_argument("--bins", type=positive_int, default=10, help="ECE bins")
    parser.add_argument("--out", type=Path, help="write surgiq_tables.md and surgiq_tables.json here")
    parser.set_defaults(handler=run_report_surgiq)


def run_report_surgiq(args) -> int:
    from recipes.evaluation.surgiq.report import build_report, load_runs, report_markdown, write_report

    report = build_report(load_runs(args.runs, args.labels), args.bins)
    if args.out:
        write_report(report, args.out)
    print(report_markdown(report))
    return 0


def add_shortcuts(commands) -> None:
    group = commands.add_parser("shortcuts", help="shortcut baselines that answer without a model")
    datasets = group.add_subparsers(dest="dataset", required=True)
    parser = datasets.add_parser(
        "surgiq",
        help="longest option, lexical overlap and unique-token baselines on SurgiQ (the paper's Table A4)",
        description="Accuracy of answer-cue heuristics on a built SurgiQ dataset; no model needed.",
    )
    parser.add_argument("--dataset", required=True, help="a folder built by `sureon build surgiq`, or its Hub id")
    parser.add_argument("--config", default="default")
    parser.add_argument("--split", default="test")
    parser.add_argument("--out", type=Path, help="write shortcuts.md and shortcuts.json here")
    parser.set_defaults(handler=run_shortcuts)


def run_shortcuts(args) -> int:
    from recipes.evaluation.surgiq.shortcuts import run_shortcuts as shortcuts

    print(shortcuts(args.dataset, args.config, args.split, args.out))
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


def add_module_command(subparsers, name: str, module: str, *, help: str, description: str) -> None:
    """A sub-command implemented by ``module``'s ``add_arguments(parser)`` and ``run(args) -> exit status``."""
    implementation = importlib.import_module(module)
    parser = subparsers.add_parser(name, help=help, description=description)
    implementation.add_arguments(parser)
    parser.set_defaults(handler=implementation.run)


def add_exports(commands) -> None:
    export = commands.add_parser("export", help="tasks and training files for other tools (lm-eval, lmms-eval, ...)")
    targets = export.add_subparsers(dest="target", required=True)
    add_module_command(
        targets,
        "lm-eval",
        "recipes.export.lm_eval",
        help="SurgiQ as lm-evaluation-harness 0.4 tasks, scored like `sureon eval surgiq`",
        description="Export SurgiQ as lm-eval tasks (see recipes/export/lm_eval.py).",
    )
    add_module_command(
        targets,
        "lmms-eval",
        "recipes.export.lmms_eval",
        help="the Sureon benchmark as lmms-eval 0.7 tasks (visual, blind, both with MG) over a local build",
        description="Export the Sureon benchmark as lmms-eval tasks (see recipes/export/lmms_eval.py).",
    )
    add_module_command(
        targets,
        "vlmevalkit",
        "recipes.export.vlmevalkit",
        help="the Sureon benchmark (visual, blind, both) and the public benchmarks as VLMEvalKit datasets",
        description="Export the Sureon and public benchmarks as VLMEvalKit datasets scored by the project's own code "
        "(see recipes/export/vlmevalkit.py).",
    )
    add_module_command(
        targets,
        "sft",
        "recipes.export.sft",
        help="Sureon or public-corpus rows as ms-swift JSONL or LLaVA / qwen-vl-finetune JSON, frames by path",
        description="Export training rows for other fine-tuning frameworks (see recipes/export/sft.py).",
    )


def add_pipeline(commands) -> None:
    from sureon.pipeline import add_subcommands

    group = commands.add_parser("pipeline", help="the construction pipeline: transcripts -> QA -> distractors")
    add_subcommands(group)


def add_review(commands) -> None:
    from builders.pipeline.review.samples import DEFAULT_CONFIG

    review = commands.add_parser("review", help="expert review of the validation pool: accounts, app, exports")
    actions = review.add_subparsers(dest="action", required=True)

    def action(name: str, help_text: str, handler, dataset: bool = False):
        parser = actions.add_parser(name, help=help_text, description=help_text)
        parser.add_argument(
            "--db", required=True, type=Path, help="the review database (SQLite; `add-user` creates a new one)"
        )
        if dataset:
            parser.add_argument("--dataset", required=True, type=Path, help="a built Sureon dataset folder")
            parser.add_argument("--config", default=DEFAULT_CONFIG, help="the config under review")
        parser.set_defaults(handler=handler)
        return parser

    add_user = action(
        "add-user", "create a reviewer account (the password is read from stdin or a prompt)", run_review
    )
    add_user.add_argument("username")
    add_user.add_argument("--admin", action="store_true")
    add_user.add_argument(
        "--reset-password",
        action="store_true",
        help="set a new password of an existing account (ends its open sessions in the running app)",
    )
    remove_user = action(
        "remove-user", "remove an account: it cannot log in, its sessions end, its decisions stay", run_review
    )
    remove_user.add_argument("username")
    backup = action("backup", "copy the database while the app runs (SQLite's online backup, mode 0600)", run_review)
    backup.add_argument("--out", required=True, type=Path, help="the new backup file")
    assign = action("assign", "assign unassigned samples to reviewers (balanced, seeded)", run_review, dataset=True)
    assign.add_argument("--reviewers", nargs="+", help="usernames (default: every account)")
    assign.add_argument("--dual-fraction", type=fraction, default=0.0, help="share of each type reviewed twice")
    assign.add_argument("--seed", default="sureon-review")
    serve = action("serve", "start the review web app", run_review, dataset=True)
    serve.add_argument("--videos", type=Path, help="folder of source videos named <source_id>.<ext>")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default: this machine only)")
    serve.add_argument("--port", type=int_range(1, 65535), default=7860)
    serve.add_argument(
        "--server-name",
        action="append",
        default=[],
        metavar="NAME",
        help="a host name reviewers reach the app by (repeatable); requests for any other Host are refused",
    )
    serve.add_argument(
        "--trusted-proxy",
        action="append",
        default=[],
        metavar="ADDR",
        help="address or network of a reverse proxy whose X-Forwarded-For/-Proto are believed (repeatable); "
        "from anyone else they are ignored. The client is the rightmost X-Forwarded-For entry that is not a "
        "trusted proxy",
    )
    serve.add_argument("--tls-cert", type=Path, help="serve HTTPS with this certificate (PEM); needs --tls-key")
    serve.add_argument("--tls-key", type=Path, help="the certificate's private key (PEM)")
    serve.add_argument(
        "--session-idle-minutes", type=positive_float, default=30.0, help="log out after this long idle"
    )
    serve.add_argument(
        "--session-max-hours", type=positive_float, default=12.0, help="log out this long after logging in"
    )
    export = action("export", "write the approved bench config and the review reports", run_review, dataset=True)
    export.add_argument("--out", required=True, type=Path)
    export.add_argument("--overwrite", action="store_true")
    action("agreement", "print inter-rater agreement on the dual-reviewed subset (JSON)", run_review)


def run_review(args) -> int:
    from builders.pipeline.review import run

    return run(args)


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sureon", description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error (or SUREON_DEBUG=1)")
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="build a dataset in the Hub layout")
    builds = build.add_subparsers(dest="dataset", required=True)
    add_build_sureon(builds)
    add_build_surgiq(builds)
    add_module_command(
        builds,
        "public",
        "public_converters.build",
        help="the templated public corpus from local copies of the public surgical datasets (the Sureon paper, "
        "Appendix C)",
        description="Build the public corpus: read each source natively, template image and clip QAs, write the Hub "
        "layout. See public_converters/build.py.",
    )
    evaluate = commands.add_parser("eval", help="evaluate a model on a benchmark")
    evals = evaluate.add_subparsers(dest="benchmark", required=True)
    add_module_command(
        evals,
        "sureon",
        "recipes.evaluation.sureon.evaluate",
        help="a model on the Sureon benchmark, visual and blind (predictions.jsonl + summary.json)",
        description="Evaluate a model on the Sureon benchmark (see recipes/evaluation/sureon/evaluate.py).",
    )
    add_module_command(
        evals,
        "public",
        "recipes.evaluation.public.evaluate",
        help="a model on the public perception benchmarks (bench-* configs of a public build; one or many GPUs)",
        description="Run a model on the public benchmarks (see recipes/evaluation/public/evaluate.py).",
    )
    add_module_command(
        evals,
        "surgiq",
        "recipes.evaluation.surgiq.evaluate",
        help="deterministic log-likelihood MCQ scoring of a causal LM or VLM (text-only)",
        description="Score SurgiQ with the paper's protocol: next-token log-probabilities of the option labels.",
    )
    report = commands.add_parser("report", help="tables and statistics across models' evaluation runs")
    reports = report.add_subparsers(dest="benchmark", required=True)
    add_module_command(
        reports,
        "sureon",
        "recipes.evaluation.sureon.report",
        help="Sureon leaderboard report (Table 3 layout, CIs, pairwise McNemar) from prediction files",
        description="Report of the Sureon benchmark from any number of models' predictions.jsonl files.",
    )
    add_module_command(
        reports,
        "public",
        "recipes.evaluation.public.report",
        help="public perception benchmarks report (video-averaged F1, CVS accuracy, mAP50) from prediction files",
        description="Report of the public perception benchmarks (the Sureon paper, D.3) from JSONL prediction files.",
    )
    add_report_surgiq(reports)
    add_near_duplicates(commands)
    add_shortcuts(commands)
    add_module_command(
        commands,
        "curate",
        "recipes.curation.curate",
        help="stage 3: blind-test curation by a guesser ensemble (folds for training), then distractor hardening",
        description="Flag questions answerable without the video (the Sureon paper, Section 3.1 Stage 3, B.4); "
        "see recipes/curation/curate.py.",
    )
    add_module_command(
        commands,
        "audit",
        "recipes.curation.audit",
        help="blind-answerability audit of any MCQ dataset: guesser consistency, shortcuts, positions, length gap",
        description="Can the questions be answered without the video? See recipes/curation/audit.py.",
    )
    videos = commands.add_parser("videos", help="the source videos of the Sureon release")
    add_module_command(
        videos.add_subparsers(dest="action", required=True),
        "fetch",
        "builders.sureon.fetch",
        help="download the source videos a release needs (yt-dlp), verify them, write availability.json",
        description="Fetch the Sureon source videos into the folder `sureon build sureon --videos` reads; "
        "resumable, see builders/sureon/fetch.py.",
    )
    add_module_command(
        commands,
        "plan",
        "recipes.training.plan.command",
        help="before renting GPUs: a recipe's tokens per sample, parameters, memory per GPU and throughput",
        description="Plan a training recipe at the real size: token counts measured on its data, parameters, "
        "model-state and activation memory per GPU (ZeRO-2, ZeRO-3, FSDP), fit, expected throughput. See "
        "recipes/training/plan/.",
    )
    add_module_command(
        commands,
        "world",
        "builders.sureon.world",
        help="a synthetic Sureon release whose answers lie in the frames, with planted language shortcuts",
        description="Write a visually grounded synthetic world: a release in the official layout, its videos and "
        "the ground truth of its planted shortcuts. See builders/sureon/world.py.",
    )
    add_module_command(
        commands,
        "reproduce",
        "sureon.reproduce",
        help="the construction method end to end in miniature: world, guessers, curation, SFT raw vs curated, GRPO",
        description="Show on a CPU that blind-test curation raises multimodal gain (the Sureon paper's Tables 4 and 8 "
        "in miniature). Resumable. See sureon/reproduce.py.",
    )
    add_exports(commands)
    add_push(commands)
    add_pipeline(commands)
    add_review(commands)
    return parser


def command_inputs(args: argparse.Namespace) -> dict[str, Path]:
    """Every existing local path among a command's arguments but ``--out``: what it reads, caches or resumes from.
    A value counts when its option is a path (``type=Path``) or when it reads as one (holds a ``/``, or starts with
    ``.`` or ``~``: a model or dataset given as a path rather than a Hub id), inside ``KEY=VALUE`` specs too
    (``--guesser model=PATH,name=NAME``, ``sft=PREDICTIONS``); a bare word (``--split test``, a config name) never
    does, whatever folder of that name the working directory holds."""
    inputs: dict[str, Path] = {}
    for name, value in vars(args).items():
        if name in ("out", "handler", "debug"):
            continue
        for item in value if isinstance(value, list | tuple) else [value]:
            if isinstance(item, Path):
                candidates = [str(item)]
            elif isinstance(item, str):
                parts = [item, *(part.rpartition("=")[2] for part in item.split(","))]
                candidates = [part for part in parts if "/" in part or part.startswith((".", "~"))]
            else:
                continue
            for candidate in dict.fromkeys(candidates):
                if Path(candidate).expanduser().exists():
                    label = f"--{name.replace('_', '-')}"
                    inputs[label if label not in inputs else f"{label} {candidate}"] = Path(candidate)
    return inputs


def check_output(args: argparse.Namespace) -> None:
    """Refuse, before the command starts, an ``--out`` that is, contains or lies inside an input, or is not
    writable."""
    from builders.outputs import check_output_location, check_writable

    out = getattr(args, "out", None)
    if out is None:
        return
    check_output_location(out, command_inputs(args))
    check_writable(out)


def main(argv: list[str] | None = None) -> int:
    from builders.errors import report_mistakes

    args = make_parser().parse_args(argv)

    def command() -> int:
        check_output(args)
        return args.handler(args)

    return report_mistakes(command, debug=args.debug)


if __name__ == "__main__":
    sys.exit(main())
