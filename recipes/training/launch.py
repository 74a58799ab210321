"""What a launch must get right before anything loads, for ``recipes/sft.py`` and ``recipes/grpo.py`` alike: one rank
per GPU, the recipe's global batch on any number of ranks, every machine writing to the same ``output_dir``, FSDP's
own activation checkpointing, and a final model saved in the recipe's dtype.

- **One rank per GPU.** ``accelerate launch`` without ``--num_processes`` starts the config file's count. accelerate
  1.16 then puts rank r on ``cuda:(r % device_count)`` (``PartialState.set_device``), so 8 ranks on a 4-GPU machine
  start without a word; DeepSpeed later calls ``set_device(local_rank)`` and stops with "invalid device ordinal"
  (``deepspeed/runtime/engine.py``), and NCCL refuses two ranks on one GPU. :func:`check_ranks` refuses such a launch
  on every rank, in one line naming ``--num_processes``, from what ``accelerate launch`` and ``torchrun`` set
  (``LOCAL_WORLD_SIZE``, ``WORLD_SIZE``, ``LOCAL_RANK``) and the GPUs this machine shows.
- **The run does not depend on the hardware.** A recipe states ``global_batch_size`` (rows per optimizer step over
  all ranks), and ``gradient_accumulation_steps = global_batch_size / (per_device_train_batch_size × ranks)`` follows
  from the ranks of the launch (:func:`accumulation_for`): the 8B SFT recipes train 64 rows a step on 4 GPUs (4 × 4 ×
  4) and on 2 machines of 8 (4 × 1 × 16) alike, with the same learning rate and warm-up. A stated accumulation would
  have made the 16-rank run a 256-row run. The accumulation is derived while the arguments are parsed
  (:func:`with_derived_accumulation`), before TRL's ``GRPOConfig`` derives its generation batch from it.
- **One ``output_dir`` for every machine.** Checkpoints are written by rank 0 and read back by every rank on resume;
  on a launch over several machines :func:`check_shared_output_dir` makes sure every rank sees the same folder.
- **FSDP's activation checkpointing.** Under FSDP the Trainer's ``activation_checkpointing`` adds a redundant
  all-gather in backward (transformers' ``training_args.py`` warns, huggingface/transformers issue 30404) and the
  Trainer refuses it beside FSDP's own (``trainer.py``); :func:`use_fsdp_checkpointing` turns the recipe's setting
  into FSDP's.
- **Weights in the recipe's dtype.** accelerate's FSDP2 upcasts the trainable parameters to fp32 under mixed precision
  (``accelerate/utils/fsdp_utils.py``, ``fsdp2_prepare_model``), so the saved model came out fp32: twice the size of
  the bf16 checkpoint it started from. :func:`save_in_recipe_dtype` casts it back.

:func:`prepare_launch` runs the first four checks; the launch scripts call it right after parsing (the process group
exists by then: ``TrainingArguments`` sets it up while it is parsed), and :func:`save_in_recipe_dtype` after the
final save.
"""

import json
import logging
import math
import os
import re
import socket
from collections.abc import Callable, Mapping
from pathlib import Path

from builders.errors import InputError
from builders.outputs import atomic_file, write_atomic


logger = logging.getLogger("sureon.launch")

