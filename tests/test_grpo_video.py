"""One frame rule and GRPO on video: ``max_frames`` picks the same frames of a clip in SFT, GRPO, evaluation and the
exports, one function encodes a prompt for all three (token ids, ``pixel_values_videos``, ``video_grid_thw``), a run
off the benchmark's 8-frame protocol says so, the GRPO trainer's log-probabilities of a batch mixing video, image
and text rows equal a direct forward of each row, and a tiny GRPO run mixes the three kinds of rows."""

import json
from pathlib import Path

import pytest
import torch
import yaml
from conftest import REPO

from builders.hub import resolve_frames
from builders.prompt import PROTOCOL_FRAMES, evenly_spaced, format_messages, frame_protocol, protocol_label
from recipes.training.grpo_data import grpo_dataset
from recipes.training.mixture import build_mixture, parse_mixture, to_example
from sureon.cli import main as cli_main


TINY_RECIPE = REPO / "recipes" / "tiny" / "grpo" / "config_smoke.yaml"


def test_frames_are_chosen_by_one_function_and_a_run_off_the_protocol_is_labelled():
    frames = [f"frame{i}" for i in range(8)]
    record = {"question_id": "q", "question": "Which?", "options": ["a", "b"], "answer_index": 0, "start": 0.0,
              "end": 8.0, "frames": frames, "frame_timestamps": [float(i) for i in range(8)]}  # fmt: skip
    assert evenly_spaced(frames, 4) == [0, 2, 5, 7] and evenly_spaced(frames, None) == list(range(8))
    (message,) = format_messages(record, frames_as="video", max_frames=4)
    video = next(part for part in message["content"] if part["type"] == "video")
    assert video["video"] == ["frame0", "frame2", "frame5", "frame7"] and video["timestamps"] == [0.0, 2.0, 5.0, 7.0]
    (images,) = format_messages(record, frames_as="images", max_frames=4)
    assert [p["image"] for p in images["content"] if p["type"] == "image"] == video["video"]
    assert PROTOCOL_FRAMES == 8
    assert frame_protocol(None, 8)["at_protocol"] and frame_protocol(8, 9)["at_protocol"]
    off = frame_protocol(4, 8)
    assert (off["frames_shown"], off["at_protocol"]) == (4, False)
    assert (
        protocol_label(off) == " (4 frames, not the 8-frame protocol)" and protocol_label(frame_protocol(8, 8)) == ""
    )


@pytest.fixture(scope="module")
def bench_row(sureon_build):
    """The first bench question with more than 4 frames, and its mixture (the SFT collator's and GRPO's input)."""
    loaded, index, _ = build_mixture(
        parse_mixture([{"path": str(sureon_build.out), "name": "bench", "split": "test"}])
    )
    dataset = loaded[0].dataset
    number = next(i for i in range(len(dataset)) if len(dataset[i]["frame_timestamps"]) > 4 and dataset[i]["options"])
    return loaded, index, number


