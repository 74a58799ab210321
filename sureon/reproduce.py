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


class Miniature:
    """What the steps share: the run (markers, subprocesses), its arguments, the release it starts from, and where
    each step writes, so that each step reads as what it does."""

    def __init__(self, args):
        from builders.sureon import world
        from recipes.training.recipe_file import GRPO, SFT, read_recipe
        from recipes.training.rewards import REWARDS

        sft_recipe = read_recipe(args.sft_config, SFT)  # every recipe checked strictly before the first step
        read_recipe(args.guesser_config, SFT)
        read_recipe(args.grpo_config, GRPO, rewards=REWARDS)
        self.args = args
        self.run = Run(args)
        out = self.out = self.run.out
        self.world_settings = world.load_config(args.world_config)
        if args.release:
            self.release, self.videos = Path(args.release), Path(args.videos) if args.videos else None
            self.truth = Path(args.shortcuts) if args.shortcuts else None
        else:
            self.release, self.videos, self.truth = out / "world" / "release", out / "world" / "videos", out / "world"
        self.frames = int(sft_recipe.get("max_frames") or 8)
        self.folds = args.num_folds
        self.build, self.build_curated = out / "build", out / "build-curated"
        self.models, self.guessers, self.curation = out / "models", out / "guessers", out / "curation"
        self.sft, self.evals, self.blind, self.grpo = out / "sft", out / "eval", out / "blind", out / "grpo"

    def build_arguments(self) -> list[str]:
        """``sureon build sureon``'s frame options, the same for the raw and the curated build."""
        # a world has no text or face to blur (blurring is for real frames); a real release keeps the default
        blur = [] if self.args.release else ["--no-blur"]
        frames = ["--max-frames", str(self.frames), "--min-frames", str(self.frames)]
        return [*frames, *blur, "--cache-dir", str(self.out / "cache"), "--overwrite"]

    def video_arguments(self) -> list[str]:
        return ["--videos", str(self.videos)] if self.videos else []

    def grpo_from(self) -> Path:
        """The checkpoint of the curated SFT run that GRPO starts from (:func:`grpo_start`)."""
        return grpo_start(self.sft / "curated", self.args.grpo_from_step)


def make_world(mini: Miniature) -> None:
    """1. A synthetic world, unless the run was given a release."""
    from builders.sureon import world

    if not mini.args.release:
        mini.run.step(
            "world", lambda: world.write_world(mini.out / "world", mini.world_settings)["counts"], what="world"
        )


def build(mini: Miniature) -> None:
    """2. ``sureon build sureon`` of the release: the benchmark, the raw training split and the validation pool."""
    configs = ["--configs", "bench", "train_all", "validation", "--on-missing-video", "skip"]
    mini.run.step(
        "build",
        lambda: mini.run.command(
            "build", "sureon", "--release", str(mini.release), *mini.video_arguments(), "--out", str(mini.build),
            *configs, *mini.build_arguments(),
        ),
        what=f"sureon build sureon ({mini.frames} frames a clip)",
    )  # fmt: skip


def make_models(mini: Miniature) -> None:
    """3. A tiny Qwen3-VL and a tiny text Qwen3 whose tokenizers know the build's words."""

    def make():
        corpus = corpus_from_build(mini.build, ["bench", "train_all", "validation"], mini.models / "corpus.txt")
        width = [f"--{k.replace('_', '-')}={v}" for k, v in GUESSER_WIDTH.items()]
        tiny = ["-m", "recipes.training.tiny_models"]
        mini.run.python(*tiny, "--out", str(mini.models / "tiny-vlm"), "--corpus", str(corpus))
        mini.run.python(
            *tiny, "--kind", "causal-lm", "--out", str(mini.models / "tiny-lm"), "--corpus", str(corpus), *width
        )

    mini.run.step("models", make, what="tiny models")


def train_guesser(mini: Miniature, name: str, dataset: Path, config: str, *extra: str) -> None:
    """A blind guesser (the guesser recipe on the tiny text model) trained on ``dataset``'s ``config``."""
    recipe = mini.run.recipe(
        Path(mini.args.guesser_config),
        f"guesser-{name}",
        model_name_or_path=str(mini.models / "tiny-lm"),
        dataset_mixture=[{"path": str(dataset), "name": config, "split": "train"}],
        output_dir=str(mini.guessers / name),
        seed=mini.args.seed,
    )
    mini.run.train("sft.py", recipe, *extra)


