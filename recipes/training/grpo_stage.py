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
hooks; image and text-only rows mix in. Transformers generates on any machine. vLLM (``use_vllm``) is refused for a
vision-language policy before any weights load (:func:`check_vllm` says why), so the recipes generate with
transformers.
"""

# ruff: noqa: E402 - the repository goes on sys.path before the project is imported
import logging
import math
import sys
from pathlib import Path


REPO_ROOT = Path(__file__).resolve().parents[1]
# Before any project import: `accelerate launch recipes/grpo.py` runs this file as a script, from any folder.
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from trl import GRPOConfig, ModelConfig, TrlParser, get_peft_config

from builders.errors import InputError
from builders.outputs import publish_permissions
from recipes.model_io.model_folder import check_model_path
from recipes.model_io.modeling import (
    apply_pixel_caps,
    attention_implementation,
    default_attn_implementation,
    is_vision_language,
    load_model,
    load_processor,
    resolve_system_prompt,
    tokenizer_of,
)
from recipes.model_io.run_record import read_run_record
from recipes.training.checkpoints import resume_checkpoint
from recipes.training.freezing import trainable_parameter_count
from recipes.training.grpo_data import check_completion_budgets, grpo_dataset
from recipes.training.grpo_trainer import PACKED_ATTENTION, VisualGRPOTrainer
from recipes.training.launch import prepare_launch
from recipes.training.mixture import (
    build_mixture,
    check_evaluation_data,
    check_frames,
    mixture_summary,
    parse_mixture,
)
from recipes.training.model_card import write_model_card
from recipes.training.recipe_file import GRPO, run_script
from recipes.training.rewards import REWARDS, reward_functions
from recipes.training.run import (
    PublishCheckpoints,
    claim_output_dir,
    labelled_positions_only_on_cpu,
    run_inputs,
    save_final_model,
    write_record,
)
from recipes.training.scripts import (
    GRPOScriptArguments,
    RecipeParser,
    available_reporters,
    configure_reporting,
    recipe_path,
)


logger = logging.getLogger("sureon.grpo")


def make_parser() -> TrlParser:
    return RecipeParser((GRPOScriptArguments, GRPOConfig, ModelConfig), GRPO, rewards=REWARDS)


def set_fields(training_args: GRPOConfig, **values) -> None:
    """Change fields in place: ``dataclasses.replace`` would rerun GRPOConfig's ``__post_init__``, which refuses the
    ``generation_batch_size`` and ``steps_per_generation`` it derived itself the first time."""
    for name, value in values.items():
        setattr(training_args, name, value)


def build_trainer(
    script_args: GRPOScriptArguments, training_args: GRPOConfig, model_args: ModelConfig, mixture: tuple | None = None
) -> dict:
    """The GRPO trainer, ready to train, with what the summary and card record; ``mixture``: the ``(loaded, index)``
    :func:`check_data` built, else built here."""
    model_path = model_args.model_name_or_path
    rewards = reward_functions(script_args.reward_funcs)
    system_prompt = resolve_system_prompt(
        model_path, override=script_args.system_prompt, revision=model_args.model_revision
    )
    set_fields(training_args, remove_unused_columns=False, report_to=available_reporters(training_args.report_to))
    configure_reporting(training_args)
    # The data first: a bad source or an empty selection fails before any weights load.
    vision_language = is_vision_language(model_path, model_args.model_revision)
    if mixture is None:
        mixture = build_mixture(parse_mixture(script_args.dataset_mixture), seed=training_args.seed)[:2]
    loaded, index = mixture
    dataset, checkable = grpo_dataset(
        loaded,
        index,
        frames_as=script_args.frames_as,
        max_frames=script_args.max_frames,
        system_prompt=system_prompt,
        vision_language=vision_language,
    )
    processor = apply_pixel_caps(
        load_processor(model_path, revision=model_args.model_revision),
        script_args.image_max_pixels,
        script_args.video_max_pixels,
    )
    model = load_model(
        model_path,
        revision=model_args.model_revision,
        dtype=model_args.dtype,
        attn_implementation=model_args.attn_implementation,
    )
    mixture = [{**summary, "rows_checkable": n} for summary, n in zip(mixture_summary(loaded), checkable, strict=True)]
    logger.info("GRPO rows with a checkable answer: %d of %d", len(dataset), len(index))
    uniform = vision_language if script_args.uniform_vision_calls is None else script_args.uniform_vision_calls
    trainer = VisualGRPOTrainer(
        uniform_vision_calls=uniform and vision_language,
        completion_budgets=script_args.completion_budgets,
        share_prompt_prefill=script_args.share_prompt_prefill,
        share_prompt_in_training=script_args.share_prompt_in_training,
        model=model,
        reward_funcs=rewards,
        args=training_args,
        train_dataset=dataset,
        processing_class=processor,
        peft_config=get_peft_config(model_args),
    )
    return {
        "trainer": trainer,
        "processor": processor,
        "mixture": mixture,
        "system_prompt": system_prompt,
        "vision_language": vision_language,
        "training_args": training_args,
    }


def check_data(script_args: GRPOScriptArguments, training_args: GRPOConfig, model_args: ModelConfig) -> tuple:
    """The mixture checked before the run claims its folder or loads any weights: the sources, configs and splits
    exist, none is evaluation data unless the recipe allows it, a visual policy's video-QA rows have frames, and the
    generation cuts it asks for apply: they cut transformers' ``generate`` (not vLLM's, nor continuous batching),
    and every reference answer fits its kind's completion budget (the model's own tokenizer counts it). Returns the
    mixture built, ``(loaded, index)``, which the trainer then takes as it is."""
    sources = parse_mixture(script_args.dataset_mixture)
    loaded, index, _ = build_mixture(sources, seed=training_args.seed)
    check_evaluation_data(sources, script_args.allow_evaluation_data)
    if is_vision_language(model_args.model_name_or_path, model_args.model_revision):
        check_frames(loaded, index)
    cuts = [name for name in ("completion_budgets", "share_prompt_prefill") if getattr(script_args, name)]
    other = [name for name in ("use_vllm", "use_transformers_continuous_batching") if getattr(training_args, name)]
    if cuts and other:
        raise InputError(
            f"{' and '.join(cuts)} with {other[0]}: true: they cut transformers' own generate call, which "
            f"{other[0]} replaces; set {other[0]}: false, or drop {' and '.join(cuts)}"
        )
    if script_args.completion_budgets:
        processor = load_processor(model_args.model_name_or_path, revision=model_args.model_revision)
        check_completion_budgets(
            loaded, index, tokenizer_of(processor), script_args.completion_budgets, training_args.max_completion_length
        )
    check_prompt_sharing(script_args, training_args, model_args)
    return loaded, index


def check_prompt_sharing(script_args: GRPOScriptArguments, training_args: GRPOConfig, model_args: ModelConfig) -> None:
    """Refuse, in one line, ``share_prompt_in_training`` where it cannot run, or where grouping each prompt's
    completions into micro-batches would change an optimizer step's gradient (docs/training/grpo.md): the packed
    pass needs an attention that takes a 4-D mask; ``bnpo`` divides each micro-batch's loss by its own tokens,
    ``top_entropy_quantile`` below 1 keeps each micro-batch's high-entropy tokens, and the entropy bonus is a mean over
    a micro-batch's tokens, so each depends on which completions share a micro-batch; and with
    ``steps_per_generation`` other than the accumulation, the grouping decides which completions each step sees."""
    if not script_args.share_prompt_in_training:
        return
    problems = []
    attention = model_args.attn_implementation or default_attn_implementation()
    if attention not in PACKED_ATTENTION:
        chosen = "attn_implementation" if model_args.attn_implementation else "this machine's default attention"
        problems.append(
            f"{chosen} {attention} takes no 4-D mask, which the packed pass needs: set attn_implementation: sdpa"
        )
    changes = []  # settings under which the grouping would change an optimizer step's gradient
    if training_args.loss_type == "bnpo":
        changes.append("loss_type bnpo divides each micro-batch's loss by its own tokens (use dapo, TRL's default)")
    if training_args.top_entropy_quantile < 1.0:
        changes.append(
            f"top_entropy_quantile {training_args.top_entropy_quantile} keeps each micro-batch's high-entropy tokens"
        )
    if training_args.entropy_coef != 0.0 or training_args.use_adaptive_entropy:
        changes.append("the entropy bonus (entropy_coef, use_adaptive_entropy) is a mean over a micro-batch's tokens")
    if training_args.steps_per_generation != training_args.gradient_accumulation_steps:
        changes.append(
            f"steps_per_generation {training_args.steps_per_generation} is not the accumulation "
            f"({training_args.gradient_accumulation_steps}), so the grouping would pick each step's completions "
            "(leave steps_per_generation unset)"
        )
    if changes:
        problems.append(
            "grouping each prompt's completions into micro-batches would change an optimizer step's gradient: "
            + "; ".join(changes)
        )
    if problems:
        raise InputError("share_prompt_in_training: " + "; ".join(problems) + "; or drop share_prompt_in_training")


def reward_means(log_history: list[dict], names: list[str]) -> dict[str, float | None]:
    """The last logged mean of each reward (TRL logs ``rewards/<name>/mean``; None or NaN for a step in which no row
    it applies to was drawn), None when it never applied."""
    means = {}
    for name in names:
        values = [entry.get(f"rewards/{name}/mean") for entry in log_history]
        values = [value for value in values if value is not None and not math.isnan(value)]
        means[name] = values[-1] if values else None
    return means


def check_vllm(training_args: GRPOConfig, model_path: str, revision: str | None = None) -> None:
    """Refuse ``use_vllm`` before any weights load for a vision-language policy, or where vLLM cannot be imported.

    With the pinned versions, vLLM cannot generate for prompts with frames. TRL 1.16 hands vLLM the prompt token ids
    the processor expanded (every video and image token already in place) with the raw frames beside them. vLLM's
    Qwen3-VL looks for the literal ``<|vision_start|><|video_pad|><|vision_end|>`` and fails on the first video row;
    on an image row it expands the first ``<|image_pad|>`` again, so completions are sampled from another prompt than
    the one scored, without an error (huggingface/trl issues 6294 and 6401; the fix, PR 6718, is in no TRL release
    this project pins). Nor does one environment hold both: TRL 1.16 accepts vLLM 0.22-0.31; vLLM 0.31.0 requires
    torch 2.13.0 and transformers below 5.18 (its published requirements), and transformers 5.17's
    TrainingArguments have no ``activation_checkpointing``, which every recipe sets. Text-only policies generate
    through TRL's own vLLM path."""
    import importlib.util

    if not training_args.use_vllm:
        return
    if is_vision_language(model_path, revision):
        raise InputError(
            "use_vllm: true with a vision-language model: TRL 1.16 hands vLLM prompt ids whose image and video tokens "
            "are already expanded, so vLLM fails on video rows and samples image rows from another prompt than the "
            "one scored (huggingface/trl issues 6294 and 6401, fixed after 1.16); set use_vllm: false, and "
            "transformers generates the same rollouts (docs/training/grpo.md)"
        )
    if importlib.util.find_spec("vllm") is None:
        raise InputError(
            "use_vllm: true, but vLLM is not installed in this environment (TRL 1.16 supports vLLM 0.22-0.31, each "
            "pinning its own torch and transformers): set use_vllm: false to generate with transformers, or run "
            "in an environment built around a supported vLLM release"
        )


