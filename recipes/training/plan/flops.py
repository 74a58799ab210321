"""Model FLOPs per training sample, from the weights each matrix multiply runs over."""

from recipes.training.plan.memory import _text_dims


def matmul_parameters(model) -> dict[str, int]:
    """Weights of the matrix multiplies, by what they run over: every LLM token, every vision patch, every merged
    visual token (the projector and deepstack mergers)."""
    import torch

    counts = {"llm": 0, "vision": 0, "projector": 0}
    from recipes.training.freezing import parameter_group

    vision_language = getattr(model.config, "vision_config", None) is not None
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear | torch.nn.Conv3d):
            group = parameter_group(f"{name}.weight", vision_language)
            counts[{"vision_tower": "vision", "projector": "projector", "llm": "llm"}[group]] += module.weight.numel()
    return counts


def training_flops(
    config, matmuls: dict, count: dict, *, frozen: set[str], lora: bool = False, adapters: int = 0
) -> float:
    """Model FLOPs of one training sample (forward + backward, no recompute): 2 per weight and token forward, 4
    more backward for what trains or passes gradients on; attention 12 x layers x width x window per token. With
    ``lora`` the LLM is a frozen part gradients pass through (4: forward, then the input gradients the adapters
    need, no weight gradients) and its ``adapters`` parameters train (6 per parameter and token)."""
    trains = {group: group not in frozen and not lora for group in ("vision_tower", "projector", "llm")}
    vision_factor = 6 if trains["vision_tower"] else 2
    projector_factor = 6 if trains["projector"] else (4 if trains["vision_tower"] else 2)
    upstream = trains["vision_tower"] or trains["projector"] or lora
    llm_factor = 6 if trains["llm"] else (4 if upstream else 2)
    d = _text_dims(config)
    tokens = count["tokens"]
    flops = llm_factor * matmuls["llm"] * tokens + (llm_factor * 2 * d["layers"] * d["q"] * tokens * tokens)
    flops += 6 * adapters * tokens
    if getattr(config, "vision_config", None) is not None and count["vision_patches"]:
        vision = config.vision_config
        flops += vision_factor * matmuls["vision"] * count["vision_patches"]
        flops += vision_factor * 2 * vision.depth * vision.hidden_size * sum(w * w for w in count["windows"])
        flops += projector_factor * matmuls["projector"] * count["visual_tokens"]
    return float(flops)
