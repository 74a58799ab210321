"""Reading a training recipe strictly: the one check that ``recipes/sft.py``, ``recipes/grpo.py`` and ``sureon plan``
run on a recipe YAML before anything starts.

A recipe is a YAML mapping whose keys are fields of the dataclasses the launch script parses: ``SFTScriptArguments``,
TRL's ``SFTConfig`` and ``ModelConfig`` for ``recipes/sft.py``; ``GRPOScriptArguments``, ``GRPOConfig`` and
``ModelConfig`` for ``recipes/grpo.py``. TRL's ``TrlParser`` turns the YAML's values into argparse defaults: a key no
dataclass declares is refused, but a value of the wrong type that is not a string is taken as it stands
(``max_frames: [8]`` reaches the collator), ``save_strategy: no`` arrives as ``False``, and ``sureon plan``, which does
not run TRL's parser, read the keys itself and ignored a misspelt one. So every reader goes through
:func:`read_recipe`, which checks, against the same dataclasses and before any model or data is loaded:

- every key is a field of one of them (a misspelt key is named, with the likely intended key);
- every value has the field's type (the key, the value and the type are named); strings convert as argparse would
  convert them (``learning_rate: 1e-5`` is a string to YAML), and a field with choices takes one of them;
- the numbers TRL and transformers take as they come are in range (:data:`RANGES`: a negative learning rate or a
  batch of 0 would fail mid-run or train wrongly);
- each ``stages:`` entry (``recipes/sft.py`` only) overrides training and data settings, never the model, and has its
  own ``dataset_mixture``; each ``dataset_mixture`` entry is checked against ``MixtureSource``'s fields the same way;
- ``model_name_or_path`` and the data are given; GRPO's ``reward_funcs`` exist, one ``reward_weights`` entry each;
- LoRA settings (``lora_r``, ``lora_target_modules``, ...) come with ``use_peft: true`` (TRL ignores them otherwise);
- no key is written twice (:func:`builders.yaml_file.load_yaml_mapping`: YAML would let the last one win).

Every problem found is listed in one line (``error: training recipe RECIPE: key: ...; key: ...``): one edit fixes all.
``recipes/sft.py`` and ``recipes/grpo.py`` print it and exit 2 (:func:`run_script`), as ``sureon`` does.
"""

import argparse
import dataclasses
import difflib
import math
import types
import typing
from collections.abc import Collection
from enum import Enum
from pathlib import Path

from builders.arguments import float_range, fraction, int_range, non_negative_int, positive_float, positive_int
from builders.errors import InputError, report_mistakes
from builders.yaml_file import load_yaml_mapping
from recipes.model_io.run_record import GRPO, SFT
from recipes.training.arguments import FORMATS, GRPOScriptArguments, MixtureSource, SFTScriptArguments


SCRIPTS = {SFT: "recipes/sft.py", GRPO: "recipes/grpo.py"}
EXAMPLES = {
    SFT: "recipes/qwen3-vl-8b/sft/config_sureon_vlm.yaml",
    GRPO: "recipes/qwen3-vl-8b/grpo/config_sureon_grpo.yaml",
}
MAX_PROBLEMS_SHOWN = 12

# ModelConfig's LoRA settings: read only with use_peft: true (without it TRL runs a full fine-tune and ignores them).
LORA_KEYS = (
    "lora_r",
    "lora_alpha",
    "lora_dropout",
    "lora_target_modules",
    "lora_target_parameters",
    "lora_modules_to_save",
    "lora_task_type",
    "use_rslora",
    "use_dora",
)

# Fields that also take one string (PEFT reads "all-linear" as every linear layer).
STRING_OR_LIST = {"lora_target_modules", "lora_target_parameters", "lora_modules_to_save"}

