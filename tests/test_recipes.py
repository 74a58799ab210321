"""Every recipe YAML parses with the real parser into a runnable plan, every accelerate config loads, and the
two-process launch from the README really starts two ranks that train on a mixed-modality stream."""

import json
import os
import socket
import subprocess
import sys
import tempfile

import pytest
import transformers
import yaml
from accelerate.commands.config.config_args import load_config_from_file
from conftest import REPO

from recipes.sft import make_parser
from recipes.training.arguments import SFTScriptArguments
from recipes.training.mixture import parse_mixture
from recipes.training.sft_stages import stage_plan


RECIPES = sorted((REPO / "recipes").glob("*/*/config_*.yaml"))
ACCELERATE_CONFIGS = sorted((REPO / "accelerate_configs").glob("*.yaml"))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run_process_group(command, *, cwd, env, timeout) -> tuple[int | None, str]:
    """Run ``command``; on timeout kill it and every process it started (the ranks too) and return None."""
    import psutil

    with tempfile.TemporaryFile("w+") as stderr:
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=stderr, text=True)
        try:
            returncode = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            family = psutil.Process(process.pid).children(recursive=True) + [psutil.Process(process.pid)]
            for member in family:
                member.kill()
            psutil.wait_procs(family, timeout=30)
            returncode = None
        stderr.seek(0)
        return returncode, stderr.read()


def test_recipes_and_configs_are_found():
    assert {p.parent.parent.name for p in RECIPES} >= {"qwen3-vl-8b", "tiny"}
    assert {p.stem for p in ACCELERATE_CONFIGS} >= {"ddp", "zero2", "zero3", "fsdp", "multi_node_zero3"}


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: str(p.relative_to(REPO / "recipes")))
def test_recipe_parses_into_a_plan(path):
    first_line = path.read_text().splitlines()[0]
    assert first_line.startswith("# Hardware: "), "the first line of a recipe states its hardware"
    # CPU here: keep everything the recipe says except bf16, which TrainingArguments refuses without a GPU.
    argv = ["--config", str(path), "--bf16", "false", "--use_cpu", "true"]
    if path.parent.name == "grpo":
        check_grpo_recipe(path, argv)
        return
    script_args, training_args, model_args = make_parser().parse_args_and_config(argv)
    assert isinstance(script_args, SFTScriptArguments)
    assert model_args.model_name_or_path
    assert training_args.output_dir
    plan = stage_plan(script_args, training_args)
    for stage in plan:
        assert parse_mixture(stage["dataset_mixture"])
    if "two_stage" in path.name:
        assert [stage["name"] for stage in plan] == ["public", "sureon"]
    if "guesser" in str(path) and path.parts[-3] == "qwen3-vl-8b":  # the Sureon paper's guesser settings (B.4)
        assert script_args.blind and training_args.learning_rate == 1e-5
        assert training_args.per_device_train_batch_size == 12
        expected_epochs = 10 if "hardening" in path.name else 1
        assert training_args.num_train_epochs == expected_epochs
    raw = yaml.safe_load(path.read_text())
    if raw.get("bf16"):
        assert "H200" in first_line or "GPU" in first_line


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: str(p.relative_to(REPO / "recipes")))
def test_recipe_reads_strictly_as_its_script_reads_it(path):
    """Every shipped recipe passes the strict reader `sureon plan` and both launch scripts use, as the recipe of
    the script its folder names, and is told apart as such from its keys alone."""
    from recipes.training.recipe_file import GRPO, SFT, detect_kind, load_recipe_yaml, read_recipe

    kind = GRPO if path.parent.name == "grpo" else SFT
    recipe = read_recipe(path, kind)
    assert detect_kind(load_recipe_yaml(path)) == kind
    assert isinstance(recipe["learning_rate"], float) and recipe["model_name_or_path"]


def test_the_strict_reader_converts_as_argparse_and_lists_every_problem(tmp_path):
    """YAML reads `1e-5` as a string: it converts to the field's type, as TRL's parser converts it; every problem of
    a recipe is listed in one line, so that one edit fixes them all."""
    from recipes.training.recipe_file import RecipeError, read_recipe

    path = tmp_path / "recipe.yaml"
    recipe = yaml.safe_load((REPO / "recipes" / "tiny" / "sft" / "config_smoke.yaml").read_text())
    path.write_text(yaml.safe_dump(recipe | {"learning_rate": "1e-5", "blind": "yes", "max_frames": "4"}))
    read = read_recipe(path)
    assert (read["learning_rate"], read["blind"], read["max_frames"]) == (1e-5, True, 4)
    path.write_text(yaml.safe_dump(recipe | {"learning_rate": "fast", "max_frame": 4, "dtype": "bf16"}))
    with pytest.raises(RecipeError) as err:
        read_recipe(path)
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"training recipe {path}: ")
    assert "learning_rate: 'fast' is not a number" in message
    assert "unknown key 'max_frame' (did you mean 'max_frames'?)" in message
    assert "dtype: 'bf16' is not one of ['auto', 'bfloat16', 'float16', 'float32']" in message
    assert "(did you mean 'bfloat16'?)" in message


