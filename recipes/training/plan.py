"""``sureon plan``: before renting GPUs, what a recipe costs at the real size: tokens per sample, parameters, memory
per GPU under ZeRO-2, ZeRO-3 and FSDP, whether it fits, and the throughput to expect.

- **Tokens** are measured, not guessed: a seeded sample of the mixture's rows goes through the training collator
  (``recipes.training.collator``) with the recipe's frame count and pixel caps, so the counts are what training
  sees. The processor is the checkpoint's when it is on disk (a local folder or the Hub cache), else the
  published Qwen3-VL image/video processor sizes with a stand-in tokenizer (``recipes.training.architectures``):
  visual tokens exact, text tokens approximate, and the table says so. Without built data,
  ``--synthetic-frames 768x432`` measures clips and images of that size instead (also said in the table).
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
- **Throughput** is model FLOPs (6 per parameter and token for what trains, 2 forward-only for a frozen tower, 4
  for a frozen part gradients flow through, plus attention) at an assumed MFU, stated as an assumption.
"""

import json
import math
from pathlib import Path

import numpy as np
import yaml


GB = 1e9
# CUDA context, NCCL buffers and allocator fragmentation; a stated allowance, not a measurement.
RESERVED_BYTES = 5 * GB
STRATEGIES = ("zero2", "zero3", "fsdp")
# Decoder layers and vision blocks: the units FSDP wraps (accelerate_configs/fsdp.yaml) and checkpointing recomputes.
BLOCK_CLASSES = ("Qwen3VLTextDecoderLayer", "Qwen3VLVisionBlock", "Qwen3DecoderLayer")
PERCENTILES = (50, 90, 99, 100)


def add_arguments(parser) -> None:
    parser.add_argument("--config", required=True, type=Path, help="a training recipe (recipes/<model>/sft/*.yaml)")
    parser.add_argument("--num-gpus", type=int, default=4, help="GPUs the run shards over (default 4)")
    parser.add_argument("--gpu-memory", type=float, default=141, help="memory per GPU in GB (default 141, H200)")
    parser.add_argument("--samples", type=int, default=256, help="rows measured per stage (seeded sample)")
    parser.add_argument("--processor", help="a local processor folder to count tokens with (default: the recipe's)")
    parser.add_argument(
        "--synthetic-frames",
        metavar="WxH",
        help="measure synthetic clips and images of this size instead of the mixture's rows (data not built yet)",
    )
    parser.add_argument("--peak-tflops", type=float, default=989.0, help="dense bf16 peak per GPU (H200: 989)")
    parser.add_argument("--assumed-mfu", type=float, default=0.4, help="MFU assumed for the throughput estimate")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--json", type=Path, help="also write the plan as JSON here")


def run(args) -> int:
    plans = plan_recipe(
        args.config,
        num_gpus=args.num_gpus,
        gpu_memory_gb=args.gpu_memory,
        samples=args.samples,
        processor_path=args.processor,
        synthetic_frames=parse_size(args.synthetic_frames) if args.synthetic_frames else None,
        peak_tflops=args.peak_tflops,
        assumed_mfu=args.assumed_mfu,
        seed=args.seed,
    )
    print(render(plans))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        temporary = args.json.with_suffix(args.json.suffix + ".tmp")
        temporary.write_text(json.dumps(plans, indent=1, default=str))
        temporary.replace(args.json)
    return 0


def parse_size(text: str) -> tuple[int, int]:
    try:
        width, height = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise ValueError(f"--synthetic-frames {text!r}: give WIDTHxHEIGHT, e.g. 768x432") from None
    return width, height


# ---------------------------------------------------------------------------------------------------- the recipe


