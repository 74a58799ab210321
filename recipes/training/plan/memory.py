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
        "heads": text.num_attention_heads,
        "kv_heads": text.num_key_value_heads,
    }


# The attention the plan assumes on a GPU: flash-attention 2, ``recipes.model_io.modeling``'s default where flash-attn
# or the Hub's prebuilt kernel of it is installed (``make gpu_setup``). ``sureon plan --measure`` predicts its CPU step
# with "sdpa", the only one a CPU runs.
ATTENTION = "flash_attention_2"
# TRL's fused LM head (``trl.trainer.utils.add_fused_lm_head``, TRL 1.16): vocabulary columns per projection tile, and
# tokens per tile.
LOSS_VOCABULARY_CHUNK = 32768
LOSS_TOKEN_CHUNK = 4096


def text_layer_bytes_per_token(config, *, attention: str = ATTENTION, sequence: int = 0) -> int:
    """Saved for backward by one Qwen3 decoder layer, per token (bf16 unless said), as measured at the 8B's widths
    (``docs/training/planning.md``): each of the two RMSNorms keeps its fp32 input, its normalised bf16 copy and
    its output (8 bytes per element); the q and k RMSNorms their fp32 input and normalised copy (6); attention its
    rotated q, k, v and output (the output is also o_proj's input) and an fp32 log-sum-exp per head; the SwiGLU MLP
    its gate, up, activation and product (2 each); each RMSNorm an fp32 scale per row. ``attention="sdpa"`` (what a
    CPU runs, and a GPU without flash-attention, when transformers passes it a mask, as in training): keys and values
    are repeated to every query head before attention keeps them, and a float mask of the ``sequence`` is made in
    each layer (2 bytes per token of it)."""
    d = _text_dims(config)
    hidden, q, kv, heads = d["hidden"], d["q"], d["kv"], d["heads"]
    kept = 16 * hidden + 6 * (q + kv) + 8 * d["intermediate"] + 4 * (2 * heads + d["kv_heads"] + 2)
    if attention == "sdpa":
        # transformers repeats keys and values to every query head when it passes a mask (a copy, unless a single
        # key/value head is only viewed wider), and sdpa makes a float mask of the boolean one in each layer.
        repeated = q if 1 < d["kv_heads"] < heads else kv
        return kept + 2 * q + 2 * repeated + 2 * repeated + 2 * q + 2 * sequence
    return kept + 2 * q + 2 * kv + 2 * kv + 2 * q


def vision_block_bytes_per_patch(config, *, attention: str = ATTENTION) -> int:
    """Saved by one vision block, per patch (bf16), as measured at the 8B's widths: the first LayerNorm's output,
    the fused qkv output (attention keeps v as a view of it), rotated q and k, the attention output and its copy
    for the projection, the residual sum and the second LayerNorm's output, the block's output, and the MLP's
    hidden before and after its activation; an fp32 log-sum-exp per head. ``attention="sdpa"`` splits the patches
    into one attention call per frame pair and concatenates the outputs: one more copy."""
    vision = config.vision_config
    hidden, intermediate = vision.hidden_size, vision.intermediate_size
    kept = 2 * hidden + 6 * hidden + 2 * 2 * hidden + 2 * hidden + 3 * 2 * hidden + 2 * 2 * intermediate
    return kept + 4 * vision.num_heads + (2 * hidden if attention == "sdpa" else 0)


def merger_bytes_per_patch(config) -> int:
    """Saved by the merger and by each deepstack merger, per patch: the LayerNorm's output, the first linear's output
    and its activation (which the second linear keeps), bf16. Their inputs are block outputs, counted there."""
    return 6 * config.vision_config.hidden_size


def patch_embedding_bytes_per_patch(config) -> int:
    """The pixels of a patch in bf16, kept by the patch embedding for its weight's gradient."""
    vision = config.vision_config
    return 2 * vision.in_channels * vision.temporal_patch_size * vision.patch_size**2


def loss_bytes(config, labelled: int, *, head_trains: bool = True, device: str = "cuda") -> int:
    """The peak of the loss's backward above what the forward keeps, for TRL's fused LM head (TRL 1.16, what
    ``recipes/sft.py`` and ``recipes/grpo.py`` train with): no logits are ever materialised; it projects only the
    ``labelled`` positions (on CUDA) in tiles of 4096 tokens x 32768 vocabulary columns, recomputes each tile in
    backward and accumulates in fp32: the LM head's weight gradient (4 bytes per weight, then its bf16 copy: 6 bytes
    per weight at the end, 3.7 GB at 151,936 x 4096; none when the head is frozen, as with LoRA or a frozen LLM), the
    hidden states' gradient (fp32) and one tile. ``device="cpu"``: TRL also makes fp32 copies of a tile and of a
    32768-row slice of the weight for each product (the CPU has no bf16-in, fp32-out product)."""
    d = _text_dims(config)
    hidden, vocab = d["hidden"], d["vocab"]
    rows = min(labelled, LOSS_TOKEN_CHUNK)
    # The fp32 hidden-state gradient, the tile buffer (allocated at the chunk's full width) and per-token fp32 stats.
    other = 4 * labelled * hidden + 2 * rows * LOSS_VOCABULARY_CHUNK + 6 * 4 * labelled
    weight = 6 * vocab * hidden if head_trains else 0
    if device == "cpu":
        copies = 4 * min(vocab, LOSS_VOCABULARY_CHUNK) * (hidden + rows)
        weight = max(weight, (4 * vocab * hidden if head_trains else 0) + copies)
    return int(weight + other)


