"""Time per optimizer step and per epoch on the named hardware (``sureon plan``'s ``time``), as a sum of named terms,
each marked as the plan's other figures are:

- **formula**: a count from the model's shapes (bytes, FLOPs) at a GPU's published peak rate (``GPUS``: NVIDIA's
  datasheets), so a floor on the time, reached only if the kernels run at that peak;
- **assumed**: rests on an assumed figure: the utilisation of the GPU's FLOPs (``--assumed-mfu``, applied to every
  FLOP executed, the recomputed ones too), an overlap of communication with compute, or the longest completion of a
  GRPO generation batch;
- **measured**: measured here (the host's work per decode step, on this machine's CPU).

Every figure is per GPU: the ranks run in parallel, and an optimizer step waits for the slowest one.

**SFT** (``recipes/sft.py``), per optimizer step of ``per_device_train_batch_size`` x accumulation rows per GPU:
the model FLOPs of forward and backward (``flops.training_flops``, per measured row, averaged) and what a step
executes on top of them (``flops.recomputed_flops``: attention's backward recomputes its scores and TRL's fused LM
head its logits tiles; with activation checkpointing every layer runs its forward again up to its last projection),
at the assumed utilisation; the padding of a batch to its longest row (the LLM's work over the padded positions, at
the recipe's measured padding share); the optimizer step (AdamW reads the fp32 weight, gradient and two moments and
writes three of them back plus the bf16 weight: 30 bytes per trained parameter the GPU holds, at HBM bandwidth); and
the communication of the strategy the recipe's hardware names (:func:`communication_seconds`).

**GRPO** (``recipes/grpo.py``, TRL 1.16's ``GRPOTrainer``), per generation batch of ``per_device_train_batch_size``
x ``steps_per_generation`` completions per GPU, then per optimizer step (:func:`grpo_time` says each term's source
in TRL and transformers).
"""

import math
import re
from collections import Counter
from dataclasses import dataclass

from recipes.training.plan.flops import _factors, recomputed_flops, training_flops
from recipes.training.plan.memory import _text_dims, kv_cache_bytes_per_token


MEASURED, FORMULA, ASSUMED = "measured", "formula", "assumed"


@dataclass(frozen=True)
class GPU:
    """A GPU's published figures: HBM bandwidth, dense bf16 peak (without sparsity), NVLink bandwidth per GPU (both
    directions together, as NVIDIA states it)."""

    name: str
    hbm_tbps: float
    peak_tflops: float
    interconnect_gbps: float
    source: str


GPUS = (
    GPU("H200", 4.8, 989.0, 900.0, "NVIDIA H200 Tensor Core GPU datasheet, H200 SXM"),
    GPU("H100", 3.35, 989.0, 900.0, "NVIDIA H100 Tensor Core GPU datasheet, H100 SXM"),
)
DEFAULT_GPU = GPUS[0]  # the shipped recipes' GPU, and what `--gpu-memory 141` plans by default
# The H100's PCIe and NVL cards have other figures (2.0 / 3.9 TB/s, 756 / 835 TFLOPS): never taken for the SXM's.
OTHER_H100 = re.compile(r"H100\s*(PCIe|NVL)", re.IGNORECASE)

# The host's work per decode step of transformers' ``generate`` (Python, the logits processors and sampling, the
# dispatch of every kernel of 36 decoder layers), which a GPU's step pays on its CPU: measured on this project's 2-core
# AMD EPYC machine (torch 2.14.1, transformers 5.25.0) by ``python benchmarks/gpu_grpo.py --decode-overhead``, a
# Qwen3-VL of the 8B's 36 text layers at tiny widths, one sequence, so that the arithmetic is negligible. A CPU figure
# and a floor: CUDA adds its launch latency per kernel (docs/training/planning.md cites a published eager figure).
DECODE_STEP_OVERHEAD_SECONDS = 0.0162
# AdamW with bf16 weights and fp32 master weights, as DeepSpeed and FSDP run it: reads the fp32 weight, the gradient
# (fp32) and both moments (16 bytes), writes the weight and the moments (12) and the bf16 copy (2).
OPTIMIZER_BYTES_PER_PARAMETER = 30
STRATEGY_NAMES = {"zero2": "ZeRO-2", "zero3": "ZeRO-3", "fsdp": "FSDP", "ddp": "DDP"}
# Forward-only parts, as generation, the log-probability passes and a frozen reference model run them.
NO_GRADIENT = frozenset({"vision_tower", "projector", "llm"})


