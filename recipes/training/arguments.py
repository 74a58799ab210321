"""What a training recipe may set, defined once: the launch scripts' own argument dataclasses (beside TRL's
``SFTConfig`` / ``GRPOConfig`` and ``ModelConfig``) and a ``dataset_mixture`` source.

The recipe reader (:mod:`recipes.training.recipe_file`) checks a recipe against these, the launch scripts parse
them (:mod:`recipes.training.scripts`), the mixture loads its sources from them (:mod:`recipes.training.mixture`);
this module imports none of those, so the three read one definition with no circle between them. Every field maps
onto a flat key of the recipe YAML (a mixture source's onto a key of a ``dataset_mixture`` entry).
"""

from dataclasses import dataclass, field
from typing import Any

from public_converters.grounded import SHAPES


# What a checkable GRPO row's answer is, by the format its prompt asks for and its rewards read: a bare option letter,
# the event letters in order, or grounded JSON of one shape (public_converters.grounded.SHAPES); the keys of a
# recipe's completion_budgets (recipes.training.grpo_data.answer_kind tells a row's).
ANSWER_KINDS = ("letter", "order", *SHAPES)


# How a source's rows read: the project's video-QA records, chat messages, or prompt / completion pairs.
FORMATS = ("auto", "video_qa", "messages", "prompt_completion")


@dataclass
class MixtureSource:
    """One ``dataset_mixture`` entry: a build (a folder or a Hub id), its config and split, its weight in the mixture
    and how its rows read; checked where a recipe is read (:func:`recipes.training.recipe_file.check_mixture`)."""

    path: str
    name: str | None = None
    split: str = "train"
    revision: str | None = None
    data_files: Any = None
    weight: float = 1.0
    max_samples: int | None = None
    format: str = "auto"
    columns: dict[str, str] = field(default_factory=dict)
    exclude_categories: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        parts = [self.path] + ([self.name] if self.name else []) + [self.split]
        return ":".join(parts)


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
        budgets = self.completion_budgets or {}
        unknown = sorted(set(budgets) - set(ANSWER_KINDS))
        if unknown:
            raise ValueError(f"completion_budgets: unknown answer kinds {unknown}; known: {list(ANSWER_KINDS)}")
        below = {kind: budget for kind, budget in budgets.items() if not isinstance(budget, int) or budget < 1}
        if below:
            raise ValueError(f"completion_budgets: {below}: each budget is a number of tokens, at least 1")
