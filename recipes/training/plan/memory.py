"""Memory per GPU: model states under ZeRO-2, ZeRO-3 and FSDP, activations per token and patch, the KV cache."""

from builders.errors import InputError


GB = 1e9
# CUDA context, NCCL buffers and allocator fragmentation; a stated allowance, not a measurement.
RESERVED_BYTES = 5 * GB
STRATEGIES = ("zero2", "zero3", "fsdp")


def model_state_bytes(
    strategy: str,
    trainable: int,
    frozen: int,
    num_gpus: int,
    *,
    largest_layer: int = 0,
    largest_block: int = 0,
    root_unit: int = 0,
) -> int:
    """Parameters, gradients and Adam states per GPU (bf16 mixed precision, no offload).

    ZeRO-2 (DeepSpeed's estimator: 2 bytes of 16-bit weights replicated + 18 sharded per trainable parameter) and
    ZeRO-3 (4 x the largest layer + 18 sharded; frozen weights 2 sharded); FSDP2 as in the module docstring.
    """
    total = trainable + frozen
    if strategy == "zero2":
        return 2 * total + int(18 * trainable / num_gpus)
    if strategy == "zero3":
        return 4 * largest_layer + int((18 * trainable + 2 * frozen) / num_gpus)
    if strategy == "fsdp":
        sharded = int((4 * total + 12 * trainable) / num_gpus)
        return sharded + 2 * (root_unit + 2 * largest_block) + 2 * largest_block
    raise InputError(f"unknown strategy {strategy!r}; choose from {STRATEGIES}")


def deepspeed_estimate(strategy: str, total: int, num_gpus: int, largest_layer: int) -> int | None:
    """DeepSpeed's own estimator (GPU bytes, one node, no offload), or None when DeepSpeed is not installed."""
    try:
        if strategy == "zero2":
            from deepspeed.runtime.zero.stage_1_and_2 import estimate_zero2_model_states_mem_needs

            return estimate_zero2_model_states_mem_needs(total, num_gpus_per_node=num_gpus, cpu_offload=False)[1]
        from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs

        return estimate_zero3_model_states_mem_needs(
            total, largest_layer, num_gpus_per_node=num_gpus, cpu_offload=False, cpu_offload_params=False
        )[1]
    except ImportError:
        return None


# ------------------------------------------------------------------------------------------------ activations


def _text_dims(config) -> dict:
    text = getattr(config, "text_config", config)
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads
    return {
        "hidden": text.hidden_size,
        "q": text.num_attention_heads * head_dim,
        "kv": text.num_key_value_heads * head_dim,
        "intermediate": text.intermediate_size,
        "layers": text.num_hidden_layers,
        "vocab": text.vocab_size,
    }


def text_layer_bytes_per_token(config) -> int:
    """Saved for backward by one Qwen3 decoder layer, per token: two RMSNorms (fp32 input and normalised copy + bf16
    output: 10 bytes per element), q/k RMSNorms (10 per element), rotated q, k, v and the attention output (2
    each), and the SwiGLU MLP's gate, up, activation and product (2 each)."""
    d = _text_dims(config)
    return 20 * d["hidden"] + 10 * (d["q"] + d["kv"]) + 2 * (2 * d["q"] + 2 * d["kv"]) + 8 * d["intermediate"]


def vision_block_bytes_per_patch(config) -> int:
    """Saved by one vision block, per patch: two LayerNorm outputs, the fused qkv output, rotated q, k in fp32,
    q, k, v and the attention output for SDPA, and the MLP's hidden pre- and post-activation (bf16 unless said)."""
    vision = config.vision_config
    hidden, intermediate = vision.hidden_size, vision.intermediate_size
    return 2 * 2 * hidden + 2 * 3 * hidden + 4 * 2 * hidden + 2 * 4 * hidden + 2 * 2 * intermediate


def logits_bytes_per_token(config, *, transient: bool = True) -> int:
    """The loss over the whole vocabulary: autograd keeps the fp32 log-softmax (4 bytes per logit); around it the
    bf16 logits and their fp32 copy (forward) or the fp32 and bf16 gradients (backward) are alive (6 more)."""
    return (10 if transient else 4) * _text_dims(config)["vocab"]


def activation_bytes(
    config, tokens: int, patches: int, *, checkpointing: bool, frozen: set[str], transient: bool = True
) -> int:
    """Activation memory of one micro-batch of ``tokens`` LLM tokens whose visuals are ``patches`` vision patches
    (``transient=False``: only what autograd saves for backward, without the loss's short-lived copies)."""
    d = _text_dims(config)
    text_layer = text_layer_bytes_per_token(config) * tokens
    logits = logits_bytes_per_token(config, transient=transient) * tokens
    if checkpointing:
        text = d["layers"] * 2 * d["hidden"] * tokens + text_layer
    else:
        text = d["layers"] * text_layer
    vision = 0
    if getattr(config, "vision_config", None) is not None and patches:
        depth, hidden = config.vision_config.depth, config.vision_config.hidden_size
        if "vision_tower" not in frozen:
            block = vision_block_bytes_per_patch(config) * patches
            vision = depth * 2 * hidden * patches + block if checkpointing else depth * block
        if "projector" not in frozen:
            # The merger and each deepstack merger: norm output, fc1 input and output, activation (bf16).
            mergers = 1 + len(config.vision_config.deepstack_visual_indexes)
            vision += mergers * 8 * hidden * patches
    return int(text + logits + vision)


def kv_cache_bytes_per_token(config) -> int:
    """Keys and values of every decoder layer for one token, bf16 (what generation holds per sequence token)."""
    d = _text_dims(config)
    return 2 * d["layers"] * d["kv"] * 2


def prefill_bytes(config, tokens: int, patches: int) -> int:
    """Peak activation memory of a forward pass without gradients over ``tokens`` LLM tokens whose visuals are
    ``patches`` vision patches (generation's prefill): the larger of one decoder layer's tensors over every token
    (plus the residual stream) and one vision block's over every patch plus the visual features that wait for the
    LLM (the merged tokens of the last layer and of each deepstack level, bf16)."""
    d = _text_dims(config)
    text = (text_layer_bytes_per_token(config) + 2 * d["hidden"]) * tokens
    vision = 0
    if getattr(config, "vision_config", None) is not None and patches:
        merged = patches // getattr(config.vision_config, "spatial_merge_size", 2) ** 2
        levels = 1 + len(getattr(config.vision_config, "deepstack_visual_indexes", []) or [])
        vision = vision_block_bytes_per_patch(config) * patches + levels * 2 * d["hidden"] * merged
    return int(max(text, vision))
