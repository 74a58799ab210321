"""``sureon reproduce``: the paper's construction method end to end, in miniature, on a CPU.

    sureon reproduce --out build/reproduce                      # makes its own world (recipes/tiny/world/...)
    sureon reproduce --release DIR --videos DIR --shortcuts DIR/shortcuts.jsonl --out OUT

Steps, each run by the project's own commands and recipes exactly as a user would run them, each skipped when a
marker says it finished (``OUT/steps/<step>.json``; a training run killed midway resumes from its last checkpoint):

1. ``world``: a synthetic world (:mod:`builders.sureon.world`) unless ``--release`` / ``--videos`` are given;
2. ``build``: ``sureon build sureon`` (bench, train_all, validation) at the recipe's frame count;
3. ``models``: a tiny Qwen3-VL and a tiny text Qwen3 whose tokenizers know the build's words;
4. ``guessers``: ``recipes/sft.py --fold k`` for k < ``--num-folds`` (blind), a blind guesser on the whole training
   split, and an "off-the-shelf" one trained on an independent world with the same kinds of shortcut;
5. ``curate``: ``sureon curate --num-folds`` on the training split (the fold guessers and the off-the-shelf one),
   ``sureon curate`` on validation;
6. ``curated``: the release with ``passes_blind_curation`` filled from the decisions, built (``db``,
   ``validation_curated``; the decoded clips come from the build's cache), and a blind guesser on it;
7. ``sft``: the SFT recipe on the raw training set and on the curated one, the same steps each;
8. ``eval``: ``sureon eval sureon --mode both`` of both runs and of each saved checkpoint; blind evaluations of the
   guessers on the validation pool;
9. ``grpo``: the GRPO recipe from an early checkpoint of the curated SFT run (``--grpo-from-step``; a finished run
   answers its own training questions almost always right, which leaves a reward no room to rise), then its
   evaluation;
10. ``report``: ``OUT/report/report.md`` (+ ``report.json``, plots) in the Sureon paper's shapes
    (:mod:`recipes.evaluation.sureon.miniature`), and ``sureon report sureon`` of the runs.

Training runs are subprocesses (as ``accelerate launch`` would start them) with one BLAS/OpenMP thread: on two cores
tiny models train several times faster that way than with threads that wait for each other.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from builders.arguments import int_range, non_negative_int, seed
from builders.errors import InputError, UserError
from builders.outputs import atomic_file, write_atomic


REPO_ROOT = Path(__file__).resolve().parents[1]
RECIPES = REPO_ROOT / "recipes" / "tiny"
DEFAULT_WORLD = RECIPES / "world" / "reproduce.yaml"
DEFAULT_SFT = RECIPES / "sft" / "config_reproduce.yaml"
DEFAULT_GUESSER = RECIPES / "guesser" / "config_world.yaml"
DEFAULT_GRPO = RECIPES / "grpo" / "config_reproduce.yaml"
GUESSER_WIDTH = {"hidden_size": 128, "head_dim": 32}
INDEPENDENT_WORLD_SEED_OFFSET = 1000


class Run:
    """One reproduction: its folder, its settings, and the markers of the steps already done."""

    def __init__(self, args):
        self.args = args
        self.out = Path(args.out)
        self.steps = self.out / "steps"
        self.steps.mkdir(parents=True, exist_ok=True)
        self.env = os.environ | {"HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
        self.env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))

    def step(self, name: str, action, *, what: str = "") -> dict:
        """Run ``action()`` unless its marker exists; the marker records its result and how long it took."""
        marker = self.steps / f"{name}.json"
        if marker.is_file():
            print(f"[reproduce] {name}: done earlier ({marker})", flush=True)
            return json.loads(marker.read_text())
        print(f"[reproduce] {name}: {what or 'running'}", flush=True)
        started = time.monotonic()
        result = action() or {}
        result = {"seconds": round(time.monotonic() - started, 1)} | result
        write_atomic(marker, json.dumps(result, indent=1, sort_keys=True, default=str))
        return result

    def command(self, *argv: str) -> None:
        """A ``sureon`` command in a subprocess (the user's command line, its own imports and logging)."""
        self.python("-m", "sureon.cli", *argv)

    def python(self, *argv: str) -> None:
        logs = self.out / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        log = logs / f"{len(list(logs.glob('*.log'))):03d}.log"
        with log.open("w") as handle:
            handle.write(" ".join(argv) + "\n")
            handle.flush()
            done = subprocess.run(
                [sys.executable, *argv], env=self.env, stdout=handle, stderr=subprocess.STDOUT, check=False
            )
        if done.returncode:
            tail = "\n".join(log.read_text().splitlines()[-25:])
            raise UserError(f"`{' '.join(argv)}` failed (exit {done.returncode}); its log {log} ends:\n{tail}")

    def recipe(self, template: Path, name: str, **fields) -> Path:
        """The recipe YAML with this run's paths and overrides, written under ``OUT/recipes`` (what was run)."""
        import yaml

        from recipes.training.recipe_file import load_recipe_yaml

        recipe = load_recipe_yaml(template) | fields
        path = self.out / "recipes" / f"{name}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        header = f"# {name}: {template.relative_to(REPO_ROOT) if template.is_relative_to(REPO_ROOT) else template}"
        path.write_text(header + " with this run's paths\n" + yaml.safe_dump(recipe, sort_keys=False))
        return path

    def train(self, script: str, recipe: Path, *extra: str) -> None:
        self.python(str(REPO_ROOT / "recipes" / script), "--config", str(recipe), *extra)


def corpus_from_build(build: Path, configs: list[str], out: Path) -> Path:
    """Every question and option text of the build, once each: the tiny models' tokenizers learn these words."""
    from datasets import load_dataset

    lines: dict[str, None] = {}
    for config in configs:
        dataset = load_dataset(str(build), config)
        for split in dataset.values():
            for row in split.select_columns(["question", "options"]):
                lines[row["question"]] = None
                lines.update(dict.fromkeys(row["options"] or []))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(line + "\n" for line in lines if line.strip()))
    return out


