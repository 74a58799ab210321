"""Tiny random models built from configs, for tests, the demo and smoke recipes (nothing is downloaded).

``build_tiny_qwen3_vl(out)`` writes a ~1 MB Qwen3-VL (2 text layers, 2 vision blocks) with a processor whose
tokenizer is trained on the spot; ``build_tiny_causal_lm(out)`` writes a text-only Qwen3 with the same vocabulary.
Both carry the chat template their real model ships (Qwen3-VL-8B-Instruct's, Qwen3's) and every added token it
emits, and load with the ordinary ``from_pretrained`` calls, so code under test renders and tokenizes what it would
with ``Qwen/Qwen3-VL-8B-Instruct``. The architecture's silent traps (see ``docs/training_notes.md``) are
asserted here: vision ``out_hidden_size`` equals the text width, token ids come from the tokenizer, the M-RoPE
sections sum to half the head size, and the processor's patch sizes match the vision config.

Usage: ``python -m recipes.training.tiny_models --out build/tiny --kind qwen3-vl``.
"""

import argparse
from pathlib import Path

from builders.errors import InputError


# The added tokens of Qwen3 and Qwen3-VL-8B-Instruct (their tokenizer_config.json), with the same special flags:
# every token their chat templates emit is one token here too, and ``skip_special_tokens`` drops what it drops there.
SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
]
ADDED_TOKENS = [
    "<tool_call>",
    "</tool_call>",
    "<|fim_prefix|>",
    "<|fim_middle|>",
    "<|fim_suffix|>",
    "<|fim_pad|>",
    "<|repo_name|>",
    "<|file_sep|>",
    "<tool_response>",
    "</tool_response>",
    "<think>",
    "</think>",
]

# The chat templates the real models ship, as TRL stores them byte for byte (``trl/chat_templates/``, used there
# to recognise a model by its template): Qwen3-VL's for the tiny Qwen3-VL, Qwen3's for the tiny text model. The
# Qwen3-VL one wraps a video as ``<|vision_start|><|video_pad|><|vision_end|>`` (``render_chat`` collapses it, as the
# processor writes each frame's markers itself); Qwen3's writes an empty ``<think>`` block before the last answer.
QWEN3_VL_TEMPLATE = "qwen3_vl"
QWEN3_TEMPLATE = "qwen3"


def trl_chat_template(name: str) -> str:
    """``trl/chat_templates/<name>.jinja`` from the installed TRL (``qwen3_vl``, ``qwen3``, ``qwen3_vl_training``)."""
    from importlib.resources import files

    path = files("trl") / "chat_templates" / f"{name}.jinja"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: this TRL has no {name!r} chat template; install trl>=1.16")
    return path.read_text(encoding="utf-8")


CORPUS = [
    "Clip: 00:01:05.50 to 00:01:20.00 of the source video. Frame at 00:01:07.25:",
    "Question: Which anatomical structure is being dissected? Options: A. B. C. D. E. F. G.",
    "Answer with the letter of the correct option. Answer with the event letters in chronological order.",
    "Answer with the sequence of surgical steps shown in the clip, in order. Answer in one or two sentences.",
    "gallbladder cystic duct cystic artery liver calot triangle hepatocystic clip cut grasper hook scissors",
    "laparoscopic cholecystectomy appendectomy hernia colectomy suturing needle trocar irrigation bleeding",
    "The surgeon retracts the fundus, dissects the peritoneum and clips the artery before division.",
    "What is the most likely next step? Why does the surgeon do this? Which instrument is used?",
    "general surgery neurosurgery robotic orthopedic critical care patient diagnosis treatment management",
    "0 1 2 3 4 5 6 7 8 9 10 12 15 20 25 30 45 60 90 seconds minutes A,B,C,D (A) (B) Answer: B.",
]


