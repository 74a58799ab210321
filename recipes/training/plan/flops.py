"""Model FLOPs per training sample, from the weights each matrix multiply runs over, and the FLOPs a step executes
on top of them (recomputation), as ``sureon plan --measure`` counts them."""

from recipes.training.plan.memory import _text_dims


def matmul_parameters(model) -> dict[str, int]:
    """Weights of the matrix multiplies, by what they run over: every LLM token (``llm``), the labelled positions
    the loss scores (``lm_head``, the output projection), every vision patch (``vision``: the blocks;
    ``patch_embedding``: the convolution over the pixels), every merged visual token (``projector``: the merger and
    the deepstack mergers); ``text_last`` and ``vision_last``: the last projection of every decoder layer and vision
    block (``down_proj``, ``fc2``), which checkpointing's recomputation stops before."""
    import torch

    from recipes.training.freezing import parameter_group

    counts = {"llm": 0, "lm_head": 0, "vision": 0, "patch_embedding": 0, "projector": 0}
    counts |= {"text_last": 0, "vision_last": 0}
    vision_language = getattr(model.config, "vision_config", None) is not None
    output = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    for name, module in model.named_modules():
        if not isinstance(module, torch.nn.Linear | torch.nn.Conv3d):
            continue
        weights = module.weight.numel()
        group = parameter_group(f"{name}.weight", vision_language)
        if module is output:
            counts["lm_head"] += weights
        elif isinstance(module, torch.nn.Conv3d):
            counts["patch_embedding"] += weights
        else:
            counts[{"vision_tower": "vision", "projector": "projector", "llm": "llm"}[group]] += weights
        last = name.rsplit(".", 1)[-1]
        if last == "down_proj":
            counts["text_last"] += weights
        elif last == "linear_fc2" and ".blocks." in f".{name}":
            counts["vision_last"] += weights
    return counts


def _factors(frozen: set[str], lora: bool) -> dict[str, int]:
    """FLOPs per weight and position of each part: 6 where it trains (2 forward, 2 for its input's gradient, 2 for
    its weights'), 4 where it is frozen but gradients pass through it to something upstream that trains, 2 where
    nothing upstream trains (forward only)."""
    trains = {group: group not in frozen and not lora for group in ("vision_tower", "projector", "llm")}
    vision = 6 if trains["vision_tower"] else 2
    projector = 6 if trains["projector"] else (4 if trains["vision_tower"] else 2)
    upstream = trains["vision_tower"] or trains["projector"] or lora
    # The LM head counts as the LLM's: it trains with it, and passes gradients down when anything below trains.
    llm = 6 if trains["llm"] else (4 if upstream else 2)
    # The patch embedding's input is the pixels, which need no gradient: 2 forward + 2 for its weights.
    patch = 4 if trains["vision_tower"] else 2
    return {"vision": vision, "projector": projector, "llm": llm, "patch": patch}


def training_flops(
    config, matmuls: dict, count: dict, *, frozen: set[str], lora: bool = False, adapters: int = 0
) -> float:
    """Model FLOPs of one training sample (forward + backward, no recompute; what MFU divides): 2 per weight and
    token forward, 4 more backward for what trains or passes gradients on (:func:`_factors`); attention 12 x layers
    x width x window per token (full windows: the causal half is counted, as PyTorch's counter does). The LM head
    runs over the ``labelled`` positions only (``count["labelled"]``; every token where a count does not say): TRL's
    fused LM head projects nothing else. With ``lora`` the LLM is a frozen part gradients pass through and its
    ``adapters`` parameters train (6 per parameter and token)."""
    factors = _factors(frozen, lora)
    d = _text_dims(config)
    tokens = count["tokens"]
    labelled = count.get("labelled", tokens)
    flops = factors["llm"] * matmuls["llm"] * tokens + factors["llm"] * 2 * d["layers"] * d["q"] * tokens * tokens
    flops += factors["llm"] * matmuls.get("lm_head", 0) * labelled
    flops += 6 * adapters * tokens
    if getattr(config, "vision_config", None) is not None and count["vision_patches"]:
        vision = config.vision_config
        flops += factors["vision"] * matmuls["vision"] * count["vision_patches"]
        flops += factors["patch"] * matmuls.get("patch_embedding", 0) * count["vision_patches"]
        flops += factors["vision"] * 2 * vision.depth * vision.hidden_size * sum(w * w for w in count["windows"])
        flops += factors["projector"] * matmuls["projector"] * count["visual_tokens"]
    return float(flops)


def recomputed_flops(
    config, matmuls: dict, count: dict, *, frozen: set[str], lora: bool = False, checkpointing: bool
) -> float:
    """FLOPs a step executes on top of :func:`training_flops`, as PyTorch's counter counts them: attention's backward
    recomputes its scores (half its forward again, flash-attention and the CPU's fused kernel alike); TRL's fused LM
    head recomputes each logits tile in backward (2 per weight and labelled position); with checkpointing, every
    layer and block that backward reaches runs its forward again, up to its last projection (PyTorch's
    non-reentrant checkpoint stops recomputing once it has what backward needs)."""
    factors = _factors(frozen, lora)
    d = _text_dims(config)
    tokens = count["tokens"]
    attention_forward = 4 * d["layers"] * d["q"] * tokens * tokens
    extra = 0.0
    if factors["llm"] > 2:
        extra += attention_forward / 2
        if checkpointing:
            extra += 2 * (matmuls["llm"] - matmuls.get("text_last", 0)) * tokens + attention_forward
    if factors["llm"] > 2:
        extra += 2 * matmuls.get("lm_head", 0) * count.get("labelled", tokens)
    if getattr(config, "vision_config", None) is not None and count["vision_patches"] and factors["vision"] > 2:
        vision = config.vision_config
        vision_attention = 4 * vision.depth * vision.hidden_size * sum(w * w for w in count["windows"])
        extra += vision_attention / 2
        if checkpointing:
            extra += 2 * (matmuls["vision"] - matmuls.get("vision_last", 0)) * count["vision_patches"]
            extra += vision_attention
    return float(extra)