def train_guessers(mini: Miniature) -> None:
    """4. The fold guessers, a guesser on the whole raw training split, and an "off-the-shelf" one trained blind on
    an independent world with the same kinds of shortcut."""
    from builders.sureon import world

    for k in range(mini.folds):
        mini.run.step(
            f"guesser-fold{k}",
            lambda k=k: train_guesser(
                mini, f"fold{k}", mini.build, "train_all", "--fold", str(k), "--num_folds", str(mini.folds)
            ),
            what=f"blind guesser holding out fold {k} of {mini.folds}",
        )
    mini.run.step(
        "guesser-all-raw",
        lambda: train_guesser(mini, "all-raw", mini.build, "train_all"),
        what="blind guesser on the whole raw training split",
    )
    independent = mini.out / "world-independent"

    def off_the_shelf():
        settings = mini.world_settings.with_overrides(seed=mini.world_settings.seed + INDEPENDENT_WORLD_SEED_OFFSET)
        world.write_world(independent, settings, videos=False)
        mini.run.command(
            "build", "sureon", "--release", str(independent / "release"), "--out", str(independent / "build"),
            "--configs", "train_all", "--overwrite",
        )  # fmt: skip
        train_guesser(mini, "off-the-shelf", independent / "build", "train_all")

    mini.run.step("guesser-off-the-shelf", off_the_shelf, what="an off-the-shelf guesser (trained on another world)")


def curate(mini: Miniature) -> None:
    """5. Stage 3: ``sureon curate --num-folds`` on the training split, ``sureon curate`` on the validation pool."""
    # stage 3 asks the fold guessers and the off-the-shelf one (the Sureon paper's B.4: any guesser reaching S >= tau
    # removes a question); measured, the folds alone found 70 % of the planted rows here, with the off-the-shelf
    # guesser 77 %
    specs = [f"--guesser=model={mini.guessers / f'fold{k}'},name=fold{k}" for k in range(mini.folds)]
    specs.append(f"--guesser=model={mini.guessers / 'off-the-shelf'},name=off-the-shelf")
    mini.run.step(
        "curate-train",
        lambda: mini.run.command(
            "curate", "--dataset", str(mini.build), "--config", "train_all", "--split", "train", *specs,
            "--num-folds", str(mini.folds), "--out", str(mini.curation / "train"), "--overwrite",
        ),
        what=f"sureon curate --num-folds {mini.folds} (training split)",
    )  # fmt: skip
    mini.run.step(
        "curate-validation",
        lambda: mini.run.command(
            "curate", "--dataset", str(mini.build), "--config", "validation", "--split", "validation",
            f"--guesser=model={mini.guessers / 'all-raw'},name=all-raw", "--out", str(mini.curation / "validation"),
            "--overwrite",
        ),
        what="sureon curate (validation pool)",
    )  # fmt: skip


def build_curated(mini: Miniature) -> None:
    """6. The release with the curation's decisions, built (``db``, ``validation_curated``; the decoded clips come
    from the raw build's cache), and a blind guesser on its training split."""
    from recipes.evaluation.sureon import miniature

    def make():
        read = miniature.read_decisions
        decisions = read(mini.curation / "train") | read(mini.curation / "validation")
        counts = curated_release(mini.release, decisions, mini.out / "release-curated")
        mini.run.command(
            "build", "sureon", "--release", str(mini.out / "release-curated"), *mini.video_arguments(),
            "--out", str(mini.build_curated), "--configs", "db", "validation_curated", "--on-missing-video", "skip",
            *mini.build_arguments(),
        )  # fmt: skip
        return counts

    mini.run.step("build-curated", make, what="the curated release and its build (db, validation_curated)")
    mini.run.step(
        "guesser-all-curated",
        lambda: train_guesser(mini, "all-curated", mini.build_curated, "db"),
        what="blind guesser on the curated training split",
    )


def train_sft(mini: Miniature) -> None:
    """7. The SFT recipe on the raw training set and on the curated one, the same steps each."""
    for name, dataset, config in (("raw", mini.build, "train_all"), ("curated", mini.build_curated, "db")):
        recipe = mini.run.recipe(
            Path(mini.args.sft_config),
            f"sft-{name}",
            model_name_or_path=str(mini.models / "tiny-vlm"),
            dataset_mixture=[{"path": str(dataset), "name": config, "split": "train"}],
            output_dir=str(mini.sft / name),
            save_total_limit=None,
            seed=mini.args.seed,
        )
        mini.run.step(
            f"sft-{name}", lambda recipe=recipe: mini.run.train("sft.py", recipe), what=f"SFT on the {name} set"
        )


def eval_sureon(mini: Miniature, model: Path, target: Path, *extra: str) -> None:
    """``sureon eval sureon`` of ``model`` on the raw build's benchmark."""
    mini.run.command(
        "eval", "sureon", "--model", str(model), "--dataset", str(mini.build), "--out", str(target),
        "--max-new-tokens", "16", *extra,
    )  # fmt: skip


