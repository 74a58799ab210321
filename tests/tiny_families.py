"""Tiny random stand-ins of the open vision-language families people evaluate (the Sureon paper's Table 3 and the
two families users most often bring), built from each family's own config, processor and image processor with
nothing downloaded, so that the tests prove the evaluation backend on every family's image tokens, chat template and
system role (``tests/test_eval_families.py``).

``build_tiny_family(name, out)`` writes one of :data:`FAMILIES` to ``out``: the family's native transformers model
class (never remote code) with 2 text layers of width 32 and a 1-2 layer vision tower, its real processor and
image processor sized for small frames, and a byte-level BPE tokenizer trained on the spot that carries the
family's special tokens (as :mod:`recipes.training.tiny_models` does for Qwen3-VL). The chat template is the one the
real checkpoints ship where an installed package stores it (TRL's ``trl/chat_templates/``: Qwen3-VL, Qwen2.5-VL,
Gemma 3, Gemma 4); for Molmo2, InternVL and LLaVA-OneVision no installed package ships one, so a short template in
``tiny_family_templates/`` beside this file follows the layout of the one their checkpoints publish (placeholders,
image placement, system role), not its every byte. Per-family quirks are in ``docs/model_families.md``.

Test code, not the package's: the demo and ``sureon reproduce`` need only :mod:`recipes.training.tiny_models`.
"""

from dataclasses import dataclass
from pathlib import Path

from builders.errors import InputError
from recipes.training.tiny_models import CORPUS, tiny_text_config, trl_chat_template


QWEN_CHAT_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

TEMPLATES = Path(__file__).with_name("tiny_family_templates")


def chat_template(name: str) -> str:
    """``tiny_family_templates/<name>.jinja``: a template written here where no installed package ships one."""
    return (TEMPLATES / f"{name}.jinja").read_text(encoding="utf-8")


@dataclass(frozen=True)
class Family:
    """How a family writes frames into its prompt, for a test or a reader to check them.

    ``image_token`` is repeated for each image feature; ``image_marker`` opens each image once (None: the family
    writes its images' tokens back to back with nothing between them); ``video_marker`` is a regex the processor
    writes once per ``frames_per_video_marker`` frames of a video (None: one undivided run of video tokens).
    """

    image_token: str
    image_marker: str | None
    video_token: str
    video_marker: str | None
    frames_per_video_marker: int
    system_role: bool  # whether the chat template renders a system turn of its own
    thinking: bool = False


_QWEN3_VL = Family(
    "<|image_pad|>", "<|vision_start|>", "<|video_pad|>", r"<[\d.]+ seconds><\|vision_start\|>", 2, True
)
FAMILIES = {
    "qwen3-vl": _QWEN3_VL,
    "qwen3-vl-thinking": Family(**{**_QWEN3_VL.__dict__, "thinking": True}),
    "qwen2.5-vl": Family("<|image_pad|>", "<|vision_start|>", "<|video_pad|>", None, 1, True),
    "gemma3": Family("<image_soft_token>", "<start_of_image>", "", None, 1, False),
    "gemma4": Family("<|image|>", "<|image>", "<|video|>", r"\d\d:\d\d <\|image>", 1, True),
    "molmo2": Family("<im_patch>", "<low_res_im_start>", "<im_patch>", r"[\d.]+ <frame_start>", 1, False),
    "internvl": Family("<IMG_CONTEXT>", "<img>", "<IMG_CONTEXT>", r"Frame\d+: <img>", 1, True),
    "llava-onevision": Family("<image>", None, "<video>", None, 1, True),
}


def _tokenizer(special: list[str], *, eos: str, pad: str, bos: str | None = None, template: str, extra=None):
    """A byte-level BPE tokenizer with the family's ``special`` tokens (ids in that order from 0), its chat
    ``template`` and its named tokens (``extra``: e.g. ``{"image_token": "<image>"}``)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=640,
        special_tokens=special,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(CORPUS, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        eos_token=eos,
        pad_token=pad,
        bos_token=bos,
        chat_template=template,
        extra_special_tokens=extra or {},
    )


def _text(tokenizer, **overrides) -> dict:
    """``tiny_models``' text tower with the family tokenizer's own end and start tokens and room for Gemma 4's 70+
    tokens per frame; tying is left to the family's default unless given."""
    return tiny_text_config(
        tokenizer,
        max_position_embeddings=8192,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.bos_token_id,
        **overrides,
    )