def parts_without_activations(frozen: set[str], lora: bool) -> set[str]:
    """Parts that keep no activations for backward: the frozen ones, and with LoRA (which adapts the LLM only) the
    vision tower and projector."""
    return set(frozen) | ({"vision_tower", "projector"} if lora else set())


def retained_bytes(
    config,
    tokens: int,
    patches: int,
    *,
    checkpointing: bool,
    frozen: set[str],
    attention: str = ATTENTION,
    sequence: int | None = None,
    labelled: int = 0,
) -> int:
    """What the forward of one micro-batch keeps for backward, for ``tokens`` LLM tokens (over sequences of
    ``sequence`` tokens, ``labelled`` of them scored) whose visuals are ``patches`` vision patches, as measured at the
    8B's widths:

    - the LLM: every decoder layer (:func:`text_layer_bytes_per_token`; with checkpointing only its input, 2 bytes
      per element), the final RMSNorm (fp32 input and normalised copy), the rotary cos and sin (bf16), under sdpa
      the boolean causal mask, and the hidden states of the labelled positions the loss keeps;
    - the vision tower, when it trains: every block (:func:`vision_block_bytes_per_patch`; with checkpointing its
      input), the tower's input or the last block's output, the rotary cos and sin (fp32), the pixels (bf16);
    - the mergers, when they train (:func:`merger_bytes_per_patch`; their inputs too when the tower keeps nothing).
    """
    d = _text_dims(config)
    sequence = tokens if sequence is None else sequence
    hidden, head_dim = d["hidden"], d["q"] // d["heads"]
    if checkpointing:
        text = d["layers"] * 2 * hidden * tokens
    else:
        text = d["layers"] * text_layer_bytes_per_token(config, attention=attention, sequence=sequence) * tokens
    text += 6 * hidden * tokens + 2 * 2 * head_dim * tokens + 2 * hidden * labelled
    if attention == "sdpa":
        text += sequence * tokens
    vision = 0
    if getattr(config, "vision_config", None) is not None and patches:
        tower = config.vision_config
        taps = len(tower.deepstack_visual_indexes or [])
        if "vision_tower" not in frozen:
            if checkpointing:
                vision = tower.depth * 2 * tower.hidden_size * patches
            else:
                vision = tower.depth * vision_block_bytes_per_patch(config, attention=attention) * patches
            vision += 2 * tower.hidden_size * patches  # the tower's input (or its last block's output)
            vision += 2 * 4 * (tower.hidden_size // tower.num_heads) * patches  # rotary cos and sin, fp32
            vision += patch_embedding_bytes_per_patch(config) * patches
        if "projector" not in frozen:
            inputs = 0 if "vision_tower" not in frozen else 2 * tower.hidden_size * (1 + taps)
            vision += ((1 + taps) * merger_bytes_per_patch(config) + inputs) * patches
    return int(text + vision)


def recompute_bytes(config, tokens: int, patches: int, *, frozen: set[str], attention: str = ATTENTION) -> int:
    """With checkpointing, the backward recomputes one layer or block at a time: the larger of their activations."""
    text = text_layer_bytes_per_token(config, attention=attention, sequence=tokens) * tokens
    vision = 0
    if getattr(config, "vision_config", None) is not None and patches and "vision_tower" not in frozen:
        vision = vision_block_bytes_per_patch(config, attention=attention) * patches
    return int(max(text, vision))


def activation_bytes(
    config,
    tokens: int,
    patches: int,
    *,
    checkpointing: bool,
    frozen: set[str],
    transient: bool = True,
    labelled: int | None = None,
    head_trains: bool | None = None,
    attention: str = ATTENTION,
    sequence: int | None = None,
) -> int:
    """Activation memory of one micro-batch of ``tokens`` LLM tokens whose visuals are ``patches`` vision patches:
    what the forward keeps (:func:`retained_bytes`) plus the larger of the loss's backward (:func:`loss_bytes` over
    the ``labelled`` positions, every token when not given; its weight gradient when ``head_trains``, by default when
    the LLM trains) and, with checkpointing, one recomputed layer. ``transient=False``: what the forward keeps only."""
    retained = retained_bytes(
        config,
        tokens,
        patches,
        checkpointing=checkpointing,
        frozen=frozen,
        attention=attention,
        sequence=sequence,
        labelled=labelled or 0,
    )
    if not transient:
        return retained
    head_trains = "llm" not in frozen if head_trains is None else head_trains
    peak = loss_bytes(config, tokens if labelled is None else labelled, head_trains=head_trains)
    if checkpointing:
        peak = max(peak, recompute_bytes(config, tokens, patches, frozen=frozen, attention=attention))
    return int(retained + peak)


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
    text = (text_layer_bytes_per_token(config, sequence=tokens) + 2 * d["hidden"]) * tokens
    vision = 0
    if getattr(config, "vision_config", None) is not None and patches:
        merged = patches // getattr(config.vision_config, "spatial_merge_size", 2) ** 2
        levels = 1 + len(getattr(config.vision_config, "deepstack_visual_indexes", []) or [])
        vision = vision_block_bytes_per_patch(config) * patches + levels * 2 * d["hidden"] * merged
    return int(max(text, vision))
