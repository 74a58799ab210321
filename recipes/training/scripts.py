"""What the two launch scripts share (``recipes/sft.py``, ``recipes/grpo.py``) on their command line: the parser that
reads a recipe once, strictly, and hands its checked values to TRL's dataclasses; the scripts' ``cli``; reporting.

Their argument dataclasses live in :mod:`recipes.training.arguments`, which the recipe reader (for ``sureon plan`` and
``sureon reproduce`` too) and the mixture read as well; no support module imports a launch script.
"""

import os
import sys
from collections.abc import Collection

from trl import SFTConfig, TrlParser

from builders.errors import InputError
from recipes.training.launch import with_derived_accumulation
from recipes.training.recipe_file import LORA_KEYS, SFT, RecipeError, config_path, read_recipe, run_script


class RecipeParser(TrlParser):
    """TRL's parser, with the recipe read once and strictly (``recipes.training.recipe_file``): a misspelt key, or a
    value of the wrong type or out of range, is one error naming it before anything loads (TRL would take a
    non-string value of any type as it stands); the checked values become the parser's defaults, as TRL's
    ``parse_args_and_config`` makes the raw YAML's, without reading the file again, and the command line still wins.
    A value TRL's own dataclasses refuse (``bf16`` on a machine without a GPU, a generation batch GRPO cannot split)
    is a user error naming the recipe, not a traceback."""

    def __init__(self, dataclass_types, kind: str, rewards: Collection[str] | None = None):
        super().__init__(dataclass_types)
        self.kind, self.rewards = kind, rewards
        if kind == SFT:
            # SFTConfig's own default (1024) is TRL's truncation length; a recipe's max_length bounds the collator's
            # rows instead (a longer row is refused, never cut: recipes.training.collator), and unset means no bound.
            self.set_defaults(max_length=None)

    def parse_args_and_config(self, args=None):
        args = list(args) if args is not None else sys.argv[1:]
        recipe = config_path(args)
        settings = {}
        if recipe is not None:
            # The model may come from the command line (--model_name_or_path); main() checks that one is given.
            required = "--model_name_or_path" not in args
            settings = read_recipe(
                recipe, self.kind, dataclass_types=self.dataclass_types, require_model=required, rewards=self.rewards
            )
            position = args.index("--config")
            args = args[:position] + args[position + 2 :]
        # The accumulation that makes the global batch on these ranks, before GRPOConfig derives its generation batch.
        args = with_derived_accumulation(args, settings, recipe_path=recipe)
        for variable, value in settings.get("env", {}).items():
            os.environ[variable] = str(value)
        self.set_defaults_with_config(**{key: value for key, value in settings.items() if key != "env"})
        try:
            parsed = self.parse_args_into_dataclasses(args=args)
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


def script_cli(make_parser, main, argv: list[str] | None = None) -> int:
    """A launch script's command line, ``--config RECIPE [--field value ...]``: 0 when trained; a mistake in the
    recipe, the options or the data is one line, ``error: ...``, and status 2
    (:func:`recipes.training.recipe_file.run_script`)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    return run_script(lambda: main(*make_parser().parse_args_and_config(argv), recipe=config_path(argv)))
