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
from recipes.model_io.run_record import SFT, read_run_record
from recipes.training.arguments import SFTScriptArguments
from recipes.training.collator import refused_rows
from recipes.training.mixture import mixture_summary
from recipes.training.model_card import write_model_card
from recipes.training.run import (
    check_launch,
    claim_run,
    finish_training,
    publish_run,
    requested_resume,
    train,
)
from recipes.training.scripts import script_cli
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
    """Train one stage to ``stage['output_dir']``; returns its record (written next to the weights) and settings.

    The stage's trainer is released before this returns (:func:`recipes.training.sft_stages.release_trainer`): the
    next stage loads its own model, and under DeepSpeed the finished stage's engine, ZeRO hooks and optimizer states
    would otherwise stay on the GPUs while it trains."""
    built = build_stage_trainer(stage, model_path, script_args, training_args, model_args)
    trainer, folds, max_length = built["trainer"], built["folds"], built["max_length"]
    training_args, script_args = built["training_args"], built["script_args"]
    result, resume = train(
        trainer, stage.get("resume_from"), cpu_labelled_positions_only=script_args.cpu_labelled_positions_only
    )
    refused = refused_rows(Path(training_args.output_dir) / REFUSED_ROWS)
    fields = {
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
        "max_length": max_length,
        "rows_over_max_length": len(refused),
        "rows_over_max_length_by_visual_tokens": sum(
            1 for row in refused if max_length and row["visual_tokens"] > max_length
        ),
        "trainable": built["trainable"],
        "attn_implementation": built["attn_implementation"],
        "uniform_vision_calls": built["uniform"],
    }
    record = finish_training(
        trainer,
        dataclasses.replace(model_args, model_name_or_path=model_path),
        built["processor"],
        SFT,
        fields,
        result=result,
        resume=resume,
        files={"folds.json": json.dumps(folds, indent=1, sort_keys=True)} if folds is not None else None,
    )
    main_process = trainer.is_world_process_zero()
    release_trainer(trainer)
    return {"record": record, "training_args": training_args, "script_args": script_args, "main": main_process}


def main(
    script_args: SFTScriptArguments, training_args: SFTConfig, model_args: ModelConfig, recipe: str | None = None
) -> Path:
    """Run every stage (skipping finished ones), write the card, push if asked; returns the final model folder."""
    training_args = check_launch(script_args, training_args, model_args, model_hint="a Hub id or a model folder")
    plan = stage_plan(script_args, training_args)
    if training_args.resume_from_checkpoint and len(plan) > 1:
        raise InputError(
            "resume_from_checkpoint with stages: each stage resumes from its own newest complete checkpoint; remove "
            "the key (or train the stage alone)"
        )
    plan[0]["resume_from"] = requested_resume(training_args, plan[0]["output_dir"])
    check_stages(plan, script_args, training_args, model_args)
    push = claim_run(
        training_args,
        model_args,
        [stage["dataset_mixture"] for stage in plan],
        recipe=recipe,
        eval_results=script_args.eval_results,
    )
    model_path, records, final = model_args.model_name_or_path, [], None
    for stage in plan:
        finished = read_run_record(stage["output_dir"]) if stage is not plan[-1] else None
        if finished is not None:
            logger.info("stage %s already trained (%s); continuing from it", stage["name"], stage["output_dir"])
            records.append(finished)
        else:
            final = train_stage(stage, model_path, script_args, training_args, model_args)
            records.append(final["record"])
        model_path = stage["output_dir"]
    output_dir = Path(plan[-1]["output_dir"])
    publish_run(
        output_dir,
        push,
        lambda: write_model_card(
            output_dir, final["script_args"], final["training_args"], records, model_args.model_name_or_path, recipe
        ),
        main_process=final["main"],
    )
    return output_dir


def cli(argv: list[str] | None = None) -> int:
    """``python recipes/sft.py --config RECIPE [--field value ...]`` (:func:`recipes.training.scripts.script_cli`)."""
    return script_cli(make_parser, main, argv)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    sys.exit(cli())