def test_sft_grpo_and_evaluation_encode_a_clip_alike_at_any_max_frames(
    tiny_qwen3_vl, sureon_build, bench_row, tmp_path, monkeypatch
):
    """For one bench question at ``max_frames`` 4 (of the 8 the build stored): the SFT collator's prompt, the GRPO
    trainer's and ``sureon eval sureon --max-frames 4``'s have the same token ids, ``pixel_values_videos`` and
    ``video_grid_thw``; the evaluation runs (no refusal) and records that it ran off the 8-frame protocol."""
    from recipes.evaluation.inference import TransformersBackend
    from recipes.model_io.modeling import apply_pixel_caps, load_processor
    from recipes.training.collator import SFTCollator
    from recipes.training.grpo_trainer import encode_row

    loaded, index, number = bench_row
    record = resolve_frames(loaded[0].dataset[number], loaded[0].media_root)
    processor = apply_pixel_caps(load_processor(str(tiny_qwen3_vl)), None, None)
    collator = SFTCollator(processor, loaded, frames_as="video", max_frames=4)
    sft = collator.encode(to_example(record, "video_qa", blind=False, frames_as="video"))
    sft_prompt = [t for t, label in zip(sft.input_ids, sft.labels, strict=True) if label == -100]

    dataset, _ = grpo_dataset(loaded, index, frames_as="video", max_frames=4)
    grpo_row = next(row for row in dataset if row["question_id"] == record["question_id"])
    stored = record["frame_timestamps"]
    chosen = [stored[i] for i in evenly_spaced(stored, 4)]
    assert grpo_row["visuals"]["videos"][0]["timestamps"] == chosen and len(chosen) == 4
    grpo = encode_row(processor, grpo_row)

    seen = []

    def recording_generate(self, conversations):
        seen.append(self.prepare(conversations))
        return ["A"] * len(conversations)

    monkeypatch.setattr(TransformersBackend, "generate", recording_generate)
    out = tmp_path / "eval"
    argv = ["eval", "sureon", "--model", str(tiny_qwen3_vl), "--dataset", str(sureon_build.out), "--mode", "visual",
            "--frames-as", "video", "--max-frames", "4", "--batch-size", "64", "--out", str(out)]  # fmt: skip
    assert cli_main(argv) == 0
    (batch,) = seen
    evaluated = json.loads((out / "summary.json").read_text())
    order = [json.loads(line)["question_id"] for line in (out / "predictions.jsonl").read_text().splitlines()]
    row = order.index(record["question_id"])
    eval_ids = batch["input_ids"][row][batch["attention_mask"][row].bool()].tolist()
    grids = batch["video_grid_thw"]
    rows_per_video = grids.prod(-1).tolist()
    first = sum(rows_per_video[:row])
    eval_pixels = batch["pixel_values_videos"][first : first + rows_per_video[row]]

    assert sft_prompt == grpo.input_ids == eval_ids
    assert torch.equal(sft.visual["video_grid_thw"], grpo.visual["video_grid_thw"])
    assert torch.equal(grpo.visual["video_grid_thw"], grids[row : row + 1])
    assert torch.equal(sft.visual["pixel_values_videos"], grpo.visual["pixel_values_videos"])
    assert torch.equal(grpo.visual["pixel_values_videos"], eval_pixels)
    assert grpo.visual["video_grid_thw"][0, 0] == 2  # 4 frames in temporal patches of 2
    frames = evaluated["run_settings"]["frames"]
    assert (frames["max_frames"], frames["frames_shown"], frames["at_protocol"]) == (4, 4, False)
    report = tmp_path / "report"
    assert cli_main(["report", "sureon", str(out / "predictions.jsonl"), "--out", str(report), "--no-paper"]) == 0
    assert "not the 8-frame protocol" in (report / "report.md").read_text()


def mixed_source(folder: Path, sureon_build) -> dict:
    """Video-QA rows of the public corpus's two other kinds, as parquet: two image questions (one frame, no clip) and
    two text-only questions (no frame)."""
    from datasets import Dataset, Features, Image, List, Value

    frame = next((sureon_build.out / "media").rglob("*.jpg")) if (sureon_build.out / "media").is_dir() else None
    from PIL import Image as PILImage

    picture = PILImage.open(frame).convert("RGB") if frame else PILImage.new("RGB", (64, 48), (200, 40, 40))
    rows = []
    for i in range(4):
        image = i < 2
        rows.append(
            {
                "question_id": f"mixed{i}",
                "question": "Which instrument is shown?" if image else f"Which step comes first ({i})?",
                "options": ["Grasper", "Hook", "Clipper", "Scissors"],
                "answer": "Hook",
                "answer_index": 1,
                "answer_format": "mcq",
                "frames": [picture] if image else [],
                "frame_timestamps": [0.0] if image else [],
            }
        )
    features = Features(
        {
            "question_id": Value("string"),
            "question": Value("string"),
            "options": List(Value("string")),
            "answer": Value("string"),
            "answer_index": Value("int64"),
            "answer_format": Value("string"),
            "frames": List(Image()),
            "frame_timestamps": List(Value("float64")),
        }
    )
    path = folder / "mixed.parquet"
    Dataset.from_list(rows, features=features).to_parquet(str(path))
    return {"path": "parquet", "data_files": str(path), "format": "video_qa"}


