"""Count what one GRPO generation batch computes on a CPU, before and after each cut of the 8B recipe
(``completion_budgets``, ``share_prompt_prefill``, ``share_prompt_in_training``: docs/training/grpo.md).

One rank's generation batch of the 8B recipe (recipes/qwen3-vl-8b/grpo/config_sureon_grpo.yaml: 4 prompts × its
``num_generations`` 8 copies, its ``max_completion_length``, ``max_frames`` and ``completion_budgets``) is generated
by the tiny recipe's trainer (recipes/tiny/grpo/config_smoke.yaml, through ``recipes/grpo.py``'s own
``build_trainer``) on a random 2-layer Qwen3-VL with the stand-in tokenizer the budgets were measured with, from a
seeded draw of synthetic lecture clips (each as one video; lettered questions and event orders). A random model
seldom ends its turn, so completions run to their budget or the cap: the worst case, where the budgets cut most.
Four settings, each from the same seed: TRL's generation (the baseline), the budgets, the shared prefill, both.
Hooks on the vision tower and the language model count, per batch:

- vision-tower inputs (images and videos) and the patches encoded;
- prefill tokens: the prompt positions the language model computes (padding included, as it is computed);
- decode steps: language-model forwards over completion positions only (the whole batch steps until its last row
  ends), and the completion positions they compute;
- generated tokens: the completion tokens kept (what the rewards read and the loss scores).

Prints each count, its ratio to the baseline, the CPU seconds of each setting (this machine's, for the ratio only;
``sureon plan`` predicts the GPU's), and checks that sharing the prefill changed no completion.

Then the training passes of that batch (the completions of both generation cuts, with advantages from -1 to 1: a
random policy earns no reward), split into micro-batches of the 8B recipe's ``per_device_train_batch_size`` by the
trainer's own ``_prepare_inputs``, each through ``_compute_loss`` and backward: TRL's passes (the baseline: shuffled
rows, every completion with its prompt) against ``share_prompt_in_training`` (each prompt's rows grouped, each
prompt once per micro-batch). Counted by hooks: the language model's positions (padding included, as computed) and
the vision tower's inputs and patches; with the CPU seconds, and a check that the step's loss and gradients agree.

    python benchmarks/grpo_generation.py [--prompts 4] [--frames 8] [--workdir build/bench]
"""

import argparse
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, fields
from pathlib import Path

import yaml


REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.timing import parse_with_quick  # noqa: E402


GRPO_8B = REPO / "recipes" / "qwen3-vl-8b" / "grpo" / "config_sureon_grpo.yaml"
TINY_RECIPE = REPO / "recipes" / "tiny" / "grpo" / "config_smoke.yaml"
CLIPS, CLIP_SIZE = 12, (160, 90)  # synthetic clips to draw prompts from, and their frames' size


@dataclass
class GenerationCounts:
    """What a generation batch computed (the module docstring says how each is counted)."""

    vision_inputs: int = 0
    vision_patches: int = 0
    prefill_tokens: int = 0
    decode_steps: int = 0
    decode_positions: int = 0
    generated_tokens: int = 0


@contextmanager
def counting(trainer):
    """Counts of the generation batches ``trainer`` (a ``VisualGRPOTrainer`` of Qwen3-VL) generates inside the block:
    forward hooks on its vision tower and language model, active during ``_generate_single_turn`` only (not in the
    log-probability passes)."""
    import torch

    counts = GenerationCounts()
    state = {"active": False, "prompt_width": 0}
    model = trainer.accelerator.unwrap_model(trainer.model_wrapped)

    def vision(module, args, kwargs):
        if state["active"]:
            pixels = args[0] if args else kwargs["hidden_states"]
            grid = args[1] if len(args) > 1 else kwargs["grid_thw"]
            counts.vision_inputs += grid.shape[0]
            counts.vision_patches += pixels.shape[0]

    def language(module, args, kwargs):
        if not state["active"]:
            return
        embeds = kwargs["inputs_embeds"]
        rows, length = embeds.shape[:2]
        cache = kwargs.get("cache")
        past = cache.get_seq_length() if cache is not None else 0
        prompt = max(0, min(past + length, state["prompt_width"]) - past)
        counts.prefill_tokens += rows * prompt
        if prompt == 0:
            counts.decode_steps += 1
            counts.decode_positions += rows * length

    generate = trainer._generate_single_turn

    def counted(prompt_ids, *args, **kwargs):
        state.update(active=True, prompt_width=max(len(ids) for ids in prompt_ids))
        try:
            completion_ids, logprobs = generate(prompt_ids, *args, **kwargs)
        finally:
            state["active"] = False
        counts.generated_tokens += sum(len(ids) for ids in completion_ids)
        return completion_ids, logprobs

    hooks = [
        model.model.visual.register_forward_pre_hook(vision, with_kwargs=True),
        model.model.language_model.register_forward_pre_hook(language, with_kwargs=True),
    ]
    trainer._generate_single_turn = counted
    try:
        with torch.no_grad():
            yield counts
    finally:
        del trainer._generate_single_turn
        for hook in hooks:
            hook.remove()


