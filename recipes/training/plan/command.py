"""``sureon plan``: the command line, and one plan per stage of a recipe."""

import argparse
import json
from pathlib import Path

from builders.arguments import float_range, int_range, positive_float, positive_int
from builders.errors import InputError
from recipes.training.launch import (
    DEFAULT_GPUS,
    DEFAULT_PER_DEVICE_BATCH,
    accumulation_for,
    hardware_gpus,
    launch_line,
    launch_strategy,
)
from recipes.training.plan.comparison import compare
from recipes.training.plan.flops import matmul_parameters, training_flops
from recipes.training.plan.grpo import grpo_plan
from recipes.training.plan.measure import ARITHMETIC, MEASURE_BATCH, machine, measure_stage
from recipes.training.plan.memory import (
    GB,
    RESERVED_BYTES,
    STRATEGIES,
    activation_bytes,
    deepspeed_estimate,
    model_state_bytes,
    parts_without_activations,
)
from recipes.training.plan.parameters import (
    block_parameters,
    largest_layer_parameters,
    meta_model,
    parameter_counts,
)
from recipes.training.plan.recipe import (
    check_data_paths,
    checkpointing_on,
    frozen_groups,
    is_grpo,
    lora_settings,
    planned_model,
    read_recipe,
    recipe_stages,
)
from recipes.training.plan.render import render
from recipes.training.plan.timing import grpo_time, hardware_figures, sft_time
from recipes.training.plan.tokens import (
    measure_grpo_mixture,
    measure_grpo_synthetic,
    measure_mixture,
    measure_synthetic,
    plan_processor,
    token_table,
)
from recipes.training.recipe_file import GRPO, SCRIPTS, SFT


def add_arguments(parser) -> None:
    parser.add_argument("--config", required=True, type=Path, help="a training recipe (recipes/<model>/sft/*.yaml)")
    parser.add_argument(
        "--num-gpus",
        type=positive_int,
        help=f"GPUs the run shards over (default: the recipe's hardware, else {DEFAULT_GPUS}); the accumulation that "
        "makes a recipe's global_batch_size and the launch line follow from it",
    )
    parser.add_argument(
        "--gpu-memory", type=positive_float, default=141, help="memory per GPU in GB (default 141, H200)"
    )
    parser.add_argument("--samples", type=positive_int, default=256, help="rows measured per stage (seeded sample)")
    parser.add_argument("--processor", help="a local processor folder to count tokens with (default: the recipe's)")
    parser.add_argument(
        "--synthetic-frames",
        metavar="WxH",
        type=frame_size,
        help="measure synthetic clips and images of this size instead of the mixture's rows (data not built yet)",
    )
    hardware = parser.add_argument_group(
        "hardware",
        "the GPU's figures the time per step is predicted at: the GPU the recipe's hardware names (H200, H100 SXM: "
        "NVIDIA's datasheets), else an H200's; each option replaces one",
    )
    hardware.add_argument("--peak-tflops", type=positive_float, help="dense bf16 peak per GPU (H200, H100: 989)")
    hardware.add_argument("--hbm-tbps", type=positive_float, help="memory bandwidth per GPU, TB/s (H200: 4.8)")
    hardware.add_argument(
        "--interconnect-gbps",
        type=positive_float,
        help="GPU-to-GPU bandwidth per GPU, both directions, GB/s (NVLink on H200 / H100: 900; over several machines "
        "give the network's per GPU)",
    )
    hardware.add_argument(
        "--decode-step-overhead-ms",
        type=positive_float,
        help="the host's work per decode step of GRPO's generation (default: measured, docs/training/planning.md)",
    )
    parser.add_argument(
        "--rows",
        type=positive_int,
        help="rows (GRPO: prompts) in an epoch of each stage, for its hours (default: the mixture's; without data "
        "the plan gives hours per 1,000 samples)",
    )
    parser.add_argument(
        "--assumed-mfu",
        type=float_range(0, 1, low_open=True),
        default=0.4,
        help="MFU assumed for the throughput estimate (a share of the peak, above 0 and at most 1)",
    )
    parser.add_argument("--seed", type=int_range(0, 2**32 - 1), default=42)
    parser.add_argument("--json", type=Path, help="also write the plan as JSON here")
    measure = parser.add_argument_group(
        "measurement",
        "check the plan's FLOPs and memory against one training step of the recipe at its real widths, depth cut, "
        "on this machine (docs/training/planning.md): about 5 minutes and 12 GB for Qwen3-VL-8B on 2 CPU cores",
    )
    measure.add_argument(
        "--measure",
        action="store_true",
        help="measure each SFT stage's step here and print it beside the plan's figures (JSON: `measurement`)",
    )
    measure.add_argument(
        "--measure-batch",
        type=positive_int,
        default=MEASURE_BATCH,
        help=f"rows per measured step (default {MEASURE_BATCH}; the per-token figures do not depend on it, and each "
        "8-frame clip adds about 2 GB at the 8B's widths)",
    )
    measure.add_argument(
        "--measure-arithmetic",
        choices=ARITHMETIC,
        default="skip",
        help="skip (default): matrix products answer zeros of their shape, FLOPs and bytes are unchanged and a step "
        "takes seconds; compute: multiply for real (hours in bf16 on a CPU without bf16 instructions)",
    )


