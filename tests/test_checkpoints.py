"""Which checkpoint a run resumes from: the newest complete one, whatever a killed save left behind (a checkpoint the
Trainer wrote in the order transformers 5.25 writes it, cut at each point), in every layout a run writes (plain,
sharded, LoRA, DeepSpeed's per-rank optimizer shards, FSDP's optimizer folder)."""

import json

import pytest
import torch
from safetensors.torch import save_file

from builders.errors import InputError
from recipes.training.checkpoints import check_checkpoint, checkpoints, resume_checkpoint


def write_checkpoint(folder, *, weights="model.safetensors", optimizer="optimizer.pt", ranks=1, deepspeed=False):
    """A checkpoint as the Trainer writes it: weights, optimizer (DeepSpeed: a shard per rank, then ``latest``), the
    RNG states, and ``trainer_state.json`` last."""
    folder.mkdir(parents=True)
    tensors = {"layer.weight": torch.ones(4, 4)}
    if weights == "sharded":
        save_file(tensors, folder / "model-00001-of-00002.safetensors")
        save_file({"head.weight": torch.ones(2)}, folder / "model-00002-of-00002.safetensors")
        weight_map = {
            "layer.weight": "model-00001-of-00002.safetensors",
            "head.weight": "model-00002-of-00002.safetensors",
        }
        (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    else:
        save_file(tensors, folder / weights)
    if deepspeed:
        tag = folder / f"global_step{folder.name.split('-')[1]}"
        tag.mkdir()
        for rank in range(ranks):
            torch.save({"rank": rank}, tag / f"bf16_zero_pp_rank_{rank}_mp_rank_00_optim_states.pt")
        (folder / "latest").write_text(tag.name)
    elif optimizer == "optimizer_0":
        (folder / "optimizer_0").mkdir()
    elif optimizer:
        torch.save({"state": {}}, folder / optimizer)
    for rank in range(ranks):
        torch.save({"python": rank}, folder / (f"rng_state_{rank}.pth" if ranks > 1 else "rng_state.pth"))
    (folder / "trainer_state.json").write_text(json.dumps({"global_step": int(folder.name.split("-")[1])}))
    return folder


@pytest.mark.parametrize(
    "layout",
    [{}, {"weights": "sharded"}, {"weights": "adapter_model.safetensors"}, {"optimizer": "optimizer_0"}]
    + [{"deepspeed": True, "ranks": 2}],
    ids=["plain", "sharded", "lora", "fsdp", "deepspeed"],
)
def test_a_checkpoint_saved_whole_is_complete(layout, tmp_path):
    assert check_checkpoint(write_checkpoint(tmp_path / "checkpoint-10", **layout)).complete


def cut(path, keep: float = 0.5):
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


DAMAGES = {
    "no trainer_state.json (the save was killed before its last file)": lambda c: (c / "trainer_state.json").unlink(),
    "trainer_state.json cut short": lambda c: cut(c / "trainer_state.json"),
    "weights cut short": lambda c: cut(c / "model.safetensors", 0.9),
    "weights missing": lambda c: (c / "model.safetensors").unlink(),
    "optimizer cut short": lambda c: cut(c / "optimizer.pt"),
    "optimizer missing": lambda c: (c / "optimizer.pt").unlink(),
    "an RNG state cut short": lambda c: cut(c / "rng_state.pth"),
}


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_the_newest_complete_checkpoint_is_resumed_and_a_newer_broken_one_named_and_kept(damage, tmp_path):
    write_checkpoint(tmp_path / "checkpoint-100")
    broken = write_checkpoint(tmp_path / "checkpoint-200")
    DAMAGES[damage](broken)
    before = sorted(p.name for p in broken.rglob("*"))
    assert not check_checkpoint(broken).complete
    resume, warnings = resume_checkpoint(tmp_path)
    assert resume == str(tmp_path / "checkpoint-100")
    (warning,) = warnings
    assert "checkpoint-200" in warning and "resuming from checkpoint-100" in warning
    assert sorted(p.name for p in broken.rglob("*")) == before, "an incomplete checkpoint was changed"


def test_deepspeed_checkpoints_need_a_shard_per_rank_and_their_tag(tmp_path):
    missing_shard = write_checkpoint(tmp_path / "checkpoint-1", deepspeed=True, ranks=2)
    next(missing_shard.glob("global_step1/*rank_1*")).unlink()
    assert "1 optimizer shards in global_step1 for 2 ranks" in check_checkpoint(missing_shard).problem
    no_tag = write_checkpoint(tmp_path / "checkpoint-2", deepspeed=True, ranks=2)
    (no_tag / "latest").write_text("global_step999")
    assert not check_checkpoint(no_tag).complete


def test_a_sharded_checkpoint_missing_a_shard_is_incomplete(tmp_path):
    folder = write_checkpoint(tmp_path / "checkpoint-3", weights="sharded")
    (folder / "model-00002-of-00002.safetensors").unlink()
    assert "1 of 2 weight shards missing" in check_checkpoint(folder).problem


def test_a_model_only_save_needs_no_optimizer(tmp_path):
    folder = write_checkpoint(tmp_path / "checkpoint-4", optimizer=None)
    assert not check_checkpoint(folder).complete
    assert check_checkpoint(folder, expect_optimizer=False).complete


def test_steps_sort_as_numbers_and_nothing_complete_starts_at_step_zero(tmp_path):
    for step in (900, 1000, 95):
        write_checkpoint(tmp_path / f"checkpoint-{step}")
    assert [path.name for path in checkpoints(tmp_path)] == ["checkpoint-95", "checkpoint-900", "checkpoint-1000"]
    assert resume_checkpoint(tmp_path)[0].endswith("checkpoint-1000")
    only_broken = tmp_path / "other"
    (write_checkpoint(only_broken / "checkpoint-5") / "trainer_state.json").unlink()
    resume, (warning,) = resume_checkpoint(only_broken)
    assert resume is None and "training starts at step 0" in warning
    assert resume_checkpoint(tmp_path / "never-trained") == (None, [])


def test_a_requested_checkpoint_must_be_whole(tmp_path):
    whole = write_checkpoint(tmp_path / "checkpoint-7")
    assert resume_checkpoint(tmp_path, str(whole)) == (str(whole), [])
    (whole / "trainer_state.json").unlink()
    with pytest.raises(InputError, match=r"resume_from_checkpoint .*checkpoint-7 is incomplete \(no trainer_state"):
        resume_checkpoint(tmp_path, str(whole))
    with pytest.raises(InputError, match="no such checkpoint folder"):
        resume_checkpoint(tmp_path, str(tmp_path / "checkpoint-8"))
