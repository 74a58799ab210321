"""Which checkpoint a training run resumes from: the newest *complete* one, never a save that was cut short.

A checkpoint of the 8B model under ZeRO-3 is some 120 GB written in place over minutes, and a job is pre-empted or
killed whenever the cluster says so. transformers' ``get_last_checkpoint`` returns the highest-numbered
``checkpoint-N`` without looking inside, so a job killed mid-save resumed from the half-written folder and failed in
DeepSpeed's loader on every retry. transformers 5.25 writes a checkpoint in this order (``Trainer._save_checkpoint``):
the weights, the optimizer and scheduler (under DeepSpeed every rank writes its own optimizer shard, then rank 0 the
``latest`` tag, then a barrier: ``deepspeed/runtime/engine.py``, ``save_checkpoint``), the RNG states, and
``trainer_state.json`` last. So a checkpoint is complete when:

- ``trainer_state.json`` is there and is a JSON object (it is written last);
- the weights are there and whole: ``model.safetensors`` or every shard its index lists, an adapter
  (``adapter_model.safetensors``), a ``pytorch_model*.bin``, or DeepSpeed's own model states;
- unless the run saves the model only (``save_only_model``), the optimizer is there: ``optimizer.pt`` / ``.bin`` /
  ``optimizer_0/`` (FSDP), or DeepSpeed's ``latest`` tag naming a folder with one optimizer shard per rank that saved
  (one ``rng_state_R.pth`` each);
- every file that says how long it must be is that long: a safetensors file's header gives the end of its last
  tensor, and a ``torch.save`` file is a zip whose central directory sits at its end.

A newer incomplete checkpoint is named in one warning line and left as it is (never deleted: it may be the only copy
of something the user wants to look at); the run's next save of that step writes over it.
"""

import json
import re
import struct
import zipfile
from dataclasses import dataclass
from pathlib import Path

from builders.errors import InputError
from recipes.model_io.model_folder import NotAWeightIndex, sharded_weights


CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")
TRAINER_STATE = "trainer_state.json"
WEIGHT_FILES = ("model.safetensors", "adapter_model.safetensors", "adapter_model.bin", "pytorch_model.bin")
OPTIMIZER_FILES = ("optimizer.pt", "optimizer.bin")
TORCH_SUFFIXES = (".pt", ".pth", ".bin")


@dataclass(frozen=True)
class CheckpointCheck:
    path: Path
    step: int
    problem: str | None  # None: complete

    @property
    def complete(self) -> bool:
        return self.problem is None


def checkpoints(output_dir: str | Path) -> list[Path]:
    """The ``checkpoint-N`` folders of ``output_dir``, oldest first (by step, not by name: 900 before 1000)."""
    folder = Path(output_dir)
    if not folder.is_dir():
        return []
    found = [(int(match.group(1)), path) for path in folder.iterdir() if (match := CHECKPOINT.match(path.name))]
    return [path for _, path in sorted(found) if path.is_dir()]


def safetensors_problem(path: Path) -> str | None:
    """Why the safetensors file at ``path`` is not whole (None when it is): its 8-byte header length, its JSON
    header, and a size that reaches the end of its last tensor."""
    size = path.stat().st_size
    try:
        with path.open("rb") as handle:
            (header_length,) = struct.unpack("<Q", handle.read(8))
            if 8 + header_length > size:
                return f"{path.name} is cut inside its header"
            header = json.loads(handle.read(header_length))
    except (struct.error, json.JSONDecodeError, UnicodeDecodeError):
        return f"{path.name} has no readable safetensors header"
    ends = [entry["data_offsets"][1] for key, entry in header.items() if key != "__metadata__"]
    expected = 8 + header_length + max(ends, default=0)
    if size < expected:
        return f"{path.name} holds {size:,} of its {expected:,} bytes"
    return None


def torch_file_problem(path: Path) -> str | None:
    """Why a ``torch.save`` file is not whole: since PyTorch 1.6 it is a zip, whose directory is written last."""
    if path.stat().st_size == 0 or not zipfile.is_zipfile(path):
        return f"{path.name} is cut short (no zip directory at its end)"
    return None