def mixed_config(tmp_path: Path, model: Path, build, name: str, **overrides) -> Path:
    config = yaml.safe_load(TINY_RECIPE.read_text())
    config |= {
        "model_name_or_path": str(model),
        "dataset_mixture": [
            {"path": str(build.out), "name": "db", "split": "train", "exclude_categories": ["TO"], "max_samples": 2},
            mixed_source(tmp_path, build),
        ],
        "output_dir": str(tmp_path / name),
        "max_frames": 4,
        "temperature": 1.0,
        **overrides,
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_trainer_log_probabilities_equal_a_direct_forward_of_each_row(tiny_qwen3_vl, sureon_build, tmp_path):
    """A batch of a video, an image and a text row (left-padded together, in one forward) scored by the trainer's
    log-probability pass: each completion token's log-probability equals a forward of that row alone (float32); so
    it does one row per forward, where ``uniform_vision_calls`` appends the masked dummy image or video a row lacks."""
    from recipes.grpo import make_parser
    from recipes.training.grpo_stage import build_trainer
    from recipes.training.grpo_trainer import encode_row

    path = mixed_config(tmp_path, tiny_qwen3_vl, sureon_build, "logps")
    script_args, training_args, model_args = make_parser().parse_args_and_config(["--config", str(path)])
    trainer = build_trainer(script_args, training_args, model_args)["trainer"]
    rows = list(trainer.train_dataset)
    picked = [next(r for r in rows if r["visuals"]["videos"]), next(r for r in rows if r["visuals"]["images"])]
    picked.append(next(r for r in rows if not r["visuals"]["videos"] and not r["visuals"]["images"]))
    prompts = trainer.encode_batch(picked)
    generator = torch.Generator().manual_seed(0)
    completions = [torch.randint(10, 200, (n,), generator=generator).tolist() for n in (5, 3, 4)]
    width = max(len(p.input_ids) for p in prompts)
    length = max(map(len, completions))
    pad = trainer._tokenizer.pad_token_id
    ids = torch.full((3, width + length), pad)
    mask = torch.zeros((3, width + length), dtype=torch.long)
    for i, (prompt, completion) in enumerate(zip(prompts, completions, strict=True)):
        ids[i, width - len(prompt.input_ids) : width] = torch.tensor(prompt.input_ids)
        ids[i, width : width + len(completion)] = torch.tensor(completion)
        mask[i, width - len(prompt.input_ids) : width + len(completion)] = 1
    model = trainer.model.eval()
    assert trainer.uniform_vision_calls
    trainer._forward_prompts = prompts
    with torch.no_grad():
        logps, _, _ = trainer._get_per_token_logps_and_entropies(model, ids, mask, length, batch_size=3)
        one_by_one, _, _ = trainer._get_per_token_logps_and_entropies(model, ids, mask, length, batch_size=1)
    trainer._forward_prompts = None
    torch.testing.assert_close(one_by_one, logps, atol=1e-5, rtol=0)
    for i, (row, completion) in enumerate(zip(picked, completions, strict=True)):
        alone = encode_row(trainer.processing_class, row)
        inputs = {"input_ids": torch.tensor([alone.input_ids + completion])}
        inputs |= alone.visual
        if alone.token_types is not None:
            inputs["mm_token_type_ids"] = torch.tensor([alone.token_types + [0] * len(completion)])
        with torch.no_grad():
            logits = model(**inputs).logits[0, len(alone.input_ids) - 1 : -1].float()
        direct = torch.log_softmax(logits, -1).gather(-1, torch.tensor(completion)[:, None])[:, 0]
        torch.testing.assert_close(logps[i, : len(completion)], direct, atol=1e-5, rtol=0)
    assert picked[0]["visuals"]["videos"][0]["timestamps"] and len(picked[0]["visuals"]["videos"][0]["frames"]) <= 4


def test_a_tiny_run_mixes_video_image_and_text_rows(sft_folder, sureon_build, tmp_path, monkeypatch):
    """Two steps of three prompts (two completions each) over two clips, two images and two text questions: every
    kind is drawn, batches mix them, and each step logs finite rewards and loss."""
    from recipes.grpo import main, make_parser
    from recipes.training.grpo_trainer import VisualGRPOTrainer

    kinds = []
    encode = VisualGRPOTrainer.encode_batch

    def recording(self, inputs):
        kinds.append({"video" if r["visuals"]["videos"] else "image" if r["visuals"]["images"] else "text"
                      for r in inputs})  # fmt: skip
        return encode(self, inputs)

    monkeypatch.setattr(VisualGRPOTrainer, "encode_batch", recording)
    path = mixed_config(tmp_path, sft_folder, sureon_build, "mixed", max_steps=2, per_device_train_batch_size=6)
    out = main(*make_parser().parse_args_and_config(["--config", str(path)]), recipe=str(path))
    summary = json.loads((out / "training_complete.json").read_text())
    assert summary["frames_as"] == "video" and summary["max_frames"] == 4 and summary["global_step"] == 2
    assert set().union(*kinds) == {"video", "image", "text"} and any(len(k) > 1 for k in kinds)
    state = json.loads((out / "checkpoint-2" / "trainer_state.json").read_text())
    logged = [entry for entry in state["log_history"] if "reward" in entry]
    assert [entry["step"] for entry in logged] == [1, 2]
    assert all(entry["loss"] == entry["loss"] and entry["rewards/format/mean"] is not None for entry in logged)


@pytest.fixture(scope="module")
def sft_folder(tiny_qwen3_vl, sureon_build, tmp_path_factory):
    """A one-step SFT run on video (what GRPO starts from)."""
    from recipes.sft import main as sft_main
    from recipes.sft import make_parser as sft_parser

    tmp = tmp_path_factory.mktemp("sft")
    config = {"model_name_or_path": str(tiny_qwen3_vl), "dtype": "float32", "output_dir": str(tmp / "sft"),
              "dataset_mixture": [{"path": str(sureon_build.out), "name": "db"}], "max_steps": 1,
              "per_device_train_batch_size": 2, "bf16": False, "use_cpu": True, "report_to": "none",
              "activation_checkpointing": False, "save_strategy": "no", "max_frames": 4}  # fmt: skip
    path = tmp / "sft.yaml"
    path.write_text(json.dumps(config))
    return sft_main(*sft_parser().parse_args_and_config(["--config", str(path)]))


@pytest.mark.parametrize("mode", ["colocate", "server"])
def test_vllm_is_refused_for_a_vision_language_policy_before_any_weights_load(
    mode, tiny_qwen3_vl, sureon_build, tmp_path
):
    """TRL 1.16 hands vLLM prompt ids whose visual tokens are expanded already: vLLM would fail on a video row and
    score an image row's completions against another prompt. `use_vllm` with a vision-language model is one line
    naming why and what works, before any weights or data load, whether vLLM is installed or not."""
    from recipes.grpo import cli, main, make_parser

    path = mixed_config(tmp_path, tiny_qwen3_vl, sureon_build, "vllm", use_vllm=True, vllm_mode=mode)
    with pytest.raises(ValueError, match="use_vllm: true with a vision-language model") as err:
        main(*make_parser().parse_args_and_config(["--config", str(path)]))
    assert "set use_vllm: false" in str(err.value) and "trl issues 6294 and 6401" in str(err.value)
    assert cli(["--config", str(path)]) == 2
    assert not (tmp_path / "vllm").exists()


def test_generation_bans_every_media_placeholder(sft_folder, sureon_build, tmp_path):
    """A sampled <|image_pad|> or <|video_pad|> would leave the visual tokens and features out of step and stop the
    log-probability pass. Here the recipe pushes the policy towards both (sequence bias +100) and replaces TRL's own
    suppression list: the step still completes, and no completion holds a placeholder. vLLM gets the same ban as
    `bad_words`."""
    from recipes.grpo import make_parser
    from recipes.model_io.modeling import load_processor, tokenizer_of
    from recipes.training.grpo_stage import build_trainer
    from recipes.training.grpo_trainer import ban_media_placeholders, media_placeholder_tokens

    tokenizer = tokenizer_of(load_processor(str(sft_folder)))
    placeholders = media_placeholder_tokens(tokenizer)
    assert {"<|image_pad|>", "<|video_pad|>"} <= set(placeholders)
    kept = {"bad_words": ["never"], "temperature": 0.7}
    assert ban_media_placeholders(kept, tokenizer, "vllm") == {**kept, "bad_words": ["never", *placeholders]}
    bias = [[[token_id], 100.0] for token_id in placeholders.values()]
    path = mixed_config(tmp_path, sft_folder, sureon_build, "ban", max_steps=1, per_device_train_batch_size=6,
                        generation_kwargs={"suppress_tokens": [], "sequence_bias": bias})  # fmt: skip
    script_args, training_args, model_args = make_parser().parse_args_and_config(["--config", str(path)])
    trainer = build_trainer(script_args, training_args, model_args)["trainer"]
    assert set(placeholders.values()) <= set(trainer.generation_config.suppress_tokens)
    completions = []
    score = trainer._generate_and_score_completions

    def recording(inputs):
        output = score(inputs)
        completions.extend(output["completion_ids"].flatten().tolist())
        return output

    trainer._generate_and_score_completions = recording
    assert trainer.train().global_step == 1
    assert completions and not set(completions) & set(placeholders.values())


def test_the_exports_keep_the_frames_training_keeps(sureon_build, tmp_path):
    """``sureon export sft --max-frames 4`` and ``sureon export lmms-eval --max-frames 4`` show each clip's frames
    chosen as SFT, GRPO and evaluation choose them (the stored frames at ``evenly_spaced(..., 4)``)."""
    from datasets import load_dataset

    from builders.hub import media_root
    from recipes.export import lmms_eval

    out = tmp_path / "train.jsonl"
    argv = ["export", "sft", "--format", "swift", "--dataset", str(sureon_build.out), "--config", "db",
            "--max-frames", "4", "--out", str(out)]  # fmt: skip
    assert cli_main(argv) == 0
    rows = load_dataset(str(sureon_build.out), "db", split="train")
    root = media_root(sureon_build.out, rows)
    exported = {json.loads(line)["id"]: json.loads(line) for line in out.read_text().splitlines()}
    checked = 0
    for row in rows:
        frames = resolve_frames(row, root)["frames"]
        expected = [str(Path(frames[i]).resolve()) for i in evenly_spaced(frames, 4)]
        images = exported[row["question_id"]]["images"]
        assert images == expected, row["question_id"]
        checked += len(frames) > 4
    assert checked and json.loads(out.with_name(f"{out.name}.manifest.json").read_text())["max_frames"] == 4

    bench = load_dataset(str(sureon_build.out), "bench", split="test")
    docs = lmms_eval.docs_in_modes(("visual",), str(media_root(sureon_build.out, bench)), 4)(bench)
    for doc, row in zip(docs, bench, strict=True):
        stamps = row["frame_timestamps"]
        assert doc["frame_timestamps"] == [stamps[i] for i in evenly_spaced(stamps, 4)] and len(doc["frames"]) <= 4
