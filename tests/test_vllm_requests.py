"""What vLLM is sent for a clip, checked without vLLM: one video with its metadata, as training encodes a clip.

The server path (``--backend openai --frames-as video`` against a local chat-completions server that records every
body): each visual request carries one ``data:video/jpeg;base64,...`` item with every frame and the clip's metadata in
``media_io_kwargs``. The offline path (``--backend vllm``, with a stand-in ``vllm`` module that records what the
engine is given): the project's rendered prompt and one ``(frames, metadata)`` video that the checkpoint's processor
encodes into the transformers backend's input ids. ``tests/test_vllm.py`` (slow) runs the real engine on CPU and
compares its prompt token ids. Reports that mix runs shown video and images say which each row was.
"""

import base64
import json
import sys
import types

import pytest
from fake_chat_server import FakeChatServer, Reply

from builders.prompt import format_messages
from recipes.evaluation.inference.openai_chat import video_request, vllm_video_metadata
from recipes.model_io.chat_inputs import encode_prompts, to_pil, video_metadata
from sureon.cli import main as cli_main


@pytest.fixture(scope="module")
def records(bench):
    from datasets import load_dataset

    return {r["question_id"]: r for r in load_dataset(str(bench), "bench", split="test")}


def frame_indices(timestamps: list[float]) -> list[int]:
    return [round(t * 1000) for t in timestamps]  # millisecond ticks: frames_indices / fps are the timestamps


def test_a_clip_is_one_video_item_with_its_metadata_and_a_blind_prompt_has_none(records):
    record = next(iter(records.values()))
    messages, fields = video_request(format_messages(record, frames_as="video"))
    parts = messages[-1]["content"]
    assert [p["type"] for p in parts] == ["text", "video_url", "text"]
    url = parts[1]["video_url"]["url"]
    assert url.startswith("data:video/jpeg;base64,")
    frames = url.removeprefix("data:video/jpeg;base64,").split(",")
    assert len(frames) == len(record["frames"])
    for sent, stored in zip(frames, record["frames"], strict=True):
        assert to_pil(base64.b64decode(sent)).tobytes() == stored.convert("RGB").tobytes()
    indices = frame_indices(record["frame_timestamps"])
    assert fields["media_io_kwargs"] == {
        "video": {
            "num_frames": -1,  # vLLM keeps only the first 32 frames of a data URL otherwise
            "fps": 1000.0,
            "frames_indices": indices,
            "total_num_frames": max(indices) + 1,
            "duration": (max(indices) + 1) / 1000.0,
            "do_sample_frames": False,
        }
    }
    assert fields["mm_processor_kwargs"] == {"cap_pixels_per_frame": True}
    blind = format_messages(record, blind=True, frames_as="video")
    assert video_request(blind) == (blind, {})


def test_each_request_gets_its_own_metadata():
    """transformers' Qwen3-VL pads an odd frames_indices list in place: a metadata two requests shared would grow."""
    first, second = vllm_video_metadata([1.0, 2.0, 3.0]), vllm_video_metadata([1.0, 2.0, 3.0])
    assert first == second and first["frames_indices"] is not second["frames_indices"]
    first["frames_indices"].append(3000)  # what the processor does to an odd list
    assert second["frames_indices"] == [1000, 2000, 3000]
    assert first["frames_indices"] is not video_metadata([1.0, 2.0, 3.0])["frames_indices"]


def test_a_served_vllm_gets_each_clip_as_one_video_and_the_run_records_it(bench, records, tmp_path):
    out = tmp_path / "served"
    argv = ["eval", "sureon", "--backend", "openai", "--model", "tiny", "--dataset", str(bench), "--out", str(out)]
    with FakeChatServer(lambda body, index: Reply(content="Answer: B")) as server:
        assert cli_main([*argv, "--base-url", server.url, "--frames-as", "video"]) == 0
        bodies = list(server.requests)
    visual = [b for b in bodies if "media_io_kwargs" in b]
    assert len(visual) == len(records) and len(bodies) == 2 * len(records)
    for body in bodies:
        kinds = [p["type"] for p in body["messages"][-1]["content"]]
        assert "image_url" not in kinds
        assert kinds.count("video_url") == (1 if body in visual else 0)
    sent = {}
    for body in visual:
        url = next(p for p in body["messages"][-1]["content"] if p["type"] == "video_url")["video_url"]["url"]
        metadata = body["media_io_kwargs"]["video"]
        assert len(url.split(",")) - 1 == len(metadata["frames_indices"])
        assert (metadata["num_frames"], metadata["do_sample_frames"]) == (-1, False)
        sent[tuple(metadata["frames_indices"])] = len(url.split(",")) - 1
    expected = {tuple(frame_indices(r["frame_timestamps"])): len(r["frames"]) for r in records.values()}
    assert sent == expected
    summary = json.loads((out / "summary.json").read_text())
    assert summary["frames_as"] == "video" and summary["run_settings"]["frames_as"] == "video"


@pytest.fixture
def recording_vllm(monkeypatch):
    """A stand-in ``vllm`` module whose ``LLM`` records how it was built and every ``generate`` call (answering
    "Answer: B"); returns what it recorded."""
    recorded = {"built": None, "calls": []}

    class LLM:
        def __init__(self, **options):
            recorded["built"] = options

        def generate(self, prompts, params, **options):
            recorded["calls"].append((prompts, options))
            choice = types.SimpleNamespace(text="Answer: B")
            return [types.SimpleNamespace(outputs=[choice]) for _ in prompts]

    module = types.ModuleType("vllm")
    module.LLM = LLM
    module.SamplingParams = lambda **options: types.SimpleNamespace(**options)
    monkeypatch.setitem(sys.modules, "vllm", module)
    return recorded