def run(args) -> int:
    if args.processor and not Path(args.processor).is_dir():
        raise InputError(
            f"--processor {args.processor}: no such folder; give a local processor folder (tokenizer_config.json ...) "
            "or leave it out to count with the recipe's"
        )
    if args.json is not None:
        check_json_output(args.json, args.config)
    plans = plan_recipe(
        args.config,
        num_gpus=args.num_gpus,
        gpu_memory_gb=args.gpu_memory,
        samples=args.samples,
        processor_path=args.processor,
        synthetic_frames=args.synthetic_frames,
        peak_tflops=args.peak_tflops,
        hbm_tbps=args.hbm_tbps,
        interconnect_gbps=args.interconnect_gbps,
        decode_step_overhead_ms=args.decode_step_overhead_ms,
        rows=args.rows,
        assumed_mfu=args.assumed_mfu,
        seed=args.seed,
        measure=args.measure,
        measure_batch=args.measure_batch,
        measure_arithmetic=args.measure_arithmetic,
    )
    print(render(plans))
    if args.json:
        from builders.outputs import write_owned_file

        write_owned_file(
            args.json, json.dumps(plans, indent=1, default=str), kind=PLAN_JSON, overwrite=True, option="--json"
        )
    return 0


PLAN_JSON = "sureon plan --json"  # the kind of file --json writes: it replaces only a plan sureon wrote there


def check_json_output(path: Path, recipe_path: Path) -> None:
    """Refuse, before planning, a ``--json`` that would cost an input: a path at, inside or around the data or model
    the recipe names (the recipe itself, like every path on the command line, is checked by ``sureon`` before the
    command starts), or a file sureon did not write (a plan it wrote is replaced)."""
    from builders.outputs import check_file_replaceable, check_output_location

    recipe = read_recipe(recipe_path)
    named = {"model_name_or_path": recipe.get("model_name_or_path")}
    for stage in recipe_stages(recipe):
        for number, entry in enumerate(stage["mixture"]):
            named[f"{stage['name']} dataset_mixture[{number}]"] = (
                entry.get("path") if isinstance(entry, dict) else entry
            )
    # what does not exist here (a Hub id, data not built yet) is passed over
    check_output_location(path, {f"{key} of {recipe_path}": value for key, value in named.items() if value}, "--json")
    check_file_replaceable(path, kind=PLAN_JSON, overwrite=True, option="--json")


def parse_size(text: str) -> tuple[int, int]:
    """``768x432`` -> ``(768, 432)``, both positive."""
    try:
        width, height = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise InputError(f"--synthetic-frames {text!r}: give WIDTHxHEIGHT, e.g. 768x432") from None
    if width < 1 or height < 1:
        raise InputError(f"--synthetic-frames {text!r}: width and height must be positive, e.g. 768x432")
    return width, height


