"""The model card written next to every trained model: base model, data mixture with counts, recipe,
hyperparameters, hardware, and evaluation results as ``model-index`` metadata when a results file is given.

Results file (JSON): a list of ``huggingface_hub.EvalResult`` fields, or ``{"model_index": [...]}``; each item at
least ``task_type``, ``dataset_type``, ``dataset_name``, ``metric_type``, ``metric_value``.
"""

import json
from pathlib import Path

from huggingface_hub import EvalResult, ModelCard, ModelCardData

from builders.errors import InputError
from model_cards import SUREON_CITATION, template_path


HYPERPARAMETERS = (
    "learning_rate",
    "num_train_epochs",
    "max_steps",
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "lr_scheduler_type",
    "warmup_steps",
    "weight_decay",
    "bf16",
    "activation_checkpointing",
    "seed",
)


def read_eval_results(path: str | Path) -> list[EvalResult]:
    data = json.loads(Path(path).read_text())
    items = data.get("model_index", []) if isinstance(data, dict) else data
    results = []
    for position, item in enumerate(items):
        try:
            results.append(EvalResult(**item))
        except TypeError as err:
            raise InputError(
                f"{path}: result {position} is not an EvalResult ({err}); see recipes/training/model_card.py"
            ) from err
    return results


def hyperparameters(training_args) -> dict:
    values = {key: getattr(training_args, key) for key in HYPERPARAMETERS if hasattr(training_args, key)}
    if values.get("max_steps", -1) > 0:
        values.pop("num_train_epochs", None)
    else:
        values.pop("max_steps", None)
    return {key: getattr(value, "value", value) for key, value in values.items()}  # enums as their plain value


def is_hub_id(name: str) -> bool:
    return not Path(name).exists() and name.count("/") == 1


def render_model_card(
    *,
    model_name: str,
    base_model: str,
    stages: list[dict],
    training_args,
    trainable: dict,
    blind: bool,
    vision_language: bool,
    max_frames: int | None,
    frames_as: str,
    system_prompt: str | None = None,
    recipe: str | None = None,
    hardware: str | None = None,
    lora: str | None = None,
    eval_results: list[EvalResult] | None = None,
    grpo: dict | None = None,
) -> ModelCard:
    """``stages``: ``[{name, mixture: [source summaries], fold, num_folds, seed}]`` in training order; ``grpo``: the
    summary of a GRPO stage (``recipes/grpo.py``: its rewards, their weights and last means, the GRPO settings)."""
    hub_datasets = sorted(
        {source["path"] for stage in stages for source in stage["mixture"] if is_hub_id(source["path"])}
    )
    card_data = ModelCardData(
        model_name=model_name,
        base_model=base_model if is_hub_id(base_model) else None,
        library_name="transformers",
        pipeline_tag="image-text-to-text" if vision_language else "text-generation",
        license="apache-2.0",
        tags=["sureon", "surgical", "trl", "grpo" if grpo else "sft"]
        + (["blind-guesser"] if blind else ["video-question-answering"]),
        datasets=hub_datasets or None,
        eval_results=eval_results or None,
    )
    description = "A text-only blind guesser for surgical video QA." if blind else "A surgical video-language model."
    return ModelCard.from_template(
        card_data,
        template_path=template_path("model_card.md"),
        model_name=model_name,
        description=description,
        base_model=base_model,
        base_model_on_hub=is_hub_id(base_model),
        stages=stages,
        blind=blind,
        recipe=recipe,
        hardware=hardware,
        max_frames=max_frames,
        frames_as=frames_as,
        system_prompt=system_prompt,
        trainable=trainable,
        lora=lora,
        hyperparameters=hyperparameters(training_args),
        eval_results=eval_results or [],
        grpo=grpo,
        rewards=list(zip(grpo["rewards"], grpo["reward_weights"], strict=True)) if grpo else [],
        citation=SUREON_CITATION,
    )


def write_model_card(
    output_dir: str | Path,
    script_args,
    training_args,
    stages: list[dict],
    base_model: str,
    recipe: str | None,
    grpo: dict | None = None,
) -> Path:
    """Render the card of a finished run from its stages' records (the last one's settings) and write it as
    ``output_dir/README.md``; ``grpo``: the GRPO stage's record (``recipes/grpo.py``)."""
    last = stages[-1]
    card = render_model_card(
        model_name=script_args.hub_model_name or training_args.hub_model_id or Path(output_dir).name,
        base_model=base_model,
        stages=stages,
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
        grpo=grpo,
    )
    path = Path(output_dir) / "README.md"
    card.save(path)
    return path
