"""``sureon plan``: before renting GPUs, what a recipe costs at the real size: tokens per sample, parameters, memory
per GPU under ZeRO-2, ZeRO-3 and FSDP, whether it fits, and the throughput to expect.

- **Tokens** are measured, not guessed: a seeded sample of the mixture's rows goes through the training collator
  (``recipes.training.collator``) with the recipe's frame count and pixel caps, so the counts are what training sees; a
  GRPO recipe's prompts go through the GRPO trainer's own encoding (``recipes.training.grpo_trainer``: its clips as
  video or images, no answer, which is generated). The processor is the checkpoint's when it is on disk (a local folder
  or the Hub cache), else the published Qwen3-VL image/video processor sizes with a stand-in tokenizer
  (``recipes.training.architectures``): visual tokens exact, text tokens approximate, and the table says so. Without
  built data, ``--synthetic-frames 768x432`` measures clips and images of that size instead (also said in the table).
- **Parameters** come from the architecture built on the ``meta`` device (no memory), grouped and frozen by
  ``recipes.training.freezing`` exactly as training does; LoRA adapters are counted from the targeted linears.
- **Model states** per GPU: DeepSpeed's own estimators for ZeRO-2 / ZeRO-3 when every parameter trains (the
  formulas below reduce to theirs; with frozen parameters only their 16-bit weights count). FSDP2 has no
  estimator: accelerate upcasts sharded parameters to fp32 under bf16 mixed precision, so 4 bytes per parameter +
  12 per trainable one, sharded, plus the bf16 root unit and two decoder layers gathered at a time.
- **Activations** are an estimate per token and layer from the tensors a Qwen3 decoder layer and a vision block
  save for backward (bf16, fp32 RMSNorm internals, SDPA/flash attention so no score matrix), plus the fp32 logits
  of the loss over the whole vocabulary; with checkpointing only each layer's input is kept and one layer is
  recomputed at a time. ``benchmarks/gpu_sft.py`` measures the real peak on a GPU.
- **GRPO** adds the reference model, the KV cache and prefill of each generation batch, and vLLM's pool.
- **Throughput** is model FLOPs (6 per parameter and token for what trains, 2 forward-only for a frozen tower, 4
  for a frozen part gradients flow through, plus attention) at an assumed MFU, stated as an assumption.
- **Time** per optimizer step and per epoch on the GPU the recipe's hardware names, under the strategy it names
  (``recipes.training.launch.launch_strategy``), as a sum of named terms each marked measured, formula or assumed
  (``timing.py``): the training FLOPs and their recompute, the padding (``batching.py``'s share), the optimizer step,
  the communication; for GRPO also the generation (vision tower, prefill, decode steps, ZeRO-3's gather) and the
  log-probability passes. Beside it the data loader's CPU cores (``batching.py``'s ``loader_plan``).

The parts, each readable alone: ``command.py`` (the command line and the plan of each stage), ``recipe.py`` (reading
a recipe: stages, freezing, LoRA, GRPO, the checkpoint it plans), ``tokens.py`` (token measurement through the
training collator and the GRPO trainer's encoding), ``parameters.py``, ``memory.py`` (model states, activations, the
KV cache and generation), ``flops.py``, ``grpo.py`` (GRPO's memory on top of the policy's), ``timing.py``,
``batching.py`` and ``render.py``.
"""