def _qwen_vl(*, version: str, thinking: bool = False):
    """Qwen3-VL (Instruct or Thinking template) or Qwen2.5-VL, with Qwen's tokenizer tokens."""
    from recipes.training.tiny_models import ADDED_TOKENS, SPECIAL_TOKENS

    template = trl_chat_template("qwen3_vl" if version == "3" else "qwen2_5_vl")
    if thinking:
        # Qwen3-VL-*-Thinking's template is the Instruct one whose generation prompt opens the reasoning block
        # (its answers are "reasoning</think>\n\nanswer"); no installed package ships it, so it is derived here.
        instruct_prompt = "{%- if add_generation_prompt %}\n    {{- '<|im_start|>assistant\\n' }}"
        if instruct_prompt not in template:
            raise RuntimeError("TRL's qwen3_vl template changed: its generation prompt was not found")
        template = template.replace(instruct_prompt, instruct_prompt.replace("\\n' }}", "\\n<think>\\n' }}"))
    from tokenizers import AddedToken

    tokenizer = _tokenizer(
        SPECIAL_TOKENS,
        eos="<|im_end|>",
        pad="<|endoftext|>",
        template=template,
        extra={
            "image_token": "<|image_pad|>",
            "video_token": "<|video_pad|>",
            "vision_start_token": "<|vision_start|>",
            "vision_end_token": "<|vision_end|>",
        },
    )
    tokenizer.add_tokens([AddedToken(token, special=False, normalized=False) for token in ADDED_TOKENS])
    token_id = tokenizer.convert_tokens_to_ids
    ids = {
        "image_token_id": token_id("<|image_pad|>"),
        "video_token_id": token_id("<|video_pad|>"),
        "vision_start_token_id": token_id("<|vision_start|>"),
        "vision_end_token_id": token_id("<|vision_end|>"),
    }
    sizes = {"patch_size": 16 if version == "3" else 14, "temporal_patch_size": 2, "merge_size": 2}
    side = sizes["patch_size"] * 2 * 2  # a 2x2 grid of merged patches: 4 tokens per image
    size = {"shortest_edge": side * side, "longest_edge": side * side}
    if version == "3":
        from transformers import (
            Qwen2VLImageProcessor,
            Qwen3VLConfig,
            Qwen3VLForConditionalGeneration,
            Qwen3VLProcessor,
            Qwen3VLVideoProcessor,
        )

        rope = {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [4, 2, 2]}
        config = Qwen3VLConfig(
            text_config=_text(tokenizer, rope_parameters=rope, tie_word_embeddings=True),
            vision_config={
                "depth": 1,
                "hidden_size": 32,
                "intermediate_size": 64,
                "num_heads": 2,
                "out_hidden_size": 32,
                "num_position_embeddings": 64,
                "deepstack_visual_indexes": [0],
                **{k: sizes[k] for k in ("patch_size", "temporal_patch_size")},
                "spatial_merge_size": 2,
            },
            tie_word_embeddings=True,
            **ids,
        )
        model = Qwen3VLForConditionalGeneration(config)
        processor = Qwen3VLProcessor(
            image_processor=Qwen2VLImageProcessor(size=size, **sizes),
            video_processor=Qwen3VLVideoProcessor(size=size, do_sample_frames=False, **sizes),
            tokenizer=tokenizer,
            chat_template=template,
        )
    else:
        from transformers import (
            Qwen2_5_VLConfig,
            Qwen2_5_VLForConditionalGeneration,
            Qwen2_5_VLProcessor,
            Qwen2VLImageProcessor,
            Qwen2VLVideoProcessor,
        )

        rope = {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [4, 2, 2]}
        config = Qwen2_5_VLConfig(
            text_config=_text(tokenizer, rope_parameters=rope, tie_word_embeddings=True),
            vision_config={
                "depth": 1,
                "hidden_size": 32,
                "intermediate_size": 64,
                "num_heads": 2,
                "out_hidden_size": 32,
                "fullatt_block_indexes": [0],
                "window_size": 56,
                "patch_size": sizes["patch_size"],
                "temporal_patch_size": 2,
                "spatial_merge_size": 2,
            },
            tie_word_embeddings=True,
            **ids,
        )
        model = Qwen2_5_VLForConditionalGeneration(config)
        processor = Qwen2_5_VLProcessor(
            image_processor=Qwen2VLImageProcessor(size=size, **sizes),
            video_processor=Qwen2VLVideoProcessor(size=size, do_sample_frames=False, **sizes),
            tokenizer=tokenizer,
            chat_template=template,
        )
    return model, processor