# Ranges TRL and transformers leave unchecked (or check only once the model is loaded); None stays allowed where the
# field is optional.
RANGES = {
    "learning_rate": positive_float,
    "per_device_train_batch_size": positive_int,
    "per_device_eval_batch_size": positive_int,
    "gradient_accumulation_steps": positive_int,
    "global_batch_size": positive_int,
    "num_train_epochs": positive_float,
    "max_steps": int_range(-1),
    "warmup_steps": float_range(0),
    "warmup_ratio": fraction,
    "weight_decay": float_range(0),
    "max_grad_norm": float_range(0),
    "logging_steps": positive_float,
    "save_steps": positive_float,
    "eval_steps": positive_float,
    "save_total_limit": positive_int,
    "dataloader_num_workers": non_negative_int,
    "seed": int_range(0, 2**32 - 1),
    "max_length": positive_int,
    "max_frames": positive_int,
    "image_max_pixels": positive_int,
    "video_max_pixels": positive_int,
    "num_folds": int_range(2),
    "fold": non_negative_int,
    "encoded_cache_mb": float_range(0),
    "lora_r": positive_int,
    "lora_alpha": positive_int,
    "lora_dropout": fraction,
    "num_generations": int_range(2),
    "max_completion_length": positive_int,
    "max_prompt_length": positive_int,
    "temperature": positive_float,
    "top_p": float_range(0, 1, low_open=True),
    "beta": float_range(0),
    "vllm_gpu_memory_utilization": float_range(0, 1, low_open=True),
    "weight": positive_float,  # a dataset_mixture source
    "max_samples": positive_int,
}


class RecipeError(InputError):
    """A recipe that cannot be trained or planned as it stands; the message names the file, the key and the fix."""


# -- the YAML file --------------------------------------------------------------------------------------------------


def load_recipe_yaml(path: Path | str, example: str = EXAMPLES[SFT]) -> dict:
    """The YAML mapping in ``path``; a missing, unreadable, non-YAML, empty or non-mapping file is a
    :class:`RecipeError` naming the file (and the YAML problem's line), by the project's one YAML reader."""
    return load_yaml_mapping(path, "training recipe", example, error=RecipeError)


# -- the dataclasses a recipe is read against -----------------------------------------------------------------------


def recipe_dataclasses(kind: str) -> tuple:
    """``(script arguments, training config, ModelConfig)`` of ``recipes/sft.py`` or ``recipes/grpo.py``."""
    if kind == SFT:
        from trl import ModelConfig, SFTConfig

        return SFTScriptArguments, SFTConfig, ModelConfig
    if kind == GRPO:
        from trl import GRPOConfig, ModelConfig

        return GRPOScriptArguments, GRPOConfig, ModelConfig
    raise InputError(f"unknown recipe kind {kind!r}: {SFT} or {GRPO}")


def settable_fields(*classes) -> dict[str, tuple[dataclasses.Field, object]]:
    """``{name: (field, type)}`` of what a YAML may set in ``classes`` (the first class declaring a name wins)."""
    found = {}
    for cls in classes:
        hints = typing.get_type_hints(cls)
        for item in dataclasses.fields(cls):
            if item.init and item.name not in found:
                found[item.name] = (item, hints.get(item.name, typing.Any))
    return found


# -- values ---------------------------------------------------------------------------------------------------------


class _Mismatch(Exception):
    pass


_TRUE, _FALSE = ("yes", "true", "t", "y", "1"), ("no", "false", "f", "n", "0")


def _union_args(hint) -> tuple | None:
    return typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else None


def _enum_of(hint) -> type[Enum] | None:
    """The Enum of a ``SomeEnum | str`` field (transformers' ``lr_scheduler_type``, ``save_strategy``, ...): the
    string must name one of its members, as transformers converts it when the run starts."""
    members = [m for m in _union_args(hint) or () if m is not type(None)]
    enums = [m for m in members if isinstance(m, type) and issubclass(m, Enum)]
    return enums[0] if len(enums) == 1 and set(members) == {enums[0], str} else None


