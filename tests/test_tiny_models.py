"""The tiny models load through the project's loader and behave like the real architectures."""

import numpy as np
import pytest
import torch
from PIL import Image

from recipes.model_io.modeling import is_vision_language, load_model, load_processor, tokenizer_of


@pytest.fixture
def tiny_vl(tiny_qwen3_vl):
    return tiny_qwen3_vl


def test_vision_language_checkpoint_loads_with_processor(tiny_vl):
    assert is_vision_language(str(tiny_vl))
    model = load_model(str(tiny_vl))
    processor = load_processor(str(tiny_vl))
    assert type(model).__name__ == "Qwen3VLForConditionalGeneration"
    assert model.config.vision_config.out_hidden_size == model.config.text_config.hidden_size
    assert model.config.video_token_id == tokenizer_of(processor).convert_tokens_to_ids("<|video_pad|>")


def test_video_frames_get_their_source_timestamps(tiny_vl):
    processor = load_processor(str(tiny_vl))
    frames = [Image.fromarray(np.full((48, 64, 3), 30 * i, np.uint8)) for i in range(4)]
    text = processor.apply_chat_template(
        [{"role": "user", "content": [{"type": "video"}, {"type": "text", "text": "Q"}]}], tokenize=False
    )
    batch = processor(
        text=[text],
        videos=[frames],
        video_metadata=[{"fps": 10.0, "total_num_frames": 900, "frames_indices": [100, 110, 120, 130]}],
        do_sample_frames=False,
        return_tensors="pt",
    )
    decoded = processor.batch_decode(batch["input_ids"])[0]
    assert "<10.5 seconds>" in decoded and "<12.5 seconds>" in decoded
    assert batch["video_grid_thw"].tolist()[0][0] == 2


def test_text_model_gives_single_token_letters(tiny_causal_lm):
    path = tiny_causal_lm
    assert not is_vision_language(str(path))
    tokenizer = load_processor(str(path))
    for letter in "ABCDEFG":
        assert len(tokenizer.tokenize(letter)) == 1 and len(tokenizer.tokenize(" " + letter)) == 1
    model = load_model(str(path))
    logits = model(**tokenizer(["Question: A?"], return_tensors="pt")).logits
    assert torch.isfinite(logits).all()


@pytest.mark.parametrize("kind", ["qwen3-vl", "qwen3"])
def test_tiny_models_carry_the_real_chat_template_and_every_token_it_emits(kind, tiny_qwen3_vl, tiny_causal_lm):
    """Qwen3-VL-8B-Instruct's and Qwen3's own templates (as TRL stores them), and a tokenizer holding each of their
    tags as one token, so a prompt tokenizes as with the real model."""
    import re
    from importlib.resources import files

    path, name = {"qwen3-vl": (tiny_qwen3_vl, "qwen3_vl"), "qwen3": (tiny_causal_lm, "qwen3")}[kind]
    shipped = (files("trl") / "chat_templates" / f"{name}.jinja").read_text()
    processor = load_processor(str(path))
    tokenizer = tokenizer_of(processor)
    assert processor.chat_template == shipped and tokenizer.chat_template == shipped
    tags = set(re.findall(r"<\|[a-z_]+\|>|</?(?:tool_call|tool_response|think)>", shipped))
    assert {"<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_response>"} <= tags
    if kind == "qwen3-vl":
        assert {"<|vision_start|>", "<|image_pad|>", "<|video_pad|>", "<|vision_end|>"} <= tags
    else:
        assert {"<think>", "</think>"} <= tags
    for tag in tags:
        assert len(tokenizer.encode(tag, add_special_tokens=False)) == 1, tag
    # Qwen's special flags: chat markers are dropped on decoding, the reasoning and tool tags are kept
    ids = tokenizer.encode("<think>x</think><|im_end|>", add_special_tokens=False)
    assert tokenizer.decode(ids, skip_special_tokens=True) == "<think>x</think>"


def test_weight_std_makes_greedy_answers_more_than_one_repeated_token(tmp_path):
    """The default tiny model answers any prompt with one token repeated; redrawn weights give varied answers that
    depend on the prompt (what a test comparing two harnesses' outputs needs)."""
    from recipes.training.tiny_models import build_tiny_qwen3_vl

    prompts = ["Question: Which instrument is used?", "Clip: 00:01:05.50 to 00:01:20.00 of the source video."]
    answers = {}
    for name, std in (("default", None), ("redrawn", 0.3)):
        path = build_tiny_qwen3_vl(tmp_path / name, weight_std=std)
        model, tokenizer = load_model(str(path)), tokenizer_of(load_processor(str(path)))
        answers[name] = []
        for prompt in prompts:
            ids = tokenizer(prompt, return_tensors="pt")
            output = model.generate(**ids, max_new_tokens=8, do_sample=False)
            answers[name].append(tuple(output[0, ids["input_ids"].shape[1] :].tolist()))
    assert all(len(set(answer)) == 1 for answer in answers["default"])
    assert all(len(set(answer)) > 1 for answer in answers["redrawn"])
    assert answers["redrawn"][0] != answers["redrawn"][1]


def test_the_vllm_stand_in_has_head_dim_64_and_qwen3_vl_8b_rope_layout(tmp_path):
    """vLLM's CPU attention refuses head size 16, so the stand-in ``vllm serve`` runs takes 64; its M-RoPE sections
    still sum to half the head and are marked interleaved as Qwen3-VL-8B's are (vLLM reads the flag; without it
    image tokens are rotated differently there than in transformers)."""
    from recipes.training.architectures import QWEN3_VL_8B_INSTRUCT
    from recipes.training.tiny_models import build_tiny_qwen3_vl, main

    assert main(["--out", str(tmp_path / "vl64"), "--head-dim", "64", "--weight-std", "0.3"]) == 0
    model = load_model(str(tmp_path / "vl64"))
    text = model.config.text_config
    assert text.head_dim == 64 and sum(text.rope_parameters["mrope_section"]) == 32
    published = QWEN3_VL_8B_INSTRUCT["text_config"]["rope_scaling"]
    assert text.rope_parameters["mrope_interleaved"] is published["mrope_interleaved"] is True
    tokenizer = tokenizer_of(load_processor(str(tmp_path / "vl64")))
    logits = model(**tokenizer(["Question: A?"], return_tensors="pt")).logits
    assert torch.isfinite(logits).all()
    with pytest.raises(ValueError, match="multiple of 16"):
        build_tiny_qwen3_vl(tmp_path / "bad", head_dim=40)
    with pytest.raises(SystemExit):
        main(["--out", str(tmp_path / "lm"), "--kind", "causal-lm", "--weight-std", "0.3"])