def recipe_gpu(hardware: str | None) -> GPU | None:
    """The GPU a recipe's ``hardware`` text names (``4× NVIDIA H200 141 GB ...`` -> H200), None when none known."""
    text = hardware or ""
    if OTHER_H100.search(text):
        return None
    return next((gpu for gpu in GPUS if re.search(rf"\b{gpu.name}\b", text, re.IGNORECASE)), None)


def hardware_figures(
    hardware: str | None,
    *,
    peak_tflops: float | None = None,
    hbm_tbps: float | None = None,
    interconnect_gbps: float | None = None,
    decode_step_overhead_ms: float | None = None,
) -> dict:
    """The figures the time model runs at: the recipe's GPU's (:data:`GPUS`), else the H200's, each replaced by the
    option given; ``source`` says where each came from."""
    named = recipe_gpu(hardware)
    gpu = named or DEFAULT_GPU
    given = {"--peak-tflops": peak_tflops, "--hbm-tbps": hbm_tbps, "--interconnect-gbps": interconnect_gbps}
    given |= {"--decode-step-overhead-ms": decode_step_overhead_ms}
    options = [option for option, value in given.items() if value is not None]
    known = ", ".join(known_gpu.name for known_gpu in GPUS)
    source = gpu.source + ("" if named else f" (the recipe's hardware names none of {known})")
    if options:
        source += f"; {', '.join(options)} as given"
    return {
        "gpu": gpu.name,
        "named_by_recipe": named is not None,
        "peak_tflops": peak_tflops or gpu.peak_tflops,
        "hbm_tbps": hbm_tbps or gpu.hbm_tbps,
        "interconnect_gbps": interconnect_gbps or gpu.interconnect_gbps,
        "decode_step_overhead_seconds": (
            decode_step_overhead_ms / 1000 if decode_step_overhead_ms is not None else DECODE_STEP_OVERHEAD_SECONDS
        ),
        "source": source,
    }


def term(name: str, seconds: float, source: str, how: str) -> dict:
    return {"name": name, "seconds": float(seconds), "source": source, "how": how}


def _flops_rate(hardware: dict, mfu: float) -> float:
    return mfu * hardware["peak_tflops"] * 1e12


def collective_seconds(size: float, num_gpus: int, hardware: dict) -> float:
    """A ring all-gather or reduce-scatter of ``size`` bytes over ``num_gpus`` GPUs: each GPU receives (and sends)
    (N-1)/N of it over one direction of its link, half the bidirectional figure NVIDIA states."""
    if num_gpus < 2:
        return 0.0
    return (num_gpus - 1) / num_gpus * size / (hardware["interconnect_gbps"] / 2 * 1e9)