def _gemma3():
    from transformers import Gemma3Config, Gemma3ForConditionalGeneration, Gemma3ImageProcessor, Gemma3Processor

    template = trl_chat_template("gemma3")
    special = ["<pad>", "<eos>", "<bos>", "<start_of_turn>", "<end_of_turn>"]
    special += ["<start_of_image>", "<end_of_image>", "<image_soft_token>"]
    tokenizer = _tokenizer(
        special,
        eos="<eos>",
        pad="<pad>",
        bos="<bos>",
        template=template,
        extra={"boi_token": "<start_of_image>", "eoi_token": "<end_of_image>", "image_token": "<image_soft_token>"},
    )
    token_id = tokenizer.convert_tokens_to_ids
    config = Gemma3Config(
        text_config=_text(tokenizer, sliding_window=64, query_pre_attn_scalar=16)
        | {"eos_token_id": [token_id("<eos>"), token_id("<end_of_turn>")]},
        vision_config={
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "image_size": 32,
            "patch_size": 8,
        },
        mm_tokens_per_image=4,
        boi_token_index=token_id("<start_of_image>"),
        eoi_token_index=token_id("<end_of_image>"),
        image_token_index=token_id("<image_soft_token>"),
    )
    model = Gemma3ForConditionalGeneration(config)
    processor = Gemma3Processor(
        image_processor=Gemma3ImageProcessor(size={"height": 32, "width": 32}),
        tokenizer=tokenizer,
        chat_template=template,
        image_seq_length=4,
    )
    return model, processor


def _gemma4():
    from transformers import (
        Gemma4AudioFeatureExtractor,
        Gemma4Config,
        Gemma4ForConditionalGeneration,
        Gemma4ImageProcessor,
        Gemma4Processor,
        Gemma4VideoProcessor,
    )

    template = trl_chat_template("gemma4")
    named = {
        "image_token": "<|image|>",
        "boi_token": "<|image>",
        "eoi_token": "<image|>",
        "audio_token": "<|audio|>",
        "boa_token": "<|audio>",
        "eoa_token": "<audio|>",
        "sot_token": "<|turn>",
        "eot_token": "<turn|>",
        "soc_token": "<|channel>",
        "eoc_token": "<channel|>",
        "think_token": "<|think|>",
    }
    special = ["<pad>", "<eos>", "<bos>", *named.values(), "<|video|>"]
    tokenizer = _tokenizer(special, eos="<eos>", pad="<pad>", bos="<bos>", template=template, extra=named)
    token_id = tokenizer.convert_tokens_to_ids
    text = _text(
        tokenizer,
        sliding_window=64,
        layer_types=["sliding_attention", "full_attention"],
        vocab_size_per_layer_input=len(tokenizer),
        hidden_size_per_layer_input=8,
        global_head_dim=16,
    ) | {"eos_token_id": [token_id("<eos>"), token_id("<turn|>")]}
    config = Gemma4Config(
        text_config=text,
        vision_config={
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "num_key_value_heads": 2,
            "head_dim": 16,
            "patch_size": 16,
            "pooling_kernel_size": 3,
        },
        audio_config=None,
        boi_token_id=token_id("<|image>"),
        eoi_token_id=token_id("<image|>"),
        image_token_id=token_id("<|image|>"),
        video_token_id=token_id("<|video|>"),
        boa_token_id=token_id("<|audio>"),
        audio_token_id=token_id("<|audio|>"),
    )
    model = Gemma4ForConditionalGeneration(config)
    processor = Gemma4Processor(
        feature_extractor=Gemma4AudioFeatureExtractor(),  # the processor requires one; no audio is sent
        image_processor=Gemma4ImageProcessor(max_soft_tokens=70, patch_size=16, pooling_kernel_size=3),
        video_processor=Gemma4VideoProcessor(max_soft_tokens=70, patch_size=16, pooling_kernel_size=3),
        tokenizer=tokenizer,
        chat_template=template,
        image_seq_length=70,
    )
    return model, processor


def _molmo2():
    from transformers import (
        Molmo2Config,
        Molmo2ForConditionalGeneration,
        Molmo2ImageProcessor,
        Molmo2Processor,
        Molmo2VideoProcessor,
    )

    image_tokens = ["<im_patch>", "<im_col>", "<im_start>", "<low_res_im_start>", "<frame_start>", "<im_end>"]
    image_tokens += ["<frame_end>", "<im_low>", "<|image|>", "<|video|>"]
    tokenizer = _tokenizer(
        [*QWEN_CHAT_TOKENS, *image_tokens],
        eos="<|im_end|>",
        pad="<|endoftext|>",
        template=chat_template("molmo2"),
        extra={"image_token": "<|image|>", "video_token": "<|video|>"},
    )
    token_id = tokenizer.convert_tokens_to_ids
    config = Molmo2Config(
        vision_config={
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "num_key_value_heads": 2,
            "head_dim": 16,
            "image_size": [56, 56],
            "patch_size": 14,
        },
        adapter_config={
            "vision_feature_layer": [-1],
            "hidden_size": 32,
            "num_attention_heads": 2,
            "num_key_value_heads": 2,
            "head_dim": 16,
            "intermediate_size": 64,
            "text_hidden_size": 32,
        },
        text_config=_text(tokenizer, additional_vocab_size=0),
        image_start_token_id=token_id("<im_start>"),
        low_res_image_start_token_id=token_id("<low_res_im_start>"),
        image_end_token_id=token_id("<im_end>"),
        image_patch_id=token_id("<im_patch>"),
        frame_start_token_id=token_id("<frame_start>"),
        frame_end_token_id=token_id("<frame_end>"),
    )
    model = Molmo2ForConditionalGeneration(config)
    processor = Molmo2Processor(
        image_processor=Molmo2ImageProcessor(
            size={"height": 56, "width": 56}, max_crops=2, overlap_margins=[1, 1], patch_size=14
        ),
        video_processor=Molmo2VideoProcessor(size={"height": 56, "width": 56}, patch_size=14, pooling_size=[2, 2]),
        tokenizer=tokenizer,
        chat_template=chat_template("molmo2"),
    )
    return model, processor


