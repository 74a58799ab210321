"""The ``sureon`` command line.

    sureon build sureon --release DIR [--videos DIR] --out OUT [--configs bench db ...]
    sureon build surgiq --source FILE [FILE ...] --out OUT [--exclude-ids dedupe_ids.txt]
    sureon videos fetch --release DIR --out VIDEOS_DIR [--configs bench ...] [--sections] [--on-rate-limit stop|wait]
    sureon push FOLDER --repo-id ORG/NAME [--repo-type model|dataset] [--private]
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
    sureon pipeline split|stage1|stage2 ...  (the construction pipeline, see builders/pipeline/command.py)
    sureon curate --dataset DIR_OR_ID --config train_all|validation --guesser SPEC [...] --out DIR
    sureon audit --dataset DIR_OR_ID --guesser SPEC [--guesser SPEC ...] --out DIR
    sureon review add-user|remove-user|assign|serve|backup|export|agreement --db review.sqlite ...
    sureon world --out DIR [--config world.yaml] [--shortcut train:length=0.5 ...]
    sureon reproduce --out DIR [--seeds N] [--release DIR --videos DIR --shortcuts FILE]
    sureon plan --config RECIPE.yaml [--num-gpus 4] [--gpu-memory 141] [--synthetic-frames 768x432]

Every command is a module next to the code it drives, with ``add_arguments(parser)`` and ``run(args) -> exit
status``, and one row of :data:`COMMANDS`. Only the module of the command typed is imported, and it imports
nothing heavy before ``run``, so ``sureon --help`` and a command's ``--help`` answer at once.

A mistake is one line (``error: ...``, exit 2) and a bug a traceback (:func:`builders.errors.report_mistakes`);
``sureon --debug ...`` or ``SUREON_DEBUG=1`` shows the traceback of a mistake too. Before any command runs, every
path it writes (its row's ``writes``: ``--out``, ``--cache``, ``--cache-dir``, ``--json``, ...) is checked against
every other path among its arguments: no command writes over, inside or around its own inputs, no two of its written
paths overlap (:func:`builders.outputs.check_written_paths`), each is of its kind (a file, a folder, a build whose
name ``datasets`` can cache) and writable.
"""

import argparse
import importlib
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from builders.outputs import BUILD, FILE, FILE_OR_FOLDER, FOLDER


@dataclass(frozen=True)
class Command:
    """One command: the words that name it, the module that implements it, its one-line help and its description,
    and what it writes: ``{option's dest: kind}`` (:data:`builders.outputs.FILE`, ``FOLDER``, ``BUILD``,
    ``FILE_OR_FOLDER``), every path option it writes to, whatever the action; every other path among its arguments is
    an input it reads."""

    words: tuple[str, ...]
    module: str
    help: str
    description: str
    writes: dict[str, str] = field(default_factory=lambda: {"out": FOLDER})


# Commands whose second word names what they act on: the first word's help, and the attribute the second is kept in.
GROUPS = {
    "build": ("build a dataset in the Hub layout", "dataset"),
    "eval": ("evaluate a model on a benchmark", "benchmark"),
    "report": ("tables and statistics across models' evaluation runs", "benchmark"),
    "near-duplicates": ("n-gram overlap of a benchmark against external questions", "dataset"),
    "shortcuts": ("shortcut baselines that answer without a model", "dataset"),
    "videos": ("the source videos of the Sureon release", "action"),
    "export": ("tasks and training files for other tools (lm-eval, lmms-eval, ...)", "target"),
}