def _weights_problem(folder: Path) -> str | None:
    try:
        sharded = sharded_weights(folder)
    except NotAWeightIndex as err:
        return str(err)
    if sharded is not None:
        _, shards, missing = sharded
        return f"{len(missing)} of {len(shards)} weight shards missing (e.g. {missing[0]})" if missing else None
    if any((folder / name).is_file() for name in WEIGHT_FILES) or _deepspeed_tag(folder) is not None:
        return None
    return "no weights"


def _deepspeed_tag(folder: Path) -> Path | None:
    latest = folder / "latest"
    if not latest.is_file():
        return None
    tag = folder / latest.read_text(encoding="utf-8", errors="replace").strip()
    return tag if tag.is_dir() else None


def _optimizer_problem(folder: Path) -> str | None:
    if any((folder / name).is_file() for name in OPTIMIZER_FILES) or (folder / "optimizer_0").is_dir():
        return None
    tag = _deepspeed_tag(folder)
    if tag is None:
        if (folder / "latest").is_file():
            return "DeepSpeed's latest tag names a folder that is not there"
        return "no optimizer state"
    shards = list(tag.glob("*optim_states.pt"))
    ranks = len(list(folder.glob("rng_state_*.pth")))
    if not shards or len(shards) < ranks:
        return f"{len(shards)} optimizer shards in {tag.name} for {max(ranks, 1)} ranks"
    return None


def check_checkpoint(path: str | Path, *, expect_optimizer: bool = True) -> CheckpointCheck:
    """Whether ``path`` (a ``checkpoint-N`` folder) is complete, and if not, what is missing (module docstring)."""
    folder = Path(path)
    match = CHECKPOINT.match(folder.name)
    step = int(match.group(1)) if match else -1
    try:
        state = json.loads((folder / TRAINER_STATE).read_text(encoding="utf-8"))
        problem = None if isinstance(state, dict) else f"{TRAINER_STATE} is not a JSON object"
    except FileNotFoundError:
        problem = f"no {TRAINER_STATE} (it is written last: the save was cut short)"
    except (json.JSONDecodeError, UnicodeDecodeError):
        problem = f"{TRAINER_STATE} is cut short"
    problem = problem or _weights_problem(folder)
    if problem is None and expect_optimizer:
        problem = _optimizer_problem(folder)
    if problem is None:
        for file in sorted(p for p in folder.rglob("*") if p.is_file()):
            if file.suffix == ".safetensors":
                problem = safetensors_problem(file)
            elif file.suffix in TORCH_SUFFIXES:
                problem = torch_file_problem(file)
            if problem is not None:
                break
    return CheckpointCheck(folder, step, problem)


def resume_checkpoint(
    output_dir: str | Path, requested: str | None = None, *, expect_optimizer: bool = True
) -> tuple[str | None, list[str]]:
    """``(checkpoint to resume from or None, warning lines)``.

    ``requested`` (the recipe's ``resume_from_checkpoint``) must be a complete checkpoint, else a one-line
    :class:`InputError`. Without it: the newest complete ``checkpoint-N`` of ``output_dir``, each newer incomplete one
    named in a warning (and left in place)."""
    if requested:
        folder = Path(requested).expanduser()
        if not folder.is_dir():
            raise InputError(f"resume_from_checkpoint {requested}: no such checkpoint folder; check the path")
        check = check_checkpoint(folder, expect_optimizer=expect_optimizer)
        if not check.complete:
            raise InputError(
                f"resume_from_checkpoint {requested} is incomplete ({check.problem}): resuming from it would fail "
                "or train from a mix of two steps; give an earlier complete checkpoint, or remove the key to resume "
                "from the newest complete one"
            )
        return str(folder), []
    warnings, newer_incomplete = [], []
    for path in reversed(checkpoints(output_dir)):
        check = check_checkpoint(path, expect_optimizer=expect_optimizer)
        if check.complete:
            if newer_incomplete:
                warnings.append(_skipped(newer_incomplete, f"resuming from {path.name}"))
            return str(path), warnings
        newer_incomplete.append(check)
    if newer_incomplete:
        warnings.append(_skipped(newer_incomplete, "no complete checkpoint: training starts at step 0"))
    return None, warnings


def _skipped(incomplete: list[CheckpointCheck], outcome: str) -> str:
    named = "; ".join(f"{check.path.name}: {check.problem}" for check in incomplete)
    return f"incomplete checkpoint(s) left as they are ({named}); {outcome}"
