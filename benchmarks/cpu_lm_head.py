"""Benchmark TRL's fused LM head on a CPU: every position projected (TRL 1.16 off CUDA) against the labelled ones only
(the recipes' ``cpu_labelled_positions_only``: ``recipes.training.run.labelled_positions_only_on_cpu``).

The same run twice, from the same weights and data: the blind guesser recipe of a synthetic world
(``recipes/tiny/guesser/config_world.yaml``: a 128-wide text Qwen3 on question + seven options, ~126 tokens a row of
which ~8 are the answer's), on one thread, through the script's own parser and ``main``. Prints each run's CPU seconds
per step and their ratio, and checks that both logged the same losses (only positions that are masked anyway are left
out, so the figures agree to float rounding).

    python benchmarks/cpu_lm_head.py [--steps 60] [--workdir build/bench]
"""

import argparse
import importlib.util
import json
import shutil
import sys
import time
from pathlib import Path

import yaml


REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.timing import parse_with_quick  # noqa: E402


WORLD = {
    "categories": ["EE", "F"],
    "option_order": "vocabulary",
    "shortcuts": {"train": {"length": 0.5}},
    "videos": {"train": 8, "validation": 1, "test": 1},
    "questions_per_video": {"train": 12, "validation": 2, "test": 2},
}


def prepare(workdir: Path) -> tuple[Path, Path]:
    """A world without videos, built, and a tiny text model knowing its words (reused when already there)."""
    from builders.sureon import world
    from recipes.training.tiny_models import build_tiny_causal_lm
    from sureon.cli import main as sureon

    root = workdir / "cpu_lm_head"
    build, model = root / "build", root / "tiny-lm"
    if not (build / "train_all").is_dir():
        shutil.rmtree(root, ignore_errors=True)
        world.write_world(root / "world", world.WorldConfig.from_dict(WORLD), videos=False)
        argv = ["build", "sureon", "--release", str(root / "world" / "release"), "--out", str(build)]
        assert sureon([*argv, "--configs", "train_all"]) == 0
    if not (model / "config.json").is_file():
        build_tiny_causal_lm(model, corpus=root / "world" / "corpus.txt", hidden_size=128, head_dim=32)
    return build, model


def train(build: Path, model: Path, out: Path, steps: int, compact: bool) -> tuple[float, list[float]]:
    """CPU seconds of ``steps`` steps of the guesser recipe, and the losses it logged."""
    recipe = yaml.safe_load((REPO / "recipes" / "tiny" / "guesser" / "config_world.yaml").read_text())
    recipe |= {
        "model_name_or_path": str(model),
        "dataset_mixture": [{"path": str(build), "name": "train_all", "split": "train"}],
        "output_dir": str(out),
        "max_steps": steps,
        "save_steps": steps,
        "logging_steps": 5,
        "report_to": "none",
        "cpu_labelled_positions_only": compact,
        "lr_scheduler_type": "constant",  # a step costs the same at any rate; the recipe's decay outlasts a short run
    }
    shutil.rmtree(out, ignore_errors=True)
    config = out.with_suffix(".yaml")
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(yaml.safe_dump(recipe))
    spec = importlib.util.spec_from_file_location("recipe_sft", REPO / "recipes" / "sft.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    began = time.process_time()
    script.main(*script.make_parser().parse_args_and_config(["--config", str(config)]), recipe=str(config))
    seconds = time.process_time() - began
    state = json.loads((out / f"checkpoint-{steps}" / "trainer_state.json").read_text())
    return seconds, [entry["loss"] for entry in state["log_history"] if "loss" in entry]


def main(argv=None) -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--workdir", type=Path, default=REPO / "build" / "bench")
    args = parse_with_quick(parser, argv, {"steps": 5})
    torch.set_num_threads(1)  # how the tiny recipes run in `make test` and `make reproduce`
    build, model = prepare(args.workdir)
    every, every_losses = train(build, model, args.workdir / "cpu_lm_head" / "every", args.steps, compact=False)
    labelled, labelled_losses = train(build, model, args.workdir / "cpu_lm_head" / "labelled", args.steps, True)
    print(f"the tiny guesser recipe, {args.steps} steps of 16 rows, one thread (CPU seconds per step)")
    print(f"  {'every position projected (TRL on a CPU), the baseline':<56} {every / args.steps:8.3f}   1.00x")
    print(f"  {'the labelled positions only (as on CUDA)':<56} {labelled / args.steps:8.3f} {labelled / every:6.2f}x")
    drift = max(abs(a - b) for a, b in zip(every_losses, labelled_losses, strict=True))
    print(f"  logged losses: {len(every_losses)} each, largest difference {drift:.2e}")
    if drift > 1e-3:
        raise SystemExit(f"the two runs logged different losses (largest difference {drift:.2e})")


if __name__ == "__main__":
    main()
