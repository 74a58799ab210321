"""The README's launch lines with the real accelerate configs, two ranks on a CPU: DeepSpeed ZeRO-3 and ZeRO-2 (its
CPU accelerator, gloo) and FSDP2, through ``recipes/sft.py`` and ``recipes/grpo.py`` on a tiny Qwen3-VL.

What a first GPU launch needs and these check: every parameter counted by its full size, although ZeRO-3 leaves a
0-element placeholder on each rank (``zero3_init_flag: true``); a blind guesser under ZeRO-3; the weights saved
whole, in the base checkpoint's key layout, and loadable; a two-stage recipe that frees stage 1's engine, model and
optimizer before stage 2 builds its trainer; GRPO's ranks all finishing. ``make slow_test`` and CI's launch step run
them (``pytest -m slow tests/test_launch_configs.py``, about two minutes on two cores).

On a CPU, accelerate's DeepSpeed set-up counts one process unless a backend is named (``ddp_backend: gloo`` below;
on GPUs NCCL is the default), and ``DS_ACCELERATOR=cpu`` selects DeepSpeed's CPU accelerator.
"""

import json
import os
import sys

import pytest
import yaml
from conftest import REPO
from safetensors import safe_open
from test_recipes import free_port, run_process_group


pytestmark = pytest.mark.slow


def launch(config: str, script: str, recipe: dict, tmp_path, **env) -> dict:
    """``accelerate launch --config_file accelerate_configs/CONFIG.yaml --num_processes 2 SCRIPT --config RECIPE``
    (``SCRIPT`` relative to the repository); returns the run's ``training_complete.json`` (the last stage's)."""
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe))
    command = [
        *(sys.executable, "-m", "accelerate.commands.launch"),
        *("--config_file", str(REPO / "accelerate_configs" / f"{config}.yaml"), "--num_processes", "2"),
        *("--mixed_precision", "no", "--main_process_port", str(free_port())),
        str(REPO / script),
        *("--config", str(path)),
    ]
    environment = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO), "DS_ACCELERATOR": "cpu", **env}
    returncode, stderr = run_process_group(command, cwd=tmp_path, env=environment, timeout=420)
    assert returncode == 0, stderr[-6000:]
    out = tmp_path / "out"
    last = max(out.glob("stage*/")) if recipe.get("stages") else out
    return json.loads((last / "training_complete.json").read_text())


def tiny_recipe(model, build, tmp_path, **changes) -> dict:
    return {
        "model_name_or_path": str(model),
        "dtype": "float32",
        "attn_implementation": "sdpa",
        "dataset_mixture": [{"path": str(build.out), "name": "db", "split": "train"}],
        "frames_as": "video",
        "max_frames": 4,
        "video_max_pixels": 4 * 48 * 48,
        "output_dir": str(tmp_path / "out"),
        "max_steps": 2,
        "per_device_train_batch_size": 1,
        "learning_rate": 1e-3,
        "logging_steps": 1,
        "save_strategy": "no",
        "bf16": False,
        "report_to": "none",
        "activation_checkpointing": False,
        "dataloader_num_workers": 0,
        "ddp_backend": "gloo",
        **changes,
    }


def weight_names(folder) -> set[str]:
    with safe_open(str(folder / "model.safetensors"), "pt") as weights:
        return set(weights.keys())


def full_sizes(model_folder) -> dict[str, int]:
    """Parameters per group of the model loaded in one process, as the recipes count them."""
    from recipes.model_io.modeling import load_model
    from recipes.training.freezing import apply_freezing

    counts = apply_freezing(load_model(str(model_folder), dtype="float32"), set())
    return {group: values["trainable"] for group, values in counts.items()}


def check_saved(out, base, *, tied_head_may_be_saved: bool = False) -> None:
    """The weights are whole, in the base checkpoint's key layout, and load with nothing missing."""
    from transformers import AutoModelForImageTextToText

    saved, expected = weight_names(out), weight_names(base)
    if tied_head_may_be_saved:
        saved -= {"lm_head.weight"}  # ZeRO-2 writes the tied head out too; loading ties it again
    assert saved == expected, sorted(saved ^ expected)[:6]
    _, info = AutoModelForImageTextToText.from_pretrained(str(out), output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]


@pytest.mark.parametrize("config", ["zero3", "zero2", "fsdp"])
def test_sft_trains_on_two_ranks_with_each_accelerate_config(config, tiny_qwen3_vl, sureon_build, tmp_path):
    summary = launch(config, "recipes/sft.py", tiny_recipe(tiny_qwen3_vl, sureon_build, tmp_path), tmp_path)
    assert summary["world_size"] == 2 and summary["global_step"] == 2
    trained = {group: values["trainable"] for group, values in summary["trainable"].items()}
    assert trained == full_sizes(tiny_qwen3_vl) and all(trained.values())
    assert summary["attn_implementation"] == "sdpa"
    check_saved(tmp_path / "out", tiny_qwen3_vl, tied_head_may_be_saved=config == "zero2")