def convert(value, hint, *, loose: bool = True):
    """``value`` as a field of type ``hint`` takes it (strings converted as argparse converts them when ``loose``);
    :class:`_Mismatch` when it cannot."""
    if hint is typing.Any or hint is object:
        return value
    if _enum_of(hint) is not None:
        return convert(value, _enum_of(hint), loose=loose)
    members = _union_args(hint)
    if members is not None:
        if isinstance(value, str) and str in members:
            return value
        for strict in (True, False) if loose else (True,):
            for member in members:
                try:
                    return convert(value, member, loose=not strict)
                except _Mismatch:
                    continue
        raise _Mismatch
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is type(None):
        if value is None:
            return None
        raise _Mismatch
    if origin is typing.Literal:
        if value in args:
            return value
        raise _Mismatch
    if hint is bool:
        if isinstance(value, bool):
            return value
        if loose and isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
            return value.strip().lower() in _TRUE
        raise _Mismatch
    if hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if loose and isinstance(value, str):
            try:
                return int(value.strip())
            except ValueError:
                raise _Mismatch from None
        raise _Mismatch
    if hint is float:
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            return value
        if loose and isinstance(value, str):
            try:
                number = float(value.strip())
            except ValueError:
                raise _Mismatch from None
            if math.isfinite(number):
                return number
        raise _Mismatch
    if hint is str:
        if isinstance(value, str):
            return value
        raise _Mismatch
    if isinstance(hint, type) and issubclass(hint, Enum):
        if isinstance(value, hint):
            return value
        if isinstance(value, str) and value in {member.value for member in hint}:
            return value
        raise _Mismatch
    if hint in (list, tuple) or origin in (list, tuple):
        if not isinstance(value, list | tuple):
            raise _Mismatch
        if not args:
            return list(value)
        return [convert(item, args[0], loose=loose) for item in value]
    if hint is dict or origin is dict:
        if not isinstance(value, dict):
            raise _Mismatch
        if len(args) == 2:
            return {convert(k, args[0], loose=loose): convert(v, args[1], loose=loose) for k, v in value.items()}
        return dict(value)
    if isinstance(hint, type):
        if isinstance(value, hint) or (dataclasses.is_dataclass(hint) and isinstance(value, dict)):
            return value
        raise _Mismatch
    return value  # a typing construct this reader does not know: left to the script's parser


_PLURAL = {int: "integers", float: "numbers", str: "strings", bool: "true/false values", dict: "mappings"}


def expected(hint, plural: bool = False) -> str:
    """What a field of type ``hint`` takes, in words (``an integer or null``)."""
    if _enum_of(hint) is not None:
        return expected(_enum_of(hint), plural)
    members = _union_args(hint)
    if members is not None:
        words = list(dict.fromkeys(expected(m, plural) for m in members if m is not type(None)))
        if type(None) in members:
            words.append("null")
        return " or ".join(words)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Literal:
        return f"one of {list(args)}"
    if isinstance(hint, type) and issubclass(hint, Enum):
        return f"one of {[member.value for member in hint]}"
    if hint in (list, tuple) or origin in (list, tuple):
        return "a list" + (f" of {expected(args[0], True)}" if args and args[0] is not typing.Any else "")
    if hint is dict or origin is dict:
        return "mappings" if plural else "a mapping"
    if plural and hint in _PLURAL:
        return _PLURAL[hint]
    names = {int: "an integer", float: "a number", str: "a string", bool: "true or false", type(None): "null"}
    if hint in names:
        return names[hint]
    return getattr(hint, "__name__", str(hint))