def test_offline_vllm_gets_the_rendered_prompt_and_one_video_the_processor_encodes_as_training_does(
    recording_vllm, bench, records, tiny_qwen3_vl, tmp_path
):
    from recipes.model_io.modeling import load_processor

    out = tmp_path / "offline"
    argv = ["eval", "sureon", "--backend", "vllm", "--model", str(tiny_qwen3_vl), "--dataset", str(bench)]
    assert cli_main([*argv, "--out", str(out), "--max-new-tokens", "4"]) == 0
    assert recording_vllm["built"]["limit_mm_per_prompt"] == {"image": 8, "video": 1}
    # the stand-in's image processor normalizes as CLIP, its video processor as Qwen3-VL: vLLM would normalize a clip
    # on the device with the image processor's mean and std
    assert recording_vllm["built"]["mm_device_do_normalize"] is False
    prompts = [p for prompts, _ in recording_vllm["calls"] for p in prompts]
    assert all(
        options["tokenization_kwargs"] == {"add_special_tokens": False} for _, options in recording_vllm["calls"]
    )
    assert len(prompts) == 2 * len(records)
    processor = load_processor(str(tiny_qwen3_vl))
    # the run's rows: visual first, then blind, in the build's order
    conversations = [format_messages(r, frames_as="video") for r in records.values()]
    conversations += [format_messages(r, blind=True, frames_as="video") for r in records.values()]
    metadata_objects = set()
    for prompt, conversation in zip(prompts, conversations, strict=True):
        expected = encode_prompts(processor, [conversation])["input_ids"]
        if "multi_modal_data" not in prompt:  # blind
            assert processor.tokenizer(prompt["prompt"], add_special_tokens=False, return_tensors="pt")[
                "input_ids"
            ].equal(expected)
            continue
        ((frames, metadata),) = prompt["multi_modal_data"]["video"]
        assert set(prompt["multi_modal_data"]) == {"video"}
        assert metadata["do_sample_frames"] is False and frames.shape[0] == len(metadata["frames_indices"])
        metadata_objects.add(id(metadata))
        encoded = processor(
            text=[prompt["prompt"]],
            videos=[list(frames)],
            video_metadata=[{k: v for k, v in metadata.items() if k != "do_sample_frames"}],
            do_sample_frames=False,
            add_special_tokens=False,
            return_tensors="pt",
            **prompt["mm_processor_kwargs"],
        )
        assert encoded["input_ids"].equal(expected)  # the transformers backend's ids, timestamps included
    assert len(metadata_objects) == len(records)
    assert json.loads((out / "summary.json").read_text())["frames_as"] == "video"
    predictions = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert {p["raw_output"] for p in predictions} == {"Answer: B"}


def write_run(folder, model: str, frames_as: str, correct: list[bool]) -> str:
    folder.mkdir()
    rows = [
        {"question_id": f"q{i}", "model": model, "mode": "visual", "category": "AD", "answer_format": "mcq"}
        | {"num_options": 4, "parsed": "A", "correct": flag, "scored_by": "accuracy"}
        for i, flag in enumerate(correct)
    ]
    (folder / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    settings = {"model": model, "backend": "vllm", "frames_as": "auto", "max_new_tokens": 16}
    summary = {"model": model, "frames_as": frames_as, "run_settings": settings}
    (folder / "summary.json").write_text(json.dumps(summary))
    return str(folder / "predictions.jsonl")


def test_a_report_mixing_video_and_image_runs_says_which_each_row_was(tmp_path):
    video = write_run(tmp_path / "video", "qwen-video", "video", [True, True, False, True])
    images = write_run(tmp_path / "images", "qwen-images", "images", [True, False, False, True])
    report = tmp_path / "report"
    assert cli_main(["report", "sureon", video, images, "--out", str(report), "--no-paper", "--resamples", "50"]) == 0
    markdown = (report / "report.md").read_text()
    assert "| qwen-video (frames as video) | visual | 75.0 ±" in markdown
    assert "| qwen-images (frames as images) | visual | 50.0 ±" in markdown
    assert "| qwen-video | — | — | qwen-video | — | vllm | video, ≤ — |" in markdown  # the runs table
    same = tmp_path / "same"
    assert cli_main(["report", "sureon", video, "--out", str(same), "--no-paper", "--resamples", "50"]) == 0
    assert "(frames as" not in (same / "report.md").read_text()


def test_the_public_report_says_it_too(tmp_path):
    runs = []
    for model, frames_as in (("clip-video", "video"), ("clip-images", "images")):
        run = tmp_path / model
        run.mkdir()
        row = {"model": model, "benchmark": "cholec80", "task": "phase", "input_mode": "clip", "video_id": "v1"}
        row |= {"frame_index": 0, "reference": "Preparation", "prediction": "Preparation", "raw_output": "{}"}
        (run / "predictions.jsonl").write_text(json.dumps(row) + "\n")
        settings = {"model": model, "backend": "vllm", "frames_as": "auto"}
        (run / "summary.json").write_text(
            json.dumps({"model": model, "frames_as": frames_as, "run_settings": settings})
        )
        runs.append(str(run / "predictions.jsonl"))
    assert cli_main(["report", "public", *runs, "--out", str(tmp_path / "report"), "--no-paper"]) == 0
    markdown = (tmp_path / "report" / "report.md").read_text()
    assert "| clip-video (clip) (frames as video) |" in markdown  # Table 5
    assert "| clip-images (frames as images) | cholec80 | phase | clip |" in markdown
