"""Every ``accelerate launch`` line a user can copy starts one rank per GPU of the hardware its recipe names.

A line that passes no ``--num_processes`` starts the accelerate config's count: the README's lines started 8 ranks on
the 4 GPUs their recipes name (accelerate 1.16 then doubles ranks up on GPUs, and DeepSpeed and NCCL stop). The lines
are found where a user copies them from (the README, ``docs/``, each recipe's first lines, the accelerate configs'
comments, the launch scripts' docstrings, ``sureon plan``'s output), parsed as accelerate parses them, and their ranks
compared with the recipe's ``# Hardware:`` line (over several machines: machines × the GPUs each machine has, as the
config says). Nothing is launched."""

import ast
import json
import re
import shlex
from pathlib import Path

import pytest
import yaml
from conftest import REPO

from recipes.training.launch import accumulation_for, hardware_strategy, launch_line, launch_strategy
from recipes.training.recipe_file import load_recipe_yaml


TRAINING_SCRIPTS = ("recipes/sft.py", "recipes/grpo.py")
RECIPES_8B = sorted((REPO / "recipes" / "qwen3-vl-8b").glob("*/config_*.yaml"))
CONFIGS = sorted((REPO / "accelerate_configs").glob("*.yaml"))
# accelerate launch options that take no value
FLAGS = {"--multi_gpu", "--cpu", "--use_deepspeed", "--use_fsdp", "--debug", "--quiet", "-q", "--no_python"}
MACHINES_AND_GPUS = re.compile(r"(\d+) machines? × (\d+) GPUs")


def comment_text(path: Path) -> str:
    """The comment lines of a YAML file, without their ``#``."""
    return "\n".join(line.lstrip("#") for line in path.read_text().splitlines() if line.lstrip().startswith("#"))


def docstring(path: Path) -> str:
    return ast.get_docstring(ast.parse(path.read_text())) or ""


def sources(root: Path) -> dict[str, str]:
    """``{file: text}`` of every place a launch line is written for a user to copy."""
    found = {"README.md": (root / "README.md").read_text()}
    found |= {str(path.relative_to(root)): path.read_text() for path in sorted((root / "docs").rglob("*.md"))}
    yamls = sorted((root / "recipes").rglob("config_*.yaml")) + sorted((root / "accelerate_configs").glob("*.yaml"))
    found |= {str(path.relative_to(root)): comment_text(path) for path in yamls}
    for script in TRAINING_SCRIPTS:
        found[script] = docstring(root / script)
    return found


def commands(text: str) -> list[str]:
    """Each ``accelerate launch ...`` command in ``text``: to the closing backtick of an inline one, over the lines a
    trailing backslash continues."""
    lines = text.splitlines()
    found = []
    for number, line in enumerate(lines):
        for start in [match.start() for match in re.finditer(r"accelerate launch\b", line)]:
            command = line[start:]
            inline = start > 0 and line[start - 1] == "`"
            if inline:
                command = command.split("`")[0]
            following = number + 1
            while command.rstrip().endswith("\\") and following < len(lines):
                command = command.rstrip()[:-1] + " " + lines[following].strip()
                following += 1
            found.append(" ".join(command.split()))
    return found


def parse(command: str) -> dict:
    """What ``accelerate launch`` reads from ``command``: its options, the script (or ``-m`` module) and the
    script's own options."""
    words = shlex.split(command)[2:]
    options, position = {}, 0
    while position < len(words) and words[position].startswith("-") and words[position] != "-m":
        word = words[position]
        if "=" in word:
            key, value = word.split("=", 1)
            options[key], position = value, position + 1
        elif word in FLAGS:
            options[word], position = True, position + 1
        else:
            options[word], position = words[position + 1], position + 2
    rest = words[position:]
    script = rest[1] if rest[:1] == ["-m"] else (rest[0] if rest else None)
    arguments = rest[2:] if rest[:1] == ["-m"] else rest[1:]
    script_options = {word: arguments[i + 1] for i, word in enumerate(arguments[:-1]) if word.startswith("--")}
    return {"options": options, "script": script, "script_options": script_options}


