"""One SFT stage made ready to train: the stages of a recipe, the trainer of each (processor with the pixel caps,
model, freezing, mixture, collator). ``recipes/sft.py`` trains them; ``sureon plan --measure`` and
``benchmarks/gpu_sft.py`` take single steps with the same trainer, so that what they measure is what the recipe runs.
"""

import dataclasses
import gc
import sys
from pathlib import Path

import torch
from trl import ModelConfig, SFTConfig, SFTTrainer, TrlParser, get_peft_config

from builders.errors import InputError
from recipes.model_io.modeling import (
    apply_pixel_caps,
    attention_implementation,
    is_vision_language,
    load_model,
    load_processor,
)
from recipes.training.arguments import SFTScriptArguments
from recipes.training.batching import GROUPED, cached_row_lengths, use_grouped_batches
from recipes.training.collator import SFTCollator
from recipes.training.freezing import apply_freezing, trainable_parameter_count
from recipes.training.mixture import build_mixture, check_evaluation_data, check_frames, parse_mixture
from recipes.training.recipe_file import SFT, check_fields, settable_fields
from recipes.training.scripts import RecipeParser, available_reporters, configure_reporting


REFUSED_ROWS = "rows_over_max_length"  # in a stage's output folder: the rows its max_length refused


def sft_parser() -> TrlParser:
    """``recipes/sft.py``'s parser: its script arguments, TRL's ``SFTConfig`` and ``ModelConfig``, from a recipe."""
    return RecipeParser((SFTScriptArguments, SFTConfig, ModelConfig), SFT)


def stage_plan(script_args: SFTScriptArguments, training_args: SFTConfig) -> list[dict]:
    """``[{name, dataset_mixture, output_dir, overrides}]``: one stage, or the recipe's ``stages`` in order."""
    if script_args.stages and script_args.dataset_mixture:
        raise InputError("give either dataset_mixture (one stage) or stages (each with its dataset_mixture), not both")
    if not script_args.stages:
        return [{"name": None, "dataset_mixture": script_args.dataset_mixture, "output_dir": training_args.output_dir}]
    fields = settable_fields(SFTScriptArguments, SFTConfig)
    for nested in ("stages", "dataset_mixture"):
        fields.pop(nested)
    plan = []
    for number, stage in enumerate(script_args.stages, start=1):
        stage = dict(stage)
        name = str(stage.pop("name", f"stage{number}"))
        mixture = stage.pop("dataset_mixture", None)
        # A stage's settings bypass argparse: converted here as the recipe reader converts them (`5e-6` is a string
        # to YAML), an unknown key or a wrong value named.
        problems: list[str] = []
        stage = check_fields(stage, fields, problems, prefix=f"stage {name!r}: ", where_known="a stage")
        if problems:
            raise InputError("; ".join(problems))
        plan.append(
            {
                "name": name,
                "dataset_mixture": mixture,
                "output_dir": str(Path(training_args.output_dir) / f"stage{number}-{name}"),
                "overrides": stage,
            }
        )
    return plan


def stage_arguments(stage: dict, script_args: SFTScriptArguments, training_args: SFTConfig) -> tuple:
    """``(script arguments, training arguments)`` of one stage: the run's, with the stage's overrides applied to the
    dataclass that declares each."""
    overrides = stage.get("overrides", {})
    script = {key: value for key, value in overrides.items() if hasattr(script_args, key)}
    training = {key: value for key, value in overrides.items() if key not in script}
    return dataclasses.replace(script_args, **script), dataclasses.replace(training_args, **training)


