"""Reading a training recipe for ``sureon plan``: its stages and settings, what trains, the checkpoint planned."""

from pathlib import Path

import yaml

from builders.errors import InputError


def read_recipe(path: Path) -> dict:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: recipe not found")
    try:
        recipe = yaml.safe_load(path.read_text())
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        mark = getattr(err, "problem_mark", None)
        problem = (f"line {mark.line + 1}: " if mark else "") + (getattr(err, "problem", None) or str(err))
        raise InputError(f"{path}: not a YAML training recipe ({problem}); give recipes/<model>/sft/*.yaml") from None
    if not isinstance(recipe, dict) or not recipe.get("model_name_or_path"):
        raise InputError(f"{path}: not a training recipe (a mapping with model_name_or_path)")
    return recipe


def check_data_paths(path: Path, recipe: dict) -> None:
    """Refuse, before any model is built, a recipe whose local data folders do not exist (a local-looking path is
    never retried as a Hub id)."""
    from builders.hub import looks_local

    entries = [entry for stage in recipe_stages(recipe) for entry in stage["mixture"]]
    paths = [str(entry.get("path") if isinstance(entry, dict) else entry) for entry in entries]
    missing = [p for p in dict.fromkeys(paths) if looks_local(p) and not Path(p).expanduser().exists()]
    if missing:
        raise FileNotFoundError(
            f"{path}: its data {', '.join(missing)} does not exist (a local path, not a Hub id): build it first, or "
            "plan on synthetic frames with --synthetic-frames 768x432"
        )


def recipe_stages(recipe: dict) -> list[dict]:
    """``[{name, mixture, settings}]``: the recipe's one stage, or each of its ``stages`` with its overrides."""
    base = {key: value for key, value in recipe.items() if key not in ("stages", "dataset_mixture")}
    if not recipe.get("stages"):
        return [{"name": "train", "mixture": recipe.get("dataset_mixture") or [], "settings": base}]
    stages = []
    for number, stage in enumerate(recipe["stages"], start=1):
        stage = dict(stage)
        name = str(stage.pop("name", f"stage{number}"))
        stages.append({"name": name, "mixture": stage.pop("dataset_mixture", None) or [], "settings": base | stage})
    return stages


def checkpointing_on(settings: dict) -> bool:
    """TRL's switch: ``activation_checkpointing`` when set, else ``gradient_checkpointing`` (TRL's default: on)."""
    value = settings.get("activation_checkpointing")
    return bool(settings.get("gradient_checkpointing", True) if value is None else value)


def frozen_groups(settings: dict) -> set[str]:
    flags = (("vision_tower", "freeze_vision_tower"), ("projector", "freeze_projector"), ("llm", "freeze_llm"))
    return {group for group, key in flags if settings.get(key)}


def lora_settings(settings: dict) -> dict | None:
    if not settings.get("use_peft"):
        return None
    targets = settings.get("lora_target_modules")
    if not targets or targets == "all-linear":
        targets = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    return {"r": settings.get("lora_r", 16), "targets": list(targets)}


def is_grpo(settings: dict) -> bool:
    """A GRPO recipe (``recipes/grpo.py``): it names rewards or a group size."""
    return "reward_funcs" in settings or "num_generations" in settings


def planned_model(recipe_path: Path, name: str) -> tuple[str, str | None]:
    """The checkpoint whose architecture is planned: ``name``, or, for a local folder not trained yet (a GRPO
    recipe starting from an SFT run), the base model of the shipped recipe whose ``output_dir`` it is."""
    if Path(name).is_dir():
        return name, None
    root = next((folder for folder in Path(recipe_path).resolve().parents if folder.name == "recipes"), None)
    for path in sorted(root.glob("*/*/config_*.yaml")) if root else []:
        other = yaml.safe_load(path.read_text()) or {}
        if other.get("output_dir") == name and other.get("model_name_or_path"):
            base = other["model_name_or_path"]
            return base, f"{name} is not trained yet: planned as {base}, what {path.name} trains it from"
    return name, None
