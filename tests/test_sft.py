"""The SFT recipe on tiny models: what reaches the model (labels, timestamps, blind inputs, uniform vision calls),
a few real optimizer steps per modality, freezing, LoRA, folds, two-stage schedules, resume, and the model card."""

import itertools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from datasets import Dataset
from huggingface_hub import ModelCard
from PIL import Image

from builders.prompt import answer_target
from builders.sureon.clips import format_clock
from recipes.model_io.chat_inputs import flatten_text, split_visuals, video_metadata
from recipes.model_io.modeling import load_model, load_processor
from recipes.sft import cli, main, make_parser
from recipes.training.collator import SFTCollator, refused_rows
from recipes.training.freezing import parameter_group
from recipes.training.mixture import MixtureSource, build_mixture, parse_mixture
from recipes.training.tiny_models import trl_chat_template


def image_source(folder: Path, n: int = 6) -> dict:
    """A TRL-conversational image QA set (``messages`` + ``images``) written as parquet."""
    rows = []
    for i in range(n):
        image = Image.fromarray(np.full((40 + 8 * i, 56, 3), 25 * i, np.uint8))
        rows.append(
            {
                "id": f"img{i}",
                "messages": [
                    {
                        "role": "user",
                        "content": [{"type": "image"}, {"type": "text", "text": "Which tool is visible?"}],
                    },
                    {
                        "role": "assistant",
                        "content": [{"type": "text", "text": ["grasper", "hook", "clipper"][i % 3]}],
                    },
                ],
                "images": [image],
            }
        )
    path = folder / "images.parquet"
    Dataset.from_list(rows).to_parquet(str(path))
    return {"path": "parquet", "data_files": str(path), "format": "messages"}


