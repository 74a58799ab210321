"""GRPO's memory per GPU on top of the policy's model states (``recipes/grpo.py``, TRL's GRPOTrainer)."""

from recipes.training.plan.memory import GB, RESERVED_BYTES, activation_bytes, kv_cache_bytes_per_token, prefill_bytes
from recipes.training.plan.timing import prompts_per_micro_batch


def grpo_plan(
    config,
    settings: dict,
    memory: dict,
    *,
    prompt_row: dict,
    total_parameters: int,
    num_gpus: int,
    gpu_memory_gb: float,
    checkpointing: bool,
    frozen: set[str],
    lora: bool,
) -> dict:
    """GRPO's memory per GPU on top of the policy's model states (TRL's GRPOTrainer, its defaults where unset):

    - **reference model** (``beta`` > 0, full fine-tuning): bf16 weights, replicated under ZeRO-2, sharded under
      ZeRO-3 and FSDP as the trainer prepares it like the policy; none when ``beta`` is 0 (TRL then skips it) or
      with LoRA (the adapter is disabled instead);
    - **training activations**: a micro-batch of ``per_device_train_batch_size`` completions, each the p99 prompt
      plus ``max_completion_length`` tokens, the loss over the completions (replaces the SFT figure); with
      ``share_prompt_in_training``, one packed sequence per distinct prompt of the micro-batch (the prompt once, then
      its completions of ``max_completion_length`` tokens each), in sdpa attention (a 4-D mask: the pass is one
      forward, checkpointed as any other, so no term is added);
    - **generation** by transformers: the KV cache of the generation batch per GPU (``per_device_train_batch_size``
      x ``steps_per_generation`` sequences of prompt + completion), plus its prefill (one forward over every
      prompt of the batch at once: the vision tower over each clip's patches, as video or images, then the LLM;
      :func:`~recipes.training.plan.memory.prefill_bytes`), plus under ZeRO-3 the full bf16 weights TRL gathers for
      generation (``ds3_gather_for_generation``); it runs between training steps, so the larger of it and the
      training activations counts;
    - **vLLM colocate**: vLLM pre-allocates ``vllm_gpu_memory_utilization`` of every GPU for its weights (bf16,
      split over ``vllm_tensor_parallel_size``) and KV cache, next to training (after training when
      ``vllm_enable_sleep_mode`` offloads it); it fits when training plus that share fit the GPU and the share
      holds the weights plus one generation batch's KV cache.
    """
    generations = int(settings.get("num_generations", 8))
    completion = int(settings.get("max_completion_length", 512))
    batch = int(settings.get("per_device_train_batch_size", 8))
    steps = int(settings.get("steps_per_generation") or settings.get("gradient_accumulation_steps", 1))
    beta = float(settings.get("beta", 0.0))
    sequence = prompt_row["tokens"] + completion
    patches = prompt_row["vision_patches"]
    generation_batch = batch * steps
    passes, trained, attention = batch, sequence, {}
    if settings.get("share_prompt_in_training"):
        passes = prompts_per_micro_batch(batch, generation_batch, generations)
        trained = round(prompt_row["tokens"] - 1 + batch / passes * completion)
        attention = {"attention": "sdpa"}
    # The loss scores the completions only (TRL's fused LM head over their positions).
    training = activation_bytes(
        config,
        round(passes * trained),
        round(passes * patches),
        checkpointing=checkpointing,
        frozen=frozen,
        labelled=batch * completion,
        head_trains="llm" not in frozen and not lora,
        sequence=trained,
        **attention,
    )
    kv_cache = kv_cache_bytes_per_token(config) * generation_batch * sequence
    prefill = prefill_bytes(config, generation_batch * prompt_row["tokens"], generation_batch * patches)
    use_vllm = bool(settings.get("use_vllm", False))
    colocate = use_vllm and settings.get("vllm_mode", "colocate") == "colocate"
    vllm = None
    if colocate:
        share = float(settings.get("vllm_gpu_memory_utilization", 0.3)) * gpu_memory_gb * GB
        weights = 2 * total_parameters // int(settings.get("vllm_tensor_parallel_size", 1))
        vllm = {
            "pool": int(share),
            "weights": weights,
            "kv_cache": kv_cache,
            "holds_a_generation_batch": weights + kv_cache <= share,
            "sleep_mode": bool(settings.get("vllm_enable_sleep_mode", False)),
        }
    plans = {}
    for strategy, states in memory.items():
        sharded = strategy != "zero2"
        reference = 0 if beta == 0 or lora else (2 * total_parameters // num_gpus if sharded else 2 * total_parameters)
        if use_vllm:
            generation = 0  # vLLM generates, in its own pool (colocate) or on its own GPUs (server)
        else:
            generation = kv_cache + prefill + (2 * total_parameters if strategy == "zero3" else 0)
        during_training = states["model_states"] + reference + max(training, generation) + RESERVED_BYTES
        pool = vllm["pool"] if vllm and not vllm["sleep_mode"] else 0
        total = during_training + pool
        fits = total <= gpu_memory_gb * GB and (vllm is None or vllm["holds_a_generation_batch"])
        if vllm and vllm["sleep_mode"]:
            fits = fits and vllm["pool"] + RESERVED_BYTES <= gpu_memory_gb * GB
        plans[strategy] = {
            **states,
            "activations": training,
            "reference_model": reference,
            "generation": generation,
            "vllm_pool": pool,
            "total": total,
            "fits": fits,
        }
    return {
        "memory": plans,
        "num_generations": generations,
        "max_completion_length": completion,
        "prompt_tokens_p99": prompt_row["tokens"],
        "sequence_tokens": sequence,
        "training_sequence_tokens": trained,
        "training_sequences_per_micro_batch": passes,
        "generation_batch_per_gpu": generation_batch,
        "beta": beta,
        "reference_model": beta > 0 and not lora,
        "loss_type": settings.get("loss_type", "dapo"),
        "generation": ("vLLM " + settings.get("vllm_mode", "colocate")) if use_vllm else "transformers",
        "kv_cache_per_token": kv_cache_bytes_per_token(config),
        "kv_cache": kv_cache,
        "prefill": prefill,
        "prompt_visual_tokens_p99": prompt_row["visual_tokens"],
        "prompt_vision_patches_p99": patches,
        "frames_as": settings.get("frames_as", "video"),
        "vllm": vllm,
    }
