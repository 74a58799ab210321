"""The plan as markdown tables."""

from recipes.training.plan.memory import GB


def render_grpo(grpo: dict, memory_by_strategy: dict) -> list[str]:
    lines = [
        "",
        (
            f"GRPO: {grpo['num_generations']} completions per prompt of at most {grpo['max_completion_length']} "
            f"tokens (sequences of {grpo['sequence_tokens']} tokens with the p99 prompt), "
            f"{grpo['generation_batch_per_gpu']} sequences generated per GPU at a time by {grpo['generation']}, "
            f"{grpo['loss_type']} loss, beta {grpo['beta']:g}: "
            + ("a reference model" if grpo["reference_model"] else "no reference model")
        ),
        "",
        (
            f"GRPO prompts (clips as {grpo['frames_as']}): p99 {grpo['prompt_tokens_p99']} tokens, of which "
            f"{grpo['prompt_visual_tokens_p99']} visual ({grpo['prompt_vision_patches_p99']} vision patches); "
            f"transformers generation holds a KV cache of {_gb(grpo['kv_cache'])} GB per GPU and prefills its batch "
            f"with {_gb(grpo['prefill'])} GB of activations"
        ),
        "",
        "| GRPO memory per GPU (GB) | reference model | activations | generation | vLLM pool | total | fits |",
        "| --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for strategy, memory in memory_by_strategy.items():
        lines.append(
            f"| {strategy} | {_gb(memory['reference_model'])} | {_gb(memory['activations'])} | "
            f"{_gb(memory['generation'])} | {_gb(memory['vllm_pool'])} | {_gb(memory['total'])} | "
            f"{'yes' if memory['fits'] else 'NO'} |"
        )
    vllm = grpo["vllm"]
    if vllm:
        lines += [
            "",
            (
                f"vLLM colocate: a pool of {_gb(vllm['pool'])} GB per GPU for its weights ({_gb(vllm['weights'])} GB) "
                f"and the KV cache of one generation batch ({_gb(vllm['kv_cache'])} GB): "
                + (
                    "it holds them"
                    if vllm["holds_a_generation_batch"]
                    else "TOO SMALL, raise vllm_gpu_memory_utilization"
                )
                + ("; sleep mode frees it during training" if vllm["sleep_mode"] else "; held during training too")
            ),
        ]
    return lines


def _gb(value: float) -> str:
    return f"{value / GB:.1f}"


def _value(value: float | None, unit: str) -> str:
    """A measured or predicted figure in the unit a reader compares it in."""
    if value is None:
        return "-"
    if unit == "FLOPs":
        return f"{value / 1e12:.3f} TFLOPs" if value >= 1e11 else f"{value / 1e9:.2f} GFLOPs"
    if value >= 1e8:
        return f"{value / GB:.3f} GB"
    return f"{value:,.0f} B" if value >= 100 else f"{value:.2f} B"


def render_measurement(measurement: dict) -> list[str]:
    """The measured step beside the plan's formulas (``recipes.training.plan.comparison.compare``)."""
    if "figures" not in measurement:
        return ["", f"measurement: {measurement.get('skipped', 'not run')}"]
    machine = measurement["machine"]
    depths = ", ".join(f"{name} {layers}+{blocks}" for name, (layers, blocks) in measurement["depths"].items())
    lines = [
        "",
        (
            f"measured here ({machine['cpu']}, {machine['cores']} cores, {machine['date']}; torch {machine['torch']}, "
            f"transformers {machine['transformers']}, TRL {machine['trl']}): one step of {measurement['rows']} "
            f"({measurement['tokens']} tokens, {measurement['labelled_tokens']} labelled, "
            f"{measurement['vision_patches']} vision patches) at the real widths, depths (text layers + vision "
            f"blocks) {depths}; arithmetic {measurement['arithmetic']}; {measurement['seconds']:.0f} s, "
            f"peak resident memory {measurement['peak_resident_bytes'] / GB:.1f} GB"
        ),
        "",
        "| figure | measured (CPU, sdpa) | predicted (same) | measured / predicted | plan on a GPU |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name, figure in measurement["figures"].items():
        ratio = f"{figure['ratio']:.3f}" if figure["ratio"] is not None else "-"
        gpu = figure.get("plan_gpu", figure.get("model_flops"))
        gpu_text = _value(gpu, figure["unit"]) if gpu is not None else ""
        if "model_flops" in figure:
            gpu_text += " (model FLOPs)"
        lines.append(
            f"| {name} | {_value(figure['measured'], figure['unit'])} | "
            f"{_value(figure['predicted'], figure['unit'])} | {ratio} | {gpu_text} |"
        )
    lines += [
        "",
        (
            "what a CPU cannot stand for (flash-attention's kernels, the CUDA allocator's slack, NCCL and DeepSpeed "
            "buffers, time): docs/training/planning.md"
        ),
    ]
    return lines


def _duration(seconds: float) -> str:
    return f"{seconds:.2f} s" if seconds < 60 else f"{seconds / 60:.1f} min"


def render_time(plan: dict) -> list[str]:
    """The time per optimizer step as its terms, the step and the epoch (``recipes.training.plan.timing``), the padding
    share and the loader's cores."""
    time, hardware = plan["time"], plan["time"]["hardware"]
    sample = time["sample"]
    lines = [
        "",
        (
            f"time per optimizer step on {plan['num_gpus']}× {hardware['gpu']} ({hardware['hbm_tbps']:g} TB/s, "
            f"{hardware['peak_tflops']:g} dense bf16 TFLOPS, {hardware['interconnect_gbps']:g} GB/s GPU to GPU: "
            f"{hardware['source']}) under {time['strategy']}, per GPU:"
        ),
    ]
    grpo = time.get("grpo")
    if grpo:
        prefill = (
            f"prefill {grpo['prefills_per_generation_batch']} times"
            if grpo["prefills_per_generation_batch"] is not None
            else "generated by vLLM"
        )
        decode = f"{grpo['decode_steps']:.0f} decode steps" if grpo["decode_steps"] is not None else "vLLM's decode"
        synced = "no synced decode"
        if grpo["synced_decode"]:
            synced = "every rank decodes until the last ends (synced_gpus)"
        lines.append(
            f"a generation batch of {grpo['completions_per_generation_batch']} completions per GPU "
            f"({grpo['prompts_per_rank']} prompts): {prefill}, {decode} ({grpo['lengths']}), completions padded to "
            f"{grpo['completion_width']:.0f} tokens for training; {synced}"
        )
        if grpo["note"]:
            lines.append(f"note: {grpo['note']}")
    lines += ["", "| term | seconds per step | source | how |", "| --- | ---: | --- | --- |"]
    for item in time["terms"]:
        lines.append(f"| {item['name']} | {item['seconds']:.2f} | {item['source']} | {item['how']} |")
    lines.append(f"| step | {time['step_seconds']:.2f} | | {time['samples_per_step']:g} {sample}s |")
    rate = time["samples_per_second"]
    summary = (
        f"step {_duration(time['step_seconds'])} for {time['samples_per_step']:g} {sample}s: {rate:.2f} {sample}s/s, "
        f"{time['hours_per_1000_samples']:.3g} h per 1,000 {sample}s"
    )
    if time["epoch_hours"] is not None:
        summary += (
            f"; an epoch of {time['rows_per_epoch']:,} {sample}s ({time['rows_source']}): {time['steps_per_epoch']:,} "
            f"steps, {time['epoch_hours']:.3g} h"
        )
    else:
        summary += "; the epoch's hours need the data or --rows N"
    lines += ["", summary]
    padding = plan.get("padding")
    if padding:
        lines.append(
            f"padding: {padding['share']:.1%} of the tokens computed as configured ("
            f"{'grouped by length' if padding['grouped'] else 'random batches'}); "
            f"{padding['share_random']:.1%} in random batches, "
            f"{padding['share_grouped']:.1%} grouped by length ({padding['rows_measured']} rows measured)"
        )
    loader = plan.get("loader")
    if loader:
        available = loader["cores_available"]
        lines.append(
            f"loader: {loader['cpu_seconds_per_sample']:.3f} CPU s per row at {rate:.2f} rows/s needs "
            f"{loader['cores_needed']:.1f} cores, {loader['cores_per_gpu_needed']:.1f} per GPU with its rank's own "
            f"process ({loader['workers_per_gpu']} dataloader workers per GPU)"
            + (f"; this machine has {available}" if available is not None else "")
        )
        if loader.get("warning"):
            lines.append(f"warning: {loader['warning']}")
    benchmark = "benchmarks/gpu_grpo.py" if grpo else "benchmarks/gpu_sft.py"
    lines.append(f"these are predictions until {benchmark} has measured them on a GPU (docs/training/planning.md)")
    return lines


def render(plans: list[dict]) -> str:
    lines = []
    for plan in plans:
        lines.append(
            f"## {plan['recipe']} — stage {plan['stage']}: {plan['model']} on {plan['num_gpus']} GPU(s) of "
            f"{plan['gpu_memory_gb']:g} GB, {plan['per_device_batch']} samples per GPU, a global batch of "
            f"{plan['global_batch']} ({plan['gradient_accumulation_steps']} accumulation steps), checkpointing "
            f"{'on' if plan['checkpointing'] else 'off'}"
        )
        if plan["synthetic_frames"]:
            width, height = plan["synthetic_frames"]
            lines.append(f"note: synthetic rows ({width}x{height} frames), not the mixture's data")
        if plan["processor_note"]:
            lines.append(f"note: {plan['processor_note']}")
        if plan["max_length"]:
            bound = plan["max_length"]
            lines.append(
                f"max_length {bound['value']}: {bound['rows_over']} of the {bound['rows_measured']} rows measured "
                f"({bound['share']:.1%}) are longer and would be refused (never cut); memory is planned on the rest"
            )
        lines += [
            "",
            "| source | rows | tokens p50 / p90 / p99 / max | visual tokens p50 / max | vision patches max |",
        ]
        lines.append("| --- | ---: | ---: | ---: | ---: |")
        for row in plan["tokens"]:
            t, v, p = row["tokens"], row["visual_tokens"], row["vision_patches"]
            lines.append(
                f"| {row['source']} | {row['rows']} | {t['p50']} / {t['p90']} / {t['p99']} / {t['p100']} | "
                f"{v['p50']} / {v['p100']} | {p['p100']} |"
            )
        lines += ["", "| parameters | trainable | frozen |", "| --- | ---: | ---: |"]
        for group, counts in plan["parameters"].items():
            lines.append(f"| {group} | {counts['trainable']:,} | {counts['frozen']:,} |")
        total_trainable = sum(c["trainable"] for c in plan["parameters"].values())
        total_frozen = sum(c["frozen"] for c in plan["parameters"].values())
        lines.append(f"| total | {total_trainable:,} | {total_frozen:,} |")
        lines += [
            "",
            "| memory per GPU (GB) | model states | activations | reserved | total | fits |",
            "| --- | ---: | ---: | ---: | ---: | --- |",
        ]
        for strategy, memory in plan["memory"].items():
            lines.append(
                f"| {strategy} ({memory['source']}) | {_gb(memory['model_states'])} | {_gb(memory['activations'])} | "
                f"{_gb(memory['reserved'])} | {_gb(memory['total'])} | {'yes' if memory['fits'] else 'NO'} |"
            )
        lines += ["", "| activations per GPU (GB, estimate) | |", "| --- | ---: |"]
        for label, value in plan["activations"].items():
            lines.append(f"| {label} | {_gb(value)} |")
        if plan.get("grpo"):
            lines += render_grpo(plan["grpo"], plan["memory"])
        if plan.get("measurement"):
            lines += render_measurement(plan["measurement"])
        if plan.get("time"):
            lines += render_time(plan)
        if plan.get("sources"):
            lines += ["", "| figure | how it was obtained |", "| --- | --- |"]
            lines += [f"| {figure} | {how} |" for figure, how in plan["sources"].items()]
        throughput = plan["throughput"]
        lines += [
            "",
            (
                f"throughput at an assumed {throughput['assumed_mfu']:.0%} MFU of {throughput['peak_tflops']:g} "
                f"TFLOPS per GPU: {throughput['samples_per_second']:.1f} samples/s, "
                f"{throughput['tokens_per_second']:,.0f} tokens/s ({throughput['flops_per_median_sample'] / 1e12:.1f} "
                f"TFLOPs per median sample of {throughput['median_tokens']} tokens, the loss over "
                f"{throughput.get('median_labelled_tokens')} of them): the training compute alone, the step's other "
                "terms are in the time table above"
            ),
            "",
        ]
    if plans:  # one launch line for the recipe, one rank per planned GPU
        lines += [f"launch: {plans[0]['launch']}", ""]
    return "\n".join(lines)