def _check_value(key: str, value, item: dataclasses.Field, hint, problems: list[str]):
    """``value`` converted for field ``key``, or the problem added to ``problems`` (and ``value`` returned)."""
    if key in STRING_OR_LIST and isinstance(value, str):
        return value
    try:
        converted = convert(value, hint)
    except _Mismatch:
        fix = ""
        if isinstance(value, bool) and (_accepts(hint, str) or _enum_of(hint) is not None):
            fix = f" (YAML reads an unquoted {'no' if value is False else 'yes'} as {value}: quote the text)"
        elif isinstance(value, str) and _accepts(hint, list):
            fix = f" (write [{value}])"
        elif isinstance(value, str) and _enum_of(hint) is not None:
            close = difflib.get_close_matches(value, [member.value for member in _enum_of(hint)], n=1)
            fix = f" (did you mean {close[0]!r}?)" if close else ""
        problems.append(f"{key}: {value!r} is not {expected(hint)}{fix}")
        return value
    choices = item.metadata.get("choices") if item is not None else None
    if choices and converted is not None and converted not in choices:
        close = difflib.get_close_matches(str(converted), [str(c) for c in choices], n=1)
        hint_text = f" (did you mean {close[0]!r}?)" if close else ""
        problems.append(f"{key}: {converted!r} is not one of {list(choices)}{hint_text}")
        return converted
    check = RANGES.get(key)
    if check is not None and isinstance(converted, int | float) and not isinstance(converted, bool):
        try:
            check(str(converted))
        except argparse.ArgumentTypeError as err:  # its text names the range
            problems.append(f"{key}: {err}")
    return converted


def _accepts(hint, kind: type) -> bool:
    members = _union_args(hint) or (hint,)
    return any(m is kind or typing.get_origin(m) is kind for m in members)


def _unknown(key: str, known, where_known: str) -> str:
    # keys transformers 5 replaced, which a recipe written for transformers 4 still holds
    replaced = {"group_by_length": "train_sampling_strategy: group_by_length"}
    if key in replaced:
        return f"unknown key {key!r} (transformers 5 replaced it: write {replaced[key]!r})"
    close = difflib.get_close_matches(str(key), list(known), n=1, cutoff=0.75)
    if close:
        return f"unknown key {key!r} (did you mean {close[0]!r}?)"
    return f"unknown key {key!r} (not a setting of {where_known})"


def check_fields(
    values: dict, fields: dict, problems: list[str], *, prefix: str = "", where_known: str = "", skip=()
) -> dict:
    """``values`` with each value converted for its field; unknown keys and wrong values added to ``problems``."""
    checked = {}
    for key, value in values.items():
        if key in skip:
            checked[key] = value
            continue
        if key not in fields:
            problems.append(prefix + _unknown(key, fields, where_known))
            checked[key] = value
            continue
        item, hint = fields[key]
        found: list[str] = []
        checked[key] = _check_value(key, value, item, hint, found)
        problems += [prefix + problem for problem in found]
    return checked


def check_mixture(entries, problems: list[str], *, prefix: str = "") -> list:
    """A ``dataset_mixture`` list checked entry by entry against ``MixtureSource``'s fields: the one check of a
    mixture, for a recipe read here and for one given to :func:`recipes.training.mixture.parse_mixture`."""
    if entries is None:
        return []
    if not isinstance(entries, list):
        problems.append(f"{prefix}dataset_mixture: expected a list of sources (- path: ...), got {entries!r}")
        return entries
    fields = settable_fields(MixtureSource)
    checked = []
    for position, entry in enumerate(entries):
        label = f"{prefix}dataset_mixture[{position}]: "
        if isinstance(entry, str):
            entry = {"path": entry}
        if not isinstance(entry, dict) or not entry.get("path") or not isinstance(entry.get("path"), str):
            problems.append(f"{label}expected a mapping with a path (a built folder or a Hub id), got {entry!r}")
            checked.append(entry)
            continue
        entry = check_fields(entry, fields, problems, prefix=label, where_known=f"a source: {sorted(fields)}")
        if "format" in entry and entry["format"] not in FORMATS:
            problems.append(f"{label}format: {entry['format']!r} is not one of {list(FORMATS)}")
        checked.append(entry)
    return checked