def evaluate(mini: Miniature) -> None:
    """8. The benchmark (``--mode both``) of both SFT runs and of each saved checkpoint; the blind accuracy of the
    off-the-shelf (OS) and fine-tuned (FT) guessers on the raw and curated validation pools."""
    for name in ("raw", "curated"):
        mini.run.step(
            f"eval-{name}",
            lambda name=name: eval_sureon(mini, mini.sft / name, mini.evals / name, "--mode", "both"),
            what=f"sureon eval sureon --mode both ({name})",
        )
        for checkpoint in sorted((mini.sft / name).glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1])):
            mini.run.step(
                f"eval-{name}-{checkpoint.name}",
                lambda c=checkpoint, name=name: eval_sureon(
                    mini, c, mini.evals / "checkpoints" / f"{name}-{c.name}", "--mode", "both"
                ),
                what=f"benchmark at {name}/{checkpoint.name}",
            )
    pools = {"raw": (mini.build, "validation"), "curated": (mini.build_curated, "validation_curated")}
    guessers_by_pool = {
        "OS": {"raw": "off-the-shelf", "curated": "off-the-shelf"},
        "FT": {"raw": "all-raw", "curated": "all-curated"},
    }
    for column, by_pool in guessers_by_pool.items():
        for pool, name in by_pool.items():
            dataset, config = pools[pool]
            mini.run.step(
                f"blind-{column}-{pool}",
                lambda dataset=dataset, config=config, name=name, column=column, pool=pool: mini.run.command(
                    "eval", "sureon", "--model", str(mini.guessers / name), "--dataset", str(dataset),
                    "--config", config, "--split", "validation", "--mode", "blind",
                    "--out", str(mini.blind / f"{column}-{pool}"), "--max-new-tokens", "16",
                ),
                what=f"blind accuracy of the {column} guesser on the {pool} validation pool",
            )  # fmt: skip


def train_grpo(mini: Miniature) -> None:
    """9. The GRPO recipe from an early checkpoint of the curated SFT run (see the module docstring), then the
    benchmark of the policy."""
    start = mini.grpo_from()
    recipe = mini.run.recipe(
        Path(mini.args.grpo_config),
        "grpo",
        model_name_or_path=str(start),
        dataset_mixture=[{"path": str(mini.build_curated), "name": "db", "split": "train"}],
        output_dir=str(mini.grpo),
        seed=mini.args.seed,
    )
    mini.run.step("grpo", lambda: mini.run.train("grpo.py", recipe), what=f"GRPO from {start.relative_to(mini.out)}")
    mini.run.step(
        "eval-grpo",
        lambda: eval_sureon(mini, mini.grpo, mini.evals / "grpo", "--mode", "visual"),
        what="benchmark after GRPO",
    )


def write_report(mini: Miniature) -> Path:
    """10. ``sureon report sureon`` of the two SFT runs, and the miniature's report in the Sureon paper's shapes."""
    from builders.sureon import world
    from recipes.evaluation.sureon import miniature

    predictions = {name: mini.evals / name / "predictions.jsonl" for name in ("raw", "curated")}
    mini.run.step(
        "report-sureon",
        lambda: mini.run.command(
            "report", "sureon", *(f"{name}={path}" for name, path in predictions.items()),
            "--out", str(mini.out / "report-sureon"), "--overwrite", "--no-paper",
        ),
        what="sureon report sureon (raw vs curated)",
    )  # fmt: skip
    # the benchmark of the checkpoint GRPO started from: the first point of its curve
    start = mini.grpo_from()
    before = (
        mini.evals / "checkpoints" / f"curated-{start.name}" if mini.args.grpo_from_step else mini.evals / "curated"
    )
    data = miniature.assemble(
        mini.out,
        truth=world.read_shortcuts(mini.truth) if mini.truth else None,
        frames=mini.frames,
        folds=mini.folds,
        grpo_start=(mini.args.grpo_from_step, before / "predictions.jsonl"),
        row_kinds=world.row_kinds(mini.truth) if mini.truth else None,
    )
    report = mini.out / "report"
    miniature.write_report(data, report)
    print(f"[reproduce] report: {report / 'report.md'}")
    return report


STEPS = (make_world, build, make_models, train_guessers, curate, build_curated, train_sft, evaluate, train_grpo)


def reproduce(args) -> Path:
    """Every step of the miniature in order (see the module docstring), then its report; returns the report folder."""
    mini = Miniature(args)
    for step in STEPS:
        step(mini)
    return write_report(mini)


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