COMMANDS = (
    Command(
        ("build", "sureon"),
        "builders.sureon.build_command",
        "Sureon-DB, validation pools and the benchmark from the official release (+ local videos)",
        "Build the Sureon configs in the Hub layout from the official annotation-only release.",
        writes={"out": BUILD, "cache_dir": FOLDER},
    ),
    Command(
        ("build", "surgiq"),
        "builders.surgiq.build_command",
        "SurgiQ text MCQs (configs default and shuffled) from your JSON / JSONL / CSV / parquet files",
        "Build SurgiQ in the Hub layout: configs default (stored option order) and shuffled.",
        writes={"out": BUILD},
    ),
    Command(
        ("build", "public"),
        "public_converters.build_command",
        "the templated public corpus from local copies of the public surgical datasets (the Sureon paper, Appendix C)",
        "Build the public corpus: read each source natively, template image and clip QAs, write the Hub layout. See "
        "public_converters/build.py.",
        writes={"out": BUILD, "cache_dir": FOLDER, "llm_cache": FILE},
    ),
    Command(
        ("eval", "sureon"),
        "recipes.evaluation.sureon.evaluate",
        "a model on the Sureon benchmark, visual and blind (predictions.jsonl + summary.json)",
        "Evaluate a model on the Sureon benchmark (see recipes/evaluation/sureon/evaluate.py).",
    ),
    Command(
        ("eval", "public"),
        "recipes.evaluation.public.evaluate",
        "a model on the public perception benchmarks (bench-* configs of a public build; one or many GPUs)",
        "Run a model on the public benchmarks (see recipes/evaluation/public/evaluate.py).",
    ),
    Command(
        ("eval", "surgiq"),
        "recipes.evaluation.surgiq.evaluate",
        "deterministic log-likelihood MCQ scoring of a causal LM or VLM (text-only)",
        "Score SurgiQ with the paper's protocol: next-token log-probabilities of the option labels.",
    ),
    Command(
        ("report", "sureon"),
        "recipes.evaluation.sureon.report",
        "Sureon leaderboard report (Table 3 layout, CIs, pairwise McNemar) from prediction files",
        "Report of the Sureon benchmark from any number of models' predictions.jsonl files.",
    ),
    Command(
        ("report", "public"),
        "recipes.evaluation.public.report",
        "public perception benchmarks report (video-averaged F1, CVS accuracy, mAP50) from prediction files",
        "Report of the public perception benchmarks (the Sureon paper, D.3) from JSONL prediction files.",
    ),
    Command(
        ("report", "surgiq"),
        "recipes.evaluation.surgiq.report_command",
        "the SurgiQ paper's tables (4, 5, 6, A3) from several `sureon eval surgiq` runs",
        "Accuracy, calibration, answer-order robustness and per-domain tables across models.",
    ),
    Command(
        ("near-duplicates", "surgiq"),
        "builders.surgiq.near_duplicates_command",
        "flag SurgiQ questions that overlap external question banks (MedQA-, MedMCQA-style files)",
        "Normalised 5-gram overlap of every SurgiQ question against external question files.",
    ),
    Command(
        ("shortcuts", "surgiq"),
        "recipes.evaluation.surgiq.shortcuts_command",
        "longest option, lexical overlap and unique-token baselines on SurgiQ (the paper's Table A4)",
        "Accuracy of answer-cue heuristics on a built SurgiQ dataset; no model needed.",
    ),
    Command(
        ("curate",),
        "recipes.curation.curate",
        "stage 3: blind-test curation by a guesser ensemble (folds for training), then distractor hardening",
        "Flag questions answerable without the video (the Sureon paper, Section 3.1 Stage 3, B.4); see "
        "recipes/curation/curate.py.",
        writes={"out": BUILD, "cache": FILE},
    ),
    Command(
        ("audit",),
        "recipes.curation.audit",
        "blind-answerability audit of any MCQ dataset: guesser consistency, shortcuts, positions, length gap",
        "Can the questions be answered without the video? See recipes/curation/audit.py.",
        writes={"out": FOLDER, "cache": FILE},
    ),
    Command(
        ("videos", "fetch"),
        "builders.sureon.fetch.command",
        "download the source videos a release needs (yt-dlp), verify them, write availability.json",
        "Fetch the Sureon source videos into the folder `sureon build sureon --videos` reads; resumable, see "
        "builders/sureon/fetch/.",
    ),
    Command(
        ("plan",),
        "recipes.training.plan.command",
        "before renting GPUs: a recipe's tokens per sample, parameters, memory per GPU and throughput",
        "Plan a training recipe at the real size: token counts measured on its data, parameters, model-state and "
        "activation memory per GPU (ZeRO-2, ZeRO-3, FSDP), fit, expected throughput. See recipes/training/plan/.",
        writes={"json": FILE},
    ),
    Command(
        ("world",),
        "builders.sureon.world.command",
        "a synthetic Sureon release whose answers lie in the frames, with planted language shortcuts",
        "Write a visually grounded synthetic world: a release in the official layout, its videos and the ground "
        "truth of its planted shortcuts. See builders/sureon/world/.",
    ),
    Command(
        ("reproduce",),
        "sureon.reproduce",
        "the construction method end to end in miniature: Table 4's three arms (stage 1, RADG, curation)",
        "Show on a CPU that stage 2 (RADG) and stage 3 (blind-test curation) each raise the multimodal gain (the "
        "Sureon paper's Tables 4 and 8 in miniature, over training seeds). Resumable. See sureon/reproduce.py.",
    ),
    Command(
        ("export", "lm-eval"),
        "recipes.export.lm_eval",
        "SurgiQ as lm-evaluation-harness 0.4 tasks, scored like `sureon eval surgiq`",
        "Export SurgiQ as lm-eval tasks (see recipes/export/lm_eval.py).",
    ),
    Command(
        ("export", "lmms-eval"),
        "recipes.export.lmms_eval",
        "the Sureon benchmark as lmms-eval 0.7 tasks (visual, blind, both with MG) over a local build",
        "Export the Sureon benchmark as lmms-eval tasks (see recipes/export/lmms_eval.py).",
    ),
    Command(
        ("export", "vlmevalkit"),
        "recipes.export.vlmevalkit",
        "the Sureon benchmark (visual, blind, both) and the public benchmarks as VLMEvalKit datasets",
        "Export the Sureon and public benchmarks as VLMEvalKit datasets scored by the project's own code (see "
        "recipes/export/vlmevalkit.py).",
    ),
    Command(
        ("export", "sft"),
        "recipes.export.sft",
        "Sureon or public-corpus rows as ms-swift JSONL or LLaVA / qwen-vl-finetune JSON, frames by path",
        "Export training rows for other fine-tuning frameworks (see recipes/export/sft.py).",
        writes={"out": FILE},
    ),
    Command(
        ("push",),
        "builders.push",
        "upload a build (a dataset repo) or a finished training run (a model repo) to the Hub",
        "Upload a folder sureon wrote to the Hub: a build as a dataset repo, a finished training run as a model repo.",
        writes={},
    ),
    Command(
        ("pipeline",),
        "builders.pipeline.command",
        "the construction pipeline: transcripts -> QA -> distractors",
        "The construction pipeline (the Sureon paper, Section 3.1): the video split, stage 1 (transcripts -> "
        "grounded QA) and stage 2 (distractors). See builders/pipeline/command.py.",
        writes={"out": FOLDER, "cache": FILE, "split_file": FILE},
    ),
    Command(
        ("review",),
        "builders.pipeline.review.command",
        "expert review of the validation pool: accounts, app, exports",
        "Stage 4, expert review of the validation pool: reviewer accounts, assignments, the web app, backups, the "
        "approved bench config and agreement. See builders/pipeline/review/command.py.",
        writes={"out": FILE_OR_FOLDER},
    ),
)