def communication_seconds(
    strategy: str,
    *,
    total_parameters: int,
    trainable: int,
    num_gpus: int,
    micro_steps: int,
    micro_step_compute: float,
    hardware: dict,
) -> tuple[float, float, str]:
    """(seconds of communication per optimizer step, seconds left exposed, how), bf16 weights and gradients (the
    model's dtype, DeepSpeed's default ``communication_data_type``):

    - ``zero3`` / ``fsdp``: every micro-step all-gathers every parameter for the forward and again for the backward
      (the recomputation of checkpointing runs inside the backward's gather) and reduce-scatters the gradients;
      DeepSpeed prefetches and overlaps them with compute (``overlap_comm`` is on by default at stage 3,
      ``deepspeed/runtime/zero/config.py``), as FSDP2 does: only what exceeds a micro-step's compute is exposed;
    - ``zero2``: every micro-step reduce-scatters the gradients (``stage_1_and_2.py`` reduces on every backward when
      gradients are partitioned), not overlapped (``overlap_comm`` is off by default below stage 3), and after the
      optimizer step the updated bf16 weights are all-gathered;
    - ``ddp``: one all-reduce of the gradients per step (accelerate skips the sync on accumulation steps), overlapped
      with the last micro-step's backward (two thirds of its compute)."""
    weights, gradients = 2 * total_parameters, 2 * trainable
    if num_gpus < 2:
        return 0.0, 0.0, "one GPU: no communication"
    if strategy in ("zero3", "fsdp"):
        per_micro = 2 * collective_seconds(weights, num_gpus, hardware)
        per_micro += collective_seconds(gradients, num_gpus, hardware)
        exposed = micro_steps * max(0.0, per_micro - micro_step_compute)
        how = (
            f"{micro_steps} micro-steps × {per_micro * 1e3:.0f} ms (two all-gathers of the weights, one "
            f"reduce-scatter of the gradients), overlapped with a micro-step's {micro_step_compute:.2f} s of compute"
        )
        return micro_steps * per_micro, exposed, how
    if strategy == "zero2":
        reduce = collective_seconds(gradients, num_gpus, hardware)
        gather = collective_seconds(gradients, num_gpus, hardware)
        seconds = micro_steps * reduce + gather
        how = (
            f"{micro_steps} micro-steps × {reduce * 1e3:.0f} ms reduce-scatter of the gradients, then "
            f"{gather * 1e3:.0f} ms all-gather of the updated weights; not overlapped"
        )
        return seconds, seconds, how
    all_reduce = 2 * collective_seconds(gradients, num_gpus, hardware)
    exposed = max(0.0, all_reduce - 2 / 3 * micro_step_compute)
    return (
        all_reduce,
        exposed,
        f"one all-reduce of the gradients ({all_reduce * 1e3:.0f} ms), overlapped with backward",
    )


def training_terms(
    config,
    matmuls: dict,
    rows: list[dict],
    *,
    micro_batch: int,
    micro_steps: int,
    frozen: set[str],
    lora: bool,
    adapters: int,
    checkpointing: bool,
    strategy: str,
    total_parameters: int,
    trainable: int,
    num_gpus: int,
    hardware: dict,
    assumed_mfu: float,
    padded_tokens: float = 0.0,
    what: str = "rows",
) -> list[dict]:
    """The terms of the training part of one optimizer step: ``micro_steps`` micro-batches of ``micro_batch`` rows
    like ``rows`` (the measured rows, averaged), each padded by ``padded_tokens`` on average (module docstring)."""
    rate = _flops_rate(hardware, assumed_mfu)

    def mean(values) -> float:
        return sum(values) / len(values)

    shape = {"frozen": frozen, "lora": lora}
    model = mean([training_flops(config, matmuls, row, **shape, adapters=adapters) for row in rows])
    kernels = mean([recomputed_flops(config, matmuls, row, **shape, checkpointing=False) for row in rows])
    checkpoint = 0.0
    if checkpointing:
        checkpoint = mean([recomputed_flops(config, matmuls, row, **shape, checkpointing=True) for row in rows])
        checkpoint -= kernels
    samples = micro_batch * micro_steps
    at = f"at {assumed_mfu:.0%} of {hardware['peak_tflops']:g} TFLOPS"
    terms = [
        term(
            "training forward and backward",
            samples * model / rate,
            ASSUMED,
            f"{samples:g} {what} × {model / 1e12:.1f} TFLOPs (model FLOPs) {at}",
        ),
        term(
            "attention's and the LM head's recompute in backward",
            samples * kernels / rate,
            ASSUMED,
            f"{samples:g} {what} × {kernels / 1e12:.2f} TFLOPs {at}",
        ),
    ]
    if checkpointing:
        terms.append(
            term(
                "activation checkpointing's recompute",
                samples * checkpoint / rate,
                ASSUMED,
                f"{samples:g} {what} × {checkpoint / 1e12:.1f} TFLOPs: every layer's forward again, {at}",
            )
        )
    padding = 0.0
    if padded_tokens > 0:
        padding = padding_flops(matmuls, padded_tokens, adapters=adapters, checkpointing=checkpointing, **shape)
        terms.append(
            term(
                "padding",
                samples * padding / rate,
                ASSUMED,
                f"{samples:g} {what} × {padded_tokens:,.0f} padded tokens the LLM computes too, {at}",
            )
        )
    micro_compute = micro_batch * (model + kernels + checkpoint + padding) / rate
    communication, exposed, how = communication_seconds(
        strategy,
        total_parameters=total_parameters,
        trainable=trainable,
        num_gpus=num_gpus,
        micro_steps=micro_steps,
        micro_step_compute=micro_compute,
        hardware=hardware,
    )
    if num_gpus > 1:
        overlapped = exposed < communication
        terms.append(
            term(
                f"{STRATEGY_NAMES[strategy]} communication" + (" (exposed)" if overlapped else ""),
                exposed,
                ASSUMED if overlapped else FORMULA,
                f"{communication:.2f} s: {how}, at {hardware['interconnect_gbps'] / 2:g} GB/s a direction",
            )
        )
    held = trainable / num_gpus if strategy in ("zero2", "zero3", "fsdp") else trainable
    terms.append(
        term(
            "optimizer step",
            OPTIMIZER_BYTES_PER_PARAMETER * held / (hardware["hbm_tbps"] * 1e12),
            FORMULA,
            f"{held / 1e9:.2f} B parameters × {OPTIMIZER_BYTES_PER_PARAMETER} bytes read and written at "
            f"{hardware['hbm_tbps']:g} TB/s",
        )
    )
    return terms


