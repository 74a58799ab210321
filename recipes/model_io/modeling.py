"""Load a model and its processor (or tokenizer) the one way the recipes, evaluation and guessers share.

A checkpoint with a ``vision_config`` loads as ``AutoModelForImageTextToText`` + ``AutoProcessor``; anything else as
``AutoModelForCausalLM`` + ``AutoTokenizer``. Remote code is never trusted. Attention defaults to flash-attention 2 on
a GPU (flash-attn, else the Hub's prebuilt kernel; ``make gpu_setup`` gets one), ``sdpa`` otherwise (with a warning on
a GPU that has neither); dtype to bf16 on GPU, float32 on CPU. The implementation that runs is logged at load and
recorded by the recipes in ``training_complete.json`` and the model card (:func:`attention_implementation`).
"""

import importlib.util
import logging

import torch

from builders.errors import InputError


logger = logging.getLogger(__name__)


def default_attn_implementation() -> str:
    """The fastest attention this machine loads: on a CUDA GPU of sm_80 (Ampere) or newer, ``flash_attention_2`` with
    flash-attn installed, else the Hub's prebuilt flash-attention 2 (``kernels-community/flash-attn2``, the name
    transformers 5.25 takes and records) when transformers can load it now (from the Hugging Face cache with
    ``HF_HUB_OFFLINE=1``, else from the Hub); else ``sdpa``. Without either on such a GPU the fallback is a warning,
    since sdpa trains slower and keeps more activation memory than ``sureon plan`` counts."""
    from recipes.model_io import attention

    if not torch.cuda.is_available():
        return "sdpa"
    if torch.cuda.get_device_capability() < attention.MIN_CAPABILITY:
        return "sdpa"
    if importlib.util.find_spec("flash_attn") is not None:
        return "flash_attention_2"
    problem = attention.hub_kernel_problem()
    repo, version = attention.hub_kernel()
    if problem is None:
        return repo
    logger.warning(
        "flash-attn is not installed and the Hub's flash-attention kernel %s v%s cannot be loaded (%s): attention "
        "falls back to sdpa on the GPU (slower, and more activation memory than `sureon plan` counts for "
        "flash-attention). Run `make gpu_setup` (it installs flash-attn or fetches that kernel; set HF_HUB_OFFLINE=1 "
        "to load a fetched kernel without the Hub), or set attn_implementation: sdpa in the recipe to choose sdpa and "
        "silence this warning",
        repo,
        version,
        problem,
    )
    return "sdpa"


def attention_implementation(model) -> str:
    """The attention implementation ``model`` runs (transformers resolves ``None`` to its own default at load)."""
    config = getattr(model, "config", None)
    return str(getattr(config, "_attn_implementation", None) or "unknown")


def default_dtype() -> torch.dtype:
    return torch.bfloat16 if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else torch.float32


def resolve_dtype(dtype: str | torch.dtype | None) -> torch.dtype | str:
    """``None``/"auto" -> the device default; "bfloat16", "float16", "float32" -> the torch dtype."""
    if dtype is None or dtype == "auto":
        return default_dtype()
    if isinstance(dtype, torch.dtype):
        return dtype
    if not hasattr(torch, dtype) or not isinstance(getattr(torch, dtype), torch.dtype):
        raise InputError(f"unknown dtype {dtype!r}: use auto, bfloat16, float16 or float32")
    return getattr(torch, dtype)


def is_vision_language(name_or_path: str, revision: str | None = None) -> bool:
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(name_or_path, revision=revision, trust_remote_code=False)
    return getattr(config, "vision_config", None) is not None


def load_processor(name_or_path: str, *, revision: str | None = None, padding_side: str | None = None):
    """The processor of a vision-language checkpoint, or the tokenizer of a text-only one."""
    from transformers import AutoProcessor, AutoTokenizer

    if is_vision_language(name_or_path, revision):
        processor = AutoProcessor.from_pretrained(name_or_path, revision=revision, trust_remote_code=False)
        tokenizer = processor.tokenizer
    else:
        processor = tokenizer = AutoTokenizer.from_pretrained(name_or_path, revision=revision, trust_remote_code=False)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if padding_side:
        tokenizer.padding_side = padding_side
    return processor


def load_model(
    name_or_path: str,
    *,
    revision: str | None = None,
    dtype: str | torch.dtype | None = None,
    attn_implementation: str | None = None,
    device_map: str | dict | None = None,
):
    """The model for ``name_or_path`` with the project's defaults (see module docstring)."""
    from transformers import AutoModelForCausalLM, AutoModelForImageTextToText
    from transformers.integrations import is_deepspeed_zero3_enabled

    auto_class = AutoModelForImageTextToText if is_vision_language(name_or_path, revision) else AutoModelForCausalLM
    model = auto_class.from_pretrained(
        name_or_path,
        revision=revision,
        dtype=resolve_dtype(dtype),
        attn_implementation=attn_implementation or default_attn_implementation(),
        device_map=device_map,
        trust_remote_code=False,
    )
    logger.info("%s loaded with %s attention", name_or_path, attention_implementation(model))
    if is_deepspeed_zero3_enabled():
        # transformers 5.25 keeps, on the model, the key renamings its loader applied, and reverts them when saving.
        # Loading into a ZeRO-3 partitioned model (zero3_init_flag) records every renaming it knows instead of the
        # ones used, so a Qwen3-VL saved after training got the legacy names (model.language_model.model.layers...):
        # transformers reads them back, vLLM and other readers of the base model's layout do not. No renaming was
        # needed for a checkpoint in the current layout, and the current layout is what is saved.
        model._weight_conversions = []
    return model


def apply_pixel_caps(processor, image_max_pixels: int | None, video_max_pixels: int | None):
    """Cap the pixels per image and per clip (Qwen3-VL: over all a clip's frames, capped per frame) in place."""
    image_processor = getattr(processor, "image_processor", None)
    video_processor = getattr(processor, "video_processor", None)
    if image_max_pixels and image_processor is not None:
        image_processor.size = {**dict(image_processor.size), "longest_edge": image_max_pixels}
    if video_processor is not None:
        if video_max_pixels:
            video_processor.size = {**dict(video_processor.size), "longest_edge": video_max_pixels}
        if hasattr(video_processor, "cap_pixels_per_frame"):
            video_processor.cap_pixels_per_frame = True
    return processor


def resolve_system_prompt(
    name_or_path: str | None, *, override: str | None = None, disabled: bool = False, revision: str | None = None
) -> str | None:
    """The system prompt to render for a model: none when ``disabled``, else ``override`` when given, else the one
    it was trained with (``training_complete.json``), so evaluation and curation see what training saw."""
    if disabled:
        return None
    if override is not None:
        return override or None
    from recipes.model_io.run_record import read_run_record

    record = read_run_record(name_or_path, revision) if name_or_path else None
    return (record or {}).get("system_prompt") or None


def tokenizer_of(processor):
    """The tokenizer inside a processor (or the tokenizer itself)."""
    return getattr(processor, "tokenizer", processor)