def hardware_gpus(recipe: Path) -> int:
    """The GPUs a recipe's first line names (``# Hardware: 4× NVIDIA H200 ...``)."""
    first = recipe.read_text().splitlines()[0]
    found = re.match(r"# Hardware: (\d+)× ", first)
    assert found, f"{recipe}: the first line names no GPU count: {first!r}"
    return int(found.group(1))


def machines_and_gpus(config: Path) -> tuple[int, int]:
    """The machines and GPUs per machine an accelerate config's comment says it is for."""
    found = MACHINES_AND_GPUS.search(comment_text(config))
    assert found, f"{config.name}: its comment names no 'N machine(s) × M GPUs'"
    return int(found.group(1)), int(found.group(2))


def launch_lines(root: Path) -> list[tuple[str, str]]:
    """``(file, command)`` of every launch line that starts a training recipe."""
    return [
        (where, command)
        for where, text in sources(root).items()
        for command in commands(text)
        if parse(command)["script"] in TRAINING_SCRIPTS
    ]


def check_line(command: str, root: Path = REPO) -> None:
    """The ranks ``command`` starts: one per GPU of the recipe's hardware, or of the machines the config is for;
    ``--num_processes`` given explicitly; the recipe's global batch splits over those ranks."""
    parsed = parse(command)
    options, script_options = parsed["options"], parsed["script_options"]
    assert "--num_processes" in options, "no --num_processes: the accelerate config's count would start"
    assert "--config_file" in options, "no --config_file: accelerate's own default config would be used"
    config_path = root / options["--config_file"]
    config = yaml.safe_load(config_path.read_text())
    ranks = int(options["--num_processes"])
    machines = int(options.get("--num_machines", config["num_machines"]))
    recipe_path = root / script_options["--config"]
    assert recipe_path.is_file(), f"no recipe {script_options['--config']}"
    config_machines, gpus_each = machines_and_gpus(config_path)
    if machines == 1:
        assert ranks == hardware_gpus(recipe_path), "the ranks are not the GPUs the recipe's hardware names"
        assert ranks <= gpus_each
    else:
        assert machines == config_machines and ranks == machines * gpus_each, (
            f"{machines} machines and {ranks} ranks, the config is for {config_machines} × {gpus_each} GPUs"
        )
    settings = load_recipe_yaml(recipe_path)
    per_device = script_options.get("--per_device_train_batch_size")
    if per_device:
        settings["per_device_train_batch_size"] = int(per_device)
    accumulation_for(settings, ranks, where=command)  # refuses a global batch these ranks cannot split


LINES = launch_lines(REPO)


def test_launch_lines_are_found_where_users_copy_them():
    files = {where for where, _ in LINES}
    assert {"README.md", "docs/training/sft.md", "docs/training/grpo.md"} <= files
    assert {"accelerate_configs/multi_node_zero3.yaml", *TRAINING_SCRIPTS} <= files
    assert {str(path.relative_to(REPO)) for path in RECIPES_8B} <= files
    readme = [command for where, command in LINES if where == "README.md"]
    assert {parse(command)["script"] for command in readme} == set(TRAINING_SCRIPTS)


def line_ids(lines) -> list[str]:
    """``FILE`` for a file's one line, ``FILE#N`` for its N-th when it has several."""
    files = [where for where, _ in lines]
    return [
        where if files.count(where) == 1 else f"{where}#{files[:n].count(where) + 1}" for n, where in enumerate(files)
    ]


@pytest.mark.parametrize("where,command", LINES, ids=line_ids(LINES))
def test_each_launch_line_starts_one_rank_per_gpu_of_its_recipe(where, command):
    check_line(command)


def test_the_readme_of_before_failed_the_check():
    """The README's line as it was: no --num_processes, so zero3.yaml's count (8) on the recipe's 4 GPUs."""
    before = (
        "accelerate launch --config_file accelerate_configs/zero3.yaml recipes/sft.py "
        "--config recipes/qwen3-vl-8b/sft/config_sureon_vlm.yaml"
    )
    with pytest.raises(AssertionError, match="--num_processes"):
        check_line(before)
    with pytest.raises(AssertionError, match="hardware"):
        check_line(before.replace("recipes/sft.py", "--num_processes 8 recipes/sft.py"))