def padding_flops(
    matmuls: dict, padded_tokens: float, *, frozen: set[str], lora: bool, adapters: int, checkpointing: bool
) -> float:
    """FLOPs of the padded positions of a row: the LLM's linear layers run over them as over any token (forward,
    backward and, with checkpointing, the forward again up to each layer's last projection); attention does not
    (flash-attention 2 unpads the batch, transformers' ``_flash_attention_forward``), nor the loss (no label)."""
    factor = _factors(frozen, lora)["llm"]
    flops = (factor * matmuls["llm"] + 6 * adapters) * padded_tokens
    if checkpointing and factor > 2:
        flops += 2 * (matmuls["llm"] - matmuls.get("text_last", 0)) * padded_tokens
    return flops


def summary(terms: list[dict], samples_per_step: float, rows_per_epoch: int | None, rows_source: str | None) -> dict:
    """``{step_seconds, samples_per_step, epoch_hours, terms, ...}``: the step is the sum of the terms."""
    step = sum(item["seconds"] for item in terms)
    steps_per_epoch = math.ceil(rows_per_epoch / samples_per_step) if rows_per_epoch else None
    return {
        "step_seconds": step,
        "samples_per_step": samples_per_step,
        "samples_per_second": samples_per_step / step if step else None,
        "hours_per_1000_samples": 1000 / samples_per_step * step / 3600,
        "rows_per_epoch": rows_per_epoch,
        "rows_source": rows_source,
        "steps_per_epoch": steps_per_epoch,
        "epoch_hours": steps_per_epoch * step / 3600 if steps_per_epoch else None,
        "terms": terms,
    }


def sft_time(
    config,
    matmuls: dict,
    rows: list[dict],
    *,
    per_device_batch: int,
    accumulation: int,
    num_gpus: int,
    padding_share: float | None,
    rows_per_epoch: int | None = None,
    rows_source: str | None = None,
    **training,
) -> dict:
    """One SFT optimizer step (module docstring); ``padding_share``: padded tokens over tokens computed for the recipe
    as configured (None: not known, counted as none). ``training``: :func:`training_terms`' shape and hardware."""
    mean_tokens = sum(row["tokens"] for row in rows) / len(rows)
    share = padding_share or 0.0
    padded = mean_tokens * share / (1 - share) if share < 1 else 0.0
    terms = training_terms(
        config,
        matmuls,
        rows,
        micro_batch=per_device_batch,
        micro_steps=accumulation,
        num_gpus=num_gpus,
        padded_tokens=padded,
        **training,
    )
    samples = per_device_batch * accumulation * num_gpus
    return summary(terms, samples, rows_per_epoch, rows_source) | {"sample": "row"}