def make_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The ``sureon`` parser: every command of :data:`COMMANDS` with its help. A command's arguments (its module) are
    added when ``argv`` names it, every command's when ``argv`` is None (the whole tree, for tests and docs)."""
    parser = argparse.ArgumentParser(prog="sureon", description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error (or SUREON_DEBUG=1)")
    commands = parser.add_subparsers(dest="command", required=True)
    groups: dict[str, argparse._SubParsersAction] = {}
    # the command's words lead argv's words: sureon's own options (--debug, --help) take no value
    words = None if argv is None else [word for word in argv if not word.startswith("-")]
    for command in COMMANDS:
        siblings = commands
        if len(command.words) > 1:
            group = command.words[0]
            if group not in groups:
                help_text, dest = GROUPS[group]
                groups[group] = commands.add_parser(group, help=help_text).add_subparsers(dest=dest, required=True)
            siblings = groups[group]
        subparser = siblings.add_parser(command.words[-1], help=command.help, description=command.description)
        if words is None or tuple(words[: len(command.words)]) == command.words:
            implementation = importlib.import_module(command.module)
            implementation.add_arguments(subparser)
            subparser.set_defaults(handler=implementation.run, writes=command.writes)
    return parser


def option_label(dest: str) -> str:
    """``cache_dir`` -> ``--cache-dir``: the option as a user typed it."""
    return f"--{dest.replace('_', '-')}"


def command_inputs(args: argparse.Namespace) -> dict[str, Path]:
    """Every existing local path among a command's arguments but the ones it writes (its row's ``writes``): what it
    reads or resumes from. A value counts when its option is a path (``type=Path``) or when it reads as one (holds a
    ``/``, or starts with ``.`` or ``~``: a model or dataset given as a path rather than a Hub id), inside
    ``KEY=VALUE`` specs too (``--guesser model=PATH,name=NAME``, ``sft=PREDICTIONS``); a bare word (``--split test``,
    a config name) never does, whatever folder of that name the working directory holds."""
    written = getattr(args, "writes", {})
    inputs: dict[str, Path] = {}
    for name, value in vars(args).items():
        if name in ("handler", "debug", "writes") or name in written:
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
                    label = option_label(name)
                    inputs[label if label not in inputs else f"{label} {candidate}"] = Path(candidate)
    return inputs


def check_output(args: argparse.Namespace) -> None:
    """Refuse, before the command starts, a path it writes (``--out``, ``--cache``, ``--json``, ...: its row's
    ``writes``) that is, contains or lies inside an input or another written path, that exists as the wrong kind, or
    that is not writable (:mod:`builders.outputs`)."""
    from builders.outputs import check_writable, check_written_kind, check_written_paths

    kinds = getattr(args, "writes", {})
    written = {option_label(dest): getattr(args, dest) for dest in kinds if getattr(args, dest, None) is not None}
    if not written:
        return
    check_written_paths(written, command_inputs(args))
    for dest, kind in kinds.items():
        path = getattr(args, dest, None)
        if path is not None:
            check_written_kind(path, kind, option_label(dest))
            check_writable(path, option_label(dest))


def main(argv: list[str] | None = None) -> int:
    from builders.errors import report_mistakes

    argv = sys.argv[1:] if argv is None else list(argv)
    args = make_parser(argv).parse_args(argv)

    def command() -> int:
        check_output(args)
        return args.handler(args)

    return report_mistakes(command, debug=args.debug)


if __name__ == "__main__":
    sys.exit(main())
