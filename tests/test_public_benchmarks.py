"""The public benchmarks end to end: bench-* configs of the public build, `sureon eval public` (one process, two
gloo ranks, a SIGKILLed run resumed) and `sureon report public`'s Table 5 against scikit-learn and pycocotools."""

import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from datasets import load_dataset
from recipe_runs import one_thread

from public_converters.build import BuildOptions, build_public
from public_converters.clips import SamplingConfig
from public_converters.evaluation import cholec80_overlap
from public_converters.grounded import parse_answer
from public_converters.schema import read_tables
from public_converters.spec import sample_module
from recipes.model_io.answers import read_answer


REPO = Path(__file__).resolve().parents[1]
SOURCES = ("cholec80", "heichole", "endoscapes", "endovis2017")
EXCLUDED = "video43"  # one of the 17 Cholec80 test videos CholecT50 trains on


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _copy_renamed(folder: Path, old: str, new: str) -> None:
    for path in sorted(folder.rglob("*")):
        if path.is_file() and old in path.name.lower():
            name = path.name.replace(old, new).replace(old.capitalize(), new.capitalize())
            shutil.copy2(path, path.with_name(name))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("sources")
    for name in SOURCES:
        sample_module(name).write(root / name)
    _copy_renamed(root / "cholec80", "video41", EXCLUDED)  # a second test video, excluded from clip mode
    _copy_renamed(root / "heichole", "hei-chole10", "hei-chole25")  # a test video with labels (25-33 are test)
    out = tmp_path_factory.mktemp("corpus") / "public"
    sampling = SamplingConfig(min_seconds=4, max_seconds=12, grid_fps=2)
    manifest = build_public(BuildOptions(sources={n: root / n for n in SOURCES}, out=out, sampling=sampling))
    return out, manifest


def bench(out, name):
    return load_dataset(str(out), name, split="test").to_list()


def test_frame_benchmarks_hold_every_test_frame_on_the_1fps_grid(corpus):
    out, manifest = corpus
    assert EXCLUDED in cholec80_overlap()
    for source, task in (("cholec80", "phase"), ("heichole", "phase"), ("heichole", "action")):
        tables, _ = read_tables(out / "normalised" / source)
        expected = 0
        for video in (v for v in tables.videos if v.split == "test"):
            grid = range(0, video.total_frames, round(video.fps))  # 1 fps of a 25-fps video
            own = [s for s in tables.segments if s.video_id == video.video_id and s.kind == task]
            covering = [[s.label for s in own if s.start_frame <= f <= s.end_frame] for f in grid]
            expected += sum(len(c) == 1 or (task == "action" and not c) for c in covering)
        rows = bench(out, f"bench-{source}-{task}-frame")
        assert len(rows) == expected > 0, (source, task)
        assert all(r["frame_indices"] == [r["frame_index"]] and r["frame_index"] % 25 == 0 for r in rows)
        assert {r["video_id"] for r in rows} == {v.video_id for v in tables.videos if v.split == "test"}
    counts = manifest["sources"]["heichole"]["benchmarks"]["bench-heichole-action-frame"]
    assert counts["rows"] + counts.get("frames with several simultaneous actions", 0) == counts["grid frames"]


def test_clip_windows_are_8_frames_at_stride_4_ending_on_the_keyframe_and_skip_the_excluded_videos(corpus):
    out, manifest = corpus
    frames = bench(out, "bench-cholec80-phase-frame")
    clips = bench(out, "bench-cholec80-phase-clip")
    assert EXCLUDED in {r["video_id"] for r in frames}
    assert EXCLUDED not in {r["video_id"] for r in clips}  # clip mode only
    assert {(r["video_id"], r["frame_index"]) for r in clips} == {
        (r["video_id"], r["frame_index"]) for r in frames if r["video_id"] != EXCLUDED
    }
    for row in clips:
        indices = row["frame_indices"]
        assert len(indices) == len(row["frames"]) == 8 and indices[-1] == row["frame_index"]
        assert row["frame_timestamps"] == [round(i / 25, 6) for i in indices]  # absolute seconds
        real = sorted(set(indices))
        assert all(b - a == 4 * 25 for a, b in itertools.pairwise(real))
        if row["frame_index"] >= 7 * 4 * 25:
            assert len(real) == 8 and row["start"] == indices[0] / 25
        else:  # the video's start: the earliest frame repeats
            assert indices[: 8 - len(real)] == [real[0]] * (8 - len(real))
        assert all((out / frame).is_file() for frame in row["frames"])
    assert (
        manifest["sources"]["cholec80"]["benchmarks"]["bench-cholec80-phase-clip"][
            "videos excluded from clip mode (cholec80_excluded_videos.txt)"
        ]
        == 1
    )


