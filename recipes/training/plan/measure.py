"""``sureon plan --measure``: the plan's FLOPs and memory models checked against one training step of the recipe at
its real widths, on whatever machine runs it (a CPU is enough).

The recipe's architecture is built at every real width, with the real vocabulary (151,936 logits per token), vision
width and deepstack mergers, and only the depth cut (:func:`recipes.training.architectures.cut_depth_config`): as
many text layers and vision blocks as deepstack taps (3 + 3 for Qwen3-VL-8B), then one more text layer, then one more
vision block, so that what one layer or block adds is a difference of two measurements. Each model takes one
training step through ``recipes/sft.py``'s own trainer (``recipes.training.sft_stages``: the recipe's collator,
frames, pixel caps, freezing, LoRA, uniform vision calls, and TRL's loss, the fused LM head that scores only the
labelled positions as it does on CUDA), checkpointing off and on, on the same rows: ``--synthetic-frames`` clips, or
a seeded sample of the mixture's rows. Nothing is downloaded; the weights are never read from disk.

Measured (:mod:`recipes.training.plan.instruments`): FLOPs by PyTorch's counter; the bytes of live tensors at every
moment of the step, hence what the forward keeps for backward, the loss's peak and the step's peak; the weights,
gradients and the optimizer's states per parameter (the recipe's optimizer, stepped on one block). Predicted: the
plan's own formulas (``flops.py``, ``memory.py``) at the same depths for the same rows. FLOPs and activations per
layer are extrapolated to the full depth. What a CPU cannot stand for is listed in ``docs/training/planning.md``.
"""

import copy
import gc
import platform
import resource
import tempfile
import time
from datetime import date
from pathlib import Path

import numpy as np

from builders.errors import InputError


# Rows of one measured step by default: the per-token and per-patch figures do not depend on it, and the recipe's
# batch of 4 clips holds four times the activations (more than a 16 GB machine has beside the 2 B weights).
MEASURE_BATCH = 1
ARITHMETIC = ("skip", "compute")
CHECKPOINTING_ORDER = (False, True)


def machine() -> dict:
    """The machine and software the measurement ran on, as the docs report it."""
    import os

    import torch
    import transformers
    import trl

    model_name = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model_name = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": model_name,
        "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "date": date.today().isoformat(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "trl": trl.__version__,
    }


def depths(config) -> dict[str, tuple[int, int]]:
    """(text layers, vision blocks) of the measured models: the base, a faithful miniature (as many text layers and
    vision blocks as deepstack taps, so that every deepstack merger feeds a text layer and trains, as in the full
    model: with fewer text layers the unused mergers would get no gradient and every difference would be off by
    their backward), then one more text layer, then one more vision block."""
    vision = getattr(config, "vision_config", None)
    taps = len(getattr(vision, "deepstack_visual_indexes", None) or []) if vision is not None else 0
    layers, blocks = max(1, taps), (max(1, taps) if vision is not None else None)
    cuts = {"base": (layers, blocks), "text layer": (layers + 1, blocks)}
    if vision is not None:
        cuts["vision block"] = (layers, blocks + 1)
    return cuts


def build_unset_model(config, *, compute: bool, seed: int):
    """The model at ``config`` on the CPU in bf16 with sdpa attention. Its weights are the model's own seeded random
    initialisation when the arithmetic is computed, zeros when it is skipped (no product reads them then, and the
    initialisation of 1.65 B parameters costs a CPU 40 s)."""
    import torch
    from transformers import AutoModelForImageTextToText
    from transformers.initialization import no_init_weights

    torch.manual_seed(seed)
    if compute:
        with torch.device("cpu"):
            return AutoModelForImageTextToText.from_config(config, dtype=torch.bfloat16, attn_implementation="sdpa")
    with no_init_weights(), torch.device("cpu"):
        model = AutoModelForImageTextToText.from_config(config, dtype=torch.bfloat16, attn_implementation="sdpa")
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.zero_()
    return model