def check_grpo_recipe(path, argv):
    """A GRPO recipe parses with recipes/grpo.py's parser; its rewards exist, one weight each; its sources load."""
    from recipes.grpo import make_parser as grpo_parser
    from recipes.training.arguments import GRPOScriptArguments
    from recipes.training.rewards import reward_functions

    script_args, training_args, model_args = grpo_parser().parse_args_and_config(argv)
    assert isinstance(script_args, GRPOScriptArguments) and model_args.model_name_or_path
    assert reward_functions(script_args.reward_funcs)
    assert len(training_args.reward_weights or script_args.reward_funcs) == len(script_args.reward_funcs)
    assert script_args.frames_as == "video", "clips as SFT trains on them and evaluation shows them"
    assert training_args.num_generations >= 2 and parse_mixture(script_args.dataset_mixture)


@pytest.mark.parametrize("path", ACCELERATE_CONFIGS, ids=lambda p: p.name)
def test_accelerate_config_loads(path):
    config = load_config_from_file(str(path))
    assert config.num_processes >= config.num_machines >= 1
    if config.fsdp_config:
        for name in config.fsdp_config["fsdp_transformer_layer_cls_to_wrap"].split(","):
            module = transformers.models.qwen3_vl.modeling_qwen3_vl
            assert hasattr(module, name), f"{name} is not a Qwen3-VL layer class"
    if config.deepspeed_config:
        assert config.deepspeed_config["zero_stage"] in (2, 3)


@pytest.mark.parametrize(
    "uniform", [True, pytest.param(False, marks=pytest.mark.slow)], ids=["uniform-vision-calls", "without"]
)
def test_two_processes_train_on_a_mixed_modality_stream(uniform, tiny_qwen3_vl, sureon_build, tmp_path):
    """The launch line that really starts two ranks on CPU (gloo); ranks draw different modalities each step.

    DDP runs without ``find_unused_parameters``, so a step in which one rank skips the vision tower fails or hangs
    (as ZeRO-3 does); with uniform vision calls every rank uses every parameter every step.
    """
    from test_sft import image_source, text_source

    config = {
        "model_name_or_path": str(tiny_qwen3_vl),
        "dtype": "float32",
        "dataset_mixture": [
            {"path": str(sureon_build.out), "name": "db", "split": "train"},
            image_source(tmp_path),
            text_source(tmp_path),
        ],
        "output_dir": str(tmp_path / "ddp"),
        "max_steps": 3,
        "per_device_train_batch_size": 1,
        "learning_rate": 1e-3,
        "logging_steps": 1,
        "save_strategy": "no",
        "bf16": False,
        "use_cpu": True,
        "report_to": "none",
        "activation_checkpointing": False,
        "dataloader_num_workers": 0,
        "ddp_find_unused_parameters": False,
        "uniform_vision_calls": uniform,
    }
    path = tmp_path / "ddp.yaml"
    path.write_text(json.dumps(config))
    command = [
        *(sys.executable, "-m", "accelerate.commands.launch"),
        *("--multi_gpu", "--num_processes", "2", "--num_machines", "1"),
        *("--mixed_precision", "no", "--dynamo_backend", "no"),
        *("--main_process_port", str(free_port())),  # not 29500: other runs on the machine may hold it
        str(REPO / "recipes" / "sft.py"),
        *("--config", str(path)),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    returncode, stderr = run_process_group(command, cwd=tmp_path, env=env, timeout=420 if uniform else 180)
    if not uniform:
        assert returncode is None or "parameters that were not used in producing loss" in stderr
        return
    assert returncode == 0, stderr[-4000:]
    summary = json.loads((tmp_path / "ddp" / "training_complete.json").read_text())
    assert summary["world_size"] == 2 and summary["global_step"] == 3
    assert summary["uniform_vision_calls"] is True


def test_a_recipe_is_read_and_checked_once_and_the_command_line_still_wins(monkeypatch, tmp_path):
    """The launch scripts' parser reads the YAML once (the strict reader) and hands its checked values to TRL's
    dataclasses; TRL's own ``parse_args_and_config`` would read the file a second time and take its raw values."""
    from trl import TrlParser

    from recipes.training import recipe_file

    recipe = tmp_path / "recipe.yaml"
    settings = yaml.safe_load((REPO / "recipes/tiny/sft/config_smoke.yaml").read_text())
    recipe.write_text(yaml.safe_dump({**settings, "learning_rate": "2e-4", "env": {"SUREON_RECIPE_ENV": "set"}}))
    reads = []
    read = recipe_file.load_recipe_yaml
    monkeypatch.setattr(recipe_file, "load_recipe_yaml", lambda path, *a: reads.append(str(path)) or read(path, *a))
    monkeypatch.setattr(TrlParser, "parse_args_and_config", lambda *_, **__: pytest.fail("TRL read the recipe again"))
    monkeypatch.delenv("SUREON_RECIPE_ENV", raising=False)
    script_args, training_args, _ = make_parser().parse_args_and_config(["--config", str(recipe), "--max_frames", "3"])
    assert reads == [str(recipe)]
    assert training_args.learning_rate == 2e-4 and script_args.max_frames == 3
    assert os.environ["SUREON_RECIPE_ENV"] == "set"