def test_cvs_asks_three_questions_per_keyframe_and_tools_come_from_test_boxes(corpus):
    out, _ = corpus
    tables, _ = read_tables(out / "normalised" / "endoscapes")
    tests = {v.video_id for v in tables.videos if v.split == "test"}
    keyframes = [f for f in tables.frames if f.video_id in tests and f.cvs is not None]
    rows = bench(out, "bench-endoscapes-cvs-frame")
    assert len(rows) == 3 * len(keyframes) > 0
    for frame in keyframes:
        own = sorted((r for r in rows if r["frame_index"] == frame.frame_index), key=lambda r: r["criterion"])
        assert [r["criterion"] for r in own] == ["C1", "C2", "C3"]
        assert [r["reference"] for r in own] == ["yes" if s >= 0.5 else "no" for s in frame.cvs]
        assert len({r["question"] for r in own}) == 3
    tools = bench(out, "bench-endovis2017-tools-frame")
    tables, _ = read_tables(out / "normalised" / "endovis2017")
    tests = {v.video_id for v in tables.videos if v.split == "test"}
    boxed = {
        (i.video_id, i.frame_index) for i in tables.instances if i.video_id in tests and i.box and i.kind == "tool"
    }
    assert {(r["video_id"], r["frame_index"]) for r in tools} == boxed
    assert sum(len(r["reference_boxes"]) for r in tools) == sum(
        1 for i in tables.instances if i.video_id in tests and i.box and i.kind == "tool"
    )


def test_every_prompt_lists_its_labels_and_its_answer_format_parses(corpus):
    out, manifest = corpus
    names = [c["config_name"] for c in manifest["configs"] if c["config_name"].startswith("bench-")]
    assert len(names) == 7
    for name in names:
        for row in bench(out, name):
            assert all(label in row["question"] for label in row["labels"])
            vocabulary = {row["answer_key"]: set(row["labels"])}
            parse_answer(row["answer_shape"], row["answer"], vocabulary, row["answer_key"])
            prediction, error = read_answer(row, f"Sure. {row['answer']} Done.")  # text around the JSON
            assert error is None
            if row["task"] == "tool_localization":
                assert prediction == row["reference_boxes"]
            else:
                assert prediction == row["reference"]


# ---- sureon eval public ------------------------------------------------------------------------------------------

BENCHMARKS = ["bench-cholec80-phase-clip", "bench-endoscapes-cvs-frame", "bench-endovis2017-tools-frame"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from recipes.training.tiny_models import build_tiny_qwen3_vl

    out = tmp_path_factory.mktemp("tiny") / "model"
    build_tiny_qwen3_vl(out, weight_std=0.3)  # greedy answers that depend on the prompt and the frames
    return out


def eval_command(model, dataset, out, *extra):
    return [
        *("-m", "recipes.evaluation.public.evaluate", "--model", str(model), "--model-name", "tiny"),
        *("--dataset", str(dataset), "--out", str(out), "--benchmark", *BENCHMARKS),
        *("--max-new-tokens", "6", "--batch-size", "2", "--limit", "10", "--dtype", "float32", *extra),
    ]


def env():
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}


@pytest.fixture(scope="module")
def one_process(corpus, tiny, tmp_path_factory):
    out = tmp_path_factory.mktemp("eval") / "one"
    evaluate_here(eval_command(tiny, corpus[0], out))
    return out


def evaluate_here(command: list[str]) -> None:
    """``python -m recipes.evaluation.public.evaluate ...`` in this process, on one thread as the ranks run."""
    from recipes.evaluation.public.evaluate import main

    assert command[:2] == ["-m", "recipes.evaluation.public.evaluate"]
    with one_thread():
        assert main(command[2:]) == 0