def _internvl():
    from transformers import (
        GotOcr2ImageProcessor,
        InternVLConfig,
        InternVLForConditionalGeneration,
        InternVLProcessor,
        InternVLVideoProcessor,
    )

    tokenizer = _tokenizer(
        [*QWEN_CHAT_TOKENS, "<img>", "</img>", "<IMG_CONTEXT>", "<video>"],
        eos="<|im_end|>",
        pad="<|endoftext|>",
        template=chat_template("internvl"),
        extra={
            "start_image_token": "<img>",
            "end_image_token": "</img>",
            "context_image_token": "<IMG_CONTEXT>",
            "video_token": "<video>",
        },
    )
    config = InternVLConfig(
        vision_config={
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "image_size": [32, 32],
            "patch_size": [8, 8],
        },
        text_config={"model_type": "qwen2", **_text(tokenizer)},
        image_token_id=tokenizer.convert_tokens_to_ids("<IMG_CONTEXT>"),
        downsample_ratio=0.5,
    )
    model = InternVLForConditionalGeneration(config)
    image_size = {"height": 32, "width": 32}
    processor = InternVLProcessor(
        image_processor=GotOcr2ImageProcessor(size=image_size, max_patches=2),
        video_processor=InternVLVideoProcessor(size=image_size),
        tokenizer=tokenizer,
        chat_template=chat_template("internvl"),
        image_seq_length=4,
    )
    return model, processor


def _llava_onevision():
    from transformers import (
        LlavaOnevisionConfig,
        LlavaOnevisionForConditionalGeneration,
        LlavaOnevisionImageProcessor,
        LlavaOnevisionProcessor,
        LlavaOnevisionVideoProcessor,
    )

    tokenizer = _tokenizer(
        [*QWEN_CHAT_TOKENS, "<image>", "<video>"],
        eos="<|im_end|>",
        pad="<|endoftext|>",
        template=chat_template("llava_onevision"),
        extra={"image_token": "<image>", "video_token": "<video>"},
    )
    token_id = tokenizer.convert_tokens_to_ids
    config = LlavaOnevisionConfig(
        vision_config={
            "model_type": "siglip_vision_model",
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "image_size": 32,
            "patch_size": 8,
        },
        text_config={"model_type": "qwen2", **_text(tokenizer)},
        image_token_index=token_id("<image>"),
        video_token_index=token_id("<video>"),
        image_grid_pinpoints=[[32, 32]],
        vision_feature_layer=-1,
    )
    model = LlavaOnevisionForConditionalGeneration(config)
    processor = LlavaOnevisionProcessor(
        image_processor=LlavaOnevisionImageProcessor(
            size={"height": 32, "width": 32}, image_grid_pinpoints=[[32, 32]], do_pad=True
        ),
        video_processor=LlavaOnevisionVideoProcessor(size={"height": 32, "width": 32}),
        tokenizer=tokenizer,
        chat_template=chat_template("llava_onevision"),
        num_image_tokens=16,
        vision_feature_select_strategy="full",
    )
    return model, processor


_BUILDERS = {
    "qwen3-vl": lambda: _qwen_vl(version="3"),
    "qwen3-vl-thinking": lambda: _qwen_vl(version="3", thinking=True),
    "qwen2.5-vl": lambda: _qwen_vl(version="2.5"),
    "gemma3": _gemma3,
    "gemma4": _gemma4,
    "molmo2": _molmo2,
    "internvl": _internvl,
    "llava-onevision": _llava_onevision,
}


def build_tiny_family(name: str, out: Path, *, seed: int = 0) -> Path:
    """Write the tiny random stand-in of family ``name`` (a key of :data:`FAMILIES`) and its processor to ``out``."""
    import torch

    if name not in _BUILDERS:
        raise InputError(f"unknown family {name!r}: choose one of {', '.join(FAMILIES)}")
    torch.manual_seed(seed)
    out = Path(out)
    model, processor = _BUILDERS[name]()
    model.save_pretrained(out)
    processor.save_pretrained(out)
    return out
