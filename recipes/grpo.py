"""Reinforcement learning of Sureon-VLM with verifiable rewards: TRL's GRPOTrainer on the project's own answer formats.

Run one recipe per YAML (the first line of each states its hardware), typically from a finished SFT run:

    accelerate launch --config_file accelerate_configs/zero2.yaml --num_processes 4 recipes/grpo.py \
        --config recipes/qwen3-vl-8b/grpo/config_sureon_grpo.yaml

Any field can be overridden on the command line (``--beta 0.04 --num_generations 4 --output_dir ...``). On a CPU
machine, after ``recipes/sft.py --config recipes/tiny/sft/config_smoke.yaml``:
``python recipes/grpo.py --config recipes/tiny/grpo/config_smoke.yaml``.

The recipe reads the same ``dataset_mixture``, ``frames_as``, ``max_frames``, ``system_prompt`` and model keys as
``recipes/sft.py``, plus GRPOConfig's own (``num_generations``, ``max_completion_length``, ``beta``, ``loss_type``,
``use_vllm`` / ``vllm_mode`` ...), ``reward_funcs: [name, ...]`` (``recipes.training.rewards``) and GRPOConfig's
``reward_weights``. Prompts are the ones evaluation shows (``recipes.training.grpo_data``), the reference answers
stay in the rows' columns, and each reward scores a completion with the evaluation's own parser. Started from an
SFT run's folder, the system prompt it was trained with is carried over (``training_complete.json``) unless the
recipe sets one. It writes the same completion marker and model card as ``recipes/sft.py``, the card naming the GRPO
stage, its rewards and their weights, and resumes from its last checkpoint when restarted.

Clips reach the policy as SFT trained on them and ``sureon eval sureon`` shows them: ``frames_as: video`` (the
default, as in SFT) gives each prompt its clip as one video (the frames and timestamps the build stored, at most
``max_frames`` of them chosen as SFT and evaluation choose them, Qwen3-VL's ``<t seconds>`` markers and temporal
patches), through ``recipes.training.grpo_trainer.VisualGRPOTrainer``, TRL's GRPOTrainer with a few documented
hooks, built by ``recipes.training.grpo_stage``; image and text-only rows mix in. Transformers generates on any
machine. vLLM (``use_vllm``) is refused for a vision-language policy before any weights load
(``recipes.training.grpo_stage.check_vllm`` says why), so the recipes generate with transformers.
"""

# ruff: noqa: E402 - the repository goes on sys.path before the project is imported
import logging
import sys
from pathlib import Path


REPO_ROOT = Path(__file__).resolve().parents[1]
# Before any project import: `accelerate launch recipes/grpo.py` runs this file as a script, from any folder.
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from trl import GRPOConfig, ModelConfig, TrlParser

from recipes.model_io.modeling import attention_implementation
from recipes.model_io.run_record import GRPO, read_run_record
from recipes.training.arguments import GRPOScriptArguments
from recipes.training.freezing import trainable_parameter_count
from recipes.training.grpo_stage import build_trainer, check_data, check_vllm, grpo_parser, reward_means
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


logger = logging.getLogger("sureon.grpo")


def make_parser() -> TrlParser:
    return grpo_parser()


def main(
    script_args: GRPOScriptArguments, training_args: GRPOConfig, model_args: ModelConfig, recipe: str | None = None
) -> Path:
    """Train (resuming from the newest complete checkpoint), write the record and card, push if asked; returns the
    folder."""
    training_args = check_launch(
        script_args, training_args, model_args, model_hint="an SFT run's folder or a base model"
    )
    check_vllm(training_args, model_args.model_name_or_path, model_args.model_revision)
    mixture = check_data(script_args, training_args, model_args)
    requested = requested_resume(training_args, training_args.output_dir)
    push = claim_run(
        training_args, model_args, [script_args.dataset_mixture], recipe=recipe, eval_results=script_args.eval_results
    )
    built = build_trainer(script_args, training_args, model_args, mixture)
    trainer, training_args = built["trainer"], built["training_args"]
    result, resume = train(trainer, requested, cpu_labelled_positions_only=script_args.cpu_labelled_positions_only)
    names = [function.__name__ for function in trainer.reward_funcs]
    started_from = read_run_record(model_args.model_name_or_path, model_args.model_revision)
    fields = {
        "name": "grpo",
        "stage": "grpo",
        "model": model_args.model_name_or_path,
        "started_from_sft": started_from is not None,
        "mixture": built["mixture"],
        "allow_evaluation_data": script_args.allow_evaluation_data,
        "rewards": names,
        "reward_weights": [float(w) for w in training_args.reward_weights or [1.0] * len(names)],
        "reward_means": reward_means(trainer.state.log_history, names),
        "num_generations": training_args.num_generations,
        "max_completion_length": training_args.max_completion_length,
        "completion_budgets": script_args.completion_budgets,
        "share_prompt_prefill": script_args.share_prompt_prefill,
        "share_prompt_in_training": script_args.share_prompt_in_training,
        "beta": training_args.beta,
        "loss_type": training_args.loss_type,
        "use_vllm": training_args.use_vllm,
        "vllm_mode": training_args.vllm_mode if training_args.use_vllm else None,
        "fold": None,
        "num_folds": None,
        "seed": training_args.seed,
        "blind": not built["vision_language"],
        "system_prompt": built["system_prompt"],
        "frames_as": script_args.frames_as,
        "max_frames": script_args.max_frames,
        "uniform_vision_calls": trainer.uniform_vision_calls,
        "attn_implementation": attention_implementation(trainer.model),
        "vision_language": built["vision_language"],
        "trainable": {"all": {"trainable": trainable_parameter_count(trainer.model)}},
    }
    record = finish_training(trainer, model_args, built["processor"], GRPO, fields, result=result, resume=resume)
    output_dir = Path(training_args.output_dir)
    stages = ([started_from] if started_from and started_from.get("mixture") else []) + [record]
    publish_run(
        output_dir,
        push,
        lambda: write_model_card(
            output_dir, script_args, training_args, stages, model_args.model_name_or_path, recipe, grpo=record
        ),
        main_process=trainer.is_world_process_zero(),
    )
    return output_dir


def cli(argv: list[str] | None = None) -> int:
    """``python recipes/grpo.py --config RECIPE [--field value ...]`` (:func:`recipes.training.scripts.script_cli`)."""
    return script_cli(make_parser, main, argv)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    sys.exit(cli())