# -- the recipe -----------------------------------------------------------------------------------------------------


def detect_kind(recipe: dict) -> str:
    """``grpo`` for a recipe of ``recipes/grpo.py`` (it names rewards or a group size, or more of its keys are
    GRPO's than SFT's), else ``sft``: what ``sureon plan`` plans it as, and the script that would run it."""
    if "reward_funcs" in recipe or "num_generations" in recipe:
        return GRPO
    sft, grpo = (set(settable_fields(*recipe_dataclasses(kind))) for kind in (SFT, GRPO))
    keys = set(recipe) - {"env", "stages", "dataset_mixture"}
    return GRPO if len(keys - grpo) < len(keys - sft) else SFT


def check_recipe(
    recipe: dict,
    *,
    where: str,
    kind: str | None = None,
    dataclass_types=None,
    require_model: bool = True,
    rewards: Collection[str] | None = None,
) -> tuple[str, dict]:
    """``(kind, recipe)`` with every value converted for its field; a :class:`RecipeError` listing every problem
    (the module docstring says what is checked). ``rewards``: the reward names a GRPO recipe may use (the registry
    lives in ``recipes.training.rewards``, which training code may not import: the caller that may passes it)."""
    if kind is None:
        kind = detect_kind(recipe)
    classes = tuple(dataclass_types) if dataclass_types else recipe_dataclasses(kind)
    fields = settable_fields(*classes)
    where_known = f"{SCRIPTS[kind]}: {', '.join(cls.__name__ for cls in classes)}"
    problems: list[str] = []
    nested = {"env", "dataset_mixture"} | ({"stages"} if "stages" in fields else set())
    checked = check_fields(recipe, fields, problems, where_known=where_known, skip=nested)

    env = recipe.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(v, str | int | float | bool) for v in env.values()):
        problems.append(f"env: expected a mapping of VARIABLE: value, got {recipe['env']!r}")
    if "dataset_mixture" in recipe:
        checked["dataset_mixture"] = check_mixture(recipe["dataset_mixture"], problems)
    stages = recipe.get("stages") if "stages" in fields else None
    if stages is not None:
        checked["stages"] = _check_stages(stages, classes, problems)
    if stages and recipe.get("dataset_mixture"):
        problems.append("give either dataset_mixture (one stage) or stages (each with its dataset_mixture), not both")
    elif not stages and not recipe.get("dataset_mixture"):
        problems.append(f"no dataset_mixture: name the data to train on, as {EXAMPLES[kind]} does")

    model = recipe.get("model_name_or_path")
    if model is None and require_model:
        problems.append("model_name_or_path is missing: name the model to start from (a Hub id or a local folder)")
    elif model is not None and (not isinstance(model, str) or not model.strip()):
        problems.append(f"model_name_or_path: {model!r} is not a Hub id or a local folder")
    lora = [key for key in LORA_KEYS if key in recipe]
    if lora and checked.get("use_peft") is not True:
        problems.append(
            f"{', '.join(lora)} without use_peft: true: a full fine-tune would run and ignore them; add use_peft: "
            "true for a LoRA run, or remove them"
        )
    fold, folds = checked.get("fold"), checked.get("num_folds", 4)
    if isinstance(fold, int) and isinstance(folds, int) and not isinstance(fold, bool) and fold >= folds >= 2:
        problems.append(f"fold: {fold} is not below num_folds ({folds}); folds count from 0")
    if kind == GRPO:
        _check_rewards(checked, rewards, problems)
    if problems:
        shown = problems[:MAX_PROBLEMS_SHOWN]
        more = f"; and {len(problems) - len(shown)} more" if len(problems) > len(shown) else ""
        raise RecipeError(f"{where}: {'; '.join(shown)}{more}")
    return kind, checked


