"""Supervised fine-tuning of Sureon-VLM (Qwen3-VL on video, image and text QA) and of the blind guessers.

Run one recipe per YAML (the first line of each states its hardware):

    accelerate launch --config_file accelerate_configs/zero3.yaml --num_processes 4 recipes/sft.py \
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

# ruff: noqa: E402 - the repository goes on sys.path before the project is imported
import dataclasses
import json
import logging
import sys
from pathlib import Path


REPO_ROOT = Path(__file__).resolve().parents[1]
# Before any project import: `accelerate launch recipes/sft.py` runs this file as a script, from any folder.
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from trl import ModelConfig, SFTConfig, TrlParser

from builders.errors import InputError
from builders.outputs import publish_permissions, write_atomic
from recipes.model_io.model_folder import check_model_path
from recipes.model_io.modeling import tokenizer_of
from recipes.model_io.run_record import COMPLETE_MARKER
from recipes.training.checkpoints import resume_checkpoint
from recipes.training.collator import refused_rows
from recipes.training.launch import prepare_launch
from recipes.training.mixture import mixture_summary
from recipes.training.model_card import write_model_card
from recipes.training.recipe_file import run_script
from recipes.training.run import (
    PublishCheckpoints,
    claim_output_dir,
    labelled_positions_only_on_cpu,
    run_inputs,
    save_final_model,
    write_record,
)
from recipes.training.scripts import SFTScriptArguments, recipe_path
from recipes.training.sft_stages import (
    REFUSED_ROWS,
    build_stage_trainer,
    check_stages,
    release_trainer,
    sft_parser,
    stage_plan,
)


logger = logging.getLogger("sureon.sft")


def make_parser() -> TrlParser:
    return sft_parser()


def train_stage(stage: dict, model_path: str, script_args, training_args: SFTConfig, model_args: ModelConfig) -> dict:
    """Train one stage to ``stage['output_dir']``; returns its summary (written next to the weights) and settings.

    The stage's trainer is released before this returns (:func:`recipes.training.sft_stages.release_trainer`): the
    next stage loads its own model, and under DeepSpeed the finished stage's engine, ZeRO hooks and optimizer states
    would otherwise stay on the GPUs while it trains."""
    built = build_stage_trainer(stage, model_path, script_args, training_args, model_args)
    trainer, processor, folds = built["trainer"], built["processor"], built["folds"]
    training_args, script_args = built["training_args"], built["script_args"]
    trainer.add_callback(PublishCheckpoints())
    resume, warnings = resume_checkpoint(
        training_args.output_dir, stage.get("resume_from"), expect_optimizer=not training_args.save_only_model
    )
    for warning in warnings if trainer.is_world_process_zero() else []:
        logger.warning("%s: %s", training_args.output_dir, warning)
    if resume:
        logger.info("resuming from %s", resume)
    with labelled_positions_only_on_cpu(script_args.cpu_labelled_positions_only):
        result = trainer.train(resume_from_checkpoint=resume)
    saved = save_final_model(
        trainer, training_args.output_dir, dataclasses.replace(model_args, model_name_or_path=model_path)
    )
    refused = refused_rows(Path(training_args.output_dir) / REFUSED_ROWS)
    summary = {
        "name": stage["name"],
        "model": model_path,
        "mixture": mixture_summary(built["loaded"]),
        "allow_evaluation_data": script_args.allow_evaluation_data,
        "fold": script_args.fold,
        "num_folds": script_args.num_folds,
        "seed": training_args.seed,
        "blind": script_args.blind,
        "system_prompt": script_args.system_prompt,
        "vision_language": built["vision_language"],
        "frames_as": script_args.frames_as,
        "max_frames": script_args.max_frames,  # `sureon eval sureon --max-frames` shows the same frames
        "max_length": built["max_length"],
        "rows_over_max_length": len(refused),
        "rows_over_max_length_by_visual_tokens": sum(
            1 for row in refused if built["max_length"] and row["visual_tokens"] > built["max_length"]
        ),
        "trainable": built["trainable"],
        "attn_implementation": built["attn_implementation"],
        "uniform_vision_calls": built["uniform"],
        "resumed_from": resume,
        "global_step": trainer.state.global_step,
        "world_size": training_args.world_size,
        "train_loss": result.training_loss,
        "lora": model_args.lora_target_modules if built["peft_config"] is not None else None,
        **saved,
    }
    main_process = trainer.is_world_process_zero()
    if main_process:
        tokenizer_of(processor).padding_side = "left"  # what generation needs
        processor.save_pretrained(training_args.output_dir)
        if folds is not None:
            write_atomic(Path(training_args.output_dir) / "folds.json", json.dumps(folds, indent=1, sort_keys=True))
        publish_permissions(training_args.output_dir)
        write_record(training_args.output_dir, summary)
    trainer.accelerator.wait_for_everyone()
    release_trainer(trainer)
    return {"summary": summary, "training_args": training_args, "script_args": script_args, "main": main_process}


def main(
    script_args: SFTScriptArguments, training_args: SFTConfig, model_args: ModelConfig, recipe: str | None = None
) -> Path:
    """Run every stage (skipping finished ones), write the card, push if asked; returns the final model folder."""
    if not model_args.model_name_or_path:
        raise InputError("model_name_or_path is required")
    training_args = prepare_launch(script_args, training_args)
    check_model_path(model_args.model_name_or_path, "model_name_or_path", model_args.model_revision)
    plan = stage_plan(script_args, training_args)
    requested = training_args.resume_from_checkpoint
    if requested and len(plan) > 1:
        raise InputError(
            "resume_from_checkpoint with stages: each stage resumes from its own newest complete checkpoint; remove "
            "the key (or train the stage alone)"
        )
    if requested:  # checked whole before anything loads
        resume_checkpoint(plan[0]["output_dir"], requested, expect_optimizer=not training_args.save_only_model)
    plan[0]["resume_from"] = requested
    check_stages(plan, script_args, training_args, model_args)
    inputs = run_inputs(
        model_args.model_name_or_path,
        [stage["dataset_mixture"] for stage in plan],
        recipe=recipe,
        eval_results=script_args.eval_results,
    )
    claim_output_dir(training_args.output_dir, inputs, main_process=training_args.process_index == 0)
    # Pushing is ours (once, with our card), never the Trainer's (it would push every checkpoint with its own card).
    # The token stays out of the training arguments: the Trainer pickles them into every checkpoint.
    push, token = training_args.push_to_hub, training_args.hub_token
    training_args = dataclasses.replace(training_args, push_to_hub=False, hub_token=None, resume_from_checkpoint=None)
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
    if final["main"]:  # the other ranks are done: nothing waits on the upload (its time is unbounded)
        args = final["training_args"]
        card = write_model_card(
            output_dir, final["script_args"], args, summaries, model_args.model_name_or_path, recipe
        )
        logger.info("model card: %s", card)
        if push:
            from builders.hub import push_folder

            repo_id = args.hub_model_id or output_dir.name
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
