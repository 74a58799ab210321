"""Reading a training recipe for ``sureon plan``: its stages and settings, what trains, the checkpoint planned.

The recipe is read by the one strict reader the launch scripts use (``recipes.training.recipe_file``): a misspelt
key or a value of the wrong type is an error naming it, never planned at a default the run would not use.
"""

from pathlib import Path

from recipes.training.recipe_file import GRPO, RecipeError, detect_kind, load_recipe_yaml
from recipes.training.recipe_file import read_recipe as read_strictly


def read_recipe(path: Path) -> dict:
    """The recipe at ``path``, checked against the dataclasses of the script that runs it (``recipes/sft.py`` or
    ``recipes/grpo.py``, told from its keys), its values converted for their fields."""
    return read_strictly(path, kind=None, require_model=True)


def check_data_paths(path: Path, recipe: dict) -> None:
    """Refuse, before any model is built, a recipe whose local data folders do not exist, naming the command that
    builds each (a local-looking path, ``build/sureon`` in a fresh checkout too, is never retried as a Hub id)."""
    from builders.hub import build_command, looks_local

    entries = [entry for stage in recipe_stages(recipe) for entry in stage["mixture"]]
    configs = {}  # path -> the first config read from it (which build it is)
    for entry in entries:
        source = entry if isinstance(entry, dict) else {"path": entry}
        configs.setdefault(str(source.get("path")), source.get("name"))
    missing = [p for p in configs if looks_local(p) and not Path(p).expanduser().exists()]
    if missing:
        commands = ", ".join(build_command(p, configs[p]) for p in missing)
        raise FileNotFoundError(
            f"{path}: its data {', '.join(missing)} {'does' if len(missing) == 1 else 'do'} not exist (a local path, "
            f"not a Hub id): build it first ({commands}), or plan on synthetic frames with --synthetic-frames 768x432"
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
    """A GRPO recipe (``recipes/grpo.py``): it names rewards or a group size, or its keys are GRPO's."""
    return detect_kind(settings) == GRPO


def planned_model(recipe_path: Path, name: str) -> tuple[str, str | None]:
    """The checkpoint whose architecture is planned: ``name``, or, for a local folder not trained yet (a GRPO
    recipe starting from an SFT run), the base model of the recipe whose ``output_dir`` it is: among the recipes
    beside ``recipe_path`` (its ``recipes`` folder), else among the shipped ones (a recipe kept outside the
    repository, such as an earlier version of a shipped one taken from git history)."""
    if Path(name).is_dir():
        return name, None
    shipped = Path(__file__).resolve().parents[2]  # recipes/, the shipped recipes' folder
    root = next((folder for folder in Path(recipe_path).resolve().parents if folder.name == "recipes"), shipped)
    for path in sorted(root.glob("*/*/config_*.yaml")):
        try:
            other = load_recipe_yaml(path)
        except RecipeError:
            continue  # not a recipe: it cannot be the one that trains `name`
        if other.get("output_dir") == name and other.get("model_name_or_path"):
            base = other["model_name_or_path"]
            return base, f"{name} is not trained yet: planned as {base}, what {path.name} trains it from"
    return name, None