@pytest.mark.parametrize("path", CONFIGS, ids=lambda path: path.name)
def test_each_accelerate_config_starts_one_rank_per_gpu_it_is_for(path):
    config = yaml.safe_load(path.read_text())
    machines, gpus_each = machines_and_gpus(path)
    assert (config["num_machines"], config["num_processes"]) == (machines, machines * gpus_each)


def test_the_single_machine_configs_are_for_the_8b_recipes_hardware():
    single = [path for path in CONFIGS if yaml.safe_load(path.read_text())["num_machines"] == 1]
    counts = {yaml.safe_load(path.read_text())["num_processes"] for path in single}
    full_fine_tunes = {hardware_gpus(path) for path in RECIPES_8B if "lora" not in path.name}
    assert counts == full_fine_tunes == {4}


def test_sureon_plan_prints_a_launch_line_for_the_recipes_hardware(capsys, monkeypatch, tmp_path):
    from recipes.training.plan import tokens
    from sureon.cli import main

    monkeypatch.chdir(REPO)  # the recipes' paths are relative to the repository, as the launch lines are
    monkeypatch.setattr(tokens, "SYNTHETIC_TIMINGS", 1)  # the loader's CPU timing is not what this test reads
    for recipe in RECIPES_8B:
        path, plan_json = str(recipe.relative_to(REPO)), tmp_path / f"{recipe.stem}.json"
        argv = ["plan", "--config", path, "--synthetic-frames", "768x432", "--samples", "4", "--json", str(plan_json)]
        assert main(argv) == 0
        printed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("launch: ")]
        assert len(printed) == 1, recipe
        command = printed[0].removeprefix("launch: ")
        assert parse(command)["script_options"]["--config"] == path
        check_line(command)
        plans = json.loads(plan_json.read_text())
        assert {stage["launch"] for stage in plans} == {command}
        # the accelerate config is the strategy the recipe's hardware names, and the one its time is planned under
        strategy = hardware_strategy(load_recipe_yaml(recipe)["hardware"])
        assert parse(command)["options"]["--config_file"] == f"accelerate_configs/{strategy}.yaml", recipe
        assert {stage["time"]["strategy"] for stage in plans} == {strategy}


def test_the_strategy_is_read_from_the_brackets_of_the_recipes_hardware():
    assert hardware_strategy("4× NVIDIA H200 141 GB (DeepSpeed ZeRO-3)") == "zero3"
    assert hardware_strategy("4× NVIDIA H200 141 GB (DeepSpeed ZeRO-2)") == "zero2"
    assert hardware_strategy("8× H100 (FSDP2, full sharding)") == "fsdp"
    assert hardware_strategy("1× NVIDIA H200 141 GB (LoRA)") == "ddp"  # brackets naming no sharding: DDP
    assert hardware_strategy("4× ZeRO-3-ready GPUs") == "ddp"  # only the brackets name it
    assert hardware_strategy(None) is None and hardware_strategy("  ") is None
    # a recipe without hardware keeps the shipped choices; over several machines, the one multi-machine config
    assert (
        launch_strategy(None, lora=True, num_gpus=1) == "ddp"
        and launch_strategy(None, lora=False, num_gpus=4) == "zero3"
    )
    assert launch_strategy("16× H200 (DeepSpeed ZeRO-2)", lora=False, num_gpus=16) == "zero3"
    zero2 = launch_line("r.yaml", script="recipes/grpo.py", num_gpus=4, strategy="zero2")
    assert zero2.startswith("accelerate launch --config_file accelerate_configs/zero2.yaml --num_processes 4 ")
    assert "multi_node_zero3.yaml --num_machines 2" in launch_line(
        "r.yaml", script="recipes/sft.py", num_gpus=16, strategy="zero3"
    )