# ---------------------------------------------------------------------------------------------------------------- GRPO


def forward_flops(config, matmuls: dict, row: dict) -> float:
    """FLOPs of a forward pass without gradients over ``row`` (2 per weight and position, attention as the training
    count has it), the LM head over its ``labelled`` positions."""
    return training_flops(config, matmuls, row, frozen=set(NO_GRADIENT))


def expected_longest(budgets: list[int], weights: list[float], draws: int) -> float:
    """The expected largest of ``draws`` budgets drawn with ``weights``: what the longest completion of a batch of
    ``draws`` prompts reaches when each completion runs to its kind's budget."""
    order = sorted(range(len(budgets)), key=lambda i: budgets[i])
    total = sum(weights)
    expected, below = 0.0, 0.0
    for index in order:
        share = weights[index] / total
        expected += budgets[index] * ((below + share) ** draws - below**draws)
        below += share
    return expected


def prompts_per_micro_batch(per_device_batch: int, completions: int, generations: int) -> float:
    """The distinct prompts a training micro-batch holds on average when a rank's generation batch of
    ``completions`` rows has each prompt's ``generations`` rows side by side (``share_prompt_in_training`` groups
    them so; ``recipes.training.grpo_trainer.group_by_prompt``) and is cut into micro-batches of
    ``per_device_batch`` rows."""
    pairs = {(row // per_device_batch, row // generations) for row in range(completions)}
    return len(pairs) / math.ceil(completions / per_device_batch)


def budget_mix(settings: dict, rows: list[dict]) -> tuple[list[int], list[float], list[str]] | None:
    """``(budgets, weights, kinds)``: each answer kind among the measured rows, its share of them and its budget of
    new tokens (capped at ``max_completion_length``); None without ``completion_budgets`` or rows with kinds."""
    cap = int(settings.get("max_completion_length", 256))
    budgets = settings.get("completion_budgets")
    kinds = Counter(row["kind"] for row in rows if row.get("kind"))
    if not budgets or not kinds:
        return None
    names = list(kinds)
    return [min(cap, int(budgets.get(kind, cap))) for kind in names], [kinds[kind] for kind in names], names


def completion_lengths(
    settings: dict, rows: list[dict], *, prompts_per_rank: int, num_gpus: int
) -> tuple[float, float, str]:
    """(decode steps of a generation batch, the completions' padded width on a rank, how they were obtained).

    Without ``completion_budgets`` every completion may run to ``max_completion_length``, and at a temperature above
    0 over a batch of completions one is assumed to: the batch's decode runs to the cap. With budgets each completion
    stops at its kind's budget (``recipes.training.grpo_data.answer_kind``, the rows' ``kind``), and the longest of a
    batch is the expected largest budget among its prompts (:func:`expected_longest`): a rank's own prompts for the
    width its log-probability and training passes are padded to; every rank's for the decode, which the step waits
    for whatever the strategy (under ZeRO-3 and FSDP transformers forces ``synced_gpus``, so every rank decodes until
    the last one ends, ``transformers/generation/utils.py``; under ZeRO-2 or DDP a rank that ends first waits at
    TRL's first gather after generating, of the completion lengths in ``GRPOTrainer._generate``, and in any case at
    its gather of the rewards in ``_calculate_rewards``, which every rank needs for the group advantages)."""
    cap = int(settings.get("max_completion_length", 256))
    budgets = settings.get("completion_budgets")
    if not budgets:
        return cap, cap, f"every completion may run to max_completion_length {cap} (assumed: one of the batch does)"
    mix = budget_mix(settings, rows)
    if mix is None:
        largest = min(cap, max(budgets.values()))
        return largest, largest, f"completion_budgets' largest, {largest} (the measured rows carry no answer kind)"
    limits, weights, names = mix
    everyone = expected_longest(limits, weights, prompts_per_rank * num_gpus)
    own = expected_longest(limits, weights, prompts_per_rank)
    shares = ", ".join(
        f"{kind} {weight / sum(weights):.0%} ≤ {limit}"
        for kind, weight, limit in zip(names, weights, limits, strict=True)
    )
    how = (
        f"completion_budgets per answer kind ({shares} tokens): the expected largest budget among "
        f"{prompts_per_rank * num_gpus} prompts of a generation batch ({prompts_per_rank} a rank)"
    )
    return everyone, own, how


def grpo_time(
    config,
    matmuls: dict,
    settings: dict,
    *,
    prompt_row: dict,
    rows: list[dict],
    per_device_batch: int,
    accumulation: int,
    num_gpus: int,
    strategy: str,
    total_parameters: int,
    trainable: int,
    frozen: set[str],
    lora: bool,
    adapters: int,
    checkpointing: bool,
    hardware: dict,
    assumed_mfu: float,
    rows_per_epoch: int | None = None,
    rows_source: str | None = None,
) -> dict:
    """One GRPO optimizer step, a sample being a prompt (TRL 1.16's ``GRPOTrainer`` with transformers generation):

    - a **generation batch** holds ``per_device_train_batch_size`` x ``steps_per_generation`` completions per GPU
      (``steps_per_generation`` defaults to the accumulation), ``num_generations`` copies of each prompt; TRL's
      ``RepeatSampler`` keeps a prompt's copies together, so a rank holds whole groups when the group size divides
      its batch; a batch is generated every ``steps_per_generation`` x ``num_iterations`` micro-steps;
    - under ZeRO-3 TRL gathers the whole model before generating (``ds3_gather_for_generation``, on by default:
      ``unwrap_model_for_generation`` in ``trl/models/utils.py``), one all-gather of the bf16 weights; without the
      gather every decode step gathers every layer;
    - the **vision tower and the prefill** run over every completion's prompt (``generate`` gets one row per
      completion), or once per distinct prompt with ``share_prompt_prefill``; forward FLOPs at the assumed
      utilisation (the LM head over the last position only, as ``generate`` asks);
    - each **decode step** reads the weights the step multiplies (the LLM and the LM head, bf16; under ZeRO-3 the
      gathered full weights, on every rank) and the batch's KV cache (every completion, to the prompt's padded width
      plus the tokens so far: finished completions stay in the batch) at HBM bandwidth, or computes at the assumed
      utilisation if that is slower, plus the host's work per step (:data:`DECODE_STEP_OVERHEAD_SECONDS`); the steps
      are :func:`completion_lengths`';
    - the **old policy's log-probabilities** are a forward over the batch when the accumulation is not a multiple of
      ``steps_per_generation`` x ``num_iterations`` (``_generate_and_score_completions``: otherwise TRL reuses the
      training pass's), the **reference model's** when ``beta`` > 0;
    - **training**: every micro-step a forward and backward over ``per_device_train_batch_size`` completions, each its
      prompt plus the completions' padded width, the loss over the completion (the SFT terms: recompute,
      communication, optimizer step). With ``share_prompt_in_training`` a rank's rows are grouped by prompt before
      they are cut into micro-batches, and a micro-batch runs one packed sequence per distinct prompt
      (:func:`prompts_per_micro_batch` of them): the prompt once, less its last token, then each of its completions
      with that token (``recipes.training.grpo_trainer.pack_by_prompt``), each completion to its own length, not the
      batch's padded width (with budgets: its kind's; the longest of a micro-batch's prompts pads the others);
      the old policy's and the reference's passes, over the batch in chunks of ``per_device_train_batch_size``
      rows, alike.

    Rewards and the group advantages are not counted (CPU work on short strings)."""
    generations = int(settings.get("num_generations", 8))
    iterations = int(settings.get("num_iterations", 1))
    if settings.get("generation_batch_size"):
        per_generation = int(settings["generation_batch_size"]) // (per_device_batch * num_gpus)
    else:
        per_generation = int(settings.get("steps_per_generation") or accumulation)
    completions = per_device_batch * per_generation  # a rank's generation batch
    prompts_per_rank = max(1, math.ceil(completions / generations))
    share_prefill = bool(settings.get("share_prompt_prefill", False))
    prefills = prompts_per_rank if share_prefill else completions
    batches_per_step = accumulation / (per_generation * iterations)
    rate = _flops_rate(hardware, assumed_mfu)
    bandwidth = hardware["hbm_tbps"] * 1e12
    decode_steps, width, lengths_how = completion_lengths(
        settings, rows, prompts_per_rank=prompts_per_rank, num_gpus=num_gpus
    )
    prompt = prompt_row["tokens"]
    terms = []
    per_batch = f"{batches_per_step:g} generation batch(es) a step"

    def per_step(seconds: float) -> float:
        return batches_per_step * seconds

    use_vllm = bool(settings.get("use_vllm", False))
    gathered = strategy == "zero3" and bool(settings.get("ds3_gather_for_generation", True))
    if gathered:
        gather = collective_seconds(2 * total_parameters, num_gpus, hardware)
        terms.append(
            term(
                "ZeRO-3 gather of the model for generation",
                per_step(gather),
                FORMULA,
                f"{per_batch} × one all-gather of {2 * total_parameters / 1e9:.1f} GB of bf16 weights "
                f"({gather * 1e3:.0f} ms)",
            )
        )
    text_only = {**prompt_row, "vision_patches": 0, "visual_tokens": 0, "windows": [], "labelled": 1}
    llm_prefill = forward_flops(config, matmuls, text_only)
    vision = forward_flops(config, matmuls, {**prompt_row, "labelled": 1}) - llm_prefill
    at = f"at {assumed_mfu:.0%} of {hardware['peak_tflops']:g} TFLOPS"
    once = "once per distinct prompt (share_prompt_prefill)" if share_prefill else "once per completion"
    if use_vllm:
        note = "vLLM generates: its prefill and decode are not modelled (text-only policies; docs/training/grpo.md)"
    else:
        note = None
        if vision > 0:
            terms.append(
                term(
                    "vision tower (generation)",
                    per_step(prefills * vision / rate),
                    ASSUMED,
                    f"{per_batch} × {prefills} prompts ({once}) × {vision / 1e12:.2f} TFLOPs {at}",
                )
            )
        terms.append(
            term(
                "prefill (generation)",
                per_step(prefills * llm_prefill / rate),
                ASSUMED,
                f"{per_batch} × {prefills} prompts of {prompt} tokens ({once}) × {llm_prefill / 1e12:.2f} TFLOPs {at}",
            )
        )
        weights = 2 * (matmuls["llm"] + matmuls.get("lm_head", 0))
        kv = kv_cache_bytes_per_token(config) * completions * (prompt + decode_steps / 2)  # the mean over the steps
        reading = (weights + kv) / bandwidth
        dims = _text_dims(config)
        step_flops = 2 * completions * (matmuls["llm"] + matmuls.get("lm_head", 0))
        step_flops += 4 * dims["layers"] * dims["q"] * completions * (prompt + decode_steps / 2)
        computing = step_flops / rate
        bound = "memory-bound" if reading >= computing else "compute-bound"
        terms.append(
            term(
                f"decode ({bound})",
                per_step(decode_steps * max(reading, computing)),
                FORMULA if reading >= computing else ASSUMED,
                f"{per_batch} × {decode_steps:.0f} steps × {max(reading, computing) * 1e3:.1f} ms (read "
                f"{weights / 1e9:.1f} GB of weights + {kv / 1e9:.1f} GB of KV cache for {completions} completions at "
                f"{hardware['hbm_tbps']:g} TB/s; {step_flops / 1e12:.2f} TFLOPs {at})",
            )
        )
        overhead = hardware["decode_step_overhead_seconds"]
        terms.append(
            term(
                "decode: the host's work per step",
                per_step(decode_steps * overhead),
                MEASURED,
                f"{per_batch} × {decode_steps:.0f} steps × {overhead * 1e3:.0f} ms (transformers' generate, measured "
                "on this project's CPU: a floor)",
            )
        )
        if strategy == "zero3" and not gathered:
            per_layer = collective_seconds(2 * total_parameters, num_gpus, hardware)
            terms.append(
                term(
                    "ZeRO-3 gathers in every decode step (ds3_gather_for_generation false)",
                    per_step((decode_steps + 1) * per_layer),
                    FORMULA,
                    f"{per_batch} × {decode_steps + 1:.0f} forwards × {per_layer * 1e3:.0f} ms",
                )
            )
    share_training = bool(settings.get("share_prompt_in_training", False))
    if share_training:  # one packed sequence per prompt of a micro-batch: the prompt once, each completion after it
        per_pass = prompts_per_micro_batch(per_device_batch, completions, generations)
        mix = budget_mix(settings, rows)
        own_length = expected_longest(*mix[:2], math.ceil(per_pass)) if mix else width
        copies = per_device_batch / per_pass
        tokens = prompt - 1 + copies * own_length
        sequence = {**prompt_row, "tokens": tokens, "labelled": copies * own_length}
        passes, what = per_pass, "packed prompts"
        shape_of = f"{per_generation * per_pass:g} packed sequences of {tokens:,.0f} tokens (share_prompt_in_training)"
    else:
        sequence = {**prompt_row, "tokens": prompt + width, "labelled": width}
        passes, what = per_device_batch, "completions"
        shape_of = f"{completions} completions of {prompt + width:.0f} tokens"
    pass_flops = per_generation * passes * forward_flops(config, matmuls, sequence)
    aligned = accumulation % (per_generation * iterations) == 0
    if not aligned:
        terms.append(
            term(
                "old policy's log-probabilities",
                per_step(pass_flops / rate),
                ASSUMED,
                f"{per_batch} × a forward over {shape_of} (the accumulation is not a multiple of "
                "steps_per_generation × num_iterations) " + at,
            )
        )
    if float(settings.get("beta", 0.0)) > 0:
        terms.append(
            term(
                "reference model's log-probabilities",
                per_step(pass_flops / rate),
                ASSUMED,
                f"{per_batch} × a forward over {shape_of} (beta > 0) " + at,
            )
        )
    terms += training_terms(
        config,
        matmuls,
        [sequence],
        micro_batch=passes,
        micro_steps=accumulation,
        frozen=frozen,
        lora=lora,
        adapters=adapters,
        checkpointing=checkpointing,
        strategy=strategy,
        total_parameters=total_parameters,
        trainable=trainable,
        num_gpus=num_gpus,
        hardware=hardware,
        assumed_mfu=assumed_mfu,
        what=what,
    )
    prompts_per_step = accumulation * per_device_batch * num_gpus / (generations * iterations)
    generation = {
        "completions_per_generation_batch": completions,
        "prompts_per_rank": prompts_per_rank,
        "prefills_per_generation_batch": prefills if not use_vllm else None,
        "share_prompt_prefill": share_prefill,
        "decode_steps": decode_steps if not use_vllm else None,
        "completion_width": width,
        "share_prompt_in_training": share_training,
        "training_prompts_per_micro_batch": passes if share_training else None,
        "training_sequence_tokens": sequence["tokens"],
        "lengths": lengths_how,
        "generation_batches_per_step": batches_per_step,
        "gathered_for_generation": gathered,
        "synced_decode": strategy in ("zero3", "fsdp") and num_gpus > 1,
        "note": note,
    }
    return summary(terms, prompts_per_step, rows_per_epoch, rows_source) | {"sample": "prompt", "grpo": generation}