def check_stages(
    plan: list[dict], script_args: SFTScriptArguments, training_args: SFTConfig, model_args: ModelConfig
) -> None:
    """Every stage checked before the run claims its folder or loads any weights, stage 2 too (it would otherwise
    fail hours in, once stage 1 had trained): its learning-rate schedule fits its length, its sources exist with the
    configs and splits named, none is evaluation data unless the recipe allows it, and a visual run's clips all have
    frames. Each stage's mixture is built as its trainer takes it (its seed and fold) and kept in the stage as
    ``stage["mixture"]``, so that :func:`build_stage_trainer` does not build it again."""
    vision_language = None
    for stage in plan:
        stage_args, stage_training = stage_arguments(stage, script_args, training_args)
        check_lr_schedule(stage_training)
        sources = parse_mixture(stage["dataset_mixture"])
        stage["mixture"] = build_mixture(
            sources, seed=stage_training.seed, fold=stage_args.fold, num_folds=stage_args.num_folds
        )
        loaded, index, _ = stage["mixture"]
        check_evaluation_data(sources, stage_args.allow_evaluation_data)
        if not stage_args.blind:
            if vision_language is None:
                vision_language = is_vision_language(model_args.model_name_or_path, model_args.model_revision)
            if vision_language:
                check_frames(loaded, index)


def check_lr_schedule(training_args: SFTConfig) -> None:
    """``warmup_stable_decay`` counts its decay in steps (``lr_scheduler_kwargs.num_decay_steps``): in a run shorter
    than warmup + decay, transformers makes the stable phase negative without a word and the rate drops to a point
    of the decay as the warmup ends (the tiny guesser recipe decays over 100 steps after 20 of warmup)."""
    steps = training_args.max_steps
    if training_args.lr_scheduler_type != "warmup_stable_decay" or steps <= 0:
        return
    decay = int((training_args.lr_scheduler_kwargs or {}).get("num_decay_steps", 0))
    warmup = training_args.get_warmup_steps(steps)
    if warmup + decay > steps:
        raise InputError(
            f"max_steps {steps} is shorter than the warmup ({warmup}) and the decay (lr_scheduler_kwargs."
            f"num_decay_steps {decay}) of warmup_stable_decay: lower num_decay_steps or warmup_steps with max_steps"
        )


def prepare_processor(processor, script_args: SFTScriptArguments):
    """Apply the recipe's pixel caps (Qwen3-VL: per image, and per clip over all its frames, capped per frame)."""
    return apply_pixel_caps(processor, script_args.image_max_pixels, script_args.video_max_pixels)


