"""Published architectures kept as data, so the real-size model can be built offline (no Hub, no weights).

``QWEN3_VL_8B_INSTRUCT`` is the ``config.json`` of ``Qwen/Qwen3-VL-8B-Instruct`` on the Hugging Face Hub, key for
key. The Hub cannot be reached from here, so the values were checked against copies of that file in public code
(TensorRT-LLM's Qwen3-VL test scenario, which names the checkpoint, and two independent ports that embed it): text
36 layers, hidden 4096, intermediate 12288, 32 heads, 8 KV heads, head_dim 128, vocab 151,936, M-RoPE sections
[24, 20, 20] interleaved, rope_theta 5e6, untied embeddings; vision depth 27, hidden 1152, intermediate 4304, 16
heads, patch 16, spatial merge 2, temporal patch 2, 2304 position embeddings, deepstack [8, 16, 24], output 4096.
Not checked: ``initializer_range``, ``rms_norm_eps`` and ``attention_dropout`` (they change no count or size).

``QWEN3_VL_PROCESSOR`` holds the Qwen3-VL family's ``preprocessor_config.json`` / ``video_preprocessor_config.json``
size limits as copied in public code; they were not checked against the 8B repository itself, and the recipes
override the upper limits anyway (``image_max_pixels``, ``video_max_pixels``). ``PUBLISHED_PARAMETERS`` is the count
the model's listings state (8.77B: the Hub page's safetensors metadata, LM Studio's model card); the model built
from the config must land within 1% of it (``tests/test_plan.py``).
"""

import copy
import json
from pathlib import Path

import torch

from builders.errors import InputError


QWEN3_VL_8B_INSTRUCT = {
    "architectures": ["Qwen3VLForConditionalGeneration"],
    "image_token_id": 151655,
    "model_type": "qwen3_vl",
    "text_config": {
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": 151643,
        "dtype": "bfloat16",
        "eos_token_id": 151645,
        "head_dim": 128,
        "hidden_act": "silu",
        "hidden_size": 4096,
        "initializer_range": 0.02,
        "intermediate_size": 12288,
        "max_position_embeddings": 262144,
        "model_type": "qwen3_vl_text",
        "num_attention_heads": 32,
        "num_hidden_layers": 36,
        "num_key_value_heads": 8,
        "rms_norm_eps": 1e-06,
        "rope_scaling": {"mrope_interleaved": True, "mrope_section": [24, 20, 20], "rope_type": "default"},
        "rope_theta": 5000000,
        "use_cache": True,
        "vocab_size": 151936,
    },
    "tie_word_embeddings": False,
    "video_token_id": 151656,
    "vision_config": {
        "deepstack_visual_indexes": [8, 16, 24],
        "depth": 27,
        "hidden_act": "gelu_pytorch_tanh",
        "hidden_size": 1152,
        "in_channels": 3,
        "initializer_range": 0.02,
        "intermediate_size": 4304,
        "model_type": "qwen3_vl",
        "num_heads": 16,
        "num_position_embeddings": 2304,
        "out_hidden_size": 4096,
        "patch_size": 16,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
    },
    "vision_end_token_id": 151653,
    "vision_start_token_id": 151652,
}

QWEN3_VL_PROCESSOR = {
    "patch_size": 16,
    "temporal_patch_size": 2,
    "merge_size": 2,
    "image_size": {"shortest_edge": 65536, "longest_edge": 16777216},
    "video_size": {"shortest_edge": 4096, "longest_edge": 25165824},
}

ARCHITECTURES = {"Qwen/Qwen3-VL-8B-Instruct": QWEN3_VL_8B_INSTRUCT}
PUBLISHED_PARAMETERS = {"Qwen/Qwen3-VL-8B-Instruct": 8.77e9}


