"""Measure the Sureon-VLM recipe at the real size on one GPU, with no downloaded weights.

Qwen3-VL-8B is built with random weights on the GPU from its published config (``recipes.training.architectures``)
and trained for a few optimiser steps by ``recipes/sft.py``'s own trainer (``build_stage_trainer``: the recipe's
collator, pixel caps, freezing and uniform vision calls) on 8-frame clips of synthetic frames at a realistic size
(768x432 JPEG, what the Sureon builder stores from 720p lectures with ``--max-side 768``). It prints, per variant,
samples/s, tokens/s, peak memory and MFU (model FLOPs per sample from ``recipes.training.plan``, no recompute, over
the GPU's dense bf16 peak; step time runs from the trainer's step begin to its end, so the optimiser step is in and
data loading, which workers prefetch in a real run, is out), and each variant's ratios against the recipe's own
setting (checkpointing on, full fine-tune) measured in the same run:

- ``checkpointing on``  the recipe's setting, the baseline;
- ``checkpointing off`` (halving the batch until it fits; the batch used is printed);
- ``frozen vision``     ``freeze_vision_tower: true``, checkpointing on.

Attention is what the recipe loads by default (flash-attention 2 from flash-attn or the Hub, else sdpa); Liger kernels
only when the recipe sets ``use_liger_kernel: true`` (none does: turned on whenever installed, they would overstate the
recipe). The tokenizer is a stand-in (the real one needs the Hub), so text tokens differ slightly from the real run's.

    python benchmarks/gpu_sft.py                       # one H200: a few minutes
    python benchmarks/gpu_sft.py --tiny                # any CPU: the tiny config, seconds (run by the tests)
"""

import argparse
import gc
import importlib.util
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path


REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402
from transformers import TrainerCallback  # noqa: E402

from recipes.training.architectures import build_model, write_architecture  # noqa: E402
from recipes.training.plan.flops import matmul_parameters, training_flops  # noqa: E402
from recipes.training.plan.tokens import write_synthetic_clips  # noqa: E402
from recipes.training.sft_stages import build_stage_trainer, sft_parser  # noqa: E402


RECIPE = REPO / "recipes" / "qwen3-vl-8b" / "sft" / "config_sureon_vlm.yaml"
VARIANTS = {
    "checkpointing on": {"activation_checkpointing": True},
    "checkpointing off": {"activation_checkpointing": False},
    "frozen vision": {"activation_checkpointing": True, "freeze_vision_tower": True},
}


def tiny_model_dir(work: Path) -> Path:
    """The tiny Qwen3-VL of the tests, at the published patch sizes (2 layers, 2 vision blocks)."""
    from recipes.training.tiny_models import build_tiny_qwen3_vl

    return build_tiny_qwen3_vl(work / "model", max_pixels=768 * 448)


class StepTimer(TrainerCallback):
    """Wall time of each optimiser step (synchronised on GPU)."""

    def __init__(self):
        self.starts, self.times = {}, []

    def _sync(self):
        if torch.cuda.is_available():
            torch.cuda.synchronize()

    def on_step_begin(self, args, state, control, **kwargs):
        self._sync()
        self.starts[state.global_step] = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        self._sync()
        self.times.append(time.perf_counter() - self.starts[state.global_step - 1])