def test_a_blind_guesser_and_a_frozen_vision_tower_train_under_zero3(tiny_qwen3_vl, sureon_build, tmp_path):
    """The guesser recipes (blind, every group trainable) and a recipe that freezes the vision tower: the counts
    are the groups' full sizes, split as frozen, and the run trains."""
    recipe = tiny_recipe(tiny_qwen3_vl, sureon_build, tmp_path, blind=True, num_folds=2, fold=1)
    summary = launch("zero3", "recipes/sft.py", recipe, tmp_path)
    sizes = full_sizes(tiny_qwen3_vl)
    assert summary["blind"] and summary["global_step"] == 2
    assert {group: values["trainable"] for group, values in summary["trainable"].items()} == sizes
    frozen = tiny_recipe(tiny_qwen3_vl, sureon_build, tmp_path, freeze_vision_tower=True)
    frozen["output_dir"] = str(tmp_path / "out")
    summary = launch("zero3", "recipes/sft.py", frozen | {"max_steps": 1}, tmp_path)
    assert summary["trainable"]["vision_tower"] == {"frozen": sizes["vision_tower"]}
    assert summary["trainable"]["llm"] == {"trainable": sizes["llm"]}


def test_two_stages_free_stage_one_before_stage_two_under_zero3(tiny_qwen3_vl, sureon_build, tmp_path):
    """When stage 2 starts building its trainer, nothing of stage 1 is alive on any rank: trainer, model, optimizer,
    DeepSpeed engine and ZeRO optimizer (its fp32 master weights and AdamW states) are all gone
    (tests/launch_probe.py watches them by weak reference). DeepSpeed 0.19.8 kept them reachable from a module-level
    list after ``destroy()`` (``recipes.training.sft_stages.release_trainer``)."""
    recipe = tiny_recipe(tiny_qwen3_vl, sureon_build, tmp_path, max_steps=1)
    mixture = recipe.pop("dataset_mixture")
    recipe["stages"] = [{"name": "first", "dataset_mixture": mixture}, {"name": "second", "dataset_mixture": mixture}]
    probe = tmp_path / "probe"
    summary = launch("zero3", "tests/launch_probe.py", recipe, tmp_path, PROBE_OUT=str(probe))
    for rank in (0, 1):
        report = json.loads((probe / f"rank{rank}.json").read_text())
        assert report == {"stages_built": 2, "alive_when_the_next_stage_started": [[]]}, rank
    assert summary["name"] == "second" and summary["model"].endswith("stage1-first")
    check_saved(tmp_path / "out" / "stage2-second", tiny_qwen3_vl)


def test_grpo_trains_on_two_ranks_under_zero3(tiny_qwen3_vl, sureon_build, tmp_path):
    recipe = tiny_recipe(tiny_qwen3_vl, sureon_build, tmp_path, per_device_train_batch_size=2)
    recipe |= {"reward_funcs": ["mcq_accuracy", "format"], "num_generations": 2, "max_completion_length": 4}
    summary = launch("zero3", "recipes/grpo.py", recipe, tmp_path)
    assert summary["world_size"] == 2 and summary["global_step"] == 2
    assert summary["trainable"]["all"]["trainable"] == sum(full_sizes(tiny_qwen3_vl).values())
    check_saved(tmp_path / "out", tiny_qwen3_vl)


def test_the_shipped_lora_recipe_ends_with_a_model_evaluation_takes(tiny_qwen3_vl, sureon_build, bench, tmp_path):
    """``recipes/qwen3-vl-8b/sft/config_sureon_vlm_lora.yaml`` with every key kept but the model, the data, the length
    and the output folder, launched as its header says (``ddp.yaml``) on two CPU ranks: the run's folder holds the
    merged model in the base's key layout, its adapter in ``adapter/``, and ``sureon eval sureon --mode both`` scores
    the folder as it is."""
    from sureon.cli import main as sureon

    recipe = yaml.safe_load((REPO / "recipes" / "qwen3-vl-8b" / "sft" / "config_sureon_vlm_lora.yaml").read_text())
    recipe |= {
        "model_name_or_path": str(tiny_qwen3_vl),
        "dataset_mixture": [{"path": str(sureon_build.out), "name": "db", "split": "train"}],
        "max_steps": 1,
        "output_dir": str(tmp_path / "out"),
        "ddp_backend": "gloo",
        "use_cpu": True,
    }
    summary = launch("ddp", "recipes/sft.py", recipe, tmp_path)
    assert summary["world_size"] == 2 and summary["merged"] is True and set(summary["trainable"]) == {"adapters"}
    out = tmp_path / "out"
    assert (out / "adapter" / "adapter_config.json").is_file() and not (out / "adapter_config.json").exists()
    check_saved(out, tiny_qwen3_vl)
    evaluation = tmp_path / "eval"
    argv = ["eval", "sureon", "--model", str(out), "--dataset", str(bench), "--mode", "both", "--out", str(evaluation)]
    assert sureon([*argv, "--max-new-tokens", "4"]) == 0
    scored = json.loads((evaluation / "summary.json").read_text())
    assert scored["model"] == str(out)