def architecture_config(name: str, *, text: dict | None = None, vision: dict | None = None):
    """The ``transformers`` config of a shipped architecture; ``text`` / ``vision`` override sub-config values (a
    scaled-down copy for tests)."""
    from transformers import AutoConfig

    if name not in ARCHITECTURES:
        raise InputError(f"no shipped architecture {name!r}; shipped: {sorted(ARCHITECTURES)}")
    values = json.loads(json.dumps(ARCHITECTURES[name]))
    values["text_config"].update(text or {})
    values["vision_config"].update(vision or {})
    config = AutoConfig.for_model(values.pop("model_type"), **values)
    vision_config, text_config = config.vision_config, config.text_config
    if vision_config.out_hidden_size != text_config.hidden_size:
        raise InputError("vision out_hidden_size must equal the text hidden_size")
    if max(vision_config.deepstack_visual_indexes) >= vision_config.depth:
        raise InputError("deepstack_visual_indexes must be below the vision depth")
    if sum(text_config.rope_parameters["mrope_section"]) != text_config.head_dim // 2:
        raise InputError("the M-RoPE sections must sum to head_dim / 2")
    return config


def local_config(name_or_path: str):
    """A checkpoint's config without its weights and without the network: a local folder, the Hub cache, or a
    shipped architecture."""
    from huggingface_hub import try_to_load_from_cache
    from transformers import AutoConfig

    if Path(name_or_path).is_dir():
        return AutoConfig.from_pretrained(name_or_path, trust_remote_code=False)
    if isinstance(try_to_load_from_cache(name_or_path, "config.json"), str):
        return AutoConfig.from_pretrained(name_or_path, trust_remote_code=False, local_files_only=True)
    if name_or_path in ARCHITECTURES:
        return architecture_config(name_or_path)
    raise InputError(
        f"{name_or_path}: no config.json in a local folder or the Hub cache, and it is not a shipped architecture "
        f"({sorted(ARCHITECTURES)}); download its config (hf download {name_or_path} config.json) or point "
        "model_name_or_path at a local checkpoint"
    )


def build_model(config, *, device: str | torch.device = "meta", dtype: torch.dtype = torch.bfloat16, **kwargs):
    """The model for ``config`` with random weights on ``device``; on ``meta`` no memory is allocated at all."""
    from transformers import AutoModelForImageTextToText

    with torch.device(device):
        return AutoModelForImageTextToText.from_config(config, dtype=dtype, **kwargs)


def standin_processor(tokenizer=None, *, sizes: dict | None = None):
    """A Qwen3-VL processor at the published patch and pixel sizes with a stand-in tokenizer (the real one needs the
    Hub): its visual token counts are exact, its text counts approximate."""
    from transformers import Qwen2VLImageProcessor, Qwen3VLProcessor, Qwen3VLVideoProcessor

    from recipes.training.tiny_models import QWEN3_VL_TEMPLATE, train_tokenizer, trl_chat_template

    sizes = sizes or QWEN3_VL_PROCESSOR
    patches = {key: sizes[key] for key in ("patch_size", "temporal_patch_size", "merge_size")}
    return Qwen3VLProcessor(
        image_processor=Qwen2VLImageProcessor(size=dict(sizes["image_size"]), **patches),
        video_processor=Qwen3VLVideoProcessor(
            size=dict(sizes["video_size"]), do_sample_frames=False, cap_pixels_per_frame=True, **patches
        ),
        tokenizer=tokenizer or train_tokenizer(),
        chat_template=trl_chat_template(QWEN3_VL_TEMPLATE),  # the template Qwen3-VL-8B-Instruct ships
    )