def count_batch(inputs: dict, merge: int) -> list[dict]:
    """What one training batch holds, as ``training_flops`` counts: one entry per row's LLM tokens (padding and the
    masked dummy visuals excluded) and one for all its vision-tower patches."""
    rows = [
        {"tokens": int(n), "vision_patches": 0, "visual_tokens": 0, "windows": []}
        for n in inputs["attention_mask"].sum(1)
    ]
    grids = [grid for key in ("image_grid_thw", "video_grid_thw") if key in inputs for grid in inputs[key].tolist()]
    patches = sum(t * h * w for t, h, w in grids)
    windows = [h * w for t, h, w in grids for _ in range(t)]
    return rows + [{"tokens": 0, "vision_patches": patches, "visual_tokens": patches // merge**2, "windows": windows}]


def record_batches(trainer, merge: int) -> list[list[dict]]:
    """Count every batch the trainer computes a loss on, in the main process (collation may run in workers)."""
    batches, compute_loss = [], trainer.compute_loss

    def counting_compute_loss(model, inputs, *args, **kwargs):
        batches.append(count_batch(inputs, merge))
        return compute_loss(model, inputs, *args, **kwargs)

    trainer.compute_loss = counting_compute_loss
    return batches


def recipe_uses_liger() -> bool:
    """Whether the measured recipe asks for Liger kernels (``use_liger_kernel``); asked for but not installed is an
    error, so that a figure never silently measures another setting."""
    from recipes.training.recipe_file import SFT, read_recipe

    wanted = bool(read_recipe(RECIPE, SFT).get("use_liger_kernel", False))
    if wanted and importlib.util.find_spec("liger_kernel") is None:
        raise SystemExit(f"error: {RECIPE.relative_to(REPO)} sets use_liger_kernel, but liger-kernel is not installed")
    return wanted


def peak_memory_bytes() -> int:
    if torch.cuda.is_available():
        return torch.cuda.max_memory_allocated()
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # CPU: the process's peak resident set


def run_variant(name, overrides, *, model_dir, config, data, batch, steps, warmup, device, dtype, peak_tflops):
    parser = sft_parser()
    from recipes.model_io.modeling import default_attn_implementation

    attn = default_attn_implementation() if device == "cuda" else "sdpa"
    liger = device == "cuda" and recipe_uses_liger()
    script_args, training_args, model_args = parser.parse_dict(
        {
            "model_name_or_path": str(model_dir),
            "dtype": "bfloat16" if dtype == torch.bfloat16 else "float32",
            "attn_implementation": attn,
            "dataset_mixture": [{"path": "parquet", "data_files": str(data), "format": "video_qa"}],
            "frames_as": "video",
            "max_frames": 8,
            "image_max_pixels": 602112,
            "video_max_pixels": 6422528,
            "output_dir": str(Path(data).parent / f"out-{name.replace(' ', '-')}"),
            "max_steps": warmup + steps,
            "per_device_train_batch_size": batch,
            "gradient_accumulation_steps": 1,
            "learning_rate": 1e-5,
            "bf16": dtype == torch.bfloat16,
            "use_cpu": device == "cpu",
            "use_liger_kernel": liger,
            "gradient_checkpointing": overrides["activation_checkpointing"],
            "logging_steps": 1000,
            "save_strategy": "no",
            "report_to": "none",
            "dataloader_num_workers": 0 if device == "cpu" else 4,
            "seed": 0,
            **overrides,
        }
    )
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    torch.manual_seed(0)
    model = build_model(config, device=device, dtype=dtype, attn_implementation=attn)
    stage = {"name": None, "dataset_mixture": script_args.dataset_mixture, "output_dir": training_args.output_dir}
    built = build_stage_trainer(stage, str(model_dir), script_args, training_args, model_args, model=model)
    trainer = built["trainer"]
    batches = record_batches(trainer, built["processor"].image_processor.merge_size)
    timer = StepTimer()
    trainer.add_callback(timer)
    matmuls = matmul_parameters(model)
    frozen = {"vision_tower"} if overrides.get("freeze_vision_tower") else set()
    try:
        trainer.train()
    finally:
        del trainer, built, model
        gc.collect()
    measured = timer.times[warmup:]
    batches = batches[warmup : warmup + len(measured)]
    seconds = sum(measured)
    samples = sum(len(b) - 1 for b in batches)
    tokens = sum(c["tokens"] for b in batches for c in b)
    flops = sum(training_flops(config, matmuls, c, frozen=frozen) for b in batches for c in b)
    return {
        "variant": name,
        "batch": batch,
        "steps": len(measured),
        "samples_per_second": samples / seconds,
        "tokens_per_second": tokens / seconds,
        "peak_memory_gb": peak_memory_bytes() / 1e9,
        "tflops_per_second": flops / seconds / 1e12,
        "mfu": flops / seconds / (peak_tflops * 1e12),
        "attention": attn,
        "liger": liger,
    }


def is_out_of_memory(err: BaseException) -> bool:
    return isinstance(err, torch.cuda.OutOfMemoryError) or "out of memory" in str(err).lower()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="the tiny config on CPU (what the tests run)")
    parser.add_argument("--steps", type=int, default=4, help="measured optimiser steps per variant")
    parser.add_argument("--warmup", type=int, default=1, help="unmeasured steps first")
    parser.add_argument("--batch-size", type=int, default=4, help="samples per step (the recipe's per-GPU batch)")
    parser.add_argument("--frame-size", default="768x432", help="synthetic frame size WxH")
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    parser.add_argument("--peak-tflops", type=float, help="dense bf16 peak (default 989, an H200; 1.0 on CPU)")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON here")
    args = parser.parse_args(argv)
    from transformers import AutoConfig

    from recipes.training.plan.command import parse_size

    device = "cuda" if torch.cuda.is_available() and not args.tiny else "cpu"
    if not args.tiny and device != "cuda":
        raise SystemExit("no CUDA GPU: run with --tiny on a CPU")
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    peak = args.peak_tflops or (989.0 if device == "cuda" else 1.0)
    size = parse_size(args.frame_size) if not args.tiny else (128, 96)
    work = Path(tempfile.mkdtemp(prefix="gpu_sft_"))
    if args.tiny:
        model_dir = tiny_model_dir(work)
    else:
        model_dir = write_architecture("Qwen/Qwen3-VL-8B-Instruct", work / "model")
    config = AutoConfig.from_pretrained(model_dir)
    clips = (args.warmup + args.steps) * args.batch_size * 2
    data = write_synthetic_clips(work, clips, size, 8)
    device_name = torch.cuda.get_device_name() if device == "cuda" else "CPU"
    print(f"{'tiny Qwen3-VL' if args.tiny else 'Qwen3-VL-8B (random weights)'} on {device_name}, {args.steps} steps")
    print(f"8-frame clips of {size[0]}x{size[1]} frames, {args.warmup} warm-up step(s)")
    results = []
    for name in args.variants:
        batch, result = args.batch_size, None
        while result is None:
            try:
                result = run_variant(
                    name,
                    VARIANTS[name],
                    model_dir=model_dir,
                    config=config,
                    data=data,
                    batch=batch,
                    steps=args.steps,
                    warmup=args.warmup,
                    device=device,
                    dtype=dtype,
                    peak_tflops=peak,
                )
            except (RuntimeError, torch.cuda.OutOfMemoryError) as err:
                if not is_out_of_memory(err) or batch == 1:
                    raise
                print(f"{name}: out of memory at batch {batch}, retrying with batch {batch // 2}")
                batch //= 2
            # Outside the except clause, so the traceback (and the tensors its frames hold) is gone.
            gc.collect()
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        results.append(result)
        print(
            f"{name:18s} batch {result['batch']}: {result['samples_per_second']:.2f} samples/s, "
            f"{result['tokens_per_second']:,.0f} tokens/s, peak memory {result['peak_memory_gb']:.2f} GB, "
            f"{result['tflops_per_second']:.3g} TFLOPS, MFU {result['mfu']:.2%} (attention {result['attention']}, "
            f"liger {'on' if result['liger'] else 'off'})"
        )
    baseline = next((r for r in results if r["variant"] == "checkpointing on"), results[0])
    for result in results:
        if result is baseline:
            continue
        print(
            f"ratio {result['variant']} / {baseline['variant']}: samples/s "
            f"{result['samples_per_second'] / baseline['samples_per_second']:.2f}x, peak memory "
            f"{result['peak_memory_gb'] / baseline['peak_memory_gb']:.2f}x"
        )
    if args.json:
        args.json.write_text(json.dumps({"device": device_name, "peak_tflops": peak, "results": results}, indent=1))
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    raise SystemExit(main())