def train_tokenizer(corpus: list[str] | None = None, vocab_size: int = 640, chat_template: str = QWEN3_VL_TEMPLATE):
    """A byte-level BPE tokenizer with Qwen's added tokens and the real ``chat_template`` (a name of
    :func:`trl_chat_template`), wrapped as a ``PreTrainedTokenizerFast``."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus or CORPUS, trainer=trainer)
    tokenizer.add_tokens([AddedToken(token, special=False, normalized=False) for token in ADDED_TOKENS])
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        chat_template=trl_chat_template(chat_template),
        extra_special_tokens={
            "image_token": "<|image_pad|>",
            "video_token": "<|video_pad|>",
            "vision_start_token": "<|vision_start|>",
            "vision_end_token": "<|vision_end|>",
        },
    )


def tiny_text_config(tokenizer, **overrides) -> dict:
    """The tiny text tower every stand-in shares (here and in the tests' ``tiny_families``); callers state how
    it ties."""
    config = {
        "vocab_size": len(tokenizer),
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "head_dim": 16,
        "max_position_embeddings": 4096,
        "bos_token_id": None,
        "eos_token_id": tokenizer.convert_tokens_to_ids("<|im_end|>"),
        "pad_token_id": tokenizer.pad_token_id,
    }
    config.update(overrides)
    return config


def read_corpus(path: Path | None) -> list[str] | None:
    """The tokenizer's training text: :data:`CORPUS` plus the lines of ``path`` (e.g. a synthetic world's
    ``corpus.txt``), so that the words a tiny model is trained on are whole tokens rather than bytes."""
    if path is None:
        return None
    lines = [line for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
    if not lines:
        raise InputError(f"{path}: the corpus file is empty")
    return CORPUS + lines


def width_overrides(hidden_size: int) -> dict:
    """The text tower at another width: the MLP twice as wide and one attention head (and key/value head) per 32
    channels. The default 32 is the smallest stand-in; the learning checks on a synthetic world take 128, with which
    a two-layer model learns on a CPU in minutes to point at an option by its content (at 32 it does not)."""
    if hidden_size == 32:
        return {}
    if hidden_size % 32:
        raise InputError(f"hidden_size must be a multiple of 32, got {hidden_size}")
    heads = max(2, hidden_size // 32)
    return {
        "hidden_size": hidden_size,
        "intermediate_size": 2 * hidden_size,
        "num_attention_heads": heads,
        "num_key_value_heads": heads,
    }


def build_tiny_qwen3_vl(
    out: Path,
    *,
    seed: int = 0,
    max_pixels: int = 64 * 64,
    weight_std: float | None = None,
    head_dim: int = 16,
    corpus: Path | None = None,
    hidden_size: int = 32,
) -> Path:
    """Write a random 2-layer Qwen3-VL and its processor to ``out``; frames are resized to at most ``max_pixels``.

    With the default initialisation the tiny model answers any prompt with one token repeated; ``weight_std``
    redraws every weight matrix from N(0, std) (seeded) so that greedy outputs depend on the prompt and the frames,
    which is what a test comparing two harnesses' outputs needs (0.3 does). ``head_dim`` is the text attention's
    head size (a multiple of 16; the M-RoPE sections keep the 2:1:1 split and sum to half of it): vLLM's CPU
    attention refuses 16, so a stand-in served by ``vllm serve`` takes 64. ``corpus``: extra tokenizer text
    (:func:`read_corpus`); ``hidden_size``: the text width (:func:`width_overrides`).
    """
    import torch
    from transformers import (
        Qwen2VLImageProcessor,
        Qwen3VLConfig,
        Qwen3VLForConditionalGeneration,
        Qwen3VLProcessor,
        Qwen3VLVideoProcessor,
    )

    tokenizer = train_tokenizer(read_corpus(corpus), vocab_size=1024 if corpus else 640)
    token_id = tokenizer.convert_tokens_to_ids
    if head_dim % 16:
        raise InputError(f"head_dim must be a multiple of 16 (the M-RoPE sections split it 2:1:1), got {head_dim}")
    mrope_section = [head_dim // 4, head_dim // 8, head_dim // 8]
    # Qwen3-VL-8B's config marks its M-RoPE interleaved; transformers always interleaves, vLLM only with the flag
    # (without it vLLM rotates image tokens by the chunked layout and answers differently from transformers)
    rope_parameters = {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": mrope_section}
    rope_parameters["mrope_interleaved"] = True
    text_config = tiny_text_config(
        tokenizer,
        head_dim=head_dim,
        rope_parameters=rope_parameters,
        tie_word_embeddings=True,
        **width_overrides(hidden_size),
    )
    vision_config = {
        "depth": 2,
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_heads": 2,
        "out_hidden_size": text_config["hidden_size"],
        "patch_size": 16,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
        "num_position_embeddings": 64,
        "deepstack_visual_indexes": [0],
    }
    config = Qwen3VLConfig(
        text_config=text_config,
        vision_config=vision_config,
        image_token_id=token_id("<|image_pad|>"),
        video_token_id=token_id("<|video_pad|>"),
        vision_start_token_id=token_id("<|vision_start|>"),
        vision_end_token_id=token_id("<|vision_end|>"),
        tie_word_embeddings=True,
    )
    assert sum(text_config["rope_parameters"]["mrope_section"]) == text_config["head_dim"] // 2
    assert max(vision_config["deepstack_visual_indexes"]) < vision_config["depth"]
    torch.manual_seed(seed)
    model = Qwen3VLForConditionalGeneration(config)
    if weight_std is not None:
        generator = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for parameter in model.parameters():
                if parameter.dim() >= 2:
                    parameter.copy_(torch.randn(parameter.shape, generator=generator) * weight_std)
    sizes = {"patch_size": 16, "temporal_patch_size": 2, "merge_size": 2}
    size = {"shortest_edge": 32 * 32, "longest_edge": max_pixels}
    processor = Qwen3VLProcessor(
        image_processor=Qwen2VLImageProcessor(size=size, **sizes),
        video_processor=Qwen3VLVideoProcessor(size=size, do_sample_frames=False, **sizes),
        tokenizer=tokenizer,
        chat_template=trl_chat_template(QWEN3_VL_TEMPLATE),
    )
    out = Path(out)
    model.save_pretrained(out)
    processor.save_pretrained(out)
    from builders.outputs import publish_permissions

    publish_permissions(out)
    return out


def build_tiny_causal_lm(
    out: Path, *, seed: int = 0, corpus: Path | None = None, hidden_size: int = 32, head_dim: int = 16
) -> Path:
    """Write a random 2-layer text-only Qwen3 and its tokenizer to ``out`` (blind guessers, SurgiQ scoring).
    ``corpus``: extra tokenizer text (:func:`read_corpus`); ``hidden_size``: the width (:func:`width_overrides`)."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    tokenizer = train_tokenizer(read_corpus(corpus), vocab_size=1024 if corpus else 640, chat_template=QWEN3_TEMPLATE)
    torch.manual_seed(seed)
    text_config = tiny_text_config(
        tokenizer, tie_word_embeddings=True, head_dim=head_dim, **width_overrides(hidden_size)
    )
    model = Qwen3ForCausalLM(Qwen3Config(**text_config))
    out = Path(out)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    from builders.outputs import publish_permissions

    publish_permissions(out)
    return out


