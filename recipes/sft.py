"""Supervised fine-tuning of Sureon-VLM (Qwen3-VL on video, image and text QA) and of the blind guessers.

Run one recipe per YAML (the first line of each states its hardware):

    accelerate launch --config_file accelerate_configs/zero3.yaml recipes/sft.py \
        --config recipes/qwen3-vl-8b/sft/config_sureon_vlm.yaml

Any field can be overridden on the command line (``--learning_rate 5e-6 --output_dir ...``). A cross-validated
blind guesser for fold ``k`` of 4: ``--config recipes/qwen3-vl-8b/guesser/config_refined.yaml --fold k``.
On a CPU machine: ``python recipes/sft.py --config recipes/tiny/sft/config_smoke.yaml``.

What this adds to TRL's ``sft.py`` (see ``docs/training_notes.md`` for why each is needed): video
clips as pre-sampled frames with their real timestamps (``recipes.training.collator``), a YAML data mixture of our
builders' outputs rendered with the project's one prompt formatter (``recipes.training.mixture``), loss on the answer
only, a ``blind`` mode without any visual input, video-level folds, explicit freezing (``recipes.training.freezing``),
uniform vision-tower calls so ZeRO-3 never hangs on mixed modalities, multi-stage schedules, automatic resume, and a
model card.
"""

import dataclasses
import json
import logging
import sys
from pathlib import Path

from trl import ModelConfig, SFTConfig, SFTTrainer, TrlParser, get_peft_config

from builders.errors import InputError


REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # `accelerate launch recipes/sft.py` runs this file as a script
    sys.path.insert(0, str(REPO_ROOT))

from recipes.training.collator import SFTCollator  # noqa: E402
from recipes.training.freezing import apply_freezing  # noqa: E402
from recipes.training.mixture import build_mixture, mixture_summary, parse_mixture  # noqa: E402
from recipes.training.modeling import (  # noqa: E402
    COMPLETE_MARKER,
    apply_pixel_caps,
    labelled_positions_only_on_cpu,
    load_model,
    load_processor,
    tokenizer_of,
)
from recipes.training.recipe_file import SFT, check_fields, run_script, settable_fields  # noqa: E402
from recipes.training.scripts import (  # noqa: E402
    RecipeParser,
    SFTScriptArguments,
    available_reporters,
    configure_reporting,
    last_checkpoint,
    recipe_path,
)


logger = logging.getLogger("sureon.sft")