def stage_arguments(recipe_values: dict, *, model_dir: Path, mixture: list[dict], out: Path, batch: int):
    """``recipes/sft.py``'s parsed arguments for the recipe with only what a measurement must change: the cut-depth
    model folder, the rows, the CPU, one step of ``batch`` rows, no logging, saving or pushing."""
    from recipes.training.sft_stages import sft_parser

    # one step of `batch` rows: the recipe's global batch (its accumulation) is not what is measured
    values = {key: value for key, value in recipe_values.items() if key not in ("stages", "global_batch_size")}
    values |= {
        "model_name_or_path": str(model_dir),
        "dataset_mixture": mixture,
        "output_dir": str(out),
        "use_cpu": True,
        "max_steps": 1,
        "per_device_train_batch_size": batch,
        "gradient_accumulation_steps": 1,
        "dataloader_num_workers": 0,
        "report_to": "none",
        "save_strategy": "no",
        "push_to_hub": False,
        "encoded_cache_mb": 0,
    }
    return sft_parser().parse_dict(values)


def batch_counts(batch: dict, merge: int) -> list[dict]:
    """What one collated batch runs, as the plan's formulas take it: one entry per row with the padded width (the
    LLM runs over the padding too) and the positions the loss scores (TRL shifts the labels by one), and one entry
    for every vision-tower patch of the batch (the uniform vision calls' placeholder image included)."""
    labels = batch["labels"][:, 1:]
    width = int(batch["input_ids"].shape[1])
    rows = [
        {"tokens": width, "labelled": int(n), "vision_patches": 0, "visual_tokens": 0, "windows": []}
        for n in (labels != -100).sum(1)
    ]
    grids = [grid for key in ("image_grid_thw", "video_grid_thw") if key in batch for grid in batch[key].tolist()]
    patches = sum(t * h * w for t, h, w in grids)
    vision = {
        "tokens": 0,
        "labelled": 0,
        "vision_patches": patches,
        "visual_tokens": patches // merge**2,
        "windows": [h * w for t, h, w in grids for _ in range(t)],
    }
    return rows + [vision]


def _unwrapped(model):
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def _storage_bytes(tensors) -> int:
    seen = {}
    for tensor in tensors:
        if tensor is not None:
            storage = tensor.untyped_storage()
            seen[storage._cdata] = storage.nbytes()
    return sum(seen.values())


def run_step(trainer, batch: dict, *, skip_arithmetic: bool) -> dict:
    """One forward and backward of ``trainer``'s model on ``batch`` as ``Trainer.training_step`` runs it (the
    compute-loss context, TRL's loss, the accelerator's backward), measured (module docstring). The optimizer is
    not stepped here (:func:`optimizer_bytes_per_parameter`)."""
    import torch

    from recipes.training.plan.instruments import instruments
    from recipes.training.run import labelled_positions_only_on_cpu

    model = trainer.model
    model.train()
    model.zero_grad(set_to_none=True)
    gc.collect()  # the last run's garbage, out of this process's resident memory before this one starts
    backbone = _unwrapped(model).base_model
    figures: dict = {}
    started = time.perf_counter()
    with labelled_positions_only_on_cpu(True), instruments(skip_arithmetic) as (live, flops):
        live.include([*model.parameters(), *model.buffers(), *batch.values()])
        figures["weights_and_inputs"] = live.live

        def loss_head_starts(module, args, output):
            figures["loss_head_start"] = live.start_region("loss head")

            def loss_head_ends(gradient):
                figures["loss_head_peak"] = live.end_region("loss head")[1]

            output.last_hidden_state.register_hook(loss_head_ends)

        hook = backbone.register_forward_hook(loss_head_starts)
        try:
            with trainer.compute_loss_context_manager():
                loss = trainer.compute_loss(model, batch)
            hook.remove()
            figures["after_forward"] = live.live
            forward_flops = flops.total
            trainer.accelerator.backward(loss)
        finally:
            hook.remove()
        del loss
        figures["after_backward"] = live.live
        figures["peak"] = live.peak
        figures["flops"] = flops.total
        figures["forward_flops"] = forward_flops
    figures["seconds"] = time.perf_counter() - started
    parameters = [p for p in model.parameters()]
    figures["weights"] = _storage_bytes([*parameters, *model.buffers()])
    figures["inputs"] = _storage_bytes([value for value in batch.values() if isinstance(value, torch.Tensor)])
    figures["gradients"] = _storage_bytes([p.grad for p in parameters])
    figures["trainable"] = sum(p.numel() for p in parameters if p.requires_grad)
    figures["total_parameters"] = sum(p.numel() for p in parameters)
    figures["retained"] = figures["after_forward"] - figures["weights_and_inputs"]
    # The loss's backward, above what the forward leaves (its own saved tensors are in ``retained``).
    figures["loss_head"] = figures["loss_head_peak"] - figures["after_forward"]
    del parameters
    model.zero_grad(set_to_none=True)
    return figures