def read_recipe(path: Path) -> dict:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: recipe not found")
    try:
        recipe = yaml.safe_load(path.read_text())
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        mark = getattr(err, "problem_mark", None)
        problem = (f"line {mark.line + 1}: " if mark else "") + (getattr(err, "problem", None) or str(err))
        raise ValueError(f"{path}: not a YAML training recipe ({problem}); give recipes/<model>/sft/*.yaml") from None
    if not isinstance(recipe, dict) or not recipe.get("model_name_or_path"):
        raise ValueError(f"{path}: not a training recipe (a mapping with model_name_or_path)")
    return recipe


def check_data_paths(path: Path, recipe: dict) -> None:
    """Refuse, before any model is built, a recipe whose local data folders do not exist (a local-looking path is
    never retried as a Hub id)."""
    from builders.hub import looks_local

    entries = [entry for stage in recipe_stages(recipe) for entry in stage["mixture"]]
    paths = [str(entry.get("path") if isinstance(entry, dict) else entry) for entry in entries]
    missing = [p for p in dict.fromkeys(paths) if looks_local(p) and not Path(p).expanduser().exists()]
    if missing:
        raise FileNotFoundError(
            f"{path}: its data {', '.join(missing)} does not exist (a local path, not a Hub id): build it first, or "
            "plan on synthetic frames with --synthetic-frames 768x432"
        )


def recipe_stages(recipe: dict) -> list[dict]:
    """``[{name, mixture, settings}]``: the recipe's one stage, or each of its ``stages`` with its overrides."""
    base = {key: value for key, value in recipe.items() if key not in ("stages", "dataset_mixture")}
    if not recipe.get("stages"):
        return [{"name": "train", "mixture": recipe.get("dataset_mixture") or [], "settings": base}]
    stages = []
    for number, stage in enumerate(recipe["stages"], start=1):
        stage = dict(stage)
        name = str(stage.pop("name", f"stage{number}"))
        stages.append({"name": name, "mixture": stage.pop("dataset_mixture", None) or [], "settings": base | stage})
    return stages


def checkpointing_on(settings: dict) -> bool:
    """TRL's switch: ``activation_checkpointing`` when set, else ``gradient_checkpointing`` (TRL's default: on)."""
    value = settings.get("activation_checkpointing")
    return bool(settings.get("gradient_checkpointing", True) if value is None else value)


def frozen_groups(settings: dict) -> set[str]:
    flags = (("vision_tower", "freeze_vision_tower"), ("projector", "freeze_projector"), ("llm", "freeze_llm"))
    return {group for group, key in flags if settings.get(key)}


# ------------------------------------------------------------------------------------------------------ tokens


def plan_processor(model_name: str, processor_path: str | None, settings: dict):
    """The processor tokens are counted with, and a note when it is the stand-in."""
    from recipes.training.architectures import standin_processor
    from recipes.training.modeling import apply_pixel_caps, load_processor

    note = None
    if processor_path:
        processor = load_processor(processor_path)
    elif _on_disk(model_name, "tokenizer_config.json") and any(
        _on_disk(model_name, name) for name in ("processor_config.json", "preprocessor_config.json")
    ):
        processor = load_processor(model_name)
    else:
        processor = standin_processor()
        note = (
            f"{model_name}'s processor is not on disk: visual tokens use its published sizes (exact), text tokens a "
            "stand-in tokenizer (approximate); pass --processor DIR for exact text counts"
        )
    apply_pixel_caps(processor, settings.get("image_max_pixels"), settings.get("video_max_pixels"))
    return processor, note


def _on_disk(name_or_path: str, filename: str) -> bool:
    if Path(name_or_path).is_dir():
        return (Path(name_or_path) / filename).is_file()
    from huggingface_hub import try_to_load_from_cache

    return isinstance(try_to_load_from_cache(name_or_path, filename), str)


def collator_for(processor, sources, settings: dict):
    from recipes.training.collator import SFTCollator

    return SFTCollator(
        processor,
        sources,
        blind=bool(settings.get("blind", False)),
        frames_as=settings.get("frames_as", "video"),
        max_frames=settings.get("max_frames", 8),
        system_prompt=settings.get("system_prompt"),
    )