def frame_size(text: str) -> tuple[int, int]:
    """:func:`parse_size` as an argparse type: a bad size is refused with the option's name, before anything runs."""
    try:
        return parse_size(text)
    except InputError:
        raise argparse.ArgumentTypeError(f"{text!r} is not WIDTHxHEIGHT with positive sizes, e.g. 768x432") from None


def plan_recipe(
    recipe_path: Path,
    *,
    num_gpus: int | None = None,
    gpu_memory_gb: float = 141,
    samples: int = 256,
    processor_path: str | None = None,
    synthetic_frames: tuple[int, int] | None = None,
    peak_tflops: float | None = None,
    hbm_tbps: float | None = None,
    interconnect_gbps: float | None = None,
    decode_step_overhead_ms: float | None = None,
    rows: int | None = None,
    assumed_mfu: float = 0.4,
    seed: int = 42,
    measure: bool = False,
    measure_batch: int = MEASURE_BATCH,
    measure_arithmetic: str = "skip",
) -> list[dict]:
    """One plan per stage of the recipe (see the module docstring for what each figure is); with ``measure``, each
    SFT stage's figures beside one measured step (:mod:`recipes.training.plan.measure`)."""
    from recipes.training.architectures import local_config

    recipe = read_recipe(recipe_path)
    if num_gpus is None:  # the recipe's hardware (4× H200 ...), else the shipped recipes' count
        num_gpus = hardware_gpus(recipe.get("hardware")) or DEFAULT_GPUS
    if num_gpus < 1:
        raise InputError("--num-gpus must be at least 1")
    if not synthetic_frames:
        check_data_paths(recipe_path, recipe)
    model_name, model_note = planned_model(Path(recipe_path), recipe["model_name_or_path"])
    config = local_config(model_name)
    model = meta_model(config)
    largest_layer = largest_layer_parameters(model)
    largest_block, root_unit = block_parameters(model)
    matmuls = matmul_parameters(model)
    stages = recipe_stages(recipe)
    script = SCRIPTS[GRPO if any(is_grpo(stage["settings"]) for stage in stages) else SFT]
    lora_run = lora_settings(stages[0]["settings"]) is not None
    launched = launch_strategy(recipe.get("hardware"), lora=lora_run, num_gpus=num_gpus)
    launch = launch_line(recipe_path, script=script, num_gpus=num_gpus, strategy=launched)
    hardware = hardware_figures(
        recipe.get("hardware"),
        peak_tflops=peak_tflops,
        hbm_tbps=hbm_tbps,
        interconnect_gbps=interconnect_gbps,
        decode_step_overhead_ms=decode_step_overhead_ms,
    )
    peak_tflops = hardware["peak_tflops"]
    plans = []
    for stage in stages:
        settings = stage["settings"]
        frozen, lora = frozen_groups(settings), lora_settings(settings)
        processor, note = plan_processor(model_name, processor_path, settings)
        note = "; ".join(n for n in (model_note, note) if n) or None
        # A GRPO stage's rows are its prompts as the GRPO trainer encodes them (the answers are generated).
        grpo_stage = is_grpo(settings)
        if synthetic_frames:
            count_tokens = measure_grpo_synthetic if grpo_stage else measure_synthetic
            counts = count_tokens(processor, settings, synthetic_frames)
        else:
            count_tokens = measure_grpo_mixture if grpo_stage else measure_mixture
            counts = count_tokens(processor, stage["mixture"], settings, samples, seed)
        parameters = parameter_counts(model, frozen, lora)
        trainable = sum(group["trainable"] for group in parameters.values())
        frozen_count = sum(group["frozen"] for group in parameters.values())
        batch = int(settings.get("per_device_train_batch_size", DEFAULT_PER_DEVICE_BATCH))
        # the accumulation the launch derives from the global batch on the planned GPUs (recipes.training.launch)
        where = f"training recipe {recipe_path}, stage {stage['name']!r}, on {num_gpus} GPU(s) (--num-gpus)"
        steps = accumulation_for(settings, num_gpus, where=where) or int(
            settings.get("gradient_accumulation_steps", 1)
        )
        # A row longer than the recipe's max_length is refused by the collator (one masked token trains in its place):
        # it is counted, and the memory is planned on the rows that train.
        bound = max_length_plan(
            settings, counts, grpo_stage, where=f"training recipe {recipe_path}, stage {stage['name']!r}"
        )
        measured = counts
        if bound is not None:
            counts = [row for row in counts if row["tokens"] <= bound["value"]]
        # The batch is padded to its longest row: plan on p99 rows (the longest one is shown too).
        by_tokens = sorted(counts, key=lambda c: c["tokens"])
        typical = by_tokens[min(len(by_tokens) - 1, int(0.99 * len(by_tokens)))]
        longest = by_tokens[-1]
        checkpointing = checkpointing_on(settings)
        no_grad = parts_without_activations(frozen, lora is not None)
        head_trains = "llm" not in frozen and lora is None

        activations = {
            f"{label}, checkpointing {'on' if on else 'off'}": micro_batch_activations(
                config, row, batch, checkpointing=on, frozen=no_grad, head_trains=head_trains
            )
            for label, row in (("p99 rows", typical), ("longest row", longest))
            for on in (True, False)
        }
        recipe_activation = max(
            micro_batch_activations(
                config, row, batch, checkpointing=checkpointing, frozen=no_grad, head_trains=head_trains
            )
            for row in (typical, longest)
        )
        memory = {}
        for strategy in STRATEGIES:
            states = model_state_bytes(
                strategy,
                trainable,
                frozen_count,
                num_gpus,
                largest_layer=largest_layer,
                largest_block=largest_block,
                root_unit=root_unit,
            )
            source = "formula"
            if strategy != "fsdp" and not frozen_count:
                estimate = deepspeed_estimate(strategy, trainable, num_gpus, largest_layer)
                if estimate is not None:
                    states, source = estimate, "DeepSpeed estimator"
            total = states + recipe_activation + RESERVED_BYTES
            memory[strategy] = {
                "model_states": states,
                "source": source,
                "activations": recipe_activation,
                "reserved": int(RESERVED_BYTES),
                "total": total,
                "fits": total <= gpu_memory_gb * GB,
            }
        grpo = None
        if grpo_stage:
            grpo = grpo_plan(
                config,
                {**settings, "gradient_accumulation_steps": steps},  # its generation batch follows the accumulation
                memory,
                prompt_row=typical,
                total_parameters=trainable + frozen_count,
                num_gpus=num_gpus,
                gpu_memory_gb=gpu_memory_gb,
                checkpointing=checkpointing,
                frozen=no_grad,
                lora=lora is not None,
            )
            memory = grpo.pop("memory")
        median = sorted(counts, key=lambda c: c["tokens"])[len(counts) // 2]
        if grpo_stage:  # trained on the prompt and its completion, the loss over the completion
            completion = grpo["max_completion_length"]
            median = {**median, "tokens": median["tokens"] + completion, "labelled": completion}
        adapters = parameters.get("adapters", {}).get("trainable", 0)
        flops = training_flops(config, matmuls, median, frozen=frozen, lora=lora is not None, adapters=adapters)
        samples_per_second = num_gpus * assumed_mfu * peak_tflops * 1e12 / flops
        shape = {
            "frozen": frozen,
            "lora": lora is not None,
            "adapters": adapters,
            "checkpointing": checkpointing,
            "strategy": launched,
            "total_parameters": trainable + frozen_count,
            "trainable": trainable,
            "hardware": hardware,
            "assumed_mfu": assumed_mfu,
        }
        epoch = epoch_rows(rows, stage, processor, grpo_stage, seed=seed, synthetic=bool(synthetic_frames))
        global_batch = batch * num_gpus * steps
        padding = None if grpo_stage else padding_plan(counts, batch, global_batch, settings, seed=seed)
        if grpo_stage:
            time = grpo_time(
                config,
                matmuls,
                {**settings, "gradient_accumulation_steps": steps},
                prompt_row=typical,
                rows=counts,
                per_device_batch=batch,
                accumulation=steps,
                num_gpus=num_gpus,
                **epoch,
                **shape,
            )
        else:
            share = padding["share"] if padding else None
            time = sft_time(
                config,
                matmuls,
                counts,
                per_device_batch=batch,
                accumulation=steps,
                num_gpus=num_gpus,
                padding_share=share,
                **epoch,
                **shape,
            )
        time |= {"strategy": launched, "hardware": hardware}
        loader = loader_for(counts, time, num_gpus)
        measurement = None
        if measure and grpo_stage:
            measurement = {
                "skipped": "a GRPO stage's step is measured by the slow test (tests/test_plan_measure.py), not here"
            }
        elif measure:
            raw = measure_stage(
                recipe,
                stage,
                config,
                processor=processor,
                synthetic_frames=synthetic_frames,
                batch=measure_batch,
                arithmetic=measure_arithmetic,
                seed=seed,
            )
            measurement = compare(raw, config, frozen=frozen, lora=lora is not None)
        plans.append(
            {
                "recipe": str(recipe_path),
                "stage": stage["name"],
                "model": recipe["model_name_or_path"],
                "num_gpus": num_gpus,
                "gpu_memory_gb": gpu_memory_gb,
                "per_device_batch": batch,
                "global_batch": global_batch,
                "gradient_accumulation_steps": steps,
                "launch": launch,
                "max_length": bound,
                "checkpointing": checkpointing,
                "frozen": sorted(frozen),
                "lora": lora,
                "processor_note": note,
                "synthetic_frames": synthetic_frames,
                "tokens": token_table(measured),
                "parameters": parameters,
                "largest_layer": largest_layer,
                "memory": memory,
                "activations": activations,
                "grpo": grpo,
                "time": time,
                "padding": padding,
                "loader": loader,
                "sources": figure_sources(measurement),
                "measurement": measurement,
                "throughput": {
                    "median_labelled_tokens": median.get("labelled"),
                    "flops_per_median_sample": flops,
                    "median_tokens": median["tokens"],
                    "assumed_mfu": assumed_mfu,
                    "peak_tflops": peak_tflops,
                    "samples_per_second": samples_per_second,
                    "tokens_per_second": samples_per_second * median["tokens"],
                },
            }
        )
    return plans


def epoch_rows(rows: int | None, stage: dict, processor, grpo_stage: bool, *, seed: int, synthetic: bool) -> dict:
    """``{rows_per_epoch, rows_source}``: ``--rows`` when given, else the rows of the stage's mixture an epoch draws
    (a GRPO stage's checkable ones: ``recipes.training.grpo_data.grpo_dataset`` leaves the others out), else (synthetic
    rows, no data) None."""
    if rows:
        return {"rows_per_epoch": rows, "rows_source": "--rows"}
    if synthetic:
        return {"rows_per_epoch": None, "rows_source": None}
    from recipes.training.mixture import build_mixture, parse_mixture

    loaded, index, _ = build_mixture(parse_mixture(stage["mixture"]), seed=seed)
    if not grpo_stage:
        return {"rows_per_epoch": len(index), "rows_source": "the mixture's rows"}
    from recipes.training.grpo_data import grpo_dataset
    from recipes.training.plan.tokens import grpo_settings

    dataset, _ = grpo_dataset(loaded, index, **grpo_settings(processor, stage["settings"]))
    return {"rows_per_epoch": len(dataset), "rows_source": "the mixture's checkable rows"}


def padding_plan(counts: list[dict], batch: int, global_batch: int, settings: dict, *, seed: int) -> dict:
    """The share of the tokens an SFT step computes that is padding, for micro-batches of ``batch`` measured rows
    drawn as the trainer draws them (``recipes.training.plan.batching.padding_share``): at random, and grouped by
    length over the ``global_batch``; ``share`` is the recipe's (``train_sampling_strategy``)."""
    from recipes.training.plan.batching import grouped_in, padding_share

    grouped = grouped_in(settings)
    shares = {
        kind: padding_share(counts, batch, grouped=kind == "grouped", seed=seed, global_batch_size=global_batch)
        for kind in ("random", "grouped")
    }
    return {
        "share": shares["grouped" if grouped else "random"],
        "share_random": shares["random"],
        "share_grouped": shares["grouped"],
        "grouped": grouped,
        "rows_measured": len(counts),
    }


def loader_for(counts: list[dict], time: dict, num_gpus: int) -> dict | None:
    """The CPU cores the data loader needs to feed the predicted rate (``recipes.training.plan.batching.loader_plan``),
    from the CPU seconds the collator took per measured row; None where the rows were not timed (GRPO's prompts are
    encoded in the trainer, not by loader workers)."""
    timed = [row["cpu_seconds"] for row in counts if row.get("cpu_seconds") is not None]
    if not timed or not time.get("samples_per_second"):
        return None
    from recipes.training.plan.batching import loader_plan

    cores = machine()["cores"]  # this machine's: the plan is usually made on the machine that trains
    return loader_plan(sum(timed) / len(timed), time["samples_per_second"], num_gpus=num_gpus, cores=cores)


def max_length_plan(settings: dict, counts: list[dict], grpo_stage: bool, *, where: str) -> dict | None:
    """``{value, rows_over, rows_measured, share}`` of an SFT stage whose recipe sets ``max_length`` (None otherwise):
    the measured rows the collator would refuse (``recipes.training.collator``: never cut); a bound that refuses every
    measured row is a one-line error, since the run would train on nothing."""
    value = settings.get("max_length")
    if value is None or grpo_stage:
        return None
    over = sum(1 for row in counts if row["tokens"] > value)
    if over == len(counts):
        shortest = min(row["tokens"] for row in counts)
        raise InputError(
            f"{where}: max_length {value} refuses every one of the {len(counts)} rows measured (the shortest has "
            f"{shortest} tokens): the run would train on nothing; raise max_length, or lower max_frames / the pixel "
            "caps"
        )
    return {"value": value, "rows_over": over, "rows_measured": len(counts), "share": over / len(counts)}


def micro_batch_activations(
    config, row: dict, batch: int, *, checkpointing: bool, frozen: set[str], head_trains: bool
) -> int:
    """Activations of a micro-batch of ``batch`` rows like ``row`` (padded to it): the loss over their labelled
    positions (every token for a count that does not say)."""
    return activation_bytes(
        config,
        batch * row["tokens"],
        batch * row["vision_patches"],
        checkpointing=checkpointing,
        frozen=frozen,
        labelled=batch * row.get("labelled", row["tokens"]),
        head_trains=head_trains,
        sequence=row["tokens"],
    )


def figure_sources(measurement: dict | None) -> dict[str, str]:
    """How each figure of a plan was obtained: measured here, a formula, or assumed (``sureon plan`` prints it)."""
    checked = (
        "measured here, in the table above"
        if measurement and "figures" in measurement
        else "checked against a measured step at the real widths (docs/training/planning.md)"
    )
    return {
        "tokens": "measured here: the recipe's rows (or synthetic clips) through the training collator",
        "parameters": "measured here: the architecture built on the meta device, frozen as training freezes it",
        "model states": "formula: DeepSpeed's own estimator where the memory table says so, memory.py's elsewhere",
        "reserved memory": "assumed: an allowance for the CUDA context, NCCL buffers and fragmentation",
        "activations": f"formula, {checked}",
        "FLOPs per sample": f"formula over the measured tokens, {checked}",
        "throughput": "assumed: an MFU and the GPU's peak, not measured",
        "time per step": "each term marked in its table: formulas at the GPU's datasheet figures, an assumed MFU and "
        "overlaps, the host's work per decode step measured on a CPU; a prediction until a GPU benchmark runs",
    }
