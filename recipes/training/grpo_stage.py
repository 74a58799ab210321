"""GRPO made ready to train, as :mod:`recipes.training.sft_stages` makes SFT's stages: the parser, the checks run
before the run claims its folder or loads any weights (the mixture, vLLM, the generation cuts, the packed training
pass), the trainer (TRL's GRPOTrainer on the project's prompts:
:class:`recipes.training.grpo_trainer.VisualGRPOTrainer`) and the rewards' logged means for the run's record.
``recipes/grpo.py`` trains it.
"""

import importlib.util
import logging
import math

from trl import GRPOConfig, ModelConfig, TrlParser, get_peft_config

from builders.errors import InputError
from recipes.model_io.modeling import (
    apply_pixel_caps,
    default_attn_implementation,
    is_vision_language,
    load_model,
    load_processor,
    resolve_system_prompt,
    tokenizer_of,
)
from recipes.training.arguments import GRPOScriptArguments
from recipes.training.grpo_data import check_completion_budgets, grpo_dataset
from recipes.training.grpo_trainer import PACKED_ATTENTION, VisualGRPOTrainer
from recipes.training.mixture import build_mixture, check_evaluation_data, check_frames, mixture_summary, parse_mixture
from recipes.training.recipe_file import GRPO
from recipes.training.rewards import REWARDS, reward_functions
from recipes.training.run import set_fields
from recipes.training.scripts import RecipeParser, available_reporters, configure_reporting


logger = logging.getLogger("sureon.grpo")


def grpo_parser() -> TrlParser:
    """``recipes/grpo.py``'s parser: its script arguments, TRL's ``GRPOConfig`` and ``ModelConfig``, from a recipe."""
    return RecipeParser((GRPOScriptArguments, GRPOConfig, ModelConfig), GRPO, rewards=REWARDS)


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
