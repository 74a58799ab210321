"""What a launch checks and sets before anything loads (``recipes.training.launch``), called directly as the launch
scripts call it: the ranks against the GPUs, the global batch on any number of ranks, one ``output_dir`` for every
machine (two "machines" as two threads), FSDP's own activation checkpointing, and the final weights in the recipe's
dtype. No launch: the environment a launcher sets and the GPUs a machine shows are passed in."""

import json
import threading
from types import SimpleNamespace

import pytest
import torch
from conftest import REPO
from safetensors import safe_open
from safetensors.torch import save_file

from builders.errors import InputError
from recipes.training.launch import (
    SHARED_CHECK_FOLDER,
    accumulation_for,
    check_global_batch,
    check_ranks,
    check_shared_output_dir,
    prepare_launch,
    save_in_recipe_dtype,
    use_fsdp_checkpointing,
    with_derived_accumulation,
)
from recipes.training.recipe_file import read_recipe


SFT_8B = REPO / "recipes" / "qwen3-vl-8b" / "sft" / "config_sureon_vlm.yaml"
GRPO_8B = REPO / "recipes" / "qwen3-vl-8b" / "grpo" / "config_sureon_grpo.yaml"


# -- ranks ----------------------------------------------------------------------------------------------------------


def test_more_ranks_than_gpus_on_a_machine_is_refused_naming_num_processes():
    environ = {"WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "8", "LOCAL_RANK": "5", "RANK": "5"}
    with pytest.raises(InputError) as err:
        check_ranks(environ=environ, device_count=4)
    message = str(err.value)
    assert "\n" not in message and "8 ranks" in message and "4 GPU" in message
    assert "--num_processes 4" in message


def test_over_several_machines_the_fix_is_the_total_of_ranks():
    environ = {"WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8", "LOCAL_RANK": "0", "CUDA_VISIBLE_DEVICES": "0,1,2,3"}
    with pytest.raises(InputError, match=r"--num_processes 8 \(the total over the 2 machines") as err:
        check_ranks(environ=environ, device_count=4)
    assert "CUDA_VISIBLE_DEVICES=0,1,2,3" in str(err.value)


@pytest.mark.parametrize(
    "environ,gpus,use_cpu",
    [
        ({"WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "4", "LOCAL_RANK": "3"}, 4, False),  # one rank per GPU
        ({"WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2", "LOCAL_RANK": "1"}, 0, False),  # a CPU machine: the tests' ranks
        ({"WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "8", "LOCAL_RANK": "7"}, 4, True),  # use_cpu on a GPU machine
        ({}, 4, False),  # `python recipes/sft.py`: one process, no launcher
    ],
    ids=["one-per-gpu", "cpu-machine", "use-cpu", "no-launcher"],
)
def test_launches_that_fit_pass(environ, gpus, use_cpu):
    check_ranks(environ=environ, device_count=gpus, use_cpu=use_cpu)


# -- the global batch -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("ranks,steps", [(1, 16), (4, 4), (16, 1)])
def test_the_8b_recipe_keeps_64_rows_a_step_on_any_ranks_that_split_it(ranks, steps):
    settings = read_recipe(SFT_8B)
    assert accumulation_for(settings, ranks, where="x") == steps
    assert settings["per_device_train_batch_size"] * steps * ranks == 64


def test_a_global_batch_the_ranks_cannot_split_is_refused_with_the_counts_that_do():
    with pytest.raises(InputError) as err:
        accumulation_for(read_recipe(SFT_8B), 3, where=f"training recipe {SFT_8B}")
    message = str(err.value)
    assert str(SFT_8B) in message and "global_batch_size 64" in message and "× 3 rank(s) = 12" in message
    assert "[1, 2, 4, 8, 16]" in message


def test_the_launch_appends_the_accumulation_of_the_ranks_it_started():
    settings = read_recipe(SFT_8B)
    args = ["--config", str(SFT_8B)]
    assert with_derived_accumulation(args, settings, environ={"WORLD_SIZE": "16"}) == [
        *args,
        *("--gradient_accumulation_steps", "1"),
    ]
    assert with_derived_accumulation(args, settings, environ={})[-1] == "16"
    overridden = [*args, "--global_batch_size=128", "--per_device_train_batch_size", "2"]
    assert with_derived_accumulation(overridden, settings, environ={"WORLD_SIZE": "4"})[-1] == "16"
    assert with_derived_accumulation(args, {"per_device_train_batch_size": 4}, environ={}) == args  # none stated


@pytest.mark.parametrize(
    "recipe,args,where",
    [
        ({"global_batch_size": 64, "gradient_accumulation_steps": 4}, [], "training recipe R"),
        ({"global_batch_size": 64}, ["--gradient_accumulation_steps", "2"], "training recipe R and the command line"),
        ({"gradient_accumulation_steps": 4}, ["--global_batch_size", "64"], "training recipe R and the command line"),
        (
            {"global_batch_size": 64, "stages": [{"name": "late", "gradient_accumulation_steps": 2}]},
            [],
            "training recipe R, stage 'late'",
        ),
    ],
    ids=["recipe", "command-line-accumulation", "command-line-global-batch", "stage"],
)
def test_a_global_batch_beside_an_accumulation_is_refused(recipe, args, where):
    with pytest.raises(InputError, match="both set the accumulation") as err:
        with_derived_accumulation(args, recipe, recipe_path="R", environ={"WORLD_SIZE": "4"})
    assert str(err.value).startswith(where + ":")


def test_grpo_derives_its_generation_batch_from_the_derived_accumulation():
    """TRL's GRPOConfig sets steps_per_generation from the accumulation while it is parsed: the accumulation must be
    the derived one by then (a recipe without it would generate 4 completions at a time, not 128)."""
    from recipes.grpo import make_parser

    argv = ["--config", str(GRPO_8B), "--bf16", "false", "--use_cpu", "true"]
    script_args, training_args, _ = make_parser().parse_args_and_config(argv)
    assert script_args.global_batch_size == 128 and training_args.world_size == 1
    per_device = training_args.per_device_train_batch_size
    assert training_args.gradient_accumulation_steps == training_args.steps_per_generation == 128 // per_device
    assert training_args.generation_batch_size == 128


def test_a_stage_that_changes_its_batch_gets_its_own_accumulation():
    stages = [{"name": "public"}, {"name": "sureon", "per_device_train_batch_size": 2}]
    script_args = SimpleNamespace(global_batch_size=64, stages=stages)
    training_args = SimpleNamespace(world_size=4, per_device_train_batch_size=4, gradient_accumulation_steps=4)
    check_global_batch(script_args, training_args)
    assert stages == [
        {"name": "public"},
        {"name": "sureon", "per_device_train_batch_size": 2, "gradient_accumulation_steps": 8},
    ]


def test_an_accumulation_that_does_not_make_the_global_batch_on_the_ranks_started_is_refused():
    script_args = SimpleNamespace(global_batch_size=64, stages=None)
    training_args = SimpleNamespace(world_size=4, per_device_train_batch_size=4, gradient_accumulation_steps=16)
    with pytest.raises(InputError, match="4 ranks started"):
        check_global_batch(script_args, training_args)


# -- machines -------------------------------------------------------------------------------------------------------


def run_ranks(folders) -> list[BaseException | None]:
    """Each rank's outcome of the shared-folder check, one thread a rank, ``folders[rank]`` its output_dir."""
    barrier = threading.Barrier(len(folders), timeout=30)
    outcomes: list[BaseException | None] = [None] * len(folders)

    def rank(number: int) -> None:
        try:
            check_shared_output_dir(folders[number], number, len(folders), barrier.wait)
        except BaseException as err:  # noqa: BLE001 - the outcome is what the test checks
            outcomes[number] = err

    threads = [threading.Thread(target=rank, args=(number,)) for number in range(len(folders))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes


def test_two_machines_writing_to_different_folders_are_refused_on_both(tmp_path):
    node_a, node_b = tmp_path / "node-a" / "run", tmp_path / "node-b" / "run"
    outcomes = run_ranks([node_a, node_b])
    assert all(isinstance(outcome, InputError) for outcome in outcomes), outcomes
    assert "ranks [1]" in str(outcomes[0]) and "ranks [0]" in str(outcomes[1])
    assert "a filesystem that every machine mounts" in str(outcomes[0]) and "\n" not in str(outcomes[0])
    assert not node_a.exists() and not node_b.exists()  # the folders the check made are gone


def test_ranks_sharing_one_folder_pass_and_leave_it_as_it_was(tmp_path):
    new = tmp_path / "new-run"
    assert run_ranks([new, new, new]) == [None, None, None]
    assert not new.exists()
    existing = tmp_path / "existing-run"
    existing.mkdir()
    (existing / "checkpoint-100").mkdir()
    assert run_ranks([existing, existing]) == [None, None]
    assert sorted(path.name for path in existing.iterdir()) == ["checkpoint-100"]
    assert not (existing / SHARED_CHECK_FOLDER).exists()


def test_prepare_launch_checks_the_folder_only_over_several_machines(tmp_path):
    training_args = SimpleNamespace(
        use_cpu=False,
        world_size=2,
        process_index=0,
        per_device_train_batch_size=4,
        gradient_accumulation_steps=1,
        output_dir=str(tmp_path / "run"),
        activation_checkpointing=True,
    )
    script_args = SimpleNamespace(global_batch_size=None, stages=None)
    waits = []

    def barrier():
        waits.append(1)

    one_machine = {"WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2", "LOCAL_RANK": "0"}
    prepare_launch(script_args, training_args, environ=one_machine, device_count=2, barrier=barrier)
    assert not waits
    two_machines = {"WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "1", "LOCAL_RANK": "0"}
    with pytest.raises(InputError, match="ranks \\[1\\]"):  # rank 1, alone in this test, wrote nothing
        prepare_launch(script_args, training_args, environ=two_machines, device_count=1, barrier=barrier)
    assert waits


# -- FSDP -----------------------------------------------------------------------------------------------------------


def test_under_fsdp_the_recipes_checkpointing_is_fsdps_own(tmp_path, monkeypatch):
    """The Trainer's switch is turned off and FSDP's on, through the variable accelerate's FSDP plugin reads (built
    here as the Trainer builds it): transformers' Trainer refuses the two together."""
    from accelerate.utils import FullyShardedDataParallelPlugin
    from trl import SFTConfig

    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")
    monkeypatch.setenv("FSDP_ACTIVATION_CHECKPOINTING", "false")
    monkeypatch.setenv("FSDP_VERSION", "2")
    training_args = SFTConfig(output_dir=str(tmp_path), activation_checkpointing=True, bf16=False, report_to="none")
    assert use_fsdp_checkpointing(training_args, device_count=4)
    assert not training_args.activation_checkpointing and not training_args.gradient_checkpointing
    assert FullyShardedDataParallelPlugin().activation_checkpointing


def test_fsdp_checkpointing_follows_a_recipe_that_turns_it_off():
    environ = {"ACCELERATE_USE_FSDP": "true", "FSDP_ACTIVATION_CHECKPOINTING": "true"}
    training_args = SimpleNamespace(activation_checkpointing=False, gradient_checkpointing=False, use_cpu=False)
    assert use_fsdp_checkpointing(training_args, environ=environ, device_count=4)
    assert environ["FSDP_ACTIVATION_CHECKPOINTING"] == "false"


@pytest.mark.parametrize(
    "environ,gpus", [({"ACCELERATE_USE_FSDP": "false"}, 4), ({"ACCELERATE_USE_FSDP": "true"}, 0)], ids=["ddp", "cpu"]
)
def test_without_fsdp_sharding_the_trainers_checkpointing_stays(environ, gpus):
    """accelerate engages FSDP on GPU ranks only: on a CPU the Trainer's checkpointing is the only one there is."""
    training_args = SimpleNamespace(activation_checkpointing=True, gradient_checkpointing=True, use_cpu=False)
    assert not use_fsdp_checkpointing(training_args, environ=dict(environ), device_count=gpus)
    assert training_args.activation_checkpointing


# -- the saved dtype ------------------------------------------------------------------------------------------------


def write_fp32_model(folder):
    """A tiny Llama saved in float32 in two shards, as FSDP2's upcast leaves a bfloat16 model's save."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2
    )
    model = LlamaForCausalLM(config).to(torch.float32)
    model.save_pretrained(folder, max_shard_size="20KB")
    return model


def test_weights_saved_in_fp32_are_cast_to_the_recipes_dtype_and_load_as_such(tmp_path):
    from transformers import AutoModelForCausalLM

    folder = tmp_path / "out"
    model = write_fp32_model(folder)
    shards = sorted(folder.glob("model*.safetensors"))
    assert len(shards) > 1 and json.loads((folder / "config.json").read_text())["dtype"] == "float32"
    before = sum(shard.stat().st_size for shard in shards)
    shards[0].chmod(0o644)  # readable by the group, as the run publishes its weights
    assert save_in_recipe_dtype(folder, "bfloat16") == len(model.state_dict())
    for shard in shards:
        with safe_open(str(shard), "pt") as weights:
            assert {str(weights.get_slice(key).get_dtype()) for key in weights.keys()} == {"BF16"}  # noqa: SIM118
    assert sum(shard.stat().st_size for shard in shards) < 0.6 * before
    assert shards[0].stat().st_mode & 0o777 == 0o644
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    assert index["metadata"]["total_size"] == sum(p.numel() * 2 for p in model.state_dict().values())
    assert json.loads((folder / "config.json").read_text())["dtype"] == "bfloat16"
    loaded = AutoModelForCausalLM.from_pretrained(folder)
    assert {p.dtype for p in loaded.parameters()} == {torch.bfloat16}
    expected = model.model.embed_tokens.weight.to(torch.bfloat16)
    assert torch.equal(loaded.model.embed_tokens.weight, expected)
    assert not list(folder.glob(".*partial*"))  # no temporary file left


def test_weights_already_in_the_recipes_dtype_are_left_untouched(tmp_path):
    folder = tmp_path / "out"
    folder.mkdir()
    save_file({"w": torch.ones(2, dtype=torch.bfloat16), "steps": torch.arange(3)}, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps({"dtype": "bfloat16"}))
    stamp = (folder / "model.safetensors").stat().st_mtime_ns
    assert save_in_recipe_dtype(folder, "bfloat16") == 0
    assert save_in_recipe_dtype(folder, "auto") == save_in_recipe_dtype(folder, None) == 0
    assert (folder / "model.safetensors").stat().st_mtime_ns == stamp
    assert save_in_recipe_dtype(folder, torch.float32) == 1  # the integer tensor stays an integer
    with safe_open(str(folder / "model.safetensors"), "pt") as weights:
        assert weights.get_tensor("steps").dtype == torch.int64