def main(
    script_args: GRPOScriptArguments, training_args: GRPOConfig, model_args: ModelConfig, recipe: str | None = None
) -> Path:
    """Train (resuming from the newest complete checkpoint), write the marker and card, push if asked; returns the
    folder."""
    if not model_args.model_name_or_path:
        raise InputError("model_name_or_path is required (an SFT run's folder or a base model)")
    training_args = prepare_launch(script_args, training_args)
    check_model_path(model_args.model_name_or_path, "model_name_or_path", model_args.model_revision)
    check_vllm(training_args, model_args.model_name_or_path, model_args.model_revision)
    mixture = check_data(script_args, training_args, model_args)
    inputs = run_inputs(
        model_args.model_name_or_path,
        [script_args.dataset_mixture],
        recipe=recipe,
        eval_results=script_args.eval_results,
    )
    claim_output_dir(training_args.output_dir, inputs, main_process=training_args.process_index == 0)
    # As in recipes/sft.py: pushing is ours (once, with our card), and the token never reaches a pickled checkpoint.
    push, token = training_args.push_to_hub, training_args.hub_token
    requested = training_args.resume_from_checkpoint
    if requested:  # checked whole before anything loads
        resume_checkpoint(training_args.output_dir, requested, expect_optimizer=not training_args.save_only_model)
    set_fields(training_args, push_to_hub=False, hub_token=None, resume_from_checkpoint=None)
    built = build_trainer(script_args, training_args, model_args, mixture)
    trainer, training_args = built["trainer"], built["training_args"]
    trainer.add_callback(PublishCheckpoints())
    output_dir = Path(training_args.output_dir)
    resume, warnings = resume_checkpoint(output_dir, requested, expect_optimizer=not training_args.save_only_model)
    for warning in warnings if trainer.is_world_process_zero() else []:
        logger.warning("%s: %s", output_dir, warning)
    if resume:
        logger.info("resuming from %s", resume)
    with labelled_positions_only_on_cpu(script_args.cpu_labelled_positions_only):
        result = trainer.train(resume_from_checkpoint=resume)
    # Every rank is done before rank 0 writes and uploads: an upload takes as long as it takes, and a rank waiting
    # for it in a barrier would hit the process group's timeout (30 minutes by default) and abort the run mid-push.
    saved = save_final_model(trainer, output_dir, model_args)
    names = [function.__name__ for function in trainer.reward_funcs]
    started_from = read_run_record(model_args.model_name_or_path, model_args.model_revision)
    summary = {
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
        "resumed_from": resume,
        "global_step": trainer.state.global_step,
        "world_size": training_args.world_size,
        "train_loss": result.training_loss,
        "lora": model_args.lora_target_modules if model_args.use_peft else None,
        **saved,
    }
    if trainer.is_world_process_zero():
        tokenizer_of(built["processor"]).padding_side = "left"  # what generation needs
        built["processor"].save_pretrained(str(output_dir))
        publish_permissions(output_dir)
        write_record(output_dir, summary)
        stages = ([started_from] if started_from and started_from.get("mixture") else []) + [summary]
        card = write_model_card(
            output_dir, script_args, training_args, stages, model_args.model_name_or_path, recipe, grpo=summary
        )
        logger.info("model card: %s", card)
        if push:
            from builders.hub import push_folder

            repo_id = training_args.hub_model_id or output_dir.name
            url = push_folder(
                output_dir, repo_id, private=bool(training_args.hub_private_repo), token=token, repo_type="model"
            )
            logger.info("pushed to %s", url)
    return output_dir


def cli(argv: list[str] | None = None) -> int:
    """``python recipes/grpo.py --config RECIPE [--field value ...]``: 0 when trained; a mistake in the recipe, the
    options or the data is one line, ``error: ...``, and status 2 (``recipes.training.recipe_file.run_script``)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    return run_script(lambda: main(*make_parser().parse_args_and_config(argv), recipe=recipe_path(argv)))


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    sys.exit(cli())
