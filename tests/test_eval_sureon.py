"""`sureon eval sureon` end to end on the demo benchmark: a tiny Qwen3-VL (transformers) and a fake endpoint (openai).

The benchmark is built as `make demo` builds it (sample release + sample videos, missing video skipped). Two gloo
ranks on the CPU (``torch.distributed.run``) must write the one-process run's predictions, byte for byte.
"""

import json
import os
import re
import shutil
import socket
import subprocess
import sys

import pytest
from conftest import REPO
from fake_chat_server import FakeChatServer, Reply, last_user_text
from recipe_runs import one_thread

from builders.jsonl_log import header_line
from builders.prompt import answer_target, format_messages
from recipes.evaluation.inference import TransformersBackend
from recipes.evaluation.sureon.evaluate import PREDICTION_FIELDS, check_frames
from recipes.model_io.answers import parse_answer
from sureon.cli import main as cli_main


EXPECTED_FIELDS = [
    "question_id",
    "model",
    "mode",
    "category",
    "answer_format",
    "num_options",
    "raw_output",
    "reasoning",
    "parsed",
    "answer",
    "correct",
    "scored_by",
]


@pytest.fixture(scope="module")
def module_tmp(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("eval")
    with pytest.MonkeyPatch.context() as patch:  # datasets' cache out of the user's home for module fixtures
        import datasets

        patch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp / "hf_datasets_cache")
        yield tmp


@pytest.fixture(scope="module")
def tiny_vl(tiny_qwen3_vl):
    return tiny_qwen3_vl  # the session's (read-only): the evaluation writes under its --out only


@pytest.fixture(scope="module")
def records(bench, module_tmp):
    from datasets import load_dataset

    return list(load_dataset(str(bench), "bench", split="test"))


@pytest.fixture(scope="module")
def evaluated(bench, tiny_vl, module_tmp):
    out = module_tmp / "eval"
    argv = ["eval", "sureon", "--model", str(tiny_vl), "--dataset", str(bench), "--mode", "both", "--out", str(out)]
    with one_thread():  # as each rank of the two-rank run below computes
        assert cli_main([*argv, "--max-new-tokens", "6", "--batch-size", "4", "--model-name", "tiny"]) == 0
    return out, argv


def counts(summary: dict) -> dict:
    """What a run generated and what it reused (``generation`` also holds each rank's share)."""
    return {key: summary["generation"][key] for key in ("generated", "cached")}


def read_predictions(out):
    return [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]


def test_predictions_hold_one_line_per_question_and_mode(evaluated, records):
    out, _ = evaluated
    predictions = read_predictions(out)
    assert len(predictions) == 2 * len(records) == 22
    assert list(PREDICTION_FIELDS) == EXPECTED_FIELDS
    assert all(list(p) == EXPECTED_FIELDS for p in predictions)
    assert {(p["question_id"], p["mode"]) for p in predictions} == {
        (r["question_id"], mode) for r in records for mode in ("visual", "blind")
    }
    by_id = {r["question_id"]: r for r in records}
    for p in predictions:
        record = by_id[p["question_id"]]
        assert p["model"] == "tiny" and p["category"] == record["category"]
        assert p["answer"] == answer_target(record)
        assert p["num_options"] == (7 if record["answer_format"] == "mcq" else None)
        expected = parse_answer(record, p["raw_output"], p["answer"])
        assert (p["parsed"], p["correct"]) == (expected.parsed, expected.correct)
        if record["category"] == "SM":
            assert (p["scored_by"], p["correct"]) == ("judge", None)  # no judge given
        else:
            assert p["scored_by"] == "accuracy" and isinstance(p["correct"], bool)