@dataclass
class PassCounts:
    """What forward passes run through a Qwen3-VL: vision-tower inputs and patches, language-model positions
    (padding included, as it is computed)."""

    vision_inputs: int = 0
    vision_patches: int = 0
    llm_positions: int = 0


@contextmanager
def counting_passes(model):
    """Counts of every forward pass of ``model`` (a Qwen3-VL, unwrapped) inside the block: hooks on its vision tower
    and language model."""
    counts = PassCounts()

    def vision(module, args, kwargs):
        grid = args[1] if len(args) > 1 else kwargs["grid_thw"]
        counts.vision_inputs += grid.shape[0]
        counts.vision_patches += (args[0] if args else kwargs["hidden_states"]).shape[0]

    def language(module, args, kwargs):
        counts.llm_positions += kwargs["inputs_embeds"].shape[0] * kwargs["inputs_embeds"].shape[1]

    hooks = [
        model.model.visual.register_forward_pre_hook(vision, with_kwargs=True),
        model.model.language_model.register_forward_pre_hook(language, with_kwargs=True),
    ]
    try:
        yield counts
    finally:
        for hook in hooks:
            hook.remove()


def prepare(workdir: Path, frames: int) -> tuple[Path, Path]:
    """Synthetic clips (``recipes.training.plan.tokens``' lecture-clip rows, ``frames`` JPEG frames each), every
    third turned into an event-ordering question, as a parquet source; and a tiny Qwen3-VL (reused when there)."""
    from datasets import Dataset

    from recipes.training.plan.tokens import write_synthetic_clips
    from recipes.training.tiny_models import build_tiny_qwen3_vl

    root = workdir / "grpo_generation"
    clips, model = root / f"clips_{frames}_frames.parquet", root / "tiny-qwen3-vl"
    if not clips.is_file():
        root.mkdir(parents=True, exist_ok=True)
        lettered = write_synthetic_clips(root, CLIPS, CLIP_SIZE, frames)
        Dataset.from_parquet(str(lettered)).map(as_ordering, with_indices=True).to_parquet(str(clips))
        lettered.unlink()
    if not (model / "config.json").is_file():
        build_tiny_qwen3_vl(model)
    return clips, model


def as_ordering(row: dict, number: int) -> dict:
    """Every third clip's question as an event order (``order`` answers), the others kept lettered."""
    if number % 3:
        return row
    return {**row, "question": "Order the events: A: clipping B: dissection C: cutting", "options": [],
            "answer": "B,A,C", "answer_index": -1, "answer_format": "TO", "answer_order": ["B", "A", "C"]}  # fmt: skip


