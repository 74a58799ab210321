"""Around a training run's steps, for ``recipes/sft.py`` and ``recipes/grpo.py`` alike: the output folder claimed
before anything loads, the checkpoint resumed from, and the final model saved so that every command can use it.

- **The output folder is the run's, never an input.** :func:`claim_output_dir` refuses an ``output_dir`` that is,
  contains or lies inside an input of the run (the model it starts from, every mixture build, the recipe, the
  results file of the card): a run writing there replaced the base model's weights, or a build's README.md (its config
  table, after which ``load_dataset(build, "bench")`` found only ``default``), or "resumed" GRPO from the SFT run it
  was meant to start from, with SFT's optimizer and learning rate. An existing folder must be one a training run of
  this project made (the ``.sureon-output`` marker builds carry, written when the run claims a new or empty folder);
  a folder of the user's is never written into.
- **Resume** from the newest complete checkpoint (:mod:`recipes.training.checkpoints`), or from the recipe's
  ``resume_from_checkpoint`` once it is checked whole.
- **A LoRA run ends with a full model.** ``PeftModel.save_pretrained`` writes only ``adapter_config.json`` and
  ``adapter_model.safetensors``: no ``config.json``, so evaluation, GRPO's start, the guessers, ``sureon push`` and
  the vLLM environment could not load it. :func:`save_final_model` keeps the adapter in ``output_dir/adapter/`` and
  writes the base model with the adapter merged in ``output_dir`` (rank 0, after every rank has saved), in the base
  checkpoint's key layout.
- **Weights readable as the user's umask allows**, checkpoints included
  (:func:`builders.outputs.publish_permissions`: ``safetensors`` writes every file 0600).
"""

import json
import logging
import os
from collections.abc import Mapping
from contextlib import contextmanager
from pathlib import Path

import torch
from transformers import TrainerCallback

from builders.errors import InputError
from builders.outputs import MARKER, check_output_location, publish_permissions, write_atomic
from recipes.model_io.run_record import COMPLETE_MARKER
from recipes.training.launch import save_in_recipe_dtype


logger = logging.getLogger(__name__)

ADAPTER_DIR = "adapter"
ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors", "adapter_model.bin")
_MARKER_TEXT = "written by a training run of sureon-recipes (recipes/sft.py, recipes/grpo.py)\n"


def run_inputs(model_path: str | None, mixtures: list, *, recipe: str | None = None, **files) -> dict[str, str]:
    """``{label: path}`` of everything a run reads that lies on this machine: the model it starts from, each mixture
    source's folder (``mixtures``: dataset_mixture lists), the recipe, and other ``files`` (``eval_results=...``)."""
    inputs = {}
    if model_path:
        inputs["model_name_or_path"] = model_path
    for stage, mixture in enumerate(mixtures, start=1):
        prefix = f"stage {stage} " if len(mixtures) > 1 else ""
        for position, source in enumerate(mixture or []):
            path = source.get("path") if isinstance(source, dict) else source
            data_files = source.get("data_files") if isinstance(source, dict) else None
            for number, value in enumerate([path, *_as_list(data_files)]):
                label = f"{prefix}dataset_mixture[{position}]" + (f" data_files[{number - 1}]" if number else "")
                if isinstance(value, str):
                    inputs[label] = value
    if recipe:
        inputs["the recipe"] = recipe
    for label, path in files.items():
        if path:
            inputs[label] = path
    return {label: path for label, path in inputs.items() if Path(path).expanduser().exists()}


def _as_list(value) -> list:
    if value is None:
        return []
    if isinstance(value, dict):
        return [item for entry in value.values() for item in _as_list(entry)]
    return list(value) if isinstance(value, list | tuple) else [value]


def claim_output_dir(output_dir: str | Path, inputs: Mapping[str, str], *, main_process: bool) -> None:
    """Refuse an ``output_dir`` that is, contains or lies inside one of ``inputs``, or that holds files no training
    run of this project wrote; otherwise mark it as the run's (``main_process`` writes the marker). Every rank checks,
    so every rank stops with the same one line."""
    out = Path(output_dir)
    check_output_location(out, inputs, option="output_dir")
    if out.exists() and not out.is_dir():
        raise InputError(f"output_dir {out} is a file: give a folder for the run (nothing was written)")
    if out.is_dir() and not (out / MARKER).is_file() and any(out.iterdir()):
        earlier = any((out / name).exists() for name in (COMPLETE_MARKER, "trainer_state.json")) or any(
            out.glob("checkpoint-*")
        )
        hint = (
            f"if it is a run of an earlier version of this project, mark it as one with `touch {out / MARKER}`"
            if earlier
            else "choose a new output_dir"
        )
        raise InputError(
            f"output_dir {out} holds files that no training run of sureon-recipes wrote (it has no {MARKER}): a run "
            f"never writes into a folder of yours; {hint} (nothing was written)"
        )
    if main_process and not (out / MARKER).is_file():
        out.mkdir(parents=True, exist_ok=True)
        write_atomic(out / MARKER, _MARKER_TEXT)


