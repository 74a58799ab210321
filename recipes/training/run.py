"""A training run's skeleton, for ``recipes/sft.py`` and ``recipes/grpo.py`` alike; each script's ``main`` reads as
these steps, with its own checks and trainer between them:

1. :func:`check_launch`: a model named, the launch's ranks and batch right, the model folder loadable;
2. :func:`requested_resume`: a ``resume_from_checkpoint`` checked whole before anything loads;
3. :func:`claim_run`: the output folder claimed (below), the push request taken out of the training arguments;
4. :func:`train`: from the newest complete checkpoint (:mod:`recipes.training.checkpoints`);
5. :func:`finish_training`: the final model saved (every rank), then the processor, the run's own files and the
   record (:mod:`recipes.model_io.run_record`, last) written by rank 0, and every rank waits;
6. :func:`publish_run`: once every rank is done, the model card and the upload, on rank 0 only.

The rules around those steps:

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

import logging
import os
from collections.abc import Callable, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import torch
from transformers import TrainerCallback

from builders.errors import InputError
from builders.outputs import MARKER, check_output_location, publish_permissions, write_atomic
from recipes.model_io.model_folder import check_model_path
from recipes.model_io.modeling import tokenizer_of
from recipes.model_io.run_record import COMPLETE_MARKER, run_record, write_run_record
from recipes.training.checkpoints import resume_checkpoint
from recipes.training.launch import prepare_launch, save_in_recipe_dtype


logger = logging.getLogger(__name__)

ADAPTER_DIR = "adapter"
ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors", "adapter_model.bin")
_MARKER_TEXT = "written by a training run of sureon-recipes (recipes/sft.py, recipes/grpo.py)\n"


def check_launch(script_args, training_args, model_args, *, model_hint: str):
    """The run's first step, before any data or weights load: a model is named (``model_hint`` says which kind), the
    launch gives one rank per GPU and the recipe's global batch (:func:`recipes.training.launch.prepare_launch`), and
    the model folder holds a model (:func:`recipes.model_io.model_folder.check_model_path`). Returns the training
    arguments the launch prepared."""
    if not model_args.model_name_or_path:
        raise InputError(f"model_name_or_path is required ({model_hint})")
    training_args = prepare_launch(script_args, training_args)
    check_model_path(model_args.model_name_or_path, "model_name_or_path", model_args.model_revision)
    return training_args


def requested_resume(training_args, output_dir: str | Path) -> str | None:
    """The recipe's ``resume_from_checkpoint``, checked whole before anything loads (a checkpoint cut short is one
    line), or None."""
    requested = training_args.resume_from_checkpoint
    if requested:
        resume_checkpoint(output_dir, requested, expect_optimizer=not training_args.save_only_model)
    return requested


def set_fields(training_args, **values) -> None:
    """Change training arguments in place: ``dataclasses.replace`` would rerun GRPOConfig's ``__post_init__``, which
    refuses the ``generation_batch_size`` and ``steps_per_generation`` it derived itself the first time."""
    for name, value in values.items():
        setattr(training_args, name, value)


@dataclass(frozen=True)
class PushRequest:
    """What ``push_to_hub`` asked for, taken out of the training arguments before training: pushing is the run's,
    once, with its card, never the Trainer's (it would push every checkpoint with its own card), and the token never
    reaches the arguments the Trainer pickles into every checkpoint."""

    wanted: bool
    repo_id: str | None
    private: bool
    token: str | None = field(default=None, repr=False)


def claim_run(
    training_args, model_args, mixtures: list, *, recipe: str | None, eval_results: str | None
) -> PushRequest:
    """Claim ``output_dir`` (:func:`claim_output_dir`, against every input of the run: the model, each mixture in
    ``mixtures``, the recipe, the card's results file) once every check has passed, and take the push request out of
    the training arguments (with ``resume_from_checkpoint``, which :func:`train` applies itself)."""
    inputs = run_inputs(model_args.model_name_or_path, mixtures, recipe=recipe, eval_results=eval_results)
    claim_output_dir(training_args.output_dir, inputs, main_process=training_args.process_index == 0)
    push = PushRequest(
        wanted=bool(training_args.push_to_hub),
        repo_id=training_args.hub_model_id,
        private=bool(training_args.hub_private_repo),
        token=training_args.hub_token,
    )
    set_fields(training_args, push_to_hub=False, hub_token=None, resume_from_checkpoint=None)
    return push


def train(trainer, requested: str | None, *, cpu_labelled_positions_only: bool):
    """Train from the newest complete checkpoint in the trainer's ``output_dir`` (or ``requested``, checked whole);
    a newer checkpoint cut short is named in a warning and kept. Returns ``(TrainOutput, the checkpoint resumed
    from or None)``."""
    output_dir = trainer.args.output_dir
    trainer.add_callback(PublishCheckpoints())
    resume, warnings = resume_checkpoint(output_dir, requested, expect_optimizer=not trainer.args.save_only_model)
    for warning in warnings if trainer.is_world_process_zero() else []:
        logger.warning("%s: %s", output_dir, warning)
    if resume:
        logger.info("resuming from %s", resume)
    with labelled_positions_only_on_cpu(cpu_labelled_positions_only):
        result = trainer.train(resume_from_checkpoint=resume)
    return result, resume


def finish_training(
    trainer, model_args, processor, kind: str, fields: dict, *, result, resume: str | None, files: dict | None = None
) -> dict:
    """Save the final model (every rank: ZeRO-3 gathers it; :func:`save_final_model`), then on rank 0 the processor
    (left padding, what generation needs), ``files`` (``{name: text}``), permissions and, last, the run's record of
    ``kind``: ``fields`` plus what every run records alike. Every rank waits for rank 0. Returns the record."""
    output_dir = Path(trainer.args.output_dir)
    saved = save_final_model(trainer, output_dir, model_args)
    record = run_record(
        kind,
        {
            **fields,
            "resumed_from": resume,
            "global_step": trainer.state.global_step,
            "world_size": trainer.args.world_size,
            "train_loss": result.training_loss,
            "lora": model_args.lora_target_modules if getattr(model_args, "use_peft", False) else None,
            **saved,
        },
    )
    if trainer.is_world_process_zero():
        tokenizer_of(processor).padding_side = "left"
        processor.save_pretrained(str(output_dir))
        for name, text in (files or {}).items():
            write_atomic(output_dir / name, text)
        publish_permissions(output_dir)
        write_run_record(output_dir, record)
    trainer.accelerator.wait_for_everyone()
    return record


def publish_run(output_dir: str | Path, push: PushRequest, write_card: Callable[[], Path], *, main_process: bool):
    """The run's last step, on rank 0 once every rank is done: the model card (``write_card()``), then the upload when
    asked. Nothing waits on the upload (its time is unbounded): a rank waiting for it in a barrier would hit the
    process group's timeout (30 minutes by default) and abort the run mid-push."""
    if not main_process:
        return
    logger.info("model card: %s", write_card())
    if push.wanted:
        from builders.hub import push_folder

        repo_id = push.repo_id or Path(output_dir).name
        url = push_folder(output_dir, repo_id, private=push.private, token=push.token, repo_type="model")
        logger.info("pushed to %s", url)


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
