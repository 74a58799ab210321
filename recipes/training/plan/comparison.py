"""The figures of ``sureon plan --measure`` (:func:`recipes.training.plan.measure.measure_stage`'s raw runs) beside
the plan's own formulas for the same rows and depths: per-layer figures as differences of two models one layer or
block apart, full-depth figures extrapolated per layer, each with how it was obtained."""

from recipes.training.plan.measure import CHECKPOINTING_ORDER


def _figure(measured, predicted, unit: str, how: str, **extra) -> dict:
    ratio = measured / predicted if measured is not None and predicted else None
    return {"measured": measured, "predicted": predicted, "ratio": ratio, "unit": unit, "how": how, **extra}


def compare(raw: dict, config, *, frozen: set[str], lora: bool) -> dict:
    """The raw figures of a measurement (:func:`~recipes.training.plan.measure.measure_stage`) beside the plan's
    formulas for the same rows and depths (the CPU's attention, ``sdpa``, and loss path), and what the plan assumes
    on a GPU (``plan_gpu``: flash-attention 2, the loss's CUDA path); per-layer figures are differences of two models,
    full-depth ones extrapolated per layer. Returns ``{"figures": {name: {measured, predicted, ratio, unit, how,
    ...}}, ...}`` (``--json``'s ``measurement``)."""
    from recipes.training.architectures import cut_depth_config
    from recipes.training.plan.flops import matmul_parameters, recomputed_flops, training_flops
    from recipes.training.plan.memory import (
        ATTENTION,
        loss_bytes,
        parts_without_activations,
        recompute_bytes,
        retained_bytes,
        text_layer_bytes_per_token,
        vision_block_bytes_per_patch,
    )
    from recipes.training.plan.parameters import meta_model

    runs, counts, batch = raw["runs"], raw["counts"], raw["batch"]
    no_grad = parts_without_activations(frozen, lora)
    rows = [c for c in counts if c["tokens"]]
    tokens = sum(c["tokens"] for c in rows)
    sequence = rows[0]["tokens"] if rows else 0
    labelled = sum(c["labelled"] for c in rows)
    patches = sum(c["vision_patches"] for c in counts)
    vision_language = getattr(config, "vision_config", None) is not None
    text_full = config.get_text_config().num_hidden_layers
    vision_full = config.vision_config.depth if vision_language else 0
    matmuls_of: dict[tuple, dict] = {}

    def kept(cfg, checkpointing: bool, attention: str = "sdpa") -> int:
        return retained_bytes(
            cfg,
            tokens,
            patches,
            checkpointing=checkpointing,
            frozen=no_grad,
            attention=attention,
            sequence=sequence,
            labelled=labelled,
        )

    def cut_config(run: dict):
        return cut_depth_config(config, text_layers=run["text_layers"], vision_blocks=run["vision_blocks"])

    def predicted_flops(cfg, *, checkpointing: bool, head_trains: bool, recompute: bool = True) -> float:
        key = (cfg.get_text_config().num_hidden_layers, cfg.vision_config.depth if vision_language else 0)
        if key not in matmuls_of:
            matmuls_of[key] = matmul_parameters(meta_model(cfg))
        matmuls = matmuls_of[key]
        total = 0.0
        for count in counts:
            total += training_flops(cfg, matmuls, count, frozen=frozen, lora=lora)
            if recompute:
                total += recomputed_flops(cfg, matmuls, count, frozen=frozen, lora=lora, checkpointing=checkpointing)
            if not head_trains and count["tokens"] and "llm" not in frozen and not lora:
                total -= 2 * matmuls["lm_head"] * count["labelled"]  # a frozen head computes no weight gradient
        return total

    def run(name: str, checkpointing: bool, frozen_head: bool = False) -> dict | None:
        suffix = ", LM head frozen" if frozen_head else ""
        return runs.get(f"{name}{suffix}, checkpointing {'on' if checkpointing else 'off'}")

    figures: dict[str, dict] = {}
    base_off = run("base", False)
    paired = run("base", False, frozen_head=True) is not None
    for checkpointing in CHECKPOINTING_ORDER:
        state = "on" if checkpointing else "off"
        base = run("base", checkpointing)
        reference = run("base", checkpointing, frozen_head=paired)
        text = run("text layer", checkpointing, frozen_head=paired)
        vision = run("vision block", checkpointing, frozen_head=paired)
        text_flops = text["flops"] - reference["flops"]
        vision_flops = vision["flops"] - reference["flops"] if vision else 0
        extra_text = text_full - base["text_layers"]
        extra_vision = vision_full - (base["vision_blocks"] or 0)
        measured_full = base["flops"] + extra_text * text_flops + extra_vision * vision_flops
        head = base["lm_head_trains"]
        figures[f"FLOPs per sample, full depth, checkpointing {state}"] = _figure(
            measured_full / batch,
            predicted_flops(config, checkpointing=checkpointing, head_trains=head) / batch,
            "FLOPs",
            "PyTorch's counter at the base depth, plus the difference one text layer and one vision block make, "
            "times the layers and blocks cut; predicted: training_flops + recomputed_flops",
            model_flops=predicted_flops(config, checkpointing=checkpointing, head_trains=head, recompute=False)
            / batch,
        )
        reference_cfg, text_cfg = cut_config(reference), cut_config(text)
        figures[f"FLOPs per text layer per sample, checkpointing {state}"] = _figure(
            text_flops / batch,
            (
                predicted_flops(text_cfg, checkpointing=checkpointing, head_trains=reference["lm_head_trains"])
                - predicted_flops(reference_cfg, checkpointing=checkpointing, head_trains=reference["lm_head_trains"])
            )
            / batch,
            "FLOPs",
            "difference of two models one text layer apart",
        )
        if vision:
            vision_cfg = cut_config(vision)
            figures[f"FLOPs per vision block per sample, checkpointing {state}"] = _figure(
                vision_flops / batch,
                (
                    predicted_flops(vision_cfg, checkpointing=checkpointing, head_trains=vision["lm_head_trains"])
                    - predicted_flops(
                        reference_cfg, checkpointing=checkpointing, head_trains=reference["lm_head_trains"]
                    )
                )
                / batch,
                "FLOPs",
                "difference of two models one vision block apart",
            )
        # Activations: what the forward keeps, per layer and block, then at the base depth and at full depth.
        text_kept = (text["retained"] - reference["retained"]) / tokens
        figures[f"activation bytes per text layer per token, checkpointing {state}"] = _figure(
            text_kept,
            2 * config.get_text_config().hidden_size
            if checkpointing
            else text_layer_bytes_per_token(config, attention="sdpa", sequence=sequence),
            "bytes",
            "what the forward keeps, difference of two models one text layer apart, over the tokens",
            plan_gpu=2 * config.get_text_config().hidden_size
            if checkpointing
            else text_layer_bytes_per_token(config, sequence=sequence),
        )
        vision_kept = 0.0
        if vision and patches:
            vision_kept = (vision["retained"] - reference["retained"]) / patches
            figures[f"activation bytes per vision block per patch, checkpointing {state}"] = _figure(
                vision_kept,
                2 * config.vision_config.hidden_size
                if checkpointing
                else vision_block_bytes_per_patch(config, attention="sdpa"),
                "bytes",
                "what the forward keeps, difference of two models one vision block apart, over the patches",
                plan_gpu=2 * config.vision_config.hidden_size
                if checkpointing
                else vision_block_bytes_per_patch(config),
            )
        base_cfg = cut_config(base)
        figures[f"activations kept by the forward, base depth, checkpointing {state}"] = _figure(
            base["retained"],
            kept(base_cfg, checkpointing),
            "bytes",
            f"live tensor bytes after the forward less the weights and inputs, {base['text_layers']} text layer(s) "
            f"and {base['vision_blocks']} vision block(s)",
        )
        kept_full = base["retained"] + extra_text * text_kept * tokens + extra_vision * vision_kept * patches
        figures[f"activations kept by the forward, full depth, checkpointing {state}"] = _figure(
            kept_full,
            kept(config, checkpointing),
            "bytes",
            "base depth plus the per-layer and per-block figures times the layers and blocks cut",
            plan_gpu=kept(config, checkpointing, attention=ATTENTION),
        )
        # The step's peak at the base depth, one process, before any optimizer state exists.
        loss = loss_bytes(base_cfg, labelled, head_trains=head, device="cpu")
        predicted_retained = kept(base_cfg, checkpointing)
        weights = 2 * base["total_parameters"] + base.get("inputs", 0)
        recompute = (
            recompute_bytes(base_cfg, tokens, patches, frozen=no_grad, attention="sdpa") if checkpointing else 0
        )
        gradients = 2 * base["trainable"]
        embedding = 2 * config.get_text_config().vocab_size * config.get_text_config().hidden_size
        figures[f"peak of forward and backward, base depth, checkpointing {state}"] = _figure(
            base["peak"],
            weights + max(predicted_retained + loss, gradients, gradients - embedding + recompute),
            "bytes",
            "live tensor bytes at their highest, weights and inputs included; predicted: weights + the largest of "
            "the forward's activations with the loss's backward on top (as backward starts), every gradient (as it "
            "ends), and with checkpointing a recomputed layer beside the gradients made before the embedding's",
        )
    figures["loss's backward above the forward (the logits' peak)"] = _figure(
        base_off["loss_head"],
        loss_bytes(cut_config(base_off), labelled, head_trains=base_off["lm_head_trains"], device="cpu"),
        "bytes",
        "peak between the backbone's output and its gradient, less what the forward keeps: TRL's fused LM head "
        f"over the {labelled} labelled position(s)",
        plan_gpu=loss_bytes(config, labelled, head_trains=base_off["lm_head_trains"]),
    )
    total_full = sum(p.numel() for p in meta_model(config).parameters())
    trainable_share = base_off["trainable"] / base_off["total_parameters"]
    optimizer = raw["optimizer"]["bytes_per_parameter"] or 0.0
    per_weight = base_off["weights"] / base_off["total_parameters"]
    per_gradient = base_off["gradients"] / max(base_off["trainable"], 1)
    figures["weights, bytes per parameter"] = _figure(per_weight, 2.0, "bytes", "bf16 weights")
    figures["gradients, bytes per trained parameter"] = _figure(per_gradient, 2.0, "bytes", "bf16 gradients")
    figures["optimizer states, bytes per trained parameter"] = _figure(
        optimizer,
        4.0,
        "bytes",
        f"{raw['optimizer']['optimizer']} stepped once on one block: two moments in the parameters' dtype",
    )
    trainable_full = total_full * trainable_share
    figures["model states, one process, full depth"] = _figure(
        per_weight * total_full + (per_gradient + optimizer) * trainable_full,
        2 * total_full + 6 * trainable_full,
        "bytes",
        "measured bytes per parameter times the full model's parameters (plain PyTorch, no DeepSpeed or FSDP: "
        "their fp32 master weights and moments are the plan's formulas, not measurable without them)",
    )
    return {
        "machine": raw["machine"],
        "arithmetic": raw["arithmetic"],
        "rows": raw["rows"],
        "batch": batch,
        "tokens": tokens,
        "labelled_tokens": labelled,
        "vision_patches": patches,
        "depths": raw["depths"],
        "seconds": raw["seconds"],
        "peak_resident_bytes": raw["peak_resident_bytes"],
        "figures": figures,
    }