def optimizer_bytes_per_parameter(trainer) -> dict:
    """The recipe's optimizer (the trainer's class and arguments) stepped once on the smallest trained block of the
    model that has gradients (a vision block, else a decoder layer): bytes of its states per parameter."""
    import torch
    from transformers import Trainer

    from recipes.training.plan.parameters import BLOCK_CLASSES

    model = trainer.model
    blocks = [
        module
        for module in model.modules()
        if type(module).__name__ in BLOCK_CLASSES and any(p.requires_grad for p in module.parameters())
    ]
    if not blocks:
        return {"optimizer": None, "bytes_per_parameter": None}
    block = min(blocks, key=lambda module: sum(p.numel() for p in module.parameters()))
    parameters = [p for p in block.parameters() if p.requires_grad]
    for parameter in parameters:
        parameter.grad = torch.zeros_like(parameter)
    optimizer_class, optimizer_kwargs = Trainer.get_optimizer_cls_and_kwargs(trainer.args, model)
    optimizer = optimizer_class(parameters, **optimizer_kwargs)
    optimizer.step()
    states = [value for state in optimizer.state.values() for value in state.values() if torch.is_tensor(value)]
    state_bytes = _storage_bytes(states)
    count = sum(p.numel() for p in parameters)
    for parameter in parameters:
        parameter.grad = None
    del optimizer, states
    return {
        "optimizer": str(getattr(trainer.args.optim, "value", trainer.args.optim)),
        "bytes_per_parameter": state_bytes / count,
    }


def pick_rows(stage: dict, settings: dict, synthetic_frames, batch: int, seed: int, work: Path) -> tuple[list, str]:
    """The mixture and the rows measured: ``batch`` synthetic clips written to ``work``, or ``batch`` rows of the
    stage's mixture drawn with ``seed``; returns (mixture entries, rows' description)."""
    if synthetic_frames:
        frames = settings.get("max_frames") or 8
        from recipes.training.plan.tokens import write_synthetic_clips

        data = write_synthetic_clips(work, batch, synthetic_frames, frames)
        mixture = [{"path": "parquet", "data_files": str(data), "format": "video_qa"}]
        width, height = synthetic_frames
        return mixture, f"{batch} synthetic {frames}-frame clip(s) of {width}x{height}"
    return stage["mixture"], f"{batch} row(s) of the mixture drawn with seed {seed}"