def generation_trainer(clips: Path, model: Path, workdir: Path, *, prompts: int, cap: int | None):
    """The tiny recipe's trainer, generating as the 8B recipe does on one rank; and the 8B recipe's budgets."""
    from recipes.grpo import make_parser
    from recipes.training.grpo_stage import build_trainer

    large = yaml.safe_load(GRPO_8B.read_text())
    recipe = yaml.safe_load(TINY_RECIPE.read_text())
    recipe |= {
        "model_name_or_path": str(model),
        "dataset_mixture": [{"path": "parquet", "data_files": str(clips), "format": "video_qa"}],
        "max_frames": large["max_frames"],
        "output_dir": str(workdir / "grpo_generation" / "run"),
        "num_generations": large["num_generations"],
        "per_device_train_batch_size": prompts * large["num_generations"],
        "max_completion_length": cap or large["max_completion_length"],
        "temperature": large["temperature"],
        "completion_budgets": None,
        "share_prompt_prefill": False,
        "share_prompt_in_training": False,
    }
    path = workdir / "grpo_generation" / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe))
    trainer = build_trainer(*make_parser().parse_args_and_config(["--config", str(path)]))["trainer"]
    trainer.model.train()  # as in the training loop: TRL logs and samples by the model's mode
    return trainer, large["completion_budgets"]  # the trainer caps each at max_completion_length


def generation_batch(trainer, prompts: int, seed: int) -> list[dict]:
    """A seeded draw of ``prompts`` checkable rows, each repeated ``num_generations`` times (as TRL's RepeatSampler
    hands a rank its prompts)."""
    import random

    rows = list(trainer.train_dataset)
    picked = random.Random(seed).sample(rows, min(prompts, len(rows)))
    return [row for row in picked for _ in range(trainer.num_generations)]


def generate(trainer, batch: list[dict], seed: int, *, budgets: dict | None, share: bool):
    """One generation batch under the given cuts: its counts, completion ids and CPU seconds."""
    import torch

    trainer.completion_budgets, trainer.share_prompt_prefill = dict(budgets or {}), share
    torch.manual_seed(seed)
    began = time.process_time()
    with counting(trainer) as counts:
        output = trainer._generate_and_score_completions(batch)
    return counts, output, time.process_time() - began


def training_passes(trainer, output: dict, micro_batch: int, seed: int, *, share: bool):
    """One generation batch's training passes (the module docstring): the trainer's ``_prepare_inputs`` splits
    ``output`` into micro-batches of ``micro_batch`` rows (one optimizer step: ``steps_per_generation`` = the
    accumulation), each goes through ``_compute_loss`` and backward. Returns their counts, the step's loss, every
    parameter's gradient and the CPU seconds."""
    import torch

    steps = len(output["completion_ids"]) // micro_batch
    batch = {**output, "advantages": torch.linspace(-1.0, 1.0, len(output["completion_ids"]))}
    saved = (trainer.args.steps_per_generation, trainer._generate_and_score_completions)
    trainer.args.steps_per_generation, trainer.current_gradient_accumulation_steps = steps, steps
    trainer._generate_and_score_completions = lambda inputs: dict(batch)
    trainer.share_prompt_in_training, trainer._step, trainer._buffered_inputs = share, 0, None
    trainer.model.zero_grad(set_to_none=True)
    torch.manual_seed(seed)
    began, loss = time.process_time(), 0.0
    try:
        with counting_passes(trainer.accelerator.unwrap_model(trainer.model)) as counts:
            trainer._prepare_inputs([{}] * len(batch["completion_ids"]))
            for inputs in trainer._buffered_inputs:
                micro_loss = trainer._compute_loss(trainer.model, inputs)
                micro_loss.backward()
                loss += micro_loss.item()
    finally:
        trainer.args.steps_per_generation = saved[0]
        del trainer._generate_and_score_completions
        trainer._buffered_inputs = None
    seconds = time.process_time() - began
    gradients = {name: p.grad.clone() for name, p in trainer.model.named_parameters() if p.grad is not None}
    return counts, loss, gradients, seconds