def curated_release(release: Path, decisions: dict[str, dict], out: Path) -> dict:
    """A copy of the release's parquet files with ``passes_blind_curation`` set from ``sureon curate`` decisions
    (questions the curation did not see keep their value): the release a curated Sureon-DB is built from."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from builders.sureon.release import find_split_files

    counts = {"set": 0, "kept": 0}
    for files in find_split_files(Path(release)).values():
        for path in files:
            table = pq.read_table(path)
            ids = table.column("question_id").to_pylist()
            flags = table.column("passes_blind_curation").to_pylist()
            new = []
            for qid, flag in zip(ids, flags, strict=True):
                if qid in decisions:
                    new.append(bool(decisions[qid]["passes"]))
                    counts["set"] += 1
                else:
                    new.append(flag)
                    counts["kept"] += 1
            index = table.schema.get_field_index("passes_blind_curation")
            table = table.set_column(index, "passes_blind_curation", pa.array(new, type=pa.bool_()))
            target = out / path.relative_to(release)
            target.parent.mkdir(parents=True, exist_ok=True)
            with atomic_file(target) as partial:
                pq.write_table(table, partial)
    return counts


def grpo_start(run_dir: Path, step: int) -> Path:
    """The SFT checkpoint GRPO starts from: ``checkpoint-<step>`` of ``run_dir``, or the finished run for step 0."""
    start = Path(run_dir) / f"checkpoint-{step}" if step else Path(run_dir)
    if not start.is_dir():
        saved = sorted(p.name for p in Path(run_dir).glob("checkpoint-*"))
        raise FileNotFoundError(
            f"{start}: no such checkpoint of the SFT run (saved: {', '.join(saved) or 'none'}); pass "
            "--grpo-from-step with a step the SFT recipe saves (its save_steps), or 0 for the finished run"
        )
    return start


def reproduce(args) -> Path:
    """Every step of the miniature (see the module docstring); returns the report folder."""
    from builders.sureon import world as world_module
    from recipes.evaluation.rewards import REWARDS
    from recipes.training.recipe_file import GRPO, SFT, read_recipe

    sft_recipe = read_recipe(args.sft_config, SFT)  # every recipe checked strictly before the first step
    read_recipe(args.guesser_config, SFT)
    read_recipe(args.grpo_config, GRPO, rewards=REWARDS)
    run = Run(args)
    out = run.out
    world_settings = world_module.load_config(args.world_config)
    if args.release:
        release, videos = Path(args.release), Path(args.videos) if args.videos else None
        truth_path = Path(args.shortcuts) if args.shortcuts else None
    else:
        release, videos, truth_path = out / "world" / "release", out / "world" / "videos", out / "world"
        run.step("world", lambda: world_module.write_world(out / "world", world_settings)["counts"], what="world")
    frames = int(sft_recipe.get("max_frames") or 8)
    build, cache = out / "build", out / "cache"
    # a world has no text or face to blur (blurring is for real frames); a real release keeps the default
    blur = [] if args.release else ["--no-blur"]
    build_args = ["--max-frames", str(frames), "--min-frames", str(frames), *blur, "--cache-dir", str(cache)]
    build_args.append("--overwrite")
    video_args = ["--videos", str(videos)] if videos else []
    run.step(
        "build",
        lambda: run.command(
            "build",
            "sureon",
            "--release",
            str(release),
            *video_args,
            "--out",
            str(build),
            "--configs",
            "bench",
            "train_all",
            "validation",
            "--on-missing-video",
            "skip",
            *build_args,
        ),
        what=f"sureon build sureon ({frames} frames a clip)",
    )

    # -- tiny models whose tokenizers know the data's words
    models = out / "models"

    def make_models():
        corpus = corpus_from_build(build, ["bench", "train_all", "validation"], models / "corpus.txt")
        width = [f"--{k.replace('_', '-')}={v}" for k, v in GUESSER_WIDTH.items()]
        run.python("-m", "recipes.training.tiny_models", "--out", str(models / "tiny-vlm"), "--corpus", str(corpus))
        run.python(
            "-m",
            "recipes.training.tiny_models",
            "--kind",
            "causal-lm",
            "--out",
            str(models / "tiny-lm"),
            "--corpus",
            str(corpus),
            *width,
        )

    run.step("models", make_models, what="tiny models")

    def guesser(name: str, dataset: Path, config: str, *extra: str) -> Path:
        target = out / "guessers" / name
        mixture = [{"path": str(dataset), "name": config, "split": "train"}]
        recipe = run.recipe(
            Path(args.guesser_config),
            f"guesser-{name}",
            model_name_or_path=str(models / "tiny-lm"),
            dataset_mixture=mixture,
            output_dir=str(target),
            seed=args.seed,
        )
        run.train("sft.py", recipe, *extra)
        return target

    folds = args.num_folds
    for k in range(folds):
        run.step(
            f"guesser-fold{k}",
            lambda k=k: guesser(f"fold{k}", build, "train_all", "--fold", str(k), "--num_folds", str(folds)) and None,
            what=f"blind guesser holding out fold {k} of {folds}",
        )
    run.step(
        "guesser-all-raw",
        lambda: guesser("all-raw", build, "train_all") and None,
        what="blind guesser on the whole raw training split",
    )

    # -- an "off-the-shelf" guesser: trained blind on an independent world with the same kinds of shortcut
    independent = out / "world-independent"

    def off_the_shelf():
        settings = world_settings.with_overrides(seed=world_settings.seed + INDEPENDENT_WORLD_SEED_OFFSET)
        world_module.write_world(independent, settings, videos=False)
        run.command(
            "build",
            "sureon",
            "--release",
            str(independent / "release"),
            "--out",
            str(independent / "build"),
            "--configs",
            "train_all",
            "--overwrite",
        )
        guesser("off-the-shelf", independent / "build", "train_all")

    run.step("guesser-off-the-shelf", off_the_shelf, what="an off-the-shelf guesser (trained on another world)")

    # -- stage 3
    curation = out / "curation"
    # stage 3 asks the fold guessers and the off-the-shelf one (the Sureon paper's B.4: any guesser reaching S >= tau
    # removes a question); measured, the folds alone found 70 % of the planted rows here, with the off-the-shelf
    # guesser 77 %
    guesser_specs = [f"--guesser=model={out / 'guessers' / f'fold{k}'},name=fold{k}" for k in range(folds)]
    guesser_specs.append(f"--guesser=model={out / 'guessers' / 'off-the-shelf'},name=off-the-shelf")
    run.step(
        "curate-train",
        lambda: run.command(
            "curate",
            "--dataset",
            str(build),
            "--config",
            "train_all",
            "--split",
            "train",
            *guesser_specs,
            "--num-folds",
            str(folds),
            "--out",
            str(curation / "train"),
            "--overwrite",
        ),
        what=f"sureon curate --num-folds {folds} (training split)",
    )
    run.step(
        "curate-validation",
        lambda: run.command(
            "curate",
            "--dataset",
            str(build),
            "--config",
            "validation",
            "--split",
            "validation",
            f"--guesser=model={out / 'guessers' / 'all-raw'},name=all-raw",
            "--out",
            str(curation / "validation"),
            "--overwrite",
        ),
        what="sureon curate (validation pool)",
    )

    from recipes.evaluation.sureon import miniature

    curated, build_curated = out / "release-curated", out / "build-curated"

    def make_curated():
        decisions = miniature.read_decisions(curation / "train") | miniature.read_decisions(curation / "validation")
        counts = curated_release(release, decisions, curated)
        run.command(
            "build",
            "sureon",
            "--release",
            str(curated),
            *video_args,
            "--out",
            str(build_curated),
            "--configs",
            "db",
            "validation_curated",
            "--on-missing-video",
            "skip",
            *build_args,
        )
        return counts

    run.step("build-curated", make_curated, what="the curated release and its build (db, validation_curated)")
    run.step(
        "guesser-all-curated",
        lambda: guesser("all-curated", build_curated, "db") and None,
        what="blind guesser on the curated training split",
    )

    # -- the recipe on raw and on curated data, the same steps
    sft = out / "sft"
    for name, dataset, config in (("raw", build, "train_all"), ("curated", build_curated, "db")):
        recipe = run.recipe(
            Path(args.sft_config),
            f"sft-{name}",
            model_name_or_path=str(models / "tiny-vlm"),
            dataset_mixture=[{"path": str(dataset), "name": config, "split": "train"}],
            output_dir=str(sft / name),
            save_total_limit=None,
            seed=args.seed,
        )
        run.step(f"sft-{name}", lambda recipe=recipe: run.train("sft.py", recipe), what=f"SFT on the {name} set")

    evals = out / "eval"

    def evaluate(model: Path, target: Path, *extra: str) -> None:
        run.command(
            "eval",
            "sureon",
            "--model",
            str(model),
            "--dataset",
            str(build),
            "--out",
            str(target),
            "--max-new-tokens",
            "16",
            *extra,
        )

    for name in ("raw", "curated"):
        run.step(
            f"eval-{name}",
            lambda name=name: evaluate(sft / name, evals / name, "--mode", "both"),
            what=f"sureon eval sureon --mode both ({name})",
        )
        for checkpoint in sorted((sft / name).glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1])):
            run.step(
                f"eval-{name}-{checkpoint.name}",
                lambda c=checkpoint, name=name: evaluate(
                    c, evals / "checkpoints" / f"{name}-{c.name}", "--mode", "both"
                ),
                what=f"benchmark at {name}/{checkpoint.name}",
            )
    blind = out / "blind"
    pools = {"raw": (build, "validation"), "curated": (build_curated, "validation_curated")}
    guessers_by_pool = {
        "OS": {"raw": "off-the-shelf", "curated": "off-the-shelf"},
        "FT": {"raw": "all-raw", "curated": "all-curated"},
    }
    for column, by_pool in guessers_by_pool.items():
        for pool, name in by_pool.items():
            dataset, config = pools[pool]
            run.step(
                f"blind-{column}-{pool}",
                lambda dataset=dataset, config=config, name=name, column=column, pool=pool: run.command(
                    "eval",
                    "sureon",
                    "--model",
                    str(out / "guessers" / name),
                    "--dataset",
                    str(dataset),
                    "--config",
                    config,
                    "--split",
                    "validation",
                    "--mode",
                    "blind",
                    "--out",
                    str(blind / f"{column}-{pool}"),
                    "--max-new-tokens",
                    "16",
                ),
                what=f"blind accuracy of the {column} guesser on the {pool} validation pool",
            )

    # -- GRPO from a checkpoint of the curated SFT run
    grpo = out / "grpo"
    start = grpo_start(sft / "curated", args.grpo_from_step)
    grpo_before = (
        evals / "checkpoints" / f"curated-{start.name}" if args.grpo_from_step else evals / "curated"
    ) / "predictions.jsonl"
    grpo_recipe = run.recipe(
        Path(args.grpo_config),
        "grpo",
        model_name_or_path=str(start),
        dataset_mixture=[{"path": str(build_curated), "name": "db", "split": "train"}],
        output_dir=str(grpo),
        seed=args.seed,
    )
    run.step("grpo", lambda: run.train("grpo.py", grpo_recipe), what=f"GRPO from {start.relative_to(out)}")
    run.step("eval-grpo", lambda: evaluate(grpo, evals / "grpo", "--mode", "visual"), what="benchmark after GRPO")

    report = out / "report"
    run.step(
        "report-sureon",
        lambda: run.command(
            "report",
            "sureon",
            f"raw={evals / 'raw' / 'predictions.jsonl'}",
            f"curated={evals / 'curated' / 'predictions.jsonl'}",
            "--out",
            str(out / "report-sureon"),
            "--overwrite",
            "--no-paper",
        ),
        what="sureon report sureon (raw vs curated)",
    )
    truth = world_module.read_shortcuts(truth_path) if truth_path else None
    kinds = world_module.row_kinds(truth_path) if truth_path else None
    data = miniature.assemble(
        out, truth=truth, frames=frames, folds=folds, grpo_start=(args.grpo_from_step, grpo_before), row_kinds=kinds
    )
    miniature.write_report(data, report)
    print(f"[reproduce] report: {report / 'report.md'}")
    return report


def add_arguments(parser) -> None:
    parser.add_argument("--out", type=Path, default=Path("build/reproduce"), help="everything goes here (resumable)")
    parser.add_argument("--release", type=Path, help="a release folder (default: a world made here)")
    parser.add_argument("--videos", type=Path, help="its videos")
    parser.add_argument("--shortcuts", type=Path, help="ground truth of planted shortcuts (a world's shortcuts.jsonl)")
    parser.add_argument("--world-config", type=Path, default=DEFAULT_WORLD, help="settings of the world made here")
    parser.add_argument("--sft-config", type=Path, default=DEFAULT_SFT)
    parser.add_argument("--guesser-config", type=Path, default=DEFAULT_GUESSER)
    parser.add_argument("--grpo-config", type=Path, default=DEFAULT_GRPO)
    parser.add_argument("--num-folds", type=int_range(2), default=4)
    parser.add_argument(
        "--grpo-from-step",
        type=non_negative_int,
        default=100,
        help="GRPO starts from this checkpoint of the curated SFT run (0: the finished run)",
    )
    parser.add_argument("--seed", type=seed, default=0, help="the training seed of every run")


def run(args) -> int:
    if bool(args.release) != bool(args.videos) and not args.release:
        raise InputError("--videos needs --release")
    reproduce(args)
    return 0