def measure_stage(
    recipe_values: dict,
    stage: dict,
    config,
    *,
    processor,
    synthetic_frames: tuple[int, int] | None,
    batch: int = MEASURE_BATCH,
    arithmetic: str = "skip",
    seed: int = 42,
    models: tuple[str, ...] | None = None,
) -> dict:
    """Measure one SFT stage (module docstring); returns the raw figures of every model (of :func:`depths`, or only
    ``models`` of them) and checkpointing setting, the rows' counts and the machine;
    ``recipes.training.plan.comparison.compare`` sets them beside the plan's."""
    import torch

    from recipes.training.architectures import cut_depth_config, write_architecture
    from recipes.training.sft_stages import build_stage_trainer

    if arithmetic not in ARITHMETIC:
        raise InputError(f"--measure-arithmetic must be one of {ARITHMETIC}, got {arithmetic!r}")
    started = time.perf_counter()
    settings = stage["settings"]
    cuts = {name: cut for name, cut in depths(config).items() if models is None or name in models}
    runs: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="sureon_measure_") as temporary:
        work = Path(temporary)
        mixture, rows = pick_rows(stage, settings, synthetic_frames, batch, seed, work)
        text_layers, vision_blocks = cuts["base"]
        model_dir = write_architecture(
            None,
            work / "model",
            processor=processor,
            config=cut_depth_config(config, text_layers=text_layers, vision_blocks=vision_blocks),
        )
        script_args, training_args, model_args = stage_arguments(
            {**recipe_values, **settings}, model_dir=model_dir, mixture=mixture, out=work / "out", batch=batch
        )
        collated, counts, optimizer = None, None, None
        for name, (text_layers, vision_blocks) in cuts.items():
            cut = cut_depth_config(
                _with_token_ids(config, model_dir), text_layers=text_layers, vision_blocks=vision_blocks
            )
            model = build_unset_model(cut, compute=arithmetic == "compute", seed=seed)
            built = build_stage_trainer(
                {"name": None, "dataset_mixture": mixture, "output_dir": training_args.output_dir},
                str(model_dir),
                script_args,
                training_args,
                model_args,
                model=model,
            )
            trainer = built["trainer"]
            if collated is None:
                collated, counts = _collate(trainer, built["processor"], batch, seed)
            head = _unwrapped(trainer.model).get_output_embeddings().weight
            head_trains = head.requires_grad
            # The models one layer or block apart are compared with the LM head frozen: at the real vocabulary its
            # gradient is a transient of 6 bytes per weight (3.7 GB) that would not fit beside the larger model's
            # layers in a 16 GB machine, and it is the same in both models of a difference, so it cancels there. The
            # base alone (no difference to take) is measured as the recipe trains it.
            paired = len(cuts) > 1
            if not head_trains:
                heads = (True,)
            elif name == "base":
                heads = (True, False) if paired else (True,)
            else:
                heads = (False,)
            for as_recipe in heads:
                head.requires_grad_(head_trains and as_recipe)
                for checkpointing in CHECKPOINTING_ORDER:
                    if checkpointing:
                        trainer.model.activation_checkpointing_enable(
                            activation_checkpointing_kwargs=training_args.activation_checkpointing_kwargs or None
                        )
                    else:
                        trainer.model.activation_checkpointing_disable()
                    figures = run_step(trainer, collated, skip_arithmetic=arithmetic == "skip")
                    head_note = "" if as_recipe else ", LM head frozen"
                    label = f"{name}{head_note}, checkpointing {'on' if checkpointing else 'off'}"
                    runs[label] = {
                        "text_layers": text_layers,
                        "vision_blocks": vision_blocks,
                        "checkpointing": checkpointing,
                        "lm_head_trains": head_trains and as_recipe,
                        **figures,
                    }
            head.requires_grad_(head_trains)
            if optimizer is None:
                optimizer = optimizer_bytes_per_parameter(trainer)
            del trainer, built, model, head
            gc.collect()
    torch.set_grad_enabled(True)
    return {
        "machine": machine(),
        "arithmetic": "skipped (zeros of the right shapes)" if arithmetic == "skip" else "computed",
        "rows": rows,
        "batch": batch,
        "counts": counts,
        "depths": {name: list(cut) for name, cut in cuts.items()},
        "runs": runs,
        "optimizer": optimizer,
        "seconds": time.perf_counter() - started,
        "peak_resident_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }


def _collate(trainer, processor, batch: int, seed: int) -> tuple[dict, list[dict]]:
    """``batch`` rows of the trainer's index drawn with ``seed``, collated by the recipe's collator, and what they
    hold (:func:`batch_counts`)."""
    index = trainer.train_dataset
    picked = np.random.default_rng(seed).choice(len(index), size=min(batch, len(index)), replace=False)
    collated = trainer.data_collator([index[int(i)] for i in sorted(picked)])
    merge = getattr(getattr(processor, "image_processor", None), "merge_size", 1) or 1
    return collated, batch_counts(collated, merge)


def _with_token_ids(config, model_dir: Path):
    """``config`` with the token ids the processor in ``model_dir`` uses (``write_architecture`` set them there)."""
    from transformers import AutoConfig

    written = AutoConfig.from_pretrained(model_dir)
    config = copy.deepcopy(config)
    for key in ("image_token_id", "video_token_id", "vision_start_token_id", "vision_end_token_id"):
        setattr(config, key, getattr(written, key))
    for key in ("eos_token_id", "pad_token_id", "bos_token_id"):
        setattr(config.text_config, key, getattr(written.text_config, key))
    return config