def encoded_counts(encoded, merge: int) -> dict:
    """Tokens of one encoded example, its vision-tower patches and their attention windows (one per frame pair)."""
    grids = [
        grid.tolist()
        for key in ("image_grid_thw", "video_grid_thw")
        if key in encoded.visual
        for grid in encoded.visual[key]
    ]
    patches = sum(t * h * w for t, h, w in grids)
    return {
        "tokens": len(encoded.input_ids),
        "visual_tokens": patches // (merge * merge),
        "vision_patches": patches,
        "windows": [h * w for t, h, w in grids for _ in range(t)],
    }


def measure_mixture(processor, mixture: list[dict], settings: dict, samples: int, seed: int) -> list[dict]:
    """Token counts of a seeded sample of the mixture's rows, each encoded by the training collator."""
    from recipes.training.mixture import build_mixture, parse_mixture

    try:
        loaded, index, _ = build_mixture(parse_mixture(mixture), seed=seed)
    except (FileNotFoundError, OSError, ConnectionError) as err:
        paths = ", ".join(str(entry.get("path")) for entry in mixture)
        raise FileNotFoundError(
            f"the recipe's data ({paths}) could not be loaded ({err}); build it first, or plan on synthetic frames "
            "with --synthetic-frames 768x432"
        ) from err
    collator = collator_for(processor, loaded, settings)
    picked = np.random.default_rng(seed).choice(len(index), size=min(samples, len(index)), replace=False)
    merge = _merge_size(processor)
    counts = []
    for position in sorted(int(p) for p in picked):
        index_row = index[position]
        counts.append(
            {
                "source": loaded[index_row["source"]].source.label,
                **encoded_counts(collator.encode(collator.example(index_row)), merge),
            }
        )
    return counts


def synthetic_clip_row(number: int, size: tuple[int, int], frames: int) -> dict:
    """A video-QA row in the builders' schema with ``frames`` frames of ``size`` (a lecture clip's shape)."""
    from PIL import Image

    width, height = size
    start = 60.0 + 30 * number
    gradient = np.linspace(0, 255, width * height * 3, dtype=np.float32).reshape(height, width, 3)
    return {
        "question_id": f"synthetic_{number:05d}",
        "clip_id": f"synthetic_{start}_{start + 16}",
        "source_id": f"synthetic{number % 7}",
        "start": start,
        "end": start + 16,
        "category": "AD",
        "category_slug": "action_description",
        "question": "Which action does the surgeon perform on the cystic duct, and with which instrument?",
        "options": [
            "Clipping with a clip applier",
            "Cutting with scissors",
            "Blunt dissection with a grasper",
            "Cauterising with a hook",
            "Retracting with a grasper",
        ],
        "answer": "Clipping with a clip applier",
        "answer_index": 0,
        "answer_format": "mcq",
        "answer_order": [],
        "passes_blind_curation": True,
        "specialty": "General surgery",
        "subject": "Hepatobiliary",
        "procedure": "laparoscopic cholecystectomy",
        "transcript": "",
        "reasoning": "",
        "frames": [Image.fromarray(((gradient + 17 * (number + k)) % 256).astype(np.uint8)) for k in range(frames)],
        "frame_timestamps": [start + 2.0 * k for k in range(frames)],
        "blurred_regions": [[] for _ in range(frames)],
    }


