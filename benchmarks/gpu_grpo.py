"""Time one GRPO optimizer step of the 8B recipe at the real size on one GPU, each term beside ``sureon plan``'s
prediction.

Qwen3-VL-8B is built with random weights on the GPU from its published config (``recipes.training.architectures``;
nothing is downloaded) and ``recipes/grpo.py``'s own trainer (``build_trainer``: the recipe's rewards, budgets, shared
prefill, frames and pixel caps; only the weights it would load are the random ones) takes two optimizer steps on
8-frame synthetic clips of 768x432 frames (multiple-choice rows: ``letter`` answers). One GPU does what one rank of
the recipe's hardware does: its per-device batch and the accumulation the recipe's global batch gives on its GPUs, so
a generation batch holds the same completions per GPU (no communication, and a decode synced over this GPU only).
The second step is timed (the first warms up kernels and the allocator), split as the plan splits it: the vision
tower and the prefill of generation (the first forward of the generation batch), the decode (the rest of generation;
its steps counted), the log-probability passes without gradients, the optimizer step, and training (the step less
all of those, less the rewards and the rest of TRL's scoring, printed apart). Each is printed beside the plan's
prediction for this same run (``sureon plan`` on the same settings, one GPU, the GPU's own datasheet figures) as
measured / predicted. Random weights sample tokens at random and rarely end a completion early: the decode runs to
each row's budget (``completion_budgets``) or to ``max_completion_length``, which is what the plan assumes.

It needs the memory of the 8B's weights, gradients and AdamW states in bf16 on one GPU (70 GB) plus generation: an
H200 (141 GB). Without a CUDA GPU it says so in one line and exits 0.

    python benchmarks/gpu_grpo.py                       # one H200: a few minutes
    python benchmarks/gpu_grpo.py --recipe OTHER.yaml   # e.g. today's recipe from git history, for before / after
    python benchmarks/gpu_grpo.py --quick               # a tiny model on the CPU, seconds (run by the tests)
    python benchmarks/gpu_grpo.py --decode-overhead     # the host's work per decode step, on this CPU
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path


REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402
import yaml  # noqa: E402
from transformers import TrainerCallback  # noqa: E402

from benchmarks.timing import parse_with_quick  # noqa: E402
from recipes.training.launch import accumulation_for, hardware_gpus  # noqa: E402


RECIPE = REPO / "recipes" / "qwen3-vl-8b" / "grpo" / "config_sureon_grpo.yaml"
QWEN = "Qwen/Qwen3-VL-8B-Instruct"
STEPS = 2  # a warm-up step, then the timed one (--quick: the one step, untimed warm-up skipped)
# What --quick changes so that a tiny model takes the same path on a CPU in seconds.
QUICK = {
    "per_device_train_batch_size": 2,
    "num_generations": 2,
    "max_completion_length": 8,
    "max_frames": 4,
    "activation_checkpointing": False,
}
# The plan's terms, by the part of the step that measures them.
MEASURED_AS = {
    "vision tower": ("vision tower (generation)",),
    "prefill": ("prefill (generation)",),
    "decode": ("decode (memory-bound)", "decode (compute-bound)", "decode: the host's work per step"),
    "log-probabilities": ("old policy's log-probabilities", "reference model's log-probabilities"),
    "training": (
        "training forward and backward",
        "attention's and the LM head's recompute in backward",
        "activation checkpointing's recompute",
    ),
    "optimizer step": ("optimizer step",),
}


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


class Clock:
    """Seconds spent in each named part of the timed step (synchronised on a GPU), and the decode steps."""

    def __init__(self):
        self.timing = False
        self.seconds: dict[str, float] = {}
        self.forwards = 0
        self.generating = False
        self.started: dict[str, float] = {}

    def start(self, name: str) -> None:
        if self.timing:
            sync()
            self.started[name] = time.perf_counter()

    def stop(self, name: str) -> None:
        if self.timing and name in self.started:
            sync()
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - self.started.pop(name)

    def wrap(self, owner, method: str, name: str, *, when=lambda: True, inside=None):
        """Time every call of ``owner.method`` (an instance attribute over the class's) under ``name``."""
        original = getattr(owner, method)
        clock = self

        def timed(*args, **kwargs):
            counted = when()
            if counted:
                clock.start(name)
            if inside:
                setattr(clock, inside, True)
            try:
                return original(*args, **kwargs)
            finally:
                if inside:
                    setattr(clock, inside, False)
                if counted:
                    clock.stop(name)

        setattr(owner, method, timed)


class StepClock(TrainerCallback):
    """Turns the clock on for the last step, and times the step and its optimizer step."""

    def __init__(self, clock: Clock, timed_step: int):
        self.clock, self.timed_step = clock, timed_step

    def on_step_begin(self, args, state, control, **kwargs):
        self.clock.timing = state.global_step == self.timed_step
        self.clock.start("step")

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        self.clock.start("optimizer step")

    def on_optimizer_step(self, args, state, control, **kwargs):
        self.clock.stop("optimizer step")

    def on_step_end(self, args, state, control, **kwargs):
        self.clock.stop("step")
        self.clock.timing = False


def instrument(trainer, model, clock: Clock) -> None:
    """Hooks that time the parts of the step (module docstring): the generation call TRL makes, its first forward
    (the prefill, with the vision tower apart), every forward after it (a decode step), the passes without
    gradients, TRL's whole generation-and-scoring."""
    clock.wrap(trainer, "_generate_and_score_completions", "generation and scoring")
    clock.wrap(trainer, "_generate_single_turn", "generation", inside="generating")
    clock.wrap(
        trainer, "_get_per_token_logps_and_entropies", "log-probabilities", when=lambda: not torch.is_grad_enabled()
    )

    def before_forward(module, args, kwargs):
        if clock.generating and clock.timing:
            clock.forwards += 1
            if clock.forwards == 1:
                clock.start("prefill forward")

    def after_forward(module, args, kwargs, output):
        if clock.generating and clock.timing and clock.forwards == 1:
            clock.stop("prefill forward")

    model.register_forward_pre_hook(before_forward, with_kwargs=True)
    model.register_forward_hook(after_forward, with_kwargs=True)
    visual = getattr(getattr(model, "model", None), "visual", None)
    if visual is not None:
        visual.register_forward_pre_hook(lambda *a: clock.start("vision tower") if clock.generating else None)
        visual.register_forward_hook(lambda *a: clock.stop("vision tower") if clock.generating else None)


def measured_parts(clock: Clock) -> dict[str, float]:
    """The timed step split as the plan splits it (module docstring)."""
    seconds = clock.seconds
    vision = seconds.get("vision tower", 0.0)
    prefill = seconds.get("prefill forward", 0.0)
    generation = seconds.get("generation", 0.0)
    passes = seconds.get("log-probabilities", 0.0)
    optimizer = seconds.get("optimizer step", 0.0)
    scoring = seconds.get("generation and scoring", 0.0)
    return {
        "vision tower": vision,
        "prefill": prefill - vision,
        "decode": generation - prefill,
        "log-probabilities": passes,
        "rewards and the rest of scoring": scoring - generation - passes,
        "training": seconds.get("step", 0.0) - scoring - optimizer,
        "optimizer step": optimizer,
        "step": seconds.get("step", 0.0),
    }


def run_recipe(recipe: dict, work: Path, *, model, device: str, steps: int) -> tuple[Clock, dict]:
    """``steps`` optimizer steps of ``recipes/grpo.py``'s trainer on ``recipe`` (a YAML written to ``work``), the
    last timed; returns the clock and the settings the trainer ran with."""
    from recipes.training import grpo_stage

    path = work / "recipe.yaml"
    path.write_text(yaml.safe_dump({**recipe, "max_steps": steps}))
    script_args, training_args, model_args = grpo_stage.grpo_parser().parse_args_and_config(["--config", str(path)])
    original = grpo_stage.load_model
    grpo_stage.load_model = lambda *args, **kwargs: model  # the random weights, not a checkpoint's (none exists)
    try:
        built = grpo_stage.build_trainer(script_args, training_args, model_args)
    finally:
        grpo_stage.load_model = original
    trainer = built["trainer"]
    clock = Clock()
    instrument(trainer, model, clock)
    trainer.add_callback(StepClock(clock, timed_step=steps - 1))
    trainer.train()
    clock.forwards = max(clock.forwards - 1, 0)  # the prefill is not a decode step
    ran = {
        "per_device_train_batch_size": training_args.per_device_train_batch_size,
        "gradient_accumulation_steps": training_args.gradient_accumulation_steps,
        "steps_per_generation": training_args.steps_per_generation,
        "device": device,
    }
    return clock, ran


def benchmark_recipe(path: Path, *, quick: bool, frame_size: tuple[int, int], work: Path) -> dict:
    """The recipe at ``path`` run as one GPU of its hardware does (module docstring), timed and planned."""
    from recipes.model_io.modeling import default_attn_implementation
    from recipes.training.architectures import build_model, write_architecture
    from recipes.training.plan.command import plan_recipe
    from recipes.training.plan.tokens import write_synthetic_clips
    from recipes.training.recipe_file import GRPO, read_recipe

    recipe = read_recipe(path, GRPO)
    gpus = hardware_gpus(recipe.get("hardware")) or 1
    accumulation = accumulation_for(recipe, gpus, where=str(path)) or int(recipe.get("gradient_accumulation_steps", 1))
    device = "cpu" if quick else "cuda"
    if quick:
        from recipes.training.tiny_models import build_tiny_qwen3_vl

        recipe |= QUICK
        model_dir = build_tiny_qwen3_vl(work / "model", max_pixels=frame_size[0] * frame_size[1])
        accumulation = 2
    else:
        model_dir = write_architecture(QWEN, work / "model")
    cap = int(recipe["max_completion_length"])
    if recipe.get("completion_budgets"):
        recipe["completion_budgets"] = {kind: min(cap, limit) for kind, limit in recipe["completion_budgets"].items()}
    batch = int(recipe["per_device_train_batch_size"])
    steps = 1 if quick else STEPS
    prompts = max(1, batch * accumulation // int(recipe["num_generations"])) * steps
    data = write_synthetic_clips(work, prompts, frame_size, int(recipe.get("max_frames") or 8))
    name = torch.cuda.get_device_name() if device == "cuda" else "CPU"
    recipe |= {
        "model_name_or_path": str(model_dir),
        "dataset_mixture": [{"path": "parquet", "data_files": str(data), "format": "video_qa"}],
        "output_dir": str(work / "out"),
        "global_batch_size": batch * accumulation,  # one GPU of the recipe's hardware
        "use_cpu": device == "cpu",
        "bf16": device == "cuda",
        "dtype": "bfloat16" if device == "cuda" else "float32",
        "attn_implementation": default_attn_implementation() if device == "cuda" else "sdpa",
        "report_to": "none",
        "save_strategy": "no",
        "logging_steps": 1000,
        "dataloader_num_workers": 0,
        "hardware": f"1× {name}",
        "use_vllm": False,
    }
    recipe.pop("gradient_accumulation_steps", None)
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(model_dir)
    torch.manual_seed(0)
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    model = build_model(config, device=device, dtype=dtype, attn_implementation=recipe["attn_implementation"])
    clock, ran = run_recipe(recipe, work, model=model, device=device, steps=steps)
    planned = work / "planned.yaml"
    planned.write_text(yaml.safe_dump(recipe))
    plan = plan_recipe(planned, num_gpus=1, synthetic_frames=frame_size, samples=4)[0]
    del model
    return {"recipe": str(path), "device": name, "ran": ran, "clock": clock, "plan": plan}


def compare(result: dict) -> dict:
    """Measured and predicted seconds of each part of the step, and their ratio."""
    predicted_terms = {item["name"]: item["seconds"] for item in result["plan"]["time"]["terms"]}
    measured = measured_parts(result["clock"])
    rows = {}
    for part, names in MEASURED_AS.items():
        predicted = sum(predicted_terms.get(name, 0.0) for name in names)
        rows[part] = {"measured": measured[part], "predicted": predicted}
    rest = "rewards and the rest of scoring"
    rows[rest] = {"measured": measured[rest], "predicted": 0.0}
    rows["step"] = {"measured": measured["step"], "predicted": result["plan"]["time"]["step_seconds"]}
    for row in rows.values():
        row["ratio"] = row["measured"] / row["predicted"] if row["predicted"] else None
    return rows


def report(result: dict) -> dict:
    plan, clock = result["plan"], result["clock"]
    grpo = plan["time"]["grpo"]
    rows = compare(result)
    print(f"{result['recipe']} on {result['device']}: {result['ran']}")
    print(
        f"decode: {clock.forwards} forwards after the prefill, the plan's {grpo['decode_steps']:.0f} steps; prefills "
        f"planned: {grpo['prefills_per_generation_batch']} per generation batch of "
        f"{grpo['completions_per_generation_batch']}"
    )
    print("| part of the step | measured s | predicted s | measured / predicted |")
    print("| --- | ---: | ---: | ---: |")
    for part, row in rows.items():
        ratio = f"{row['ratio']:.2f}x" if row["ratio"] is not None else "-"
        print(f"| {part} | {row['measured']:.3f} | {row['predicted']:.3f} | {ratio} |")
    return {
        "recipe": result["recipe"],
        "device": result["device"],
        "ran": result["ran"],
        "decode_steps": {"measured": clock.forwards, "predicted": grpo["decode_steps"]},
        "parts": rows,
        "plan_terms": plan["time"]["terms"],
    }


def measure_decode_overhead(steps: int = 64, repeats: int = 3) -> float:
    """Seconds of the host's work per decode step of transformers' ``generate``: a Qwen3-VL with the 8B's 36 text
    layers at tiny widths, one sequence on this CPU (the arithmetic is negligible there), sampling as GRPO does; the
    difference of ``8 + steps`` and ``8`` new tokens over ``steps``, the fastest of ``repeats``."""
    from recipes.training.architectures import architecture_config, build_model

    text = {"hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2}
    text |= {"vocab_size": 2048, "bos_token_id": None, "eos_token_id": 2}
    vision = {"depth": 1, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2, "out_hidden_size": 64}
    config = architecture_config(QWEN, text=text, vision={**vision, "deepstack_visual_indexes": [0]})
    torch.manual_seed(0)
    model = build_model(config, device="cpu", dtype=torch.float32, attn_implementation="sdpa").eval()
    ids = torch.randint(10, 2000, (1, 64))

    def generate(new_tokens: int) -> float:
        started = time.perf_counter()
        with torch.no_grad():
            model.generate(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=new_tokens,
                min_new_tokens=new_tokens,
                do_sample=True,
                temperature=1.0,
                pad_token_id=0,
                suppress_tokens=[3, 4],
            )
        return time.perf_counter() - started

    generate(4)
    return min((generate(8 + steps) - generate(8)) / steps for _ in range(repeats))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", type=Path, default=RECIPE, help="the GRPO recipe (default: the 8B's)")
    parser.add_argument("--frame-size", default="768x432", help="synthetic frame size WxH")
    parser.add_argument("--decode-overhead", action="store_true", help="measure the host's work per decode step")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON here")
    args = parse_with_quick(parser, argv, {"frame_size": "128x96"})
    from recipes.training.plan.command import parse_size

    if args.decode_overhead:
        torch.set_num_threads(1)
        seconds = measure_decode_overhead()
        print(f"the host's work per decode step (36 text layers, one sequence, this CPU): {seconds * 1e3:.1f} ms")
        return 0
    if not args.quick and not torch.cuda.is_available():
        print("skipped: no CUDA GPU here (benchmarks/gpu_grpo.py times the 8B GRPO recipe on one; --quick: the CPU)")
        return 0
    work = Path(tempfile.mkdtemp(prefix="gpu_grpo_"))
    try:
        result = benchmark_recipe(args.recipe, quick=args.quick, frame_size=parse_size(args.frame_size), work=work)
        figures = report(result)
        if args.quick:
            print("(--quick: a tiny model on the CPU against the H200's figures: the ratios mean nothing here)")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1, default=str))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    raise SystemExit(main())