def cut_deepstack_indexes(indexes: list[int], depth: int, kept: int) -> list[int]:
    """The deepstack taps of a vision tower of ``depth`` blocks placed on ``kept`` blocks: each at the same share of
    the depth (rounded down), moved on where two would meet, so that every deepstack merger still runs once
    ([8, 16, 24] of 27 -> [0, 1, 2] of 3, [1, 2, 3] of 4)."""
    if kept < len(indexes):
        raise InputError(
            f"a vision tower cut to {kept} blocks cannot keep {len(indexes)} deepstack taps: keep at least "
            f"{len(indexes)} blocks"
        )
    mapped: list[int] = []
    for index in sorted(indexes):
        mapped.append(max(index * kept // depth, mapped[-1] + 1 if mapped else 0))
    if mapped and mapped[-1] >= kept:  # crowded at the top: the last blocks, in order
        mapped = list(range(kept - len(indexes), kept))
    return mapped


def cut_depth_config(config, *, text_layers: int, vision_blocks: int | None = None):
    """A copy of a Qwen3-VL ``config`` at every real width, vocabulary and vision setting, with only the depth cut:
    ``text_layers`` decoder layers and ``vision_blocks`` vision blocks, the deepstack taps moved onto the kept blocks
    (:func:`cut_deepstack_indexes`). What ``sureon plan --measure`` and the real-width tests build: the 8B at 1 text
    layer and 3 vision blocks is 1.65 B parameters, 1.24 B of them the embedding and the LM head."""
    config = copy.deepcopy(config)
    text = getattr(config, "text_config", config)
    if text_layers < 1:
        raise InputError(f"keep at least one text layer, not {text_layers}")
    text.num_hidden_layers = text_layers
    if getattr(text, "layer_types", None):
        text.layer_types = text.layer_types[:text_layers]
    vision = getattr(config, "vision_config", None)
    if vision is not None and vision_blocks is not None:
        taps = list(getattr(vision, "deepstack_visual_indexes", None) or [])
        vision.deepstack_visual_indexes = cut_deepstack_indexes(taps, vision.depth, vision_blocks)
        vision.depth = vision_blocks
    return config


def write_architecture(name: str | None, out: Path, processor=None, *, config=None) -> Path:
    """A checkpoint folder without weights (config + processor) that ``load_processor`` and ``AutoConfig`` read;
    token ids follow the processor's tokenizer, the sizes stay the published ones (or ``config``'s: a cut-depth copy
    of the architecture ``name``, :func:`cut_depth_config`)."""
    processor = processor or standin_processor()
    tokenizer = processor.tokenizer
    config = copy.deepcopy(config) if config is not None else architecture_config(name)
    for key, token in (
        ("image_token_id", "<|image_pad|>"),
        ("video_token_id", "<|video_pad|>"),
        ("vision_start_token_id", "<|vision_start|>"),
        ("vision_end_token_id", "<|vision_end|>"),
    ):
        setattr(config, key, tokenizer.convert_tokens_to_ids(token))
    config.text_config.eos_token_id = tokenizer.convert_tokens_to_ids("<|im_end|>")
    config.text_config.pad_token_id = tokenizer.pad_token_id
    config.text_config.bos_token_id = None
    out = Path(out)
    config.save_pretrained(out)
    processor.save_pretrained(out)
    return out


def write_cut_depth_checkpoint(
    name: str, out: Path, *, text_layers: int, vision_blocks: int, processor=None, seed: int = 0
) -> Path:
    """A checkpoint folder the recipes and ``sureon eval`` load as ``model_name_or_path``: the shipped architecture
    ``name`` at every real width, vocabulary and vision setting, its depth cut (:func:`cut_depth_config`), with
    seeded random weights (its own initialisation, bf16) and a processor (the stand-in's tokenizer unless given: its
    few hundred tokens index the first rows of the real 151,936-row embedding and LM head). Nothing is downloaded;
    the 8B at 1 text layer and 3 vision blocks is a 3.3 GB folder."""
    folder = write_architecture(
        name,
        out,
        processor,
        config=cut_depth_config(architecture_config(name), text_layers=text_layers, vision_blocks=vision_blocks),
    )
    from transformers import AutoConfig

    torch.manual_seed(seed)
    model = build_model(AutoConfig.from_pretrained(folder), device="cpu", dtype=torch.bfloat16)
    model.save_pretrained(folder)
    del model
    return folder