def measure_synthetic(processor, settings: dict, size: tuple[int, int]) -> list[dict]:
    """Token counts of one synthetic clip (``max_frames`` frames) and one image of ``size``."""
    from recipes.training.mixture import to_example

    collator = collator_for(processor, [], settings)
    merge = _merge_size(processor)
    clip = synthetic_clip_row(0, size, settings.get("max_frames") or 8)
    image_row = {
        "messages": [
            {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": clip["question"]}]},
            {"role": "assistant", "content": [{"type": "text", "text": clip["answer"]}]},
        ],
        "images": [clip["frames"][0]],
    }
    rows = []
    for label, row, fmt in (("synthetic clip", clip, "video_qa"), ("synthetic image", image_row, "messages")):
        example = to_example(
            row,
            fmt,
            blind=collator.blind,
            frames_as=collator.frames_as,
            system_prompt=collator.system_prompt,
        )
        rows.append({"source": f"{label} {size[0]}x{size[1]}", **encoded_counts(collator.encode(example), merge)})
    return rows


def _merge_size(processor) -> int:
    return getattr(getattr(processor, "image_processor", None), "merge_size", 1) or 1


def percentiles(values: list[int]) -> dict[str, int]:
    return {f"p{p}": math.ceil(np.percentile(values, p)) for p in PERCENTILES}


def token_table(counts: list[dict]) -> list[dict]:
    """Per source and overall: rows measured and percentiles of tokens, visual tokens and vision patches."""
    groups: dict[str, list[dict]] = {}
    for count in counts:
        groups.setdefault(count["source"], []).append(count)
    if len(groups) > 1:
        groups["all"] = counts
    return [
        {
            "source": source,
            "rows": len(items),
            "tokens": percentiles([item["tokens"] for item in items]),
            "visual_tokens": percentiles([item["visual_tokens"] for item in items]),
            "vision_patches": percentiles([item["vision_patches"] for item in items]),
        }
        for source, items in groups.items()
    ]


# ------------------------------------------------------------------------------------------------- parameters


def meta_model(config):
    from recipes.training.architectures import build_model

    return build_model(config, device="meta")


def parameter_counts(model, frozen: set[str], lora: dict | None = None) -> dict[str, dict[str, int]]:
    """``{group: {"trainable", "frozen"}}`` as training sets them; with ``lora`` the base is frozen and
    ``adapters`` holds the adapter parameters (r x (in + out) per targeted linear)."""
    from recipes.training.freezing import apply_freezing

    if lora is None:
        counts = apply_freezing(model, frozen)
        return {
            group: {"trainable": c.get("trainable", 0), "frozen": c.get("frozen", 0)} for group, c in counts.items()
        }
    import torch

    counts = apply_freezing(model, set())
    counts = {
        group: {"trainable": 0, "frozen": c.get("trainable", 0) + c.get("frozen", 0)} for group, c in counts.items()
    }
    targets, rank = set(lora["targets"]), int(lora["r"])
    adapters = sum(
        rank * (module.in_features + module.out_features)
        for name, module in model.named_modules()
        if isinstance(module, torch.nn.Linear) and name.rsplit(".", 1)[-1] in targets
    )
    if not adapters:
        raise ValueError(f"lora_target_modules {sorted(targets)} match no linear layer of the model")
    counts["adapters"] = {"trainable": adapters, "frozen": 0}
    return counts


def largest_layer_parameters(model) -> int:
    """The most parameters one module holds itself: DeepSpeed's ``largest_layer_params`` (the embedding here)."""
    return max(sum(p.numel() for p in module.parameters(recurse=False)) for module in model.modules())


def block_parameters(model) -> tuple[int, int]:
    """(largest wrapped block, the FSDP root unit: everything outside the blocks)."""
    blocks = [module for module in model.modules() if type(module).__name__ in BLOCK_CLASSES]
    in_blocks = sum(p.numel() for block in blocks for p in block.parameters())
    largest = max((sum(p.numel() for p in block.parameters()) for block in blocks), default=0)
    return largest, sum(p.numel() for p in model.parameters()) - in_blocks


# --------------------------------------------------------------------------------------------- model states


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
    raise ValueError(f"unknown strategy {strategy!r}; choose from {STRATEGIES}")


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


# ------------------------------------------------------------------------------------------------------ FLOPs


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


# ------------------------------------------------------------------------------------------------------ plan


def lora_settings(settings: dict) -> dict | None:
    if not settings.get("use_peft"):
        return None
    targets = settings.get("lora_target_modules")
    if not targets or targets == "all-linear":
        targets = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    return {"r": settings.get("lora_r", 16), "targets": list(targets)}


def plan_recipe(
    recipe_path: Path,
    *,
    num_gpus: int = 4,
    gpu_memory_gb: float = 141,
    samples: int = 256,
    processor_path: str | None = None,
    synthetic_frames: tuple[int, int] | None = None,
    peak_tflops: float = 989.0,
    assumed_mfu: float = 0.4,
    seed: int = 42,
) -> list[dict]:
    """One plan per stage of the recipe (see the module docstring for what each figure is)."""
    from recipes.training.architectures import local_config

    if num_gpus < 1:
        raise ValueError("--num-gpus must be at least 1")
    recipe = read_recipe(recipe_path)
    if not synthetic_frames:
        check_data_paths(recipe_path, recipe)
    model_name, model_note = planned_model(Path(recipe_path), recipe["model_name_or_path"])
    config = local_config(model_name)
    model = meta_model(config)
    largest_layer = largest_layer_parameters(model)
    largest_block, root_unit = block_parameters(model)
    matmuls = matmul_parameters(model)
    plans = []
    for stage in recipe_stages(recipe):
        settings = stage["settings"]
        frozen, lora = frozen_groups(settings), lora_settings(settings)
        processor, note = plan_processor(model_name, processor_path, settings)
        note = "; ".join(n for n in (model_note, note) if n) or None
        if synthetic_frames:
            counts = measure_synthetic(processor, settings, synthetic_frames)
        else:
            counts = measure_mixture(processor, stage["mixture"], settings, samples, seed)
        parameters = parameter_counts(model, frozen, lora)
        trainable = sum(group["trainable"] for group in parameters.values())
        frozen_count = sum(group["frozen"] for group in parameters.values())
        batch = int(settings.get("per_device_train_batch_size", 8))
        # The batch is padded to its longest row: plan on p99 rows (the longest one is shown too).
        by_tokens = sorted(counts, key=lambda c: c["tokens"])
        typical = by_tokens[min(len(by_tokens) - 1, int(0.99 * len(by_tokens)))]
        longest = by_tokens[-1]
        checkpointing = checkpointing_on(settings)
        # LoRA adapts the LLM only: the vision tower and projector keep no activations for backward.
        no_grad = frozen | ({"vision_tower", "projector"} if lora else set())
        activations = {
            f"{label}, checkpointing {'on' if on else 'off'}": activation_bytes(
                config, batch * row["tokens"], batch * row["vision_patches"], checkpointing=on, frozen=no_grad
            )
            for label, row in (("p99 rows", typical), ("longest row", longest))
            for on in (True, False)
        }
        recipe_activation = max(
            activation_bytes(
                config,
                batch * row["tokens"],
                batch * row["vision_patches"],
                checkpointing=checkpointing,
                frozen=no_grad,
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
        if is_grpo(settings):
            grpo = grpo_plan(
                config,
                settings,
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
        adapters = parameters.get("adapters", {}).get("trainable", 0)
        flops = training_flops(config, matmuls, median, frozen=frozen, lora=lora is not None, adapters=adapters)
        samples_per_second = num_gpus * assumed_mfu * peak_tflops * 1e12 / flops
        plans.append(
            {
                "recipe": str(recipe_path),
                "stage": stage["name"],
                "model": recipe["model_name_or_path"],
                "num_gpus": num_gpus,
                "gpu_memory_gb": gpu_memory_gb,
                "per_device_batch": batch,
                "checkpointing": checkpointing,
                "frozen": sorted(frozen),
                "lora": lora,
                "processor_note": note,
                "synthetic_frames": synthetic_frames,
                "tokens": token_table(counts),
                "parameters": parameters,
                "largest_layer": largest_layer,
                "memory": memory,
                "activations": activations,
                "grpo": grpo,
                "throughput": {
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


# ------------------------------------------------------------------------------------------------------- GRPO


def is_grpo(settings: dict) -> bool:
    """A GRPO recipe (``recipes/grpo.py``): it names rewards or a group size."""
    return "reward_funcs" in settings or "num_generations" in settings


def planned_model(recipe_path: Path, name: str) -> tuple[str, str | None]:
    """The checkpoint whose architecture is planned: ``name``, or, for a local folder not trained yet (a GRPO
    recipe starting from an SFT run), the base model of the shipped recipe whose ``output_dir`` it is."""
    if Path(name).is_dir():
        return name, None
    root = next((folder for folder in Path(recipe_path).resolve().parents if folder.name == "recipes"), None)
    for path in sorted(root.glob("*/*/config_*.yaml")) if root else []:
        other = yaml.safe_load(path.read_text()) or {}
        if other.get("output_dir") == name and other.get("model_name_or_path"):
            base = other["model_name_or_path"]
            return base, f"{name} is not trained yet: planned as {base}, what {path.name} trains it from"
    return name, None


def kv_cache_bytes_per_token(config) -> int:
    """Keys and values of every decoder layer for one token, bf16 (what generation holds per sequence token)."""
    d = _text_dims(config)
    return 2 * d["layers"] * d["kv"] * 2


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
      plus ``max_completion_length`` tokens (replaces the SFT figure);
    - **generation** by transformers: the KV cache of the generation batch per GPU (``per_device_train_batch_size``
      x ``steps_per_generation`` sequences of prompt + completion), plus under ZeRO-3 the full bf16 weights TRL
      gathers for generation (``ds3_gather_for_generation``); it runs between training steps, so the larger of it
      and the training activations counts;
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
    training = activation_bytes(config, batch * sequence, batch * patches, checkpointing=checkpointing, frozen=frozen)
    generation_batch = batch * steps
    kv_cache = kv_cache_bytes_per_token(config) * generation_batch * sequence
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
            generation = kv_cache + (2 * total_parameters if strategy == "zero3" else 0)
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
        "generation_batch_per_gpu": generation_batch,
        "beta": beta,
        "reference_model": beta > 0 and not lora,
        "loss_type": settings.get("loss_type", "dapo"),
        "generation": ("vLLM " + settings.get("vllm_mode", "colocate")) if use_vllm else "transformers",
        "kv_cache_per_token": kv_cache_bytes_per_token(config),
        "kv_cache": kv_cache,
        "vllm": vllm,
    }


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


# ---------------------------------------------------------------------------------------------------- render


def _gb(value: float) -> str:
    return f"{value / GB:.1f}"


def render(plans: list[dict]) -> str:
    lines = []
    for plan in plans:
        lines.append(
            f"## {plan['recipe']} — stage {plan['stage']}: {plan['model']} on {plan['num_gpus']} GPU(s) of "
            f"{plan['gpu_memory_gb']:g} GB, {plan['per_device_batch']} samples per GPU, checkpointing "
            f"{'on' if plan['checkpointing'] else 'off'}"
        )
        if plan["synthetic_frames"]:
            width, height = plan["synthetic_frames"]
            lines.append(f"note: synthetic rows ({width}x{height} frames), not the mixture's data")
        if plan["processor_note"]:
            lines.append(f"note: {plan['processor_note']}")
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
        throughput = plan["throughput"]
        lines += [
            "",
            (
                f"throughput at an assumed {throughput['assumed_mfu']:.0%} MFU of {throughput['peak_tflops']:g} "
                f"TFLOPS per GPU: {throughput['samples_per_second']:.1f} samples/s, "
                f"{throughput['tokens_per_second']:,.0f} tokens/s ({throughput['flops_per_median_sample'] / 1e12:.1f} "
                f"TFLOPs per median sample of {throughput['median_tokens']} tokens); measure it with "
                "benchmarks/gpu_sft.py"
            ),
            "",
        ]
    return "\n".join(lines)
