"""What the two launch scripts share (``recipes/sft.py``, ``recipes/grpo.py``): their argument dataclasses, the
parser that reads a recipe strictly before TRL's does, and reporting.

Support code, not a launch script: ``recipes.training.recipe_file`` checks a recipe against these dataclasses for
``sureon plan`` and ``sureon reproduce`` too, and no support module may import a launch script.
"""

import os
import sys
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from trl import SFTConfig, TrlParser

from builders.errors import InputError
from recipes.training.launch import with_derived_accumulation
from recipes.training.recipe_file import LORA_KEYS, SFT, RecipeError, config_path, read_recipe


@dataclass
class SharedScriptArguments:
    """What both launch scripts read the same way, with the same recipe keys and defaults: the data mixture and how
    clips reach the model, the vision-tower and CPU settings, the system prompt and the model card's facts."""

    dataset_mixture: list[dict[str, Any]] | None = field(
        default=None,
        metadata={"help": "sources: [{path, name, split, weight, format, columns, max_samples}] (GRPO: video QA)"},
    )
    frames_as: str = field(
        default="video",
        metadata={"help": "clip frames as one 'video' or as tagged 'images'", "choices": ["video", "images"]},
    )
    max_frames: int | None = field(default=8, metadata={"help": "frames per clip (evenly subsampled above it)"})
    image_max_pixels: int | None = field(default=None, metadata={"help": "pixel cap per image"})
    video_max_pixels: int | None = field(default=None, metadata={"help": "pixel cap per clip (all its frames)"})
    uniform_vision_calls: bool | None = field(
        default=None,
        metadata={
            "help": "run the vision tower on every batch and log-probability pass (dummy inputs when a batch has "
            "none); default: on for VLMs"
        },
    )
    system_prompt: str | None = field(
        default=None,
        metadata={
            "help": "system message of every example; recorded with the weights and applied by default by "
            "`sureon eval sureon`, `sureon curate`, `sureon audit` and GRPO from the run (GRPO's default: the one "
            "its starting SFT run was trained with)"
        },
    )
    cpu_labelled_positions_only: bool = field(
        default=False,
        metadata={
            "help": "on a CPU, score only the labelled positions through TRL's fused LM head, as on CUDA (~40 %% less "
            "CPU a step on tiny models; float rounding differs: recipes.model_io.modeling)"
        },
    )
    allow_evaluation_data: bool = field(
        default=False,
        metadata={
            "help": "let dataset_mixture name evaluation data (the benchmark, a validation pool, a bench-* config, a "
            "non-train split); refused otherwise, and recorded with the weights so that sureon eval warns"
        },
    )
    global_batch_size: int | None = field(
        default=None,
        metadata={
            "help": "rows per optimizer step over all ranks; the launch derives gradient_accumulation_steps from it "
            "(global_batch_size / (per_device_train_batch_size × ranks)), so the run is the same on any number of "
            "GPUs and machines (recipes.training.launch); give it or gradient_accumulation_steps, not both"
        },
    )
    hardware: str | None = field(default=None, metadata={"help": "stated in the model card"})
    eval_results: str | None = field(default=None, metadata={"help": "JSON of results for the card's model-index"})
    hub_model_name: str | None = field(default=None, metadata={"help": "model name in the card"})


@dataclass
class SFTScriptArguments(SharedScriptArguments):
    """SFT's own options (stages, blind mode, freezing, folds, the encoded-example cache) after the shared ones;
    every field maps onto a flat key of the recipe YAML."""

    stages: list[dict[str, Any]] | None = field(
        default=None,
        metadata={
            "help": "multi-stage schedule: [{name, dataset_mixture, <any training field>}]; each stage starts "
            "from the previous stage's weights"
        },
    )
    blind: bool = field(default=False, metadata={"help": "drop every frame and image: question + options only"})
    freeze_vision_tower: bool = False
    freeze_projector: bool = False
    freeze_llm: bool = False
    fold: int | None = field(default=None, metadata={"help": "hold out this fold (video-level, subject-stratified)"})
    num_folds: int = 4
    encoded_cache_mb: float = field(
        default=0.0,
        metadata={
            "help": "keep encoded examples in memory up to this many MB per process, so that later epochs skip the "
            "chat template and the image processor (recipes.training.collator); pays on small models and CPUs"
        },
    )


DEFAULT_REWARDS = ["mcq_accuracy", "order_accuracy", "format"]