def test_predictions_cover_every_row_in_the_report_format(corpus, one_process):
    lines = (one_process / "predictions.jsonl").read_text().splitlines()
    rows = [row for name in BENCHMARKS for row in bench(corpus[0], name)[:10]]
    records = [json.loads(line) for line in lines]
    assert [r["question_id"] for r in records] == [r["question_id"] for r in rows]
    done = subprocess.run(
        [sys.executable, "-m", "sureon.cli", "report", "public", str(one_process / "predictions.jsonl")]
        + ["--out", str(one_process / "report")],
        env=env(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "(a) Macro-F1" in done.stdout and "tiny (clip)" in done.stdout and "(c) Endoscapes-CVS" in done.stdout


@pytest.mark.slow  # ~17 CPU s; the ranks' shared code (recipes/evaluation/ranks.py) runs two-rank in make test
# through tests/test_eval_sureon.py's launch
def test_two_gloo_ranks_write_the_same_predictions_as_one_process(corpus, tiny, one_process, tmp_path):
    out = tmp_path / "two"
    command = [
        *(sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2"),
        *("--master-port", str(free_port())),
        "--module",
        *eval_command(tiny, corpus[0], out)[1:],
    ]
    done = subprocess.run(command, env=env(), capture_output=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    assert (out / "predictions.jsonl").read_bytes() == (one_process / "predictions.jsonl").read_bytes()
    assert sorted(p.name for p in (out / "generations").iterdir()) == ["rank-0-of-2.jsonl", "rank-1-of-2.jsonl"]


def test_a_sigkilled_run_resumes_and_ends_byte_identical(corpus, tiny, one_process, tmp_path):
    out = tmp_path / "killed"
    log = out / "generations" / "rank-0-of-1.jsonl"
    process = subprocess.Popen(
        [sys.executable, *eval_command(tiny, corpus[0], out)], env=env(), stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 300

    def entries() -> int:  # the complete lines of the cache after its header (the line naming the cache's kind)
        lines = log.read_text().split("\n")[:-1] if log.is_file() else []
        return len([line for line in lines if "sureon_cache" not in json.loads(line)])

    while not entries() and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    cached = entries()
    assert 0 < cached and not (out / "predictions.jsonl").exists()
    evaluate_here(eval_command(tiny, corpus[0], out))  # the rerun resumes from what the killed run cached
    assert (out / "predictions.jsonl").read_bytes() == (one_process / "predictions.jsonl").read_bytes()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["generation"]["ranks"][0]["cached"] == cached


# ---- the report's Table 5 against scikit-learn and pycocotools ---------------------------------------------------


def test_table5_numbers_equal_scikit_learn_and_pycocotools(corpus, tmp_path):
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval
    from sklearn.metrics import accuracy_score, f1_score

    from recipes.evaluation.public.evaluate import prediction_record
    from recipes.evaluation.public.report import build_report, load_groups, parse_exclusions

    out, _ = corpus
    rng = np.random.default_rng(0)
    records = []
    for name in ("bench-cholec80-phase-frame", "bench-endoscapes-cvs-frame", "bench-endovis2017-tools-frame"):
        for row in bench(out, name):
            answer = json.loads(row["answer"])
            if row["task"] == "tool_localization":
                # each box kept (a hit) or moved far off (a miss plus a false positive)
                shifts = [float(rng.choice([0, 400])) for _ in answer]
                answer = [
                    b | {"box": [min(1000.0, v + shift) for v in b["box"]]}
                    for b, shift in zip(answer, shifts, strict=True)
                ]
            elif rng.random() < 0.4:
                answer = {row["answer_key"]: str(rng.choice(row["labels"]))}
            records.append(prediction_record(row, json.dumps(answer), "m"))
    path = tmp_path / "predictions.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    data = build_report(load_groups([str(path)], {}), parse_exclusions(None))
    part_a = {(r["model"], r["input_mode"]): r for r in data["table5"]["a"] if r["from"] == "predictions"}
    phase = [r for r in records if r["task"] == "phase"]
    per_video, closed = [], set(phase[0]["labels"])
    assert closed > {r["reference"] for r in phase}  # the closed set holds phases no test reference uses
    for video in sorted({r["video_id"] for r in phase}):
        truth = [r["reference"] for r in phase if r["video_id"] == video]
        # the report's classes: the benchmark's closed label set; a prediction outside it is a miss
        guess = [r["prediction"] if r["prediction"] in closed else "miss" for r in phase if r["video_id"] == video]
        per_video.append(
            (
                f1_score(truth, guess, labels=sorted(set(truth) | (set(guess) - {"miss"})), average="macro"),
                accuracy_score(truth, guess),
            )
        )
    assert part_a[("m", "frame")]["cholec80_phase"] == pytest.approx(100 * np.mean([f for f, _ in per_video]))
    assert data["table5"]["b"][0]["accuracy"] == pytest.approx(100 * np.mean([a for _, a in per_video]))
    cvs = [r for r in records if r["task"] == "cvs"]
    for criterion in ("C1", "C2", "C3"):
        own = [r for r in cvs if r["criterion"] == criterion]
        expected = 100 * np.mean([r["prediction"] == r["reference"] for r in own])
        assert data["table5"]["c"][0][criterion] == pytest.approx(expected)
    tools = [r for r in records if r["task"] == "tool_localization"]
    names = sorted({b["label"] for r in tools for b in r["reference_boxes"]})
    xywh = lambda b: [b[0], b[1], b[2] - b[0], b[3] - b[1]]  # noqa: E731
    gt = COCO()
    gt.dataset = {
        "images": [{"id": i} for i in range(1, len(tools) + 1)],
        "categories": [{"id": k + 1, "name": n} for k, n in enumerate(names)],
        "annotations": [
            {"id": n, "image_id": i, "category_id": names.index(b["label"]) + 1, "bbox": xywh(b["bbox"])}
            | {"area": xywh(b["bbox"])[2] * xywh(b["bbox"])[3], "iscrowd": 0}
            for n, (i, b) in enumerate(
                ((i, b) for i, r in enumerate(tools, start=1) for b in r["reference_boxes"]), start=1
            )
        ],
    }
    gt.createIndex()
    detections = [
        {"image_id": i, "category_id": names.index(b["label"]) + 1, "bbox": xywh(b["bbox"]), "score": 1.0}
        for i, r in enumerate(tools, start=1)
        for b in r["boxes"]
    ]
    evaluation = COCOeval(gt, gt.loadRes(detections), "bbox")
    evaluation.evaluate()
    evaluation.accumulate()
    evaluation.summarize()
    precision = evaluation.eval["precision"][0, :, :, 0, -1]
    expected = 100 * np.mean([precision[:, k][precision[:, k] > -1].mean() for k in range(len(names))])
    assert data["table5"]["map50"][0]["map50"] == pytest.approx(expected)
    assert 0 < expected < 100


def test_an_openai_compatible_endpoint_gets_the_frames_as_images_and_its_json_is_parsed(corpus, tmp_path, monkeypatch):
    from fake_chat_server import FakeChatServer, Reply, last_user_text

    from sureon.cli import main as cli

    monkeypatch.setenv("TEST_PUBLIC_KEY", "sk-public-secret")

    def script(body, index):
        text = last_user_text(body)
        if "surgical phase" in text:
            return Reply(content='The phase is:\n```json\n{"phase": "gallbladder dissection"}\n```')
        return Reply(content='{"answer": "no"}' if "Critical view" in text else "I cannot tell.")

    out = tmp_path / "served"
    argv = ["eval", "public", "--model", "served-vlm", "--backend", "openai", "--dataset", str(corpus[0])]
    argv += ["--out", str(out), "--benchmark", *BENCHMARKS, "--api-key-env", "TEST_PUBLIC_KEY"]
    with FakeChatServer(script) as server:
        assert cli([*argv, "--base-url", server.url]) == 0
        asked = len(server.requests)
        assert cli([*argv, "--base-url", server.url]) == 0  # a rerun asks nothing again
        assert len(server.requests) == asked
    rows = {r["question_id"]: r for name in BENCHMARKS for r in bench(corpus[0], name)}
    assert asked == len(rows)
    images = sorted(sum(p["type"] == "image_url" for p in b["messages"][-1]["content"]) for b in server.requests)
    assert images == sorted(len(r["frames"]) for r in rows.values())
    records = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    by_task = {task: [r for r in records if r["task"] == task] for task in ("phase", "cvs", "tool_localization")}
    assert {r["prediction"] for r in by_task["phase"]} == {"gallbladder dissection"}
    assert {r["prediction"] for r in by_task["cvs"]} == {"no"}
    assert all(r["boxes"] is None and r["parse_error"] for r in by_task["tool_localization"])  # a miss, kept


def test_no_benchmarks_writes_no_bench_config(tmp_path):
    sample_module("cholec80").write(tmp_path / "cholec80")
    options = BuildOptions(sources={"cholec80": tmp_path / "cholec80"}, out=tmp_path / "public", benchmarks=False)
    manifest = build_public(options)
    assert not [c for c in manifest["configs"] if c["config_name"].startswith("bench-")]
    assert not (tmp_path / "public" / "bench").exists() and "benchmarks" not in manifest["sources"]["cholec80"]


def test_a_benchmark_without_rows_says_truthfully_why(tmp_path):
    """A copy with only Cholec80's training videos (every file of video41 gone, nothing misnamed) builds, and its
    empty benchmarks say that none of the split's test videos is in the copy, not that test labels are withheld."""
    from public_converters.benchmarks import build_benchmarks
    from public_converters.media import check_media
    from public_converters.normalise import normalise_source
    from public_converters.spec import registry

    root = tmp_path / "cholec80"
    sample_module("cholec80").write(root)
    for path in sorted(root.rglob("video41*")):
        path.unlink()
    built = build_benchmarks(check_media(normalise_source(registry()["cholec80"], root)))
    assert built.rows == {}
    for mode in ("frame", "clip"):
        entry = built.manifest[f"bench-cholec80-phase-{mode}"]
        assert entry["test_videos"] == 0
        assert (
            entry["not written"]
            == "none of the 40 test videos of the endonet split (video41 ... video80) is in this copy"
        )