def test_summary_agrees_with_the_predictions(evaluated):
    out, _ = evaluated
    predictions = read_predictions(out)
    summary = json.loads((out / "summary.json").read_text())
    for mode in ("visual", "blind"):
        scored = [p for p in predictions if p["mode"] == mode and p["scored_by"] == "accuracy"]
        entry = summary["modes"][mode]
        assert entry["scored"] == len(scored) == 10
        assert entry["mu"] == pytest.approx(100 * sum(p["correct"] for p in scored) / len(scored), abs=0.01)
        assert entry["unparseable"] == [p["question_id"] for p in scored if p["parsed"] is None]
        assert entry["per_category"]["EE"]["n"] == 2 and entry["per_category"]["SM"]["accuracy"] is None
        assert entry["judged"]["unjudged"] == ["sureon_test_0040"]  # no judge given
        assert list(entry["per_category"]) == ["AD", "EE", "EA", "PAD", "IAI", "LAR", "SPI", "F", "TO", "SM"]
    gain = summary["modes"]["visual"]["mu"] - summary["modes"]["blind"]["mu"]
    assert summary["multimodal_gain"]["mu"] == pytest.approx(gain)
    assert counts(summary) == {"generated": 22, "cached": 0}


def test_visual_and_blind_inputs_differ_only_in_frames_with_true_timestamps(tiny_vl, records):
    backend = TransformersBackend(str(tiny_vl), max_new_tokens=2)
    assert backend.frames_as == "video"
    tokenizer = backend.processor.tokenizer
    for record in records:
        visual = format_messages(record, frames_as="video")
        blind = format_messages(record, blind=True, frames_as="video")
        visual_text, blind_text = tokenizer.batch_decode(backend.prepare([visual, blind])["input_ids"])
        blind_text = blind_text.replace("<|endoftext|>", "")  # left padding
        frame_blocks = re.findall(
            r"<([\d.]+) seconds><\|vision_start\|>(?:<\|video_pad\|>)+<\|vision_end\|>", visual_text
        )
        stamps = record["frame_timestamps"]
        pairs = [stamps[i : i + 2] for i in range(0, len(stamps), 2)]  # one marker per temporal patch of 2 frames
        assert frame_blocks == [f"{(pair[0] + pair[-1]) / 2:.1f}" for pair in pairs]
        without_frames = re.sub(
            r"<[\d.]+ seconds><\|vision_start\|>(?:<\|video_pad\|>)+<\|vision_end\|>", "", visual_text
        )
        assert without_frames == blind_text
        assert "<|vision_start|>" not in blind_text
    images = format_messages(records[0], frames_as="images")
    image_text = tokenizer.decode(backend.prepare([images])["input_ids"][0])
    stripped = re.sub(r"\nFrame at [\d:.]+: <\|vision_start\|>(?:<\|image_pad\|>)+<\|vision_end\|>", "", image_text)
    assert stripped == tokenizer.decode(backend.prepare([format_messages(records[0], blind=True)])["input_ids"][0])


class ProcessorSpy:
    """Wraps a processor and records the keyword arguments of each call."""

    def __init__(self, processor):
        self.wrapped = processor
        self.calls = []

    def __getattr__(self, name):
        return getattr(self.wrapped, name)

    def __call__(self, *args, **kwargs):
        self.calls.append(kwargs)
        return self.wrapped(*args, **kwargs)


def test_frames_reach_the_processor_unsampled_with_their_source_timestamps(tiny_vl, records):
    backend = TransformersBackend(str(tiny_vl), max_new_tokens=2, batch_size=4)
    backend.processor = spy = ProcessorSpy(backend.processor)
    outputs = backend.generate([format_messages(r, frames_as="video") for r in records[:3]])
    assert len(outputs) == 3 and all(isinstance(o, str) for o in outputs)
    (call,) = spy.calls
    assert call["do_sample_frames"] is False and call["cap_pixels_per_frame"] is True
    assert [len(video) for video in call["videos"]] == [len(r["frames"]) for r in records[:3]]
    for metadata, record in zip(call["video_metadata"], records[:3], strict=True):
        times = [index / metadata["fps"] for index in metadata["frames_indices"]]
        assert times == pytest.approx(record["frame_timestamps"], abs=1e-3)
    blind = backend.generate([format_messages(r, blind=True, frames_as="video") for r in records[:2]])
    assert len(blind) == 2 and "videos" not in spy.calls[-1] and "images" not in spy.calls[-1]