@dataclass
class GRPOScriptArguments(SharedScriptArguments):
    """GRPO's own options (the rewards, and how generation is cut: docs/training/grpo.md) after the shared ones;
    every field maps onto a flat key of the recipe YAML."""

    reward_funcs: list[str] = field(
        default_factory=lambda: list(DEFAULT_REWARDS),
        metadata={"help": "rewards (recipes.training.rewards); weights: GRPOConfig's reward_weights"},
    )
    completion_budgets: dict[str, int] | None = field(
        default=None,
        metadata={
            "help": "the most new tokens a completion of each answer kind may take (recipes.training.grpo_data."
            "ANSWER_KINDS: letter, order, label, boxes, ...); a completion stops there or at its own end-of-turn, "
            "and a kind left out keeps max_completion_length; refused when a reference answer does not fit"
        },
    )
    share_prompt_prefill: bool = field(
        default=False,
        metadata={
            "help": "run the vision tower and the prompt's prefill once per distinct prompt of a generation batch, "
            "each of its num_generations completions decoding from a copy of that cache (same sampling)"
        },
    )
    share_prompt_in_training: bool = field(
        default=False,
        metadata={
            "help": "run each prompt once per micro-batch in the training passes (its completions packed after it, "
            "a 4-D mask: sdpa or eager attention) and group each prompt's completions into micro-batches; the same "
            "log-probabilities, loss and gradients as TRL's passes"
        },
    )

    def __post_init__(self):
        from recipes.training.grpo_data import ANSWER_KINDS

        budgets = self.completion_budgets or {}
        unknown = sorted(set(budgets) - set(ANSWER_KINDS))
        if unknown:
            raise ValueError(f"completion_budgets: unknown answer kinds {unknown}; known: {list(ANSWER_KINDS)}")
        below = {kind: budget for kind, budget in budgets.items() if not isinstance(budget, int) or budget < 1}
        if below:
            raise ValueError(f"completion_budgets: {below}: each budget is a number of tokens, at least 1")


class RecipeParser(TrlParser):
    """TRL's parser, with the recipe read strictly first (``recipes.training.recipe_file``): a misspelt key, or a value
    of the wrong type or out of range, is one error naming it before anything loads (TRL would take a non-string value
    of any type as it stands); a value TRL's own dataclasses refuse (``bf16`` on a machine without a GPU, a generation
    batch GRPO cannot split) is a user error naming the recipe, not a traceback. ``recipes/grpo.py`` uses it too."""

    def __init__(self, dataclass_types, kind: str, rewards: Collection[str] | None = None):
        super().__init__(dataclass_types)
        self.kind, self.rewards = kind, rewards
        if kind == SFT:
            # SFTConfig's own default (1024) is TRL's truncation length; a recipe's max_length bounds the collator's
            # rows instead (a longer row is refused, never cut: recipes.training.collator), and unset means no bound.
            self.set_defaults(max_length=None)

    def parse_args_and_config(self, args=None, *rest, **kwargs):
        args = list(args) if args is not None else sys.argv[1:]
        recipe = config_path(args)
        settings = {}
        if recipe is not None:
            # The model may come from the command line (--model_name_or_path); main() checks that one is given.
            required = "--model_name_or_path" not in args
            settings = read_recipe(
                recipe, self.kind, dataclass_types=self.dataclass_types, require_model=required, rewards=self.rewards
            )
        # The accumulation that makes the global batch on these ranks, before GRPOConfig derives its generation batch.
        args = with_derived_accumulation(args, settings, recipe_path=recipe)
        try:
            parsed = super().parse_args_and_config(args, *rest, **kwargs)
        except InputError:
            raise
        except ValueError as err:  # TrainingArguments / GRPOConfig refusing a setting in __post_init__
            where = f"training recipe {recipe}" if recipe else "the command line"
            raise RecipeError(f"{where}: {' '.join(str(err).split())}") from err
        lora_options = [
            arg.split("=")[0] for arg in args if arg.startswith("--") and arg[2:].split("=")[0] in LORA_KEYS
        ]
        if lora_options and not any(getattr(item, "use_peft", False) for item in parsed):
            raise RecipeError(
                f"the command line: {', '.join(lora_options)} without use_peft: a full fine-tune would run and ignore "
                "them; add --use_peft true for a LoRA run, or drop them"
            )
        return parsed


def configure_reporting(training_args: SFTConfig) -> None:
    """wandb runs offline unless a key is configured, so a run on an air-gapped node never blocks on login."""
    report_to = training_args.report_to or []
    if ("wandb" in report_to or "all" in report_to) and not os.environ.get("WANDB_API_KEY"):
        os.environ.setdefault("WANDB_MODE", "offline")


def available_reporters(requested: list[str] | str | None) -> list[str]:
    """Keep the reporters that are installed (``auto``: tensorboard and wandb when present)."""
    import importlib.util

    if requested in (None, "none", ["none"]):
        return []
    requested = [requested] if isinstance(requested, str) else list(requested)
    if "auto" in requested:
        requested = ["tensorboard", "wandb"]
    modules = {"tensorboard": "tensorboard", "wandb": "wandb"}
    return [name for name in requested if importlib.util.find_spec(modules.get(name, name)) is not None]


def recipe_path(argv: list[str]) -> str | None:
    return argv[argv.index("--config") + 1] if "--config" in argv else None