def make_parser() -> TrlParser:
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
    random weights built in memory by ``benchmarks/gpu_sft.py``), freezing, the mixture and its collator."""
    script_args = dataclasses.replace(
        script_args, **{k: v for k, v in stage.get("overrides", {}).items() if hasattr(script_args, k)}
    )
    overrides = {k: v for k, v in stage.get("overrides", {}).items() if not hasattr(script_args, k)}
    training_args = dataclasses.replace(
        training_args,
        **overrides,
        output_dir=stage["output_dir"],
        remove_unused_columns=False,
        dataset_kwargs={"skip_prepare_dataset": True},
        max_length=None,
        report_to=available_reporters(training_args.report_to),
    )
    configure_reporting(training_args)
    check_lr_schedule(training_args)
    processor = prepare_processor(load_processor(model_path, revision=model_args.model_revision), script_args)
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

    sources = parse_mixture(stage["dataset_mixture"])
    loaded, index, folds = build_mixture(
        sources, seed=training_args.seed, fold=script_args.fold, num_folds=script_args.num_folds
    )
    uniform = script_args.uniform_vision_calls
    if uniform is None:
        uniform = vision_language and not script_args.blind
    if training_args.ddp_find_unused_parameters is None and (uniform or not vision_language):
        # Every parameter takes part in every step, so DDP can skip its search for unused ones.
        training_args = dataclasses.replace(training_args, ddp_find_unused_parameters=False)
    collator = SFTCollator(
        processor,
        loaded,
        blind=script_args.blind,
        frames_as=script_args.frames_as,
        max_frames=script_args.max_frames,
        max_length=training_args.max_length,
        uniform_vision_calls=uniform,
        system_prompt=script_args.system_prompt,
        encoded_cache_mb=script_args.encoded_cache_mb,
    )
    trainer = SFTTrainer(
        model=model,
        args=training_args,
        train_dataset=index,
        data_collator=collator,
        processing_class=processor,
        peft_config=peft_config,
    )
    if peft_config is not None:
        trainable = {"adapters": {"trainable": sum(p.numel() for p in trainer.model.parameters() if p.requires_grad)}}
    return {
        "trainer": trainer,
        "processor": processor,
        "loaded": loaded,
        "folds": folds,
        "trainable": trainable,
        "uniform": uniform,
        "vision_language": vision_language,
        "peft_config": peft_config,
        "training_args": training_args,
        "script_args": script_args,
    }


def train_stage(stage: dict, model_path: str, script_args, training_args: SFTConfig, model_args: ModelConfig) -> dict:
    """Train one stage to ``stage['output_dir']``; returns its summary (written next to the weights)."""
    built = build_stage_trainer(stage, model_path, script_args, training_args, model_args)
    trainer, processor, folds = built["trainer"], built["processor"], built["folds"]
    training_args, script_args = built["training_args"], built["script_args"]
    resume = last_checkpoint(training_args.output_dir)
    if resume:
        logger.info("resuming from %s", resume)
    with labelled_positions_only_on_cpu(script_args.cpu_labelled_positions_only):
        result = trainer.train(resume_from_checkpoint=resume)
    trainer.save_model(training_args.output_dir)
    summary = {
        "name": stage["name"],
        "model": model_path,
        "mixture": mixture_summary(built["loaded"]),
        "fold": script_args.fold,
        "num_folds": script_args.num_folds,
        "seed": training_args.seed,
        "blind": script_args.blind,
        "system_prompt": script_args.system_prompt,
        "vision_language": built["vision_language"],
        "frames_as": script_args.frames_as,
        "max_frames": script_args.max_frames,  # `sureon eval sureon --max-frames` shows the same frames
        "trainable": built["trainable"],
        "uniform_vision_calls": built["uniform"],
        "resumed_from": resume,
        "global_step": trainer.state.global_step,
        "world_size": training_args.world_size,
        "train_loss": result.training_loss,
        "lora": model_args.lora_target_modules if built["peft_config"] is not None else None,
    }
    if trainer.is_world_process_zero():
        tokenizer_of(processor).padding_side = "left"  # what generation needs
        processor.save_pretrained(training_args.output_dir)
        if folds is not None:
            (Path(training_args.output_dir) / "folds.json").write_text(json.dumps(folds, indent=1, sort_keys=True))
        (Path(training_args.output_dir) / COMPLETE_MARKER).write_text(json.dumps(summary, indent=1, default=str))
    trainer.accelerator.wait_for_everyone()
    return {"trainer": trainer, "summary": summary, "training_args": training_args, "script_args": script_args}


def write_card(final: dict, summaries: list[dict], base_model: str, recipe: str | None) -> Path:
    from recipes.training.model_card import read_eval_results, render_model_card

    script_args, training_args = final["script_args"], final["training_args"]
    last = summaries[-1]
    card = render_model_card(
        model_name=script_args.hub_model_name or training_args.hub_model_id or Path(training_args.output_dir).name,
        base_model=base_model,
        stages=summaries,
        training_args=training_args,
        trainable=last["trainable"],
        blind=last["blind"],
        vision_language=last["vision_language"],
        max_frames=script_args.max_frames,
        frames_as=script_args.frames_as,
        system_prompt=last.get("system_prompt"),
        recipe=recipe,
        hardware=script_args.hardware,
        lora=", ".join(last["lora"]) if isinstance(last["lora"], list) else last["lora"],
        eval_results=read_eval_results(script_args.eval_results) if script_args.eval_results else None,
    )
    path = Path(training_args.output_dir) / "README.md"
    card.save(path)
    return path


def main(
    script_args: SFTScriptArguments, training_args: SFTConfig, model_args: ModelConfig, recipe: str | None = None
) -> Path:
    """Run every stage (skipping finished ones), write the card, push if asked; returns the final model folder."""
    if not model_args.model_name_or_path:
        raise InputError("model_name_or_path is required")
    plan = stage_plan(script_args, training_args)
    # Pushing is ours (once, with our card), never the Trainer's (it would push every checkpoint with its own card).
    # The token stays out of the training arguments: the Trainer pickles them into every checkpoint.
    push, token = training_args.push_to_hub, training_args.hub_token
    training_args = dataclasses.replace(training_args, push_to_hub=False, hub_token=None)
    model_path, summaries, final = model_args.model_name_or_path, [], None
    for stage in plan:
        marker = Path(stage["output_dir"]) / COMPLETE_MARKER
        if marker.is_file() and stage is not plan[-1]:
            logger.info("stage %s already trained (%s); continuing from it", stage["name"], marker)
            summaries.append(json.loads(marker.read_text()))
        else:
            final = train_stage(stage, model_path, script_args, training_args, model_args)
            summaries.append(final["summary"])
        model_path = stage["output_dir"]
    output_dir = Path(plan[-1]["output_dir"])
    if final["trainer"].is_world_process_zero():
        card = write_card(final, summaries, model_args.model_name_or_path, recipe)
        logger.info("model card: %s", card)
        if push:
            from builders.hub import push_folder

            repo_id = final["training_args"].hub_model_id or output_dir.name
            args = final["training_args"]
            url = push_folder(output_dir, repo_id, private=bool(args.hub_private_repo), token=token, repo_type="model")
            logger.info("pushed to %s", url)
    return output_dir


def cli(argv: list[str] | None = None) -> int:
    """``python recipes/sft.py --config RECIPE [--field value ...]``: 0 when trained; a mistake in the recipe, the
    options or the data is one line, ``error: ...``, and status 2 (``recipes.training.recipe_file.run_script``)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    return run_script(lambda: main(*make_parser().parse_args_and_config(argv), recipe=recipe_path(argv)))


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    sys.exit(cli())