DEFAULT_GPUS = 4  # the shipped 8B recipes' hardware; what `sureon plan` plans a recipe that names none on
GPUS_PER_MACHINE = 8  # accelerate_configs/multi_node_zero3.yaml's machines
DEFAULT_PER_DEVICE_BATCH = 8  # TrainingArguments' per_device_train_batch_size (TRL keeps it)
BATCH_KEYS = ("global_batch_size", "gradient_accumulation_steps", "per_device_train_batch_size")
SHARED_CHECK_FOLDER = ".sureon-shared-filesystem-check"
# Bytes per element of each dtype a safetensors header names (the format's own names).
STORED_BYTES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "I16": 2, "U16": 2, "F16": 2, "BF16": 2}
STORED_BYTES |= {"I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8}
LAUNCH_DOCS = "docs/training/sft.md, 'Launching: ranks, machines, FSDP'"


# -- ranks ----------------------------------------------------------------------------------------------------------


def _count(environ: Mapping[str, str], name: str) -> int | None:
    value = environ.get(name)
    return int(value) if value not in (None, "") else None


def check_ranks(*, use_cpu: bool = False, environ: Mapping[str, str] | None = None, device_count=None) -> None:
    """Refuse a launch that starts more ranks on this machine than it has GPUs (``device_count``: the GPUs this
    process sees, ``torch.cuda.device_count()`` by default). Nothing to check on a CPU run or outside a launcher."""
    env = os.environ if environ is None else environ
    if use_cpu or env.get("ACCELERATE_USE_CPU", "").lower() in ("1", "true", "yes"):
        return
    world = _count(env, "WORLD_SIZE")
    local = _count(env, "LOCAL_WORLD_SIZE") or world
    local_rank = _count(env, "LOCAL_RANK")
    if local is None and local_rank is None:
        return  # `python recipes/sft.py`: one process
    if device_count is None:
        import torch

        device_count = torch.cuda.device_count()
    if not device_count:
        return  # a CPU machine: the ranks share its cores
    local = local or 1
    if local <= device_count and (local_rank or 0) < device_count:
        return
    machines = max(1, (world or local) // local)
    visible = env.get("CUDA_VISIBLE_DEVICES")
    shown = f" (CUDA_VISIBLE_DEVICES={visible})" if visible else ""
    fix = (
        f"pass --num_processes {device_count}"
        if machines == 1
        else f"pass --num_processes {machines * device_count} (the total over the {machines} machines: "
        f"{machines} × {device_count})"
    )
    raise InputError(
        f"this launch starts {max(local, (local_rank or 0) + 1)} ranks on this machine, which shows {device_count} "
        f"GPU(s){shown}: each rank needs its own GPU; {fix} to accelerate launch, as each recipe's first lines do "
        f"({LAUNCH_DOCS})"
    )


# -- the global batch -----------------------------------------------------------------------------------------------


def _refuse_both(settings: Mapping, where: str) -> None:
    if settings.get("global_batch_size") is not None and settings.get("gradient_accumulation_steps") is not None:
        raise InputError(
            f"{where}: global_batch_size and gradient_accumulation_steps both set the accumulation; keep "
            "global_batch_size (the accumulation follows from it, the per-device batch and the ranks) and remove "
            "gradient_accumulation_steps"
        )


def accumulation_for(settings: Mapping, world_size: int, *, where: str) -> int | None:
    """``gradient_accumulation_steps`` of a recipe's (or a stage's) batch ``settings`` on ``world_size`` ranks: the
    ``global_batch_size`` split over the ranks' per-device batches; None when the settings state no global batch. A
    global batch the ranks cannot split, or one stated beside an accumulation, is refused in one line."""
    _refuse_both(settings, where)
    global_batch = settings.get("global_batch_size")
    if global_batch is None:
        return None
    if not isinstance(global_batch, int) or isinstance(global_batch, bool) or global_batch < 1:
        raise InputError(f"{where}: global_batch_size {global_batch!r} is not a positive integer")
    per_device = settings.get("per_device_train_batch_size") or DEFAULT_PER_DEVICE_BATCH
    per_step = per_device * world_size
    if global_batch % per_step:
        ranks = [n for n in range(1, global_batch // per_device + 1) if global_batch % (per_device * n) == 0]
        fits = f"it splits over {ranks} rank(s)" if ranks else "no rank count splits it"
        raise InputError(
            f"{where}: global_batch_size {global_batch} is not a multiple of per_device_train_batch_size "
            f"{per_device} × {world_size} rank(s) = {per_step}, so no whole number of accumulation steps makes it "
            f"({fits} at this per-device batch); change per_device_train_batch_size or the ranks"
        )
    return global_batch // per_step


def _option(args: list[str], name: str) -> str | None:
    """The last value given to ``--name`` on a command line (``--name V`` or ``--name=V``), as argparse reads it."""
    value = None
    for position, arg in enumerate(args):
        if arg == f"--{name}" and position + 1 < len(args):
            value = args[position + 1]
        elif arg.startswith(f"--{name}="):
            value = arg.split("=", 1)[1]
    return value


def _as_int(text: str | None, name: str) -> int | None:
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        raise InputError(f"the command line: --{name} {text!r} is not an integer") from None


def _batch_keys(settings: Mapping) -> dict:
    return {key: settings[key] for key in BATCH_KEYS if key in settings}


def with_derived_accumulation(
    args: list[str], recipe: Mapping, *, recipe_path: str | None = None, environ: Mapping[str, str] | None = None
) -> list[str]:
    """A launch script's command line ``args`` with ``--gradient_accumulation_steps`` derived from the global batch
    the recipe or the command line states (the command line wins, as in TRL's parser), on the ranks the launcher
    started (``WORLD_SIZE``; one without a launcher); ``args`` unchanged without a global batch. ``recipe``: the
    recipe's settings as :func:`recipes.training.recipe_file.read_recipe` returns them, read from ``recipe_path``.

    Before parsing, so that TRL's ``GRPOConfig`` derives its generation batch (``steps_per_generation``) from the
    accumulation the run will use. Refused in one line: a global batch stated beside an accumulation (by the recipe,
    the command line or a stage), and a global batch the ranks cannot split."""
    env = os.environ if environ is None else environ
    given = {key: _as_int(_option(args, key), key) for key in BATCH_KEYS}
    given = {key: value for key, value in given.items() if value is not None}
    top = _batch_keys(recipe) | given
    sources = ([f"training recipe {recipe_path}"] if recipe_path else []) + (["the command line"] if given else [])
    where = " and ".join(sources) or "the command line"
    for number, stage in enumerate(recipe.get("stages") or [], start=1):
        if isinstance(stage, Mapping):
            _refuse_both(top | _batch_keys(stage), f"{where}, stage {stage.get('name', f'stage{number}')!r}")
    steps = accumulation_for(top, _count(env, "WORLD_SIZE") or 1, where=where)
    return args if steps is None else [*args, "--gradient_accumulation_steps", str(steps)]


def check_global_batch(script_args, training_args) -> None:
    """The accumulation derived while parsing makes the recipe's global batch on the ranks that really started, and
    each stage that changes its batch gets the accumulation its own batch needs (written into the stage, which
    ``recipes.training.sft_stages`` applies)."""
    top = {
        "global_batch_size": script_args.global_batch_size,
        "per_device_train_batch_size": training_args.per_device_train_batch_size,
    }
    steps = accumulation_for(top, training_args.world_size, where="the launch")
    if steps is not None and steps != training_args.gradient_accumulation_steps:
        raise InputError(
            f"the launch: {training_args.world_size} ranks started, but the launcher's WORLD_SIZE did not say so "
            f"when the recipe was read, so gradient_accumulation_steps {training_args.gradient_accumulation_steps} "
            f"does not make global_batch_size {script_args.global_batch_size}: start the run with accelerate launch "
            "or torchrun"
        )
    for number, stage in enumerate(getattr(script_args, "stages", None) or [], start=1):
        if not any(key in stage for key in ("global_batch_size", "per_device_train_batch_size")):
            continue
        name = stage.get("name", f"stage{number}")
        steps = accumulation_for(top | _batch_keys(stage), training_args.world_size, where=f"stage {name!r}")
        if steps is not None:
            stage["gradient_accumulation_steps"] = steps


# -- machines -------------------------------------------------------------------------------------------------------


def spans_machines(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the launch has ranks on several machines (``WORLD_SIZE`` above ``LOCAL_WORLD_SIZE``)."""
    env = os.environ if environ is None else environ
    world, local = _count(env, "WORLD_SIZE"), _count(env, "LOCAL_WORLD_SIZE")
    return world is not None and local is not None and world > local


def check_shared_output_dir(output_dir: str | Path, rank: int, world_size: int, barrier: Callable[[], None]) -> None:
    """Refuse, on every rank, an ``output_dir`` that the ranks do not all see: each rank writes a file named after it
    in a folder of ``output_dir``, waits for the others (``barrier``: ``torch.distributed.barrier`` in a run), and
    looks for every rank's file. Every rank passes every barrier, whatever it found, so none is left waiting. Nothing
    is left behind: each rank removes its own file, then the folders the check made (``output_dir`` too, when it did
    not exist before)."""
    out = Path(output_dir)
    probe = out / SHARED_CHECK_FOLDER
    own = probe / f"rank-{rank}"
    existed = out.exists()
    barrier()  # every rank has looked before any rank creates it
    problem = None
    try:
        probe.mkdir(parents=True, exist_ok=True)
        own.write_text(socket.gethostname())
    except OSError as err:
        problem = f"output_dir {out}: rank {rank} cannot write there ({err.strerror or err})"
    barrier()
    missing = [other for other in range(world_size) if not (probe / f"rank-{other}").is_file()]
    barrier()
    own.unlink(missing_ok=True)
    barrier()
    for folder in (probe,) if existed else (probe, out):
        try:
            folder.rmdir()
        except OSError:  # removed by another rank first, or (output_dir) not empty
            pass
    if problem:
        raise InputError(problem)
    if missing:
        raise InputError(
            f"output_dir {out}: rank {rank} (on {socket.gethostname()}) does not see the files that ranks {missing} "
            "wrote there, so the machines of this launch write to different folders, and a checkpoint rank 0 saves "
            "would be missing on the others: put output_dir (and the builds the recipe reads) on a filesystem that "
            f"every machine mounts at the same path ({LAUNCH_DOCS})"
        )


# -- FSDP -----------------------------------------------------------------------------------------------------------


def _true(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes")


def use_fsdp_checkpointing(training_args, *, environ=None, device_count=None) -> bool:
    """Under FSDP, the recipe's ``activation_checkpointing`` done FSDP's way: FSDP's own checkpointing
    (``FSDP_ACTIVATION_CHECKPOINTING``, which accelerate's FSDP plugin reads when the Trainer builds it) on or off as
    the recipe says, the Trainer's off. True when FSDP shards this run (accelerate engages it on GPUs only)."""
    env = os.environ if environ is None else environ
    if not _true(env.get("ACCELERATE_USE_FSDP")) or getattr(training_args, "use_cpu", False):
        return False
    if device_count is None:
        import torch

        device_count = torch.cuda.device_count()
    if not device_count:
        return False
    wanted = bool(training_args.activation_checkpointing)
    configured = _true(env.get("FSDP_ACTIVATION_CHECKPOINTING"))
    env["FSDP_ACTIVATION_CHECKPOINTING"] = "true" if wanted else "false"
    training_args.activation_checkpointing = training_args.gradient_checkpointing = False
    logger.info(
        "FSDP: activation checkpointing %s by FSDP's own wrapper (fsdp_activation_checkpointing%s), not the "
        "Trainer's, which adds a redundant all-gather in backward",
        "on" if wanted else "off",
        "" if wanted == configured else f", the accelerate config's {str(configured).lower()} set to the recipe's",
    )
    return True


def save_in_recipe_dtype(folder: str | Path, dtype) -> int:
    """Cast the floating tensors of the model saved in ``folder`` (``model*.safetensors``; an adapter's files are left
    alone) to ``dtype`` (the recipe's ``dtype``, a name or a ``torch.dtype``; ``auto`` or None leaves them), each file
    replaced atomically, then set ``config.json``'s ``dtype`` (and its sub-configs') and the index's total size.
    Returns the number of tensors cast: 0 when the save was in ``dtype`` already, e.g. under DeepSpeed, whose ZeRO-3
    save is 16-bit. For after the final save under FSDP2, whose fp32 upcast the save keeps; rank 0 only."""
    import torch
    from safetensors import safe_open
    from safetensors.torch import save_file

    if dtype is None or dtype == "auto":
        return 0
    target = dtype if isinstance(dtype, torch.dtype) else getattr(torch, str(dtype), None)
    if not isinstance(target, torch.dtype) or not target.is_floating_point:
        raise InputError(f"dtype {dtype!r} is not a floating dtype (bfloat16, float16, float32)")
    name = str(target).removeprefix("torch.")
    folder = Path(folder)
    cast, total = 0, 0
    stored = {"BF16": torch.bfloat16, "F16": torch.float16, "F32": torch.float32, "F64": torch.float64}
    for path in sorted(folder.glob("model*.safetensors")):
        with safe_open(str(path), "pt") as weights:
            # From the header first: a save already in the dtype (every save but FSDP2's) is read no further.
            names = weights.keys()
            slices = [weights.get_slice(key) for key in names]
            if not {stored.get(part.get_dtype()) for part in slices} - {target, None}:
                total += sum(math.prod(part.get_shape()) * STORED_BYTES[part.get_dtype()] for part in slices)
                continue
            metadata = weights.metadata()
            tensors = {key: weights.get_tensor(key) for key in names}
        changed = [key for key, tensor in tensors.items() if tensor.is_floating_point() and tensor.dtype != target]
        for key in changed:
            tensors[key] = tensors[key].to(target)
        total += sum(tensor.numel() * tensor.element_size() for tensor in tensors.values())
        if changed:
            mode = path.stat().st_mode & 0o777  # safetensors writes 0600: keep the mode the file had
            with atomic_file(path) as partial:
                save_file(tensors, str(partial), metadata=metadata)
            path.chmod(mode)
            cast += len(changed)
        del tensors
    if not cast:
        return 0
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        content = json.loads(index.read_text())
        content.setdefault("metadata", {})["total_size"] = total
        write_atomic(index, json.dumps(content, indent=2, sort_keys=True) + "\n")
    config_path = folder / "config.json"
    if config_path.is_file():
        config = json.loads(config_path.read_text())
        for section in [config, *(value for value in config.values() if isinstance(value, dict))]:
            for key in ("dtype", "torch_dtype"):
                if key in section:
                    section[key] = name
        config["dtype"] = name
        write_atomic(config_path, json.dumps(config, indent=2, sort_keys=True) + "\n")
    logger.info("saved weights cast to the recipe's %s: %d tensors in %s", name, cast, folder)
    return cast


# -- the launch -----------------------------------------------------------------------------------------------------


def prepare_launch(script_args, training_args, *, environ=None, device_count=None, barrier=None):
    """What a launch script runs right after parsing, before anything loads (the module docstring says why): the
    ranks checked against the GPUs, the global batch against the ranks that started (and each stage's accumulation),
    the shared ``output_dir`` on a launch over several machines, and FSDP's activation checkpointing. Returns
    ``training_args`` (changed in place: ``dataclasses.replace`` would rerun GRPOConfig's checks)."""
    env = os.environ if environ is None else environ
    check_ranks(use_cpu=bool(getattr(training_args, "use_cpu", False)), environ=env, device_count=device_count)
    check_global_batch(script_args, training_args)
    if spans_machines(env):
        if barrier is None:
            import torch.distributed

            barrier = torch.distributed.barrier
        rank, world = training_args.process_index, training_args.world_size
        check_shared_output_dir(training_args.output_dir, rank, world, barrier)
    use_fsdp_checkpointing(training_args, environ=env, device_count=device_count)
    return training_args


# -- launch lines ---------------------------------------------------------------------------------------------------


def hardware_gpus(hardware: str | None) -> int | None:
    """The GPU count a recipe's ``hardware`` names (``4× NVIDIA H200 ...`` -> 4), None when it names none."""
    found = re.match(r"\s*(\d+)\s*[×x]\s", hardware or "")
    return int(found.group(1)) if found else None


def machines_for(num_gpus: int) -> int:
    """The fewest machines of at most :data:`GPUS_PER_MACHINE` GPUs, as many on each, that hold ``num_gpus``."""
    return next(m for m in range(1, num_gpus + 1) if num_gpus % m == 0 and num_gpus // m <= GPUS_PER_MACHINE)


STRATEGY_NAMES = ((r"ZeRO[- ]?3", "zero3"), (r"ZeRO[- ]?2", "zero2"), (r"\bFSDP", "fsdp"))


def hardware_strategy(hardware: str | None) -> str | None:
    """The parallelism a recipe's ``hardware`` names in brackets (``4× NVIDIA H200 141 GB (DeepSpeed ZeRO-3)`` ->
    ``zero3``): ``zero2``, ``zero3``, ``fsdp``, or ``ddp`` when the brackets name none of them (``(LoRA)``); None
    when the recipe states no hardware."""
    if not hardware or not hardware.strip():
        return None
    named = " ".join(re.findall(r"\(([^)]*)\)", hardware))
    return next((strategy for pattern, strategy in STRATEGY_NAMES if re.search(pattern, named, re.IGNORECASE)), "ddp")


def launch_strategy(hardware: str | None, *, lora: bool, num_gpus: int) -> str:
    """The strategy :func:`launch_line` launches (and ``sureon plan`` times): the one the recipe's ``hardware`` names;
    for a recipe that names no hardware, DDP for LoRA and ZeRO-3 for a full fine-tune (the shipped recipes' choices);
    over several machines ZeRO-3, the one multi-machine config (``accelerate_configs/multi_node_zero3.yaml``)."""
    if machines_for(num_gpus) > 1:
        return "zero3"
    return hardware_strategy(hardware) or ("ddp" if lora else "zero3")


def launch_line(recipe_path: str | Path, *, script: str, num_gpus: int, strategy: str) -> str:
    """The ``accelerate launch`` line that runs ``recipe_path`` on ``num_gpus`` GPUs, one rank each, with the
    accelerate config of ``strategy`` (:func:`launch_strategy`), over machines of up to 8 GPUs beyond one."""
    machines = machines_for(num_gpus)
    if machines == 1:
        config = strategy
        where = ""
    else:
        config = "multi_node_zero3"
        where = f"--num_machines {machines} --machine_rank RANK --main_process_ip ADDRESS "
    return (
        f"accelerate launch --config_file accelerate_configs/{config}.yaml {where}--num_processes {num_gpus} "
        f"{script} --config {recipe_path}"
    )