def _check_stages(stages, classes: tuple, problems: list[str]) -> list:
    """Each stage of a multi-stage recipe: a name, its dataset_mixture, and overrides of training and data
    settings (the model is the previous stage's output)."""
    if not isinstance(stages, list) or not stages:
        problems.append(f"stages: expected a list of stages (- name: ..., dataset_mixture: ...), got {stages!r}")
        return stages
    script, training = classes[0], classes[1]
    fields = settable_fields(script, training)
    for name in ("stages", "dataset_mixture"):
        fields.pop(name, None)
    model_fields = set(settable_fields(*classes[2:])) - set(fields)
    checked = []
    for number, stage in enumerate(stages, start=1):
        if not isinstance(stage, dict):
            problems.append(f"stages[{number - 1}]: expected a mapping (name, dataset_mixture, ...), got {stage!r}")
            checked.append(stage)
            continue
        label = f"stage {stage.get('name', number)!r}: "
        if "name" in stage and not isinstance(stage["name"], str | int):
            problems.append(f"{label}name: {stage['name']!r} is not a string")
        moved = sorted(set(stage) & model_fields)
        if moved:
            problems.append(f"{label}{moved} cannot change between stages (each stage starts from the one before)")
        overrides = {k: v for k, v in stage.items() if k not in model_fields}
        result = check_fields(
            overrides,
            fields,
            problems,
            prefix=label,
            where_known="a stage: training and data settings",
            skip={"name", "dataset_mixture"},
        )
        if not stage.get("dataset_mixture"):
            problems.append(f"{label}no dataset_mixture: each stage names its own data")
        else:
            result["dataset_mixture"] = check_mixture(stage["dataset_mixture"], problems, prefix=label)
        checked.append(result)
    return checked


def _check_rewards(recipe: dict, known: Collection[str] | None, problems: list[str]) -> None:
    """One weight per reward; with ``known`` (the registry's names), every reward is one of them."""
    names = recipe.get("reward_funcs")
    if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
        return  # a type problem, reported already (or absent: the script's default)
    for name in names if known is not None else []:
        if name not in known:
            close = difflib.get_close_matches(name, list(known), n=1)
            problems.append(
                f"reward_funcs: unknown reward {name!r}"
                + (f" (did you mean {close[0]!r}?)" if close else f"; known: {sorted(known)}")
            )
    weights = recipe.get("reward_weights")
    if isinstance(weights, list) and len(weights) != len(names):
        problems.append(f"reward_weights: {len(weights)} weights for {len(names)} reward_funcs; give one each")


def read_recipe(
    path: Path | str,
    kind: str | None = None,
    *,
    dataclass_types=None,
    require_model: bool = True,
    rewards: Collection[str] | None = None,
) -> dict:
    """The recipe at ``path``, checked strictly (module docstring), its values converted for their fields; ``kind``
    (``sft`` or ``grpo``) None tells it from the keys; ``rewards`` as :func:`check_recipe` takes them."""
    recipe = load_recipe_yaml(path, EXAMPLES.get(kind or SFT))
    return check_recipe(
        recipe,
        where=f"training recipe {path}",
        kind=kind,
        dataclass_types=dataclass_types,
        require_model=require_model,
        rewards=rewards,
    )[1]


def config_path(argv: list[str]) -> str | None:
    """The recipe of a launch script's command line (``--config PATH``), or None."""
    if "--config" not in argv:
        return None
    position = argv.index("--config") + 1
    if position >= len(argv) or argv[position].startswith("--"):
        raise RecipeError("--config needs a recipe file, e.g. --config " + EXAMPLES[SFT])
    return argv[position]


def run_script(action) -> int:
    """Run a launch script's ``action()``; a user's mistake (a bad recipe, data that is not there) is one line,
    ``error: ...``, and exit status 2, as in ``sureon`` (:func:`builders.errors.report_mistakes`)."""
    return report_mistakes(action)