BUILDERS = {"qwen3-vl": build_tiny_qwen3_vl, "causal-lm": build_tiny_causal_lm}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--kind", choices=list(BUILDERS), default="qwen3-vl")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--head-dim", type=int, help="text attention head size (default 16; vLLM on CPU: 64)")
    parser.add_argument("--weight-std", type=float, help="qwen3-vl only: redraw weights from N(0, std)")
    parser.add_argument("--max-pixels", type=int, help="qwen3-vl only: the processor's largest frame, in pixels")
    parser.add_argument("--hidden-size", type=int, help="the text width (default 32; a multiple of 32)")
    parser.add_argument("--corpus", type=Path, help="extra tokenizer text, one line each (a world's corpus.txt)")
    args = parser.parse_args(argv)
    options = {"weight_std": args.weight_std, "max_pixels": args.max_pixels}
    options = {key: value for key, value in options.items() if value is not None}
    if options and args.kind != "qwen3-vl":
        parser.error(f"--{next(iter(options)).replace('_', '-')} applies to --kind qwen3-vl only")
    options |= {k: v for k, v in (("hidden_size", args.hidden_size), ("head_dim", args.head_dim)) if v is not None}
    print(BUILDERS[args.kind](args.out, seed=args.seed, corpus=args.corpus, **options))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