def test_a_rerun_reuses_every_cached_generation(evaluated, tmp_path, monkeypatch):
    out, argv = evaluated
    resumed = tmp_path / "resumed"
    shutil.copytree(out, resumed)
    (resumed / "predictions.jsonl").unlink()

    def no_generation(self, conversations):
        raise AssertionError("a cached generation was recomputed")

    monkeypatch.setattr(TransformersBackend, "generate", no_generation)
    argv = [*argv[: argv.index("--out")], "--out", str(resumed), "--max-new-tokens", "6", "--model-name", "tiny"]
    assert cli_main(argv) == 0
    assert (resumed / "predictions.jsonl").read_text() == (out / "predictions.jsonl").read_text()
    summary = json.loads((resumed / "summary.json").read_text())
    assert counts(summary) == {"generated": 0, "cached": 22}


def test_a_run_killed_mid_write_regenerates_only_what_is_missing(evaluated, tmp_path):
    out, argv = evaluated
    resumed = tmp_path / "killed"
    shutil.copytree(out, resumed)
    log = resumed / "generations" / "rank-0-of-1.jsonl"
    lines = log.read_text().splitlines(keepends=True)
    log.write_text("".join(lines[:-3]) + lines[-3][: len(lines[-3]) // 2])  # cut short
    argv = [*argv[: argv.index("--out")], "--out", str(resumed), "--max-new-tokens", "6", "--model-name", "tiny"]
    assert cli_main([*argv, "--batch-size", "4"]) == 0
    summary = json.loads((resumed / "summary.json").read_text())
    assert counts(summary) == {"generated": 3, "cached": 19}
    assert (resumed / "predictions.jsonl").read_text() == (out / "predictions.jsonl").read_text()
    assert all(json.loads(line) for line in log.read_text().splitlines()[-3:])


def test_a_run_folder_from_before_sharding_resumes_from_its_generations_file(evaluated, tmp_path, monkeypatch):
    out, argv = evaluated
    earlier = tmp_path / "earlier"
    earlier.mkdir()
    shutil.copy(out / "generations" / "rank-0-of-1.jsonl", earlier / "generations.jsonl")  # the one cache of then

    def no_generation(self, conversations):
        raise AssertionError("a cached generation was recomputed")

    monkeypatch.setattr(TransformersBackend, "generate", no_generation)
    argv = [*argv[: argv.index("--out")], "--out", str(earlier), "--max-new-tokens", "6", "--model-name", "tiny"]
    assert cli_main(argv) == 0
    assert counts(json.loads((earlier / "summary.json").read_text())) == {"generated": 0, "cached": 22}
    assert (earlier / "predictions.jsonl").read_text() == (out / "predictions.jsonl").read_text()


def test_a_changed_setting_regenerates(evaluated, tmp_path):
    out, argv = evaluated
    changed = tmp_path / "changed"
    shutil.copytree(out, changed)
    argv = [*argv[: argv.index("--out")], "--out", str(changed), "--max-new-tokens", "3", "--mode", "blind"]
    assert cli_main([*argv, "--model-name", "tiny", "--limit", "2"]) == 0
    assert counts(json.loads((changed / "summary.json").read_text())) == {"generated": 2, "cached": 0}
    assert len(read_predictions(changed)) == 2


def test_visual_mode_needs_frames_for_every_question(records):
    from datasets import Dataset

    without = Dataset.from_list(
        [{k: v for k, v in r.items() if k not in ("frames", "frame_timestamps")} for r in records]
    )
    with pytest.raises(ValueError, match="annotation-only build"):
        check_frames(without, ["visual", "blind"], "bench")
    check_frames(without, ["blind"], "bench")
    texts = [
        {"question_id": r["question_id"], "frames": [f"frame {t}" for t in ts], "frame_timestamps": ts}
        for r in records
        for ts in [r["frame_timestamps"]]
    ]
    texts[3]["frame_timestamps"] = []
    with pytest.raises(ValueError, match=f"1 question\\(s\\) have no frames \\(e.g. {records[3]['question_id']}"):
        check_frames(Dataset.from_list(texts), ["visual"], "bench")


def test_openai_backend_sends_frames_as_images_and_the_judge_grades_summaries(bench, records, tmp_path, monkeypatch):
    monkeypatch.setenv("TEST_EVAL_KEY", "sk-eval-secret")
    references = {answer_target(r) for r in records if r["category"] == "SM"}

    def script(body, index):
        if body["model"] == "fake-judge":
            text = last_user_text(body)
            assert text.startswith("REFERENCE:") and "Summarize" not in text  # reference + prediction only
            verdict = "correct" if "mobilized" in text.split("PREDICTION:")[1] else "incorrect"
            return Reply(content=json.dumps({"reason": "steps compared", "verdict": verdict}))
        question = last_user_text(body)
        if "Summarize" in question:
            return Reply(content="The colon is mobilized, the hilum exposed, artery and vein divided.")
        if "Order these events" in question:
            return Reply(content="Order: B -> C -> A")
        return Reply(content="**Answer: (B)**")

    out = tmp_path / "hosted"
    argv = ["eval", "sureon", "--model", "fake-vlm", "--backend", "openai", "--dataset", str(bench), "--out", str(out)]
    with FakeChatServer(script) as server:
        extra = ["--base-url", server.url, "--api-key-env", "TEST_EVAL_KEY", "--judge-model", "fake-judge"]
        extra += ["--judge-base-url", server.url, "--judge-api-key-env", "TEST_EVAL_KEY"]
        assert cli_main([*argv, *extra]) == 0
        first_round = len(server.requests)
        first_summary = json.loads((out / "summary.json").read_text())
        assert cli_main([*argv, *extra]) == 0  # rerun: nothing asked again
        assert len(server.requests) == first_round
    generation = [b for b in server.requests if b["model"] == "fake-vlm"]
    judge = [b for b in server.requests if b["model"] == "fake-judge"]
    assert len(generation) == 22 and len(judge) == 2
    assert {h["Authorization"] for h in server.headers} == {"Bearer sk-eval-secret"}
    frames = {r["question_id"]: len(r["frames"]) for r in records}
    image_counts = sorted(sum(p["type"] == "image_url" for p in b["messages"][-1]["content"]) for b in generation)
    assert image_counts == sorted([0] * 11 + list(frames.values()))
    assert all(
        p["image_url"]["url"].startswith("data:image/jpeg;base64,")
        for b in generation
        for p in b["messages"][-1]["content"]
        if p["type"] == "image_url"
    )
    predictions = read_predictions(out)
    sm = [p for p in predictions if p["category"] == "SM"]
    assert [p["correct"] for p in sm] == [True, True] and {p["answer"] for p in sm} == references
    to = [p for p in predictions if p["category"] == "TO"]
    assert {p["parsed"] for p in to} == {"B,C,A"} and all(p["correct"] for p in to)
    mcq = [p for p in predictions if p["answer_format"] == "mcq"]
    assert {p["parsed"] for p in mcq} == {"B"} and all(p["correct"] == (p["answer"] == "B") for p in mcq)
    assert first_summary["modes"]["visual"]["judged"] == {
        "n": 1,
        "verdicts": 1,
        "correct": 1,
        "accuracy": 100.0,
        "unjudged": [],
    }
    assert (
        first_summary["llm_usage"]["generation"]["calls"] == 22 and first_summary["llm_usage"]["judge"]["calls"] == 2
    )
    summary = json.loads((out / "summary.json").read_text())
    assert counts(summary) == {"generated": 0, "cached": 22} and summary["llm_usage"]["judge"]["cached"] == 2
    assert "sk-eval-secret" not in (out / "summary.json").read_text()


def test_a_retrained_checkpoint_at_the_same_name_regenerates(evaluated, tiny_vl, tmp_path):
    out, argv = evaluated
    model = tmp_path / "model"
    shutil.copytree(tiny_vl, model)  # copy2 keeps sizes and mtimes: the same checkpoint
    shutil.copytree(out, tmp_path / "eval")
    argv = [*argv[: argv.index("--model")], "--model", str(model), *argv[argv.index("--dataset") :]]
    argv = [*argv[: argv.index("--out")], "--out", str(tmp_path / "eval"), "--max-new-tokens", "6"]
    argv += ["--model-name", "tiny", "--mode", "blind", "--limit", "2"]
    assert cli_main(argv) == 0
    assert counts(json.loads((tmp_path / "eval" / "summary.json").read_text())) == {"generated": 0, "cached": 2}
    (model / "model.safetensors").write_bytes((model / "model.safetensors").read_bytes())  # rewritten weights
    assert cli_main(argv) == 0
    assert counts(json.loads((tmp_path / "eval" / "summary.json").read_text())) == {"generated": 2, "cached": 0}


def test_failed_endpoint_calls_stop_the_run_and_a_rerun_asks_only_for_them(bench, tmp_path):
    from recipes.evaluation.sureon.evaluate import main

    overloaded = {"on": True}

    def script(body, index):
        if overloaded["on"] and "Which structure is visible?" in last_user_text(body):
            return Reply(status=500, raw="overloaded")
        return Reply(content="A")

    out = tmp_path / "flaky"
    with FakeChatServer(script) as server:
        argv = ["--model", "m", "--backend", "openai", "--dataset", str(bench), "--out", str(out), "--limit", "3"]
        argv += ["--base-url", server.url, "--mode", "blind", "--max-retries", "1"]
        with pytest.raises(RuntimeError, match=r"1 generation\(s\) failed after retries \(sureon_test_0031 \(blind\)"):
            main(argv)
        assert not (out / "predictions.jsonl").exists()
        assert len(server.requests) == 2 + 2  # two answered, one asked twice
        overloaded["on"] = False
        assert main(argv) == 0
        assert len(server.requests) == 5  # only the failed one again
    assert [p["parsed"] for p in read_predictions(out)] == ["A", "A", "A"]


def test_a_text_only_model_answers_blind_and_refuses_frames(bench, tmp_path, capsys):
    from recipes.training.tiny_models import build_tiny_causal_lm

    model = build_tiny_causal_lm(tmp_path / "tiny-lm")
    argv = ["eval", "sureon", "--model", str(model), "--dataset", str(bench), "--max-new-tokens", "4", "--limit", "3"]
    assert cli_main([*argv, "--mode", "blind", "--out", str(tmp_path / "blind")]) == 0
    assert [p["mode"] for p in read_predictions(tmp_path / "blind")] == ["blind"] * 3
    assert cli_main([*argv, "--mode", "visual", "--out", str(tmp_path / "visual")]) == 2
    assert "a text-only model got frames" in capsys.readouterr().err


def test_a_system_prompt_goes_first_in_every_request_and_into_the_summary(bench, tmp_path, monkeypatch):
    """`--system-prompt` (as lmms-eval's Qwen3-VL sends one) is a system message before the unchanged prompt."""
    monkeypatch.setenv("TEST_EVAL_KEY", "sk-eval-secret")
    out = tmp_path / "system"
    argv = ["eval", "sureon", "--model", "fake-vlm", "--backend", "openai", "--dataset", str(bench), "--out", str(out)]
    argv += ["--mode", "blind", "--limit", "2", "--api-key-env", "TEST_EVAL_KEY"]
    with FakeChatServer(lambda body, index: Reply(content="B")) as server:
        assert cli_main([*argv, "--base-url", server.url, "--system-prompt", "You are a helpful assistant."]) == 0
    assert len(server.requests) == 2
    for body in server.requests:
        system, user = body["messages"]
        assert system["role"] == "system" and "You are a helpful assistant." in json.dumps(system["content"])
        assert user["role"] == "user" and "Question: " in json.dumps(user["content"])
    assert json.loads((out / "summary.json").read_text())["system_prompt"] == "You are a helpful assistant."


def test_a_files_layout_config_is_evaluated_with_its_frames_from_the_build(sureon_build, tmp_path, monkeypatch):
    """`db` of a default build stores its frames once under media/ and its rows hold relative paths: evaluation
    resolves them against the build, wherever it is run from, and sends each question's own JPEGs."""
    import base64

    from datasets import load_dataset

    build = sureon_build.out
    db = load_dataset(str(build), "db", split="train")
    assert db.features["frames"].feature.dtype == "string" and db[0]["frames"][0].startswith("media/")
    monkeypatch.chdir(tmp_path)  # relative paths must not be opened against the working directory
    monkeypatch.setenv("TEST_EVAL_KEY", "k")
    out = tmp_path / "db"
    argv = ["eval", "sureon", "--model", "fake-vlm", "--backend", "openai", "--dataset", str(build), "--out", str(out)]
    argv += ["--config", "db", "--split", "train", "--mode", "visual", "--limit", "3"]
    argv += ["--api-key-env", "TEST_EVAL_KEY"]
    with FakeChatServer(lambda body, index: Reply(content="A")) as server:
        assert cli_main([*argv, "--base-url", server.url]) == 0
    sent = sorted(
        [
            base64.b64decode(p["image_url"]["url"].split(",", 1)[1])
            for p in body["messages"][-1]["content"]
            if p["type"] == "image_url"
        ]
        for body in server.requests
    )
    expected = sorted([(build / path).read_bytes() for path in row["frames"]] for row in db.select(range(3)))
    assert sent == expected and all(len(frames) >= 4 for frames in sent)
    assert [p["question_id"] for p in read_predictions(out)] == db["question_id"][:3]


@pytest.mark.parametrize(
    "command, option",
    [
        (["eval", "sureon", "--model", "m"], "--limit"),
        (["eval", "sureon", "--model", "m"], "--max-new-tokens"),
        (["eval", "public", "--model", "m", "--benchmark", "bench-cholec80-phase-frame"], "--limit"),
        (["eval", "surgiq", "--model", "m"], "--limit"),
        (["export", "lmms-eval"], "--max-new-tokens"),
    ],
)
def test_a_count_of_zero_is_refused_before_anything_is_read_or_written(bench, tmp_path, capsys, command, option):
    """`--limit 0` used to evaluate every row and `--max-new-tokens 0` to be accepted: now argparse refuses it (exit
    2, the range in the message), and a caller of the functions gets the same refusal from ``check_counts``."""
    from recipes.evaluation.runner import check_counts

    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exit:
        cli_main([*command, "--dataset", str(bench), "--out", str(out), option, "0"])
    assert exit.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.endswith(f"error: argument {option}: 0 is not an integer of at least 1")
    assert not out.exists()
    with pytest.raises(ValueError, match=f"{option} 0: give a positive number"):
        check_counts(**{option.removeprefix("--").replace("-", "_"): 0})


def trained_on(model, folder, mixture: list[dict], **record) -> str:
    """A copy of ``model`` with the training_complete.json recipes/sft.py would have written after training on
    ``mixture`` (hand-written: no training needed)."""
    shutil.copytree(model, folder)
    entries = [{"format": "video_qa", "rows_used": 11} | source for source in mixture]
    (folder / "training_complete.json").write_text(json.dumps({"name": None, "mixture": entries} | record))
    return str(folder)


def test_a_model_trained_on_the_benchmark_is_warned_about_recorded_and_marked_in_the_report(
    evaluated, bench, tiny_vl, tmp_path, capsys
):
    """Before, `sureon eval` scored a model trained on the bench rows with no word, although its training record
    says so; now the run warns before generating, summary.json records it and `sureon report` marks its rows."""
    out, _ = evaluated
    assert "contamination" not in json.loads((out / "summary.json").read_text())  # a model no recipe trained
    model = trained_on(tiny_vl, tmp_path / "trained", [{"path": str(bench), "name": "bench", "split": "test"}])
    run = tmp_path / "contaminated"
    argv = ["eval", "sureon", "--model", model, "--dataset", str(bench), "--mode", "blind", "--limit", "2"]
    assert cli_main([*argv, "--max-new-tokens", "2", "--model-name", "tiny-trained", "--out", str(run)]) == 0
    printed = capsys.readouterr()
    assert "warning: tiny-trained was trained on the rows it is scored on" in printed.err
    assert "trained on the evaluated rows" in printed.out
    (finding,) = json.loads((run / "summary.json").read_text())["contamination"]
    assert finding["match"] == "same build, config and split" and finding["source"] == f"{bench}:bench:test"
    assert (finding["trained_in"], finding["questions"], finding["shared_questions"]) == (model, 2, 2)

    report = tmp_path / "report"
    runs = [str(out / "predictions.jsonl"), str(run / "predictions.jsonl")]
    assert cli_main(["report", "sureon", *runs, "--resamples", "50", "--no-paper", "--out", str(report)]) == 0
    markdown = (report / "report.md").read_text()
    assert "| tiny-trained (trained on the evaluated rows) | blind |" in markdown
    assert "| tiny | visual |" in markdown and "| tiny (trained" not in markdown
    assert "## Models trained on the evaluated rows" in markdown
    models = {m["name"]: m for m in json.loads((report / "report.json").read_text())["models"]}
    assert models["tiny-trained"]["contamination"] == [finding] and models["tiny"]["contamination"] == []


# ---- two ranks ----------------------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def rank_environment() -> dict:
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}


def cache_lines(entries: list[dict]) -> list[str]:
    return [json.dumps(entry) + "\n" for entry in entries]


def test_two_gloo_ranks_resume_every_cache_and_write_the_one_process_predictions(evaluated, records, tmp_path):
    out, argv = evaluated
    logged = [json.loads(line) for line in (out / "generations" / "rank-0-of-1.jsonl").read_text().splitlines()[1:]]
    share = [{r["question_id"] for r in records[rank::2]} for rank in (0, 1)]  # rank r: questions r, r + 2, ...
    two = tmp_path / "two"
    (two / "generations").mkdir(parents=True)
    # an earlier one-process run that generated 2 of rank 0's items, and rank 1 of a killed two-rank run: 3 whole
    # generations and a fourth cut short mid-write
    earlier = [entry for entry in logged if entry["question_id"] in share[0]][:2]
    killed = cache_lines([entry for entry in logged if entry["question_id"] in share[1]][:4])
    (two / "generations" / "rank-0-of-1.jsonl").write_text(header_line("generations") + "".join(cache_lines(earlier)))
    (two / "generations" / "rank-1-of-2.jsonl").write_text(
        header_line("generations") + "".join(killed[:3]) + killed[3][:40]
    )
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc-per-node",
        "2",
        "--master-port",
        str(free_port()),
    ]
    command += ["--module", "sureon", *argv[: argv.index("--out")], "--out", str(two)]
    command += ["--max-new-tokens", "6", "--batch-size", "4", "--model-name", "tiny"]
    done = subprocess.run(command, env=rank_environment(), capture_output=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    assert (two / "predictions.jsonl").read_bytes() == (out / "predictions.jsonl").read_bytes()
    summary = json.loads((two / "summary.json").read_text())
    shares = [(r["rank"], r["rows"], r["generated"], r["cached"]) for r in summary["generation"]["ranks"]]
    assert shares == [(0, 6, 12 - 2, 2), (1, 5, 10 - 3, 3)]  # each rank its questions in both modes, minus the cached
    assert counts(summary) == {"generated": 17, "cached": 5} and summary["generation"]["world_size"] == 2
    assert re.search(r"2 ranks: rank 0 10 new in [\d.]+ s, rank 1 7 new in", done.stdout.decode())  # rank 0 prints
    assert sorted(p.name for p in (two / "generations").iterdir()) == [
        "rank-0-of-1.jsonl",
        "rank-0-of-2.jsonl",
        "rank-1-of-2.jsonl",
    ]
    resumed = (two / "generations" / "rank-1-of-2.jsonl").read_text().splitlines()[1:]
    assert len([json.loads(line) for line in resumed]) == 3 + 7  # the cut line gone, rank 1's new generations added


def test_ranks_given_different_out_folders_each_stop_with_one_line(bench, tiny_vl, tmp_path):
    port, started = str(free_port()), []
    for rank in (0, 1):
        folder = tmp_path / f"rank-{rank}-starts-here"
        folder.mkdir()
        launcher = {"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2"}
        launcher |= {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port}
        command = [sys.executable, "-m", "sureon", "eval", "sureon", "--model", str(tiny_vl), "--dataset", str(bench)]
        process = subprocess.Popen(
            [*command, "--out", "results"],  # relative: another folder on each rank
            cwd=folder,
            env=rank_environment() | launcher,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        started.append((folder, process))
    for folder, process in started:
        _, stderr = process.communicate(timeout=300)
        assert process.returncode == 2, stderr
        outs = [tmp_path / f"rank-{rank}-starts-here" / "results" for rank in (0, 1)]
        message = (
            f"error: the 2 ranks of this launch were given different arguments (--out: rank 0 {outs[0]}, rank 1 "
            f"{outs[1]}): start every rank with the same command line, with absolute paths when the ranks start in "
            "different folders"
        )
        assert stderr.splitlines() == [message]  # one line, on each rank
        assert not (folder / "results").exists()