class PublishCheckpoints(TrainerCallback):
    """Checkpoints readable as the umask allows, as soon as each is saved (:func:`publish_permissions`)."""

    def on_save(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            if folder.is_dir():
                publish_permissions(folder)
        return control


@contextmanager
def _zero3_initialisation_off():
    """Load a model whole in one process although the run trains under ZeRO-3: transformers partitions every model it
    loads while a ZeRO-3 config is registered (``is_deepspeed_zero3_enabled``), which on one rank alone would wait on
    the others forever."""
    from transformers.integrations import deepspeed

    registered = deepspeed._hf_deepspeed_config_weak_ref
    deepspeed.unset_hf_deepspeed_config()
    try:
        yield
    finally:
        deepspeed._hf_deepspeed_config_weak_ref = registered


def merge_adapter(output_dir: str | Path, base_model: str, *, revision: str | None = None, dtype=None) -> Path:
    """Move the adapter the trainer saved in ``output_dir`` to ``output_dir/adapter`` and write the base model with
    the adapter merged in ``output_dir``; returns the adapter's folder."""
    from peft import PeftModel

    from recipes.model_io.modeling import load_model

    out = Path(output_dir)
    adapter = out / ADAPTER_DIR
    adapter.mkdir(exist_ok=True)
    for name in ADAPTER_FILES:
        if (out / name).is_file():
            os.replace(out / name, adapter / name)
    with _zero3_initialisation_off():
        base = load_model(base_model, revision=revision, dtype=dtype, attn_implementation="sdpa", device_map="cpu")
        merged = PeftModel.from_pretrained(base, str(adapter)).merge_and_unload()
        merged.save_pretrained(str(out))
    logger.info("LoRA adapter merged into %s (the adapter alone: %s)", out, adapter)
    return adapter


def save_final_model(trainer, output_dir: str | Path, model_args) -> dict:
    """Save the trained weights (every rank takes part: ZeRO-3 gathers them), then, on rank 0, merge a LoRA adapter
    into a full model, cast what FSDP saved in fp32 back to the recipe's dtype
    (:func:`recipes.training.launch.save_in_recipe_dtype`) and make the files readable as the umask allows. Returns
    what the run's record says of it."""
    trainer.save_model(str(output_dir))
    trainer.accelerator.wait_for_everyone()
    adapter = None
    if trainer.is_world_process_zero():
        if (Path(output_dir) / "adapter_config.json").is_file():
            adapter = merge_adapter(
                output_dir, model_args.model_name_or_path, revision=model_args.model_revision, dtype=model_args.dtype
            )
        save_in_recipe_dtype(output_dir, model_args.dtype)
        publish_permissions(output_dir)
    uses_peft = bool(getattr(model_args, "use_peft", False))
    return {"adapter": ADAPTER_DIR if uses_peft else None, "merged": uses_peft and adapter is not None}


def write_record(output_dir: str | Path, summary: dict) -> Path:
    """``training_complete.json``: written last and atomically, so its presence says the run finished."""
    return write_atomic(Path(output_dir) / COMPLETE_MARKER, json.dumps(summary, indent=1, default=str))


@contextmanager
def labelled_positions_only_on_cpu(enabled: bool = True):
    """While active (and ``enabled``), TRL's fused LM head scores only the labelled positions on a CPU, as it does on
    CUDA; yields whether that applies (False, and nothing changed, where TRL's internals are not the ones this was
    written against). The recipes' ``cpu_labelled_positions_only`` (off by default).

    SFTTrainer and GRPOTrainer put a fused LM head on the model (``trl.trainer.utils.add_fused_lm_head``, TRL 1.16):
    on CUDA and XPU it projects only the positions that have a label, elsewhere every position, since a count that
    changes with each batch would change the tile shapes and recompile on Neuron (its own comment). Eager PyTorch on a
    CPU recompiles nothing, so the prompt's positions (all but the answer's ~8 tokens of an SFT row) are projected
    through the vocabulary only to be masked: about 40 % of a tiny recipe's step. Only that choice is changed, not
    the kernels (``trl.kernels.chunked_logprob`` keeps its own); the log-probabilities of the labelled positions, and
    so the loss, the entropy and the accuracy TRL logs, agree with projecting every position to float rounding
    (``benchmarks/cpu_lm_head.py``: 0.59x the CPU time a step). Off by default because float rounding is enough to
    move a tiny model's learning curve: ``make reproduce`` with it gave another Table 4 (see the README).
    """
    try:
        from trl.trainer import utils as trl_utils
    except ImportError:
        yield False
        return
    chooses_compact = getattr(trl_utils, "_use_triton", None)
    if not enabled or chooses_compact is None:
        yield False
        return

    def compact_on_cpu_too(device: torch.device) -> bool:
        return device.type == "cpu" or chooses_compact(device)

    trl_utils._use_triton = compact_on_cpu_too
    try:
        yield True
    finally:
        trl_utils._use_triton = chooses_compact