def build_stage_trainer(
    stage: dict, model_path: str, script_args, training_args: SFTConfig, model_args: ModelConfig, model=None
) -> dict:
    """The trainer of one stage, ready to train: processor with the pixel caps, model (``model`` when given, e.g.
    random weights built in memory by ``benchmarks/gpu_sft.py``), freezing, the mixture and its collator, and with
    ``train_sampling_strategy: group_by_length`` the length-grouped batches (``recipes/training/batching.py``)."""
    script_args, training_args = stage_arguments(stage, script_args, training_args)
    # The recipe's max_length bounds the collator's rows (refused above it, never cut); TRL's own truncation stays off.
    max_length = training_args.max_length
    training_args = dataclasses.replace(
        training_args,
        output_dir=stage["output_dir"],
        remove_unused_columns=False,
        dataset_kwargs={"skip_prepare_dataset": True},
        max_length=None,
        report_to=available_reporters(training_args.report_to),
    )
    configure_reporting(training_args)
    check_lr_schedule(training_args)
    # The data first: a source, config or split that is not there fails before any weights load.
    loaded, index, folds = stage.get("mixture") or build_mixture(
        parse_mixture(stage["dataset_mixture"]),
        seed=training_args.seed,
        fold=script_args.fold,
        num_folds=script_args.num_folds,
    )
    processor = prepare_processor(load_processor(model_path, revision=model_args.model_revision), script_args)
    rows = {
        "blind": script_args.blind,
        "frames_as": script_args.frames_as,
        "max_frames": script_args.max_frames,
        "max_length": max_length,
        "system_prompt": script_args.system_prompt,
    }
    lengths = None
    if training_args.train_sampling_strategy == GROUPED:
        # Counted before the model loads (a row that cannot be read stops the run now, not hours in); transformers'
        # own sampler for this key would read each row's input_ids, which the index rows do not have.
        with training_args.main_process_first(desc="counting the rows' tokens"):
            lengths = cached_row_lengths(SFTCollator(processor, loaded, **rows), index, stage["output_dir"])
    if model is None:
        model = load_model(
            model_path,
            revision=model_args.model_revision,
            dtype=model_args.dtype,
            attn_implementation=model_args.attn_implementation,
        )
    vision_language = getattr(model.config, "vision_config", None) is not None
    frozen = {
        group
        for group, flag in (
            ("vision_tower", script_args.freeze_vision_tower),
            ("projector", script_args.freeze_projector),
            ("llm", script_args.freeze_llm),
        )
        if flag
    }
    peft_config = get_peft_config(model_args)
    if peft_config is not None and frozen:
        raise InputError("with LoRA only the adapters train: choose the adapted layers with lora_target_modules")
    trainable = apply_freezing(model, frozen) if peft_config is None else {}

    uniform = script_args.uniform_vision_calls
    if uniform is None:
        uniform = vision_language and not script_args.blind
    if training_args.ddp_find_unused_parameters is None and (uniform or not vision_language):
        # Every parameter takes part in every step, so DDP can skip its search for unused ones.
        training_args = dataclasses.replace(training_args, ddp_find_unused_parameters=False)
    collator = SFTCollator(
        processor,
        loaded,
        **rows,
        uniform_vision_calls=uniform,
        encoded_cache_mb=script_args.encoded_cache_mb,
        refused_rows_log=str(Path(stage["output_dir"]) / REFUSED_ROWS),
    )
    trainer = SFTTrainer(
        model=model,
        args=training_args,
        train_dataset=index,
        data_collator=collator,
        processing_class=processor,
        peft_config=peft_config,
    )
    if lengths is not None:
        use_grouped_batches(trainer, lengths)
    if peft_config is not None:
        trainable = {"adapters": {"trainable": trainable_parameter_count(trainer.model)}}
    return {
        "trainer": trainer,
        "processor": processor,
        "loaded": loaded,
        "folds": folds,
        "trainable": trainable,
        "uniform": uniform,
        "vision_language": vision_language,
        "attn_implementation": attention_implementation(model),
        "peft_config": peft_config,
        "training_args": training_args,
        "script_args": script_args,
        "max_length": max_length,
    }


def release_trainer(trainer) -> None:
    """Free what a trained stage holds before the next stage loads its model: accelerate's ``free_memory`` destroys
    the DeepSpeed engine and drops its references to the model, optimizer, scheduler and data loaders; the trainer's
    own references go too, and the CUDA cache is emptied. Without this, the two-stage recipe kept stage 1's engine and
    AdamW states on every GPU while stage 2 trained: for the 8B model on 4 GPUs, some 35-40 GB per GPU more than one
    stage needs.

    DeepSpeed 0.19.8 keeps a ZeRO-3 model alive after its engine is destroyed: its forward hooks push modules on a
    module-level list (``deepspeed.runtime.zero.parameter_offload.FWD_MODULE_STACK``) and leave some there (the top
    module always, and a module whose forward hook ran without its post-forward one), and through their parameters
    that list held the ZeRO optimizer, its fp32 master weights and AdamW states, and the whole model. The model's
    modules are taken off that list, after which all of it is freed (``tests/test_launch_configs.py`` checks it by
    weak reference on two ranks)."""
    model = trainer.model
    trainer.accelerator.free_memory()
    parameter_offload = sys.modules.get("deepspeed.runtime.zero.parameter_offload")  # loaded only if ZeRO ran
    if parameter_offload is not None and model is not None:
        own = {id(module) for module in model.modules()}
        parameter_offload.FWD_MODULE_STACK[:] = [m for m in parameter_offload.FWD_MODULE_STACK if id(m) not in own]
    del model
    for name in ("model", "model_wrapped", "deepspeed", "optimizer", "lr_scheduler", "ref_model"):
        if getattr(trainer, name, None) is not None:
            setattr(trainer, name, None)
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