def text_source(folder: Path, n: int = 6) -> dict:
    """A text-only prompt/completion set (JSON lines)."""
    path = folder / "text.jsonl"
    lines = [
        {"prompt": f"Question {i}: which letter? Options: A. x B. y", "completion": "AB"[i % 2]} for i in range(n)
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return {"path": "json", "data_files": str(path), "format": "prompt_completion"}


def video_source(build, name: str = "db", **extra) -> dict:
    return {"path": str(build.out), "name": name, "split": "train", **extra}


def collator_for(model_path, entries, **kwargs):
    loaded, index, _ = build_mixture(parse_mixture(entries))
    return SFTCollator(load_processor(str(model_path)), loaded, **kwargs), index, loaded


def run_sft(tmp_path, model, entries, *extra, name="run", steps=2, **config_keys):
    """Train through the real parser and ``main`` (what ``accelerate launch recipes/sft.py`` runs)."""
    config = {
        "model_name_or_path": str(model),
        "dtype": "float32",
        "dataset_mixture": entries,
        "output_dir": str(tmp_path / name),
        "max_steps": steps,
        "per_device_train_batch_size": 2,
        "learning_rate": 1e-2,
        "lr_scheduler_type": "constant",
        "logging_steps": 1,
        "save_steps": 1,
        "bf16": False,
        "use_cpu": True,
        "report_to": "none",
        "activation_checkpointing": False,
        **config_keys,
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(json.dumps(config))  # JSON is YAML
    args = make_parser().parse_args_and_config(["--config", str(path), *extra])
    out = main(*args, recipe=str(path))
    return out, json.loads((out / "training_complete.json").read_text())


def load_config_rows(build, name, split="train"):
    from datasets import load_dataset

    return load_dataset(str(build.out), name, split=split)


def snapshot(path):
    model = load_model(str(path), dtype="float32")
    return {name: p.detach().clone() for name, p in model.named_parameters()}


def changed(before, after):
    return {name for name in before if not torch.equal(before[name], after[name])}


# --- what the collator hands the model -----------------------------------------------------------------------------


def test_labels_keep_only_the_answer_and_end_of_turn(tiny_qwen3_vl, sureon_build):
    collator, index, loaded = collator_for(tiny_qwen3_vl, [video_source(sureon_build)])
    batch = collator([index[0], index[1]])
    tokenizer = collator.tokenizer
    for i in range(2):
        record = loaded[0].dataset[index[i]["row"]]
        kept = batch["labels"][i][batch["labels"][i] != -100]
        assert tokenizer.decode(kept) == answer_target(record) + "<|im_end|>\n"
        learned = batch["labels"][i] != -100
        assert not (learned & (batch["input_ids"][i] == collator.processor.video_token_id)).any()
        assert batch["attention_mask"][i][learned].all()


def test_cached_encodings_give_the_same_batches_and_stop_at_the_cap(tiny_qwen3_vl, sureon_build):
    """``encoded_cache_mb``: a row drawn again comes from memory, as it was encoded, and the cache never grows past its
    cap; without it nothing is kept."""
    entries = [video_source(sureon_build)]
    plain, index, _ = collator_for(tiny_qwen3_vl, entries, max_frames=4)
    cached, _, _ = collator_for(tiny_qwen3_vl, entries, max_frames=4, encoded_cache_mb=64)
    rows = [index[0], index[1], index[0], index[2], index[1]]
    for first, second in itertools.pairwise(rows):
        expected, got = plain([first, second]), cached([first, second])
        assert expected.keys() == got.keys()
        for key in expected:
            assert torch.equal(expected[key], got[key]), key
    assert len(cached._encoded) == 3 and not plain._encoded
    assert cached.encoded(index[0]) is cached.encoded(index[0])  # from memory, not encoded again
    one_row = cached.encoded(index[0]).nbytes()
    capped, _, _ = collator_for(tiny_qwen3_vl, entries, max_frames=4, encoded_cache_mb=1.5 * one_row / 2**20)
    capped([index[0], index[1], index[2]])
    assert 1 <= len(capped._encoded) < 3 and capped._encoded_bytes <= 1.5 * one_row


@pytest.mark.parametrize("kind", ["qwen3-vl", "qwen3"])
def test_labels_are_the_assistant_mask_of_trls_training_template(kind, tiny_qwen3_vl, tiny_causal_lm, sureon_build):
    """The collator's labels cover exactly what TRL's {% generation %} variant of the real template marks as the
    assistant's (Qwen3's includes its empty <think> block), over the same tokens."""
    model, template = {"qwen3-vl": (tiny_qwen3_vl, "qwen3_vl_training"), "qwen3": (tiny_causal_lm, "qwen3_training")}[
        kind
    ]
    collator, index, _ = collator_for(model, [video_source(sureon_build)], blind=True)
    for row in index.select(range(3)):
        example = collator.example(row)
        encoded = collator.encode(example)
        messages = example.prompt + [{"role": "assistant", "content": [{"type": "text", "text": example.target}]}]
        rendered = collator.tokenizer.apply_chat_template(
            messages if collator.is_vlm else flatten_text(messages),
            chat_template=trl_chat_template(template),
            tokenize=True,
            return_dict=True,
            return_assistant_tokens_mask=True,
        )
        assert rendered["input_ids"] == encoded.input_ids
        assert rendered["assistant_masks"] == [int(label != -100) for label in encoded.labels]
        assert sum(rendered["assistant_masks"]) > 2


def test_video_frames_reach_the_processor_with_their_source_timestamps(tiny_qwen3_vl, sureon_build):
    collator, index, loaded = collator_for(tiny_qwen3_vl, [video_source(sureon_build)])
    record = loaded[0].dataset[index[0]["row"]]
    stamps = record["frame_timestamps"]
    assert len(stamps) == 8
    text = collator.tokenizer.decode(collator([index[0]])["input_ids"][0])
    expected = [f"<{(stamps[i] + stamps[i + 1]) / 2:.1f} seconds>" for i in range(0, 8, 2)]
    assert [marker for marker in expected if marker in text] == expected
    assert video_metadata([12.5, 13.25])["frames_indices"] == [12500, 13250]


def test_max_frames_caps_tagged_images_as_it_caps_a_video(tiny_qwen3_vl, sureon_build):
    """``max_frames: 5`` shows 5 frames whichever way the clip goes in, the same 5, each image with its own tag."""
    shown = {}
    for frames_as in ("video", "images"):
        collator, index, loaded = collator_for(
            tiny_qwen3_vl, [video_source(sureon_build)], frames_as=frames_as, max_frames=5
        )
        example = collator.example(index[0])
        _, images, videos = split_visuals(example.prompt, collator.max_frames)
        shown[frames_as] = videos[0]["timestamps"] if videos else images
        if frames_as == "images":
            text = collator.tokenizer.decode(collator([index[0]])["input_ids"][0])
            tags = re.findall(r"\nFrame at ([\d:.]+): <\|vision_start\|>(?:<\|image_pad\|>)+<\|vision_end\|>", text)
            assert len(images) == len(tags) == text.count("Frame at ") == 5
            assert collator([index[0]])["image_grid_thw"].shape[0] == 5
    record = loaded[0].dataset[index[0]["row"]]
    assert len(record["frame_timestamps"]) == 8
    assert tags == [format_clock(t) for t in shown["video"]]
    assert shown["video"][0] == record["frame_timestamps"][0] and shown["video"][-1] == record["frame_timestamps"][-1]


def test_a_template_that_wraps_the_video_does_not_nest_vision_markers(tiny_qwen3_vl, sureon_build):
    collator, index, _ = collator_for(tiny_qwen3_vl, [video_source(sureon_build)])
    wrapped_pad = "<|vision_start|><|video_pad|><|vision_end|>"
    assert wrapped_pad in collator.processor.chat_template  # Qwen3-VL's own template wraps it
    collator.processor.chat_template = collator.processor.chat_template.replace(wrapped_pad, "<|video_pad|>")
    bare = collator.tokenizer.decode(collator([index[0]])["input_ids"][0])
    template = collator.processor.chat_template
    assert "<|video_pad|>" in template
    collator.processor.chat_template = template.replace("<|video_pad|>", "<|vision_start|><|video_pad|><|vision_end|>")
    wrapped = collator.tokenizer.decode(collator([index[0]])["input_ids"][0])
    assert not re.search(r"<\|vision_start\|><[\d.]+ seconds>", wrapped)
    assert wrapped == bare


def test_blind_batches_carry_no_visual_input_and_the_same_question(tiny_qwen3_vl, sureon_build):
    visual, index, _ = collator_for(tiny_qwen3_vl, [video_source(sureon_build)])
    blind, _, _ = collator_for(tiny_qwen3_vl, [video_source(sureon_build)], blind=True)
    blind_batch, visual_batch = blind([index[0]]), visual([index[0]])
    assert not {"pixel_values", "pixel_values_videos"} & set(blind_batch)
    decode = visual.tokenizer.decode
    blind_text = decode(blind_batch["input_ids"][0])
    visual_text = decode(visual_batch["input_ids"][0])
    for token in ("<|video_pad|>", "<|vision_start|>", "<|vision_end|>"):
        visual_text = visual_text.replace(token, "")

    assert re.sub(r"<[\d.]+ seconds>", "", visual_text) == blind_text


def test_every_batch_runs_the_vision_tower_once_per_modality(tiny_qwen3_vl, sureon_build, tmp_path):
    entries = [video_source(sureon_build), image_source(tmp_path), text_source(tmp_path)]
    collator, index, loaded = collator_for(tiny_qwen3_vl, entries, uniform_vision_calls=True)
    model = load_model(str(tiny_qwen3_vl), dtype="float32")
    calls = []
    model.model.visual.register_forward_hook(lambda *_: calls.append(1))
    starts = np.cumsum([0] + [item.rows_used for item in loaded])
    video, image, text = (index[int(s)] for s in starts[:3])
    for rows in ([text], [image], [video], [text, image], [video, text], [image, video, text]):
        calls.clear()
        batch = collator(rows)
        assert {"pixel_values", "pixel_values_videos"} <= set(batch)
        loss = model(**batch).loss
        assert torch.isfinite(loss)
        assert len(calls) == 2, rows
    # The dummies change nothing: same loss as the same text batch without them.
    plain, _, _ = collator_for(tiny_qwen3_vl, entries, uniform_vision_calls=False)
    with torch.no_grad():
        with_dummies = model(**collator([text])).loss
        without = model(**plain([text])).loss
    torch.testing.assert_close(with_dummies, without)


def test_a_row_longer_than_max_length_is_refused_whole_and_listed_never_cut(tiny_qwen3_vl, sureon_build, tmp_path):
    """The recipe's max_length reaches the collator: a longer row trains as one masked padding token (never cut
    inside its video's tokens or its answer), so the batch's loss is the other rows' loss, and the row is listed
    with its token counts."""
    entries = [video_source(sureon_build), text_source(tmp_path)]
    unbounded, index, loaded = collator_for(tiny_qwen3_vl, entries, uniform_vision_calls=True)
    video, text = index[0], index[loaded[0].rows_used]
    lengths = {key: len(unbounded.encoded(row).input_ids) for key, row in (("video", video), ("text", text))}
    assert lengths["text"] < lengths["video"]
    log = tmp_path / "refused"
    bounded, _, _ = collator_for(
        tiny_qwen3_vl, entries, uniform_vision_calls=True, max_length=lengths["text"], refused_rows_log=str(log)
    )
    model = load_model(str(tiny_qwen3_vl), dtype="float32")
    with torch.no_grad():
        torch.testing.assert_close(model(**bounded([video, text])).loss, model(**unbounded([text])).loss)
    batch = bounded([video, text])
    assert batch["input_ids"].shape[1] == unbounded([text])["input_ids"].shape[1]  # as wide as the text row alone
    (refused,) = refused_rows(log)
    assert refused["row"] == video["row"] and refused["tokens"] == lengths["video"]
    assert 0 < refused["visual_tokens"] < refused["tokens"] and refused["source"] == loaded[0].source.label
    assert bounded([video])["labels"].eq(-100).all()


def test_a_recipes_max_length_is_obeyed_and_counted_in_the_record(tiny_qwen3_vl, sureon_build, tmp_path):
    collator, index, _ = collator_for(tiny_qwen3_vl, [video_source(sureon_build)])
    lengths = sorted(len(collator.encoded(index[i]).input_ids) for i in range(len(index)))
    bound = lengths[len(lengths) // 2]
    over = sum(1 for length in lengths if length > bound)
    assert 0 < over < len(lengths)
    out, summary = run_sft(
        tmp_path, tiny_qwen3_vl, [video_source(sureon_build)], steps=len(index) // 2, max_length=bound
    )
    assert summary["max_length"] == bound and summary["rows_over_max_length"] == over
    assert len(refused_rows(out / "rows_over_max_length")) == over
    _, unbounded = run_sft(tmp_path, tiny_qwen3_vl, [video_source(sureon_build)], name="unbounded", steps=1)
    assert unbounded["max_length"] is None and unbounded["rows_over_max_length"] == 0


def test_mixture_weights_folds_and_unknown_keys(sureon_build):
    half = MixtureSource(**video_source(sureon_build, name="train_all", weight=0.5))
    twice = MixtureSource(**video_source(sureon_build, weight=2))
    loaded, index, _ = build_mixture([half, twice])
    assert [item.rows_used for item in loaded] == [10, 28]
    again = build_mixture([half, twice])[1]
    assert index["row"] == again["row"]
    with pytest.raises(ValueError, match=r"unknown key 'wieght' \(did you mean 'weight'\?\)"):
        parse_mixture([{"path": "x", "wieght": 2}])
    with pytest.raises(ValueError, match=r"dataset_mixture\[0\]: max_samples: 'ten' is not an integer or null"):
        parse_mixture([{"path": "x", "max_samples": "ten"}])
    loaded, index, folds = build_mixture(
        [MixtureSource(**video_source(sureon_build, name="train_all"))], fold=1, num_folds=3
    )
    videos = loaded[0].dataset["source_id"]
    assert set(folds.values()) == {0, 1, 2}  # the sample's training split has three videos
    assert all(folds[videos[row]] != 1 for row in index["row"])
    assert loaded[0].rows_used == sum(folds[v] != 1 for v in videos) < len(videos)


def test_parameter_groups_of_qwen3_vl():
    assert parameter_group("model.visual.pos_embed.weight", True) == "vision_tower"
    assert parameter_group("model.visual.merger.linear_fc1.weight", True) == "projector"
    assert parameter_group("model.visual.deepstack_merger_list.0.norm.weight", True) == "projector"
    assert parameter_group("model.language_model.layers.0.mlp.up_proj.weight", True) == "llm"
    with pytest.raises(ValueError, match="belongs to no group"):
        parameter_group("model.audio_tower.conv.weight", True)


# --- real optimizer steps ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("modality", ["video", "image", "mixed"])
def test_training_steps_update_every_trainable_parameter(modality, tiny_qwen3_vl, sureon_build, tmp_path):
    entries = {
        "video": [video_source(sureon_build)],
        "image": [image_source(tmp_path)],
        "mixed": [video_source(sureon_build), image_source(tmp_path), text_source(tmp_path)],
    }[modality]
    before = snapshot(tiny_qwen3_vl)
    out, summary = run_sft(tmp_path, tiny_qwen3_vl, entries, steps=3 if modality == "mixed" else 2)
    losses = [
        entry["loss"]
        for entry in json.loads((out / "checkpoint-2" / "trainer_state.json").read_text())["log_history"]
        if "loss" in entry
    ]
    assert losses and all(np.isfinite(losses))
    assert summary["global_step"] == (3 if modality == "mixed" else 2)
    assert changed(before, snapshot(out)) == set(before)


def test_frozen_vision_tower_stays_exactly_as_loaded(tiny_qwen3_vl, sureon_build, tmp_path):
    """With activation checkpointing too, as the 8B recipes run (a frozen tower must not cut the LLM's gradients)."""
    before = snapshot(tiny_qwen3_vl)
    freeze = ("--freeze_vision_tower", "true", "--activation_checkpointing", "true")
    out, summary = run_sft(tmp_path, tiny_qwen3_vl, [video_source(sureon_build)], *freeze)
    moved = changed(before, snapshot(out))
    vision = {name for name in before if parameter_group(name, True) == "vision_tower"}
    assert "model.visual.pos_embed.weight" in vision
    assert moved == set(before) - vision
    assert summary["trainable"]["vision_tower"] == {"frozen": sum(before[name].numel() for name in vision)}


def test_blind_guesser_on_a_text_model(tiny_causal_lm, sureon_build, tmp_path):
    before = snapshot(tiny_causal_lm)
    entries = [video_source(sureon_build, name="train_all", exclude_categories=["SM"])]
    out, summary = run_sft(tmp_path, tiny_causal_lm, entries, "--blind", "true")
    assert summary["blind"] and not summary["vision_language"]
    categories = load_config_rows(sureon_build, "train_all")["category"]
    assert summary["mixture"][0]["rows_used"] == sum(category != "SM" for category in categories) < len(categories)
    assert changed(before, snapshot(out)) == set(before)
    card = ModelCard.load(out / "README.md")
    assert card.data.pipeline_tag == "text-generation" and "blind-guesser" in card.data.tags


def test_a_run_shorter_than_its_warmup_stable_decay_schedule_is_refused(tiny_causal_lm, sureon_build, tmp_path):
    """warmup_stable_decay counts its decay in steps (the tiny guesser recipe: 100 after 20 of warmup); a run shorter
    than both would, in transformers, start its decay part-way as the warmup ends. Refused before anything is
    written; a run exactly as long as warmup + decay trains."""
    schedule = {
        "lr_scheduler_type": "warmup_stable_decay",
        "lr_scheduler_kwargs": {"num_decay_steps": 4},
        "warmup_steps": 2,
    }
    source = [video_source(sureon_build)]
    with pytest.raises(ValueError, match=r"max_steps 5 is shorter than the warmup \(2\) and the decay"):
        run_sft(tmp_path, tiny_causal_lm, source, "--blind", "true", steps=5, **schedule)
    assert not (tmp_path / "run").exists()
    _, summary = run_sft(tmp_path, tiny_causal_lm, source, "--blind", "true", name="long_enough", steps=6, **schedule)
    assert summary["global_step"] == 6


def test_lora_trains_only_the_adapters_and_ends_with_the_merged_model(tiny_qwen3_vl, sureon_build, tmp_path):
    """The adapter stays in ``adapter/``; the run's folder holds the base with it merged, in the base's key layout,
    which loads as any model does (evaluation, GRPO's start, the guessers take the folder as it is)."""
    from peft import PeftModel
    from safetensors import safe_open

    out, summary = run_sft(
        tmp_path,
        tiny_qwen3_vl,
        [video_source(sureon_build)],
        "--use_peft",
        "true",
        "--lora_r",
        "4",
        "--lora_target_modules",
        "q_proj",
        "v_proj",
    )
    base = load_model(str(tiny_qwen3_vl), dtype="float32")
    adapted = PeftModel.from_pretrained(load_model(str(tiny_qwen3_vl), dtype="float32"), str(out / "adapter"))
    merged = {name: p for name, p in adapted.named_parameters()}
    lora = {name for name in merged if "lora_" in name}
    assert lora and all("language_model" in name for name in lora)
    assert any(not torch.equal(merged[name], torch.zeros_like(merged[name])) for name in lora if "lora_B" in name)
    for name, parameter in base.named_parameters():
        peft_name = next(n for n in merged if n.endswith((name.replace("weight", "base_layer.weight"), name)))
        assert torch.equal(parameter, merged[peft_name]), name
    assert set(summary["trainable"]) == {"adapters"}
    assert summary["adapter"] == "adapter" and summary["merged"] is True
    assert not (out / "adapter_config.json").exists()

    def keys(folder):
        with safe_open(str(folder / "model.safetensors"), "pt") as weights:
            return set(weights.keys())

    assert keys(out) == keys(tiny_qwen3_vl)
    expected = dict(adapted.merge_and_unload().named_parameters())
    loaded = dict(load_model(str(out), dtype="float32").named_parameters())
    assert loaded.keys() == expected.keys()
    assert all(torch.allclose(loaded[name], expected[name]) for name in expected)
    before = dict(base.named_parameters())
    assert any(not torch.equal(loaded[name], before[name]) for name in expected if "q_proj" in name)


def test_resume_continues_from_the_last_checkpoint(tiny_qwen3_vl, sureon_build, tmp_path):
    entries = [video_source(sureon_build)]
    run_sft(tmp_path, tiny_qwen3_vl, entries, steps=2)
    out, summary = run_sft(tmp_path, tiny_qwen3_vl, entries, steps=3)
    assert summary["resumed_from"].endswith("checkpoint-2")
    assert summary["global_step"] == 3
    state = json.loads((out / "checkpoint-3" / "trainer_state.json").read_text())
    assert [entry["step"] for entry in state["log_history"] if "loss" in entry] == [1, 2, 3]
    # The weights, the checkpoints' included, are readable as the umask allows (safetensors writes them 0600)
    umask = os.umask(0o022)
    os.umask(umask)
    modes = {path.relative_to(out): path.stat().st_mode & 0o777 for path in out.rglob("*") if path.is_file()}
    assert {path: mode for path, mode in modes.items() if mode != 0o666 & ~umask} == {}
    assert Path("checkpoint-3/model.safetensors") in modes and Path("model.safetensors") in modes


def test_a_save_cut_short_is_passed_over_and_a_requested_one_refused(tiny_qwen3_vl, sureon_build, tmp_path, caplog):
    """A job killed while saving checkpoint-2 (its weights written, trainer_state.json not yet) resumes from
    checkpoint-1, names checkpoint-2 in a warning, and trains on; asked for by name, checkpoint-2 is one line."""
    entries = [video_source(sureon_build)]
    run_sft(tmp_path, tiny_qwen3_vl, entries, steps=2)
    (tmp_path / "run" / "training_complete.json").unlink()
    (tmp_path / "run" / "checkpoint-2" / "trainer_state.json").unlink()
    half_written = str(tmp_path / "run" / "checkpoint-2")
    with pytest.raises(ValueError, match=r"checkpoint-2 is incomplete \(no trainer_state.json"):
        run_sft(tmp_path, tiny_qwen3_vl, entries, "--resume_from_checkpoint", half_written, steps=3)
    with caplog.at_level("WARNING"):
        out, summary = run_sft(tmp_path, tiny_qwen3_vl, entries, steps=3)
    assert summary["resumed_from"].endswith("checkpoint-1") and summary["global_step"] == 3
    assert any("checkpoint-2: no trainer_state.json" in record.message for record in caplog.records)
    state = json.loads((out / "checkpoint-3" / "trainer_state.json").read_text())
    assert [entry["step"] for entry in state["log_history"] if "loss" in entry] == [1, 2, 3]
    _, resumed = run_sft(
        tmp_path, tiny_qwen3_vl, entries, "--resume_from_checkpoint", str(out / "checkpoint-2"), steps=3
    )
    assert resumed["resumed_from"] == str(out / "checkpoint-2")


def test_two_stage_schedule_continues_from_stage_one(tiny_qwen3_vl, sureon_build, tmp_path, monkeypatch):
    from recipes.training import sft_stages

    stages = [
        {"name": "public", "dataset_mixture": [image_source(tmp_path)]},
        {"name": "sureon", "dataset_mixture": [video_source(sureon_build)], "learning_rate": 1e-3},
    ]
    built = []
    monkeypatch.setattr(sft_stages, "build_mixture", lambda *a, **k: built.append(1) or build_mixture(*a, **k))
    out, summary = run_sft(tmp_path, tiny_qwen3_vl, None, stages=stages)
    assert len(built) == 2, "each stage's mixture is built once: checked before the run, then trained as it is"
    assert out.name == "stage2-sureon"
    assert summary["model"] == str(out.parent / "stage1-public")
    card = (out / "README.md").read_text()
    assert "### Stage 1: public" in card and "### Stage 2: sureon" in card
    stage_one = out.parent / "stage1-public" / "training_complete.json"
    finished = stage_one.stat().st_mtime_ns
    run_sft(tmp_path, tiny_qwen3_vl, None, stages=stages)
    assert stage_one.stat().st_mtime_ns == finished, "a finished stage was trained again"


def test_fold_run_writes_its_folds_and_card(tiny_causal_lm, sureon_build, tmp_path):
    results = tmp_path / "results.json"
    results.write_text(
        json.dumps(
            [
                {
                    "task_type": "visual-question-answering",
                    "dataset_type": "sureon/sureon",
                    "dataset_name": "Sureon benchmark",
                    "dataset_config": "bench",
                    "dataset_split": "test",
                    "metric_type": "accuracy",
                    "metric_value": 48.2,
                }
            ]
        )
    )
    entries = [video_source(sureon_build, name="train_all")]
    out, summary = run_sft(
        tmp_path,
        tiny_causal_lm,
        entries,
        "--blind",
        "true",
        "--fold",
        "2",
        "--num_folds",
        "3",
        "--eval_results",
        str(results),
    )
    folds = json.loads((out / "folds.json").read_text())
    assert summary["fold"] == 2 and summary["mixture"][0]["rows_used"] < 20
    assert 2 in folds.values()
    card = ModelCard.load(out / "README.md")
    assert card.data.eval_results[0].metric_value == 48.2
    assert card.data.to_dict()["model-index"][0]["results"][0]["dataset"]["config"] == "bench"
    assert "fold 2 of a 3-fold" in card.text


def record_barriers(monkeypatch, calls: list) -> None:
    """Every ``Accelerator.wait_for_everyone`` is appended to ``calls`` as ``("barrier",)``: an upload must come after
    the last one, since a rank waiting in a barrier for an upload of unbounded length would time out."""
    from accelerate import Accelerator

    wait = Accelerator.wait_for_everyone

    def recording(self):
        calls.append(("barrier",))
        return wait(self)

    monkeypatch.setattr(Accelerator, "wait_for_everyone", recording)


def test_push_uploads_the_final_folder_once_with_its_card(tiny_causal_lm, sureon_build, tmp_path, monkeypatch, capsys):
    import huggingface_hub
    from huggingface_hub import HfApi

    calls = []
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)  # offline tests: the fake Hub is all
    monkeypatch.setattr(HfApi, "create_repo", lambda self, repo_id, **kw: calls.append(("create", repo_id, kw)))

    def upload_folder(self, **kwargs):
        calls.append(("upload", kwargs["repo_id"], kwargs))
        assert (Path(kwargs["folder_path"]) / "README.md").is_file()
        assert self.token == "hf_secret_token_123"

    monkeypatch.setattr(HfApi, "upload_folder", upload_folder)
    record_barriers(monkeypatch, calls)
    entries = [video_source(sureon_build)]
    push = ("--blind", "true", "--push_to_hub", "true", "--hub_model_id", "org/guesser", "--hub_token")
    out, _ = run_sft(tmp_path, tiny_causal_lm, entries, *push, "hf_secret_token_123")
    kinds = [call[0] for call in calls]
    assert "barrier" in kinds and kinds[-2:] == ["create", "upload"], kinds  # no rank waits in a barrier on it
    calls = [call for call in calls if call[0] != "barrier"]
    assert [call[:2] for call in calls] == [("create", "org/guesser"), ("upload", "org/guesser")]
    assert calls[1][2]["repo_type"] == "model" and calls[1][2]["folder_path"] == str(out)
    printed = capsys.readouterr()
    assert "hf_secret_token_123" not in printed.out + printed.err
    leaks = [path for path in out.rglob("*") if path.is_file() and b"hf_secret_token_123" in path.read_bytes()]
    assert not leaks, "the token reached files that are uploaded"


def test_a_system_prompt_travels_with_the_weights_to_evaluation_curation_and_audit(
    tiny_qwen3_vl, sureon_build, tmp_path, monkeypatch
):
    """Recorded in training_complete.json and the card; evaluation renders the training prompt token for token."""
    from recipes.curation.curate import load_guesser
    from recipes.evaluation.inference import TransformersBackend
    from sureon.cli import main as cli_main

    system = "You are a board-certified general surgeon.\nAnswer with the letter only."
    out, summary = run_sft(tmp_path, tiny_qwen3_vl, [video_source(sureon_build)], steps=1, system_prompt=system)
    assert summary["system_prompt"] == system
    assert (
        "  You are a board-certified general surgeon.\n  Answer with the letter only."
        in (out / "README.md").read_text()
    )

    seen = []

    def answer_a(self, conversations, *sampling):
        seen.extend(conversations)
        return [["A"] * sampling[0] for _ in conversations] if sampling else ["A"] * len(conversations)

    monkeypatch.setattr(TransformersBackend, "generate", answer_a)
    monkeypatch.setattr(TransformersBackend, "sample", answer_a)
    argv = ["eval", "sureon", "--model", str(out), "--dataset", str(sureon_build.out), "--mode", "visual"]
    argv += ["--limit", "3"]
    for extra, expected in (
        ([], system),
        (["--system-prompt", "Be brief."], "Be brief."),
        (["--no-system-prompt"], None),
    ):
        seen.clear()
        run = tmp_path / f"eval{len(extra)}{expected is None}"
        assert cli_main([*argv, *extra, "--out", str(run)]) == 0
        assert json.loads((run / "summary.json").read_text())["system_prompt"] == expected
        systems = [c[0]["content"][0]["text"] if c[0]["role"] == "system" else None for c in seen]
        assert systems == [expected] * 3
        if expected == system:
            trained = list(seen)

    bench = {"path": str(sureon_build.out), "name": "bench", "split": "test"}
    collator, index, _ = collator_for(out, [bench], system_prompt=system)
    training_prompts = {}
    for row in index:
        example = collator.example(row)
        encoded = collator.encode(example)
        prompt_length = encoded.labels.index(next(label for label in encoded.labels if label != -100))
        training_prompts[example.key] = encoded.input_ids[:prompt_length]
    backend = TransformersBackend(str(out))
    questions = [r["question_id"] for r in load_config_rows(sureon_build, "bench", "test").select(range(3))]
    for question_id, conversation in zip(questions, trained, strict=True):
        assert backend.prepare([conversation])["input_ids"][0].tolist() == training_prompts[question_id]

    assert load_guesser(f"model={out}").system_prompt == system
    (tmp_path / "other.txt").write_text("Guess.")
    (tmp_path / "empty.txt").write_text("")
    assert load_guesser(f"model={out},system_prompt_file={tmp_path / 'other.txt'}").system_prompt == "Guess."
    assert load_guesser(f"model={out},system_prompt_file={tmp_path / 'empty.txt'}").system_prompt is None
    seen.clear()
    audit = ["audit", "--dataset", str(sureon_build.out), "--config", "bench", "--guesser", f"model={out},name=g"]
    assert cli_main([*audit, "--trials", "2", "--out", str(tmp_path / "audit")]) == 0
    assert json.loads((tmp_path / "audit" / "audit.json").read_text())["system_prompts"] == {"g": system}
    assert seen and all(c[0] == {"role": "system", "content": [{"type": "text", "text": system}]} for c in seen)


def test_the_fused_lm_head_scores_only_labelled_positions_on_a_cpu_with_the_same_loss(tiny_causal_lm, monkeypatch):
    """``cpu_labelled_positions_only``: inside ``labelled_positions_only_on_cpu`` TRL's fused LM head projects the
    labelled positions only (as on CUDA), and the loss, the log-probabilities and the entropy at those positions, and
    the gradients, are what projecting every position gives; outside it (or disabled), TRL is as it comes."""
    from trl.trainer import utils as trl_utils

    from recipes.model_io.modeling import load_model
    from recipes.training.run import labelled_positions_only_on_cpu

    projected = []
    apply = trl_utils._ChunkedLogProbFunction.apply

    def counting(hidden, *args):
        projected.append(hidden.shape[0])
        return apply(hidden, *args)

    monkeypatch.setattr(trl_utils._ChunkedLogProbFunction, "apply", counting)
    model = load_model(str(tiny_causal_lm), dtype="float32")
    trl_utils.add_fused_lm_head(model, outputs=("log_probs", "entropy", "is_top1"))
    generator = torch.Generator().manual_seed(0)
    input_ids = torch.randint(5, 100, (3, 24), generator=generator)
    labels = torch.full_like(input_ids, -100)
    labels[:, -4:] = input_ids[:, -4:]  # an answer of four tokens after a 20-token prompt
    labels[2, -4:] = -100  # and a row with nothing to learn

    def step():
        model.zero_grad()
        out = model(input_ids=input_ids, labels=labels, fused_lm_head=True)
        out.loss.backward()
        grads = [p.grad.clone() for p in model.parameters() if p.grad is not None]
        return out.loss.detach(), out.log_probs.detach(), out.entropy.detach(), grads

    original = trl_utils._use_triton
    every = step()
    with labelled_positions_only_on_cpu(enabled=False) as applied:
        assert not applied and trl_utils._use_triton is original
        step()
    with labelled_positions_only_on_cpu() as applied:
        assert applied
        labelled = step()
    assert trl_utils._use_triton is original
    step()
    assert projected == [3 * 23, 3 * 23, 2 * 4, 3 * 23]  # every shifted position, or only the eight labelled ones
    for a, b in zip(every[:3], labelled[:3], strict=True):
        assert torch.allclose(a, b, atol=1e-5)
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(every[3], labelled[3], strict=True))


# --- a recipe mistake is one line ------------------------------------------------------------------------------------

SMOKE_RECIPE = Path(__file__).resolve().parents[1] / "recipes" / "tiny" / "sft" / "config_smoke.yaml"


def smoke_variant(tmp_path: Path, text: str | None = None, **changes) -> Path:
    """The tiny smoke recipe with ``changes`` (a value of ``...`` drops the key), or ``text`` as it stands."""
    import yaml

    path = tmp_path / "recipe.yaml"
    if text is None:
        recipe = yaml.safe_load(SMOKE_RECIPE.read_text()) | {"output_dir": str(tmp_path / "run")} | changes
        text = yaml.safe_dump({key: value for key, value in recipe.items() if value is not ...}, sort_keys=False)
    path.write_text(text)
    return path


RECIPE_MISTAKES = {
    "misspelt key": (
        {"per_device_train_bach_size": 2},
        "unknown key 'per_device_train_bach_size' (did you mean 'per_device_train_batch_size'?)",
    ),
    "wrong type": ({"max_frames": "eight"}, "max_frames: 'eight' is not an integer or null"),
    "negative learning rate": ({"learning_rate": -1e-5}, "learning_rate: -1e-05 is not a number greater than 0"),
    "batch of 0": ({"per_device_train_batch_size": 0}, "per_device_train_batch_size: 0 is not an integer of at least"),
    "no model": ({"model_name_or_path": ...}, "model_name_or_path is missing"),
    "a misspelt stage key": (
        {"dataset_mixture": ..., "stages": [{"name": "a", "dataset_mixture": ["x"], "num_train_epoch": 1}]},
        "stage 'a': unknown key 'num_train_epoch' (did you mean 'num_train_epochs'?)",
    ),
    "a source key of the wrong type": (
        {"dataset_mixture": [{"path": "x", "max_samples": "all"}]},
        "dataset_mixture[0]: max_samples: 'all' is not an integer or null",
    ),
    "a setting TrainingArguments refuses": (
        {"load_best_model_at_end": True, "eval_strategy": "no"},
        "--load_best_model_at_end requires the save and eval strategy to match",
    ),
    "not YAML": ("model_name_or_path: [a\nb: c\n", "not YAML (line 2"),
    "empty": ("", "the file is empty"),
    "a YAML list": ("- model_name_or_path: x\n", "got a YAML list"),
}


@pytest.mark.parametrize("mistake", list(RECIPE_MISTAKES))
def test_a_recipe_mistake_is_one_line_before_anything_loads(mistake, tmp_path, capsys):
    """`python recipes/sft.py --config RECIPE` reads the recipe strictly (recipes.training.recipe_file): each mistake
    is one line naming the file and the key, exit status 2, and nothing is written."""
    change, says = RECIPE_MISTAKES[mistake]
    path = smoke_variant(tmp_path, change) if isinstance(change, str) else smoke_variant(tmp_path, **change)
    assert cli(["--config", str(path)]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith(f"error: training recipe {path}: ") and says in error and "\n" not in error, error
    assert not (tmp_path / "run").exists()


def test_the_script_prints_a_recipe_mistake_in_one_line(tmp_path):
    """The launch line itself (`python recipes/sft.py --config ...`, what accelerate launches): one line, exit 2."""
    path = smoke_variant(tmp_path, max_frames="eight")
    script = Path(__file__).resolve().parents[1] / "recipes" / "sft.py"
    command = [sys.executable, str(script), "--config", str(path)]
    done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr[-2000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last == f"error: training recipe {path}: max_frames: 'eight' is not an integer or null", last
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
