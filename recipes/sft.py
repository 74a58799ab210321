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

from trl import ModelConfig, SFTConfig, TrlParser

from builders.errors import InputError


REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # `accelerate launch recipes/sft.py` runs this file as a script
    sys.path.insert(0, str(REPO_ROOT))

from recipes.training.mixture import mixture_summary  # noqa: E402
from recipes.training.modeling import COMPLETE_MARKER, labelled_positions_only_on_cpu, tokenizer_of  # noqa: E402
from recipes.training.recipe_file import run_script  # noqa: E402
from recipes.training.scripts import SFTScriptArguments, last_checkpoint, recipe_path  # noqa: E402
from recipes.training.sft_stages import build_stage_trainer, release_trainer, sft_parser, stage_plan  # noqa: E402


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
        "attn_implementation": built["attn_implementation"],
        "uniform_vision_calls": built["uniform"],
        "resumed_from": resume,
        "global_step": trainer.state.global_step,
        "world_size": training_args.world_size,
        "train_loss": result.training_loss,
        "lora": model_args.lora_target_modules if built["peft_config"] is not None else None,
    }
    main_process = trainer.is_world_process_zero()
    if main_process:
        tokenizer_of(processor).padding_side = "left"  # what generation needs
        processor.save_pretrained(training_args.output_dir)
        if folds is not None:
            (Path(training_args.output_dir) / "folds.json").write_text(json.dumps(folds, indent=1, sort_keys=True))
        (Path(training_args.output_dir) / COMPLETE_MARKER).write_text(json.dumps(summary, indent=1, default=str))
    trainer.accelerator.wait_for_everyone()
    release_trainer(trainer)
    return {"summary": summary, "training_args": training_args, "script_args": script_args, "main": main_process}


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
    if final["main"]:  # the other ranks are done: nothing waits on the upload (its time is unbounded)
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