def report_training(trainer, output: dict, micro_batch: int, seed: int) -> None:
    """Prints the training passes' counts, their ratios and the agreement of the two settings' loss and gradients."""
    training_passes(trainer, output, micro_batch, seed, share=False)  # a warm-up
    settings = {"TRL's passes (baseline)": False, "share_prompt_in_training": True}
    runs = {name: training_passes(trainer, output, micro_batch, seed, share=share) for name, share in settings.items()}
    base_counts, base_loss, base_gradients, base_seconds = runs["TRL's passes (baseline)"]
    rows = len(output["completion_ids"])
    print(
        f"its training passes: {rows // micro_batch} micro-batches of {micro_batch} completions (the 8B recipe's "
        "per_device_train_batch_size), forward and backward"
    )
    for name, (counts, _, _, seconds) in runs.items():
        print(f"  {name}")
        for item in fields(PassCounts):
            value, base = getattr(counts, item.name), getattr(base_counts, item.name)
            print(f"    {item.name.replace('_', ' '):<20} {value:>9,}  {value / base:6.3f}x of the baseline")
        print(f"    {'CPU seconds':<20} {seconds:>9.2f}  {seconds / base_seconds:6.3f}x of the baseline")
    _, loss, gradients, _ = runs["share_prompt_in_training"]
    largest = max(gradient.abs().max().item() for gradient in base_gradients.values())
    apart = max((gradients[name] - gradient).abs().max().item() for name, gradient in base_gradients.items())
    print(
        f"  the step's loss {loss:.6f} against {base_loss:.6f}; gradients apart by at most {apart:.1e} (the largest "
        f"is {largest:.1e})"
    )
    if abs(loss - base_loss) > 1e-5 * max(1.0, abs(base_loss)) or apart > 1e-4 * largest:
        raise SystemExit("share_prompt_in_training changed the step's loss or gradients")


def main(argv=None) -> None:
    import torch

    from recipes.training.grpo_data import answer_kind

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=4, help="prompts per rank's batch (the 8B recipe's: 4)")
    parser.add_argument("--cap", type=int, default=None, help="max_completion_length (default: the 8B recipe's)")
    parser.add_argument("--frames", type=int, default=8, help="frames per synthetic clip (the 8B recipe shows 8)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", type=Path, default=REPO / "build" / "bench")
    args = parse_with_quick(parser, argv, {"prompts": 2, "cap": 16, "frames": 2})
    torch.set_num_threads(1)
    clips, model = prepare(args.workdir, args.frames)
    trainer, budgets = generation_trainer(clips, model, args.workdir, prompts=args.prompts, cap=args.cap)
    batch = generation_batch(trainer, args.prompts, args.seed)
    settings = {
        "TRL's generation (baseline)": {"budgets": None, "share": False},
        "completion_budgets": {"budgets": budgets, "share": False},
        "share_prompt_prefill": {"budgets": None, "share": True},
        "both": {"budgets": budgets, "share": True},
    }
    generate(trainer, batch, args.seed, budgets=None, share=False)  # a warm-up, so that no setting pays first calls
    runs = {name: generate(trainer, batch, args.seed, **cut) for name, cut in settings.items()}
    base_counts, base_output, base_seconds = runs["TRL's generation (baseline)"]
    kinds = [answer_kind(row) for row in batch[:: trainer.num_generations]]
    print(
        f"one rank's GRPO generation batch: {len(kinds)} prompts ({', '.join(kinds)}) x {trainer.num_generations} "
        f"completions of at most {trainer.max_completion_length} tokens, budgets {budgets} (tiny Qwen3-VL, one CPU "
        "thread)"
    )
    for name, (counts, _, seconds) in runs.items():
        print(f"  {name}")
        for item in fields(GenerationCounts):
            value, base = getattr(counts, item.name), getattr(base_counts, item.name)
            ratio = f"{value / base:6.3f}x" if base else "     -"
            print(f"    {item.name.replace('_', ' '):<20} {value:>9,}  {ratio} of the baseline")
        print(f"    {'CPU seconds':<20} {seconds:>9.2f}  {seconds / base_seconds:6.3f}x of the baseline")
    shared = runs["share_prompt_prefill"][1]
    same = torch.equal(shared["completion_ids"], base_output["completion_ids"])
    print(f"  sharing the prefill, the same completions as the baseline: {'yes' if same else 'NO'}")
    if not same:
        raise SystemExit("share_prompt_prefill changed the completions drawn from the same seed")
    micro_batch = min(yaml.safe_load(GRPO_8B.read_text())["per_device_train_batch_size"], len(batch))
    report_training(trainer, runs["both"][1], micro_batch, args.seed)


if __name__ == "__main__":
    main()
