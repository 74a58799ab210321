"""`sureon export lmms-eval`: the exported task's own functions, called as lmms-eval calls them, give our prompt,
our parsing and our metrics; the slow test runs lmms-eval 0.7 itself in a separate virtual environment on a tiny
Qwen3-VL and compares every output with `sureon eval sureon`.

lmms-eval 0.7 pins wandb==0.25 and av<16, which clash with the project's environment, so it is never installed in
it: CI checks the task through its functions and YAML, and only the slow test meets the real harness.
"""

import glob
import importlib.util
import json
import os
import re
import site
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SAMPLE_RELEASE
from datasets import load_dataset
from PIL import Image

from builders.prompt import format_messages
from recipes.evaluation.sureon.evaluate import score_all, summarize
from recipes.export import lmms_eval as export
from recipes.export.task_files import FunctionTag, load_task_yaml
from sureon.cli import main as cli_main


LMMS_EVAL = "lmms-eval==0.7.3"
SYSTEM_PROMPT = "You are a helpful assistant."  # what lmms-eval's Qwen3-VL sends unless told otherwise


@pytest.fixture(scope="module")
def tasks(sureon_build, tmp_path_factory):
    out = tmp_path_factory.mktemp("lmms") / "lmms_tasks"
    argv = ["export", "lmms-eval", "--dataset", str(sureon_build.out), "--out", str(out), "--max-new-tokens", "16"]
    assert cli_main(argv) == 0
    return out


@pytest.fixture(scope="module")
def utils(tasks):
    spec = importlib.util.spec_from_file_location("exported_lmms_utils", tasks / "utils.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def docs(tasks):
    """The test split exactly as lmms-eval loads it from the base YAML (frames decoded to PIL images)."""
    base = load_task_yaml(tasks / export.BASE)
    return load_dataset(base["dataset_path"], base["dataset_name"], split=base["test_split"])


def texts_and_images(content: list[dict], image_key: str) -> list:
    return [part["text"] if part["type"] == "text" else ("image", part[image_key].tobytes()) for part in content]


def test_visual_prompt_is_our_formatter_with_frames_in_place(utils, docs):
    visual = utils.process_docs_visual(docs)
    assert len(visual) == len(docs) and set(visual["mode"]) == {"visual"}
    for doc in visual:
        (ours,) = format_messages(doc, frames_as="images")
        (theirs,) = utils.doc_to_messages(doc)
        assert theirs["role"] == "user"
        assert texts_and_images(theirs["content"], "url") == texts_and_images(ours["content"], "image")
        assert theirs["content"][0]["text"].startswith("Clip: ")
        assert [v.tobytes() for v in utils.doc_to_visual(doc)] == [f.tobytes() for f in doc["frames"]]
        text = utils.doc_to_text(doc)
        assert re.findall(r"<image (\d+)>", text) == [str(k) for k in range(1, len(doc["frames"]) + 1)]
        assert re.sub(r"<image \d+>", "", text) == "".join(p["text"] for p in ours["content"] if p["type"] == "text")
        assert re.search(r"Frame at [\d:.]+: <image 1>", text)


def test_blind_prompt_has_no_visuals_and_the_same_text(utils, docs):
    blind = utils.process_docs_blind(docs)
    for doc in blind:
        (theirs,) = utils.doc_to_messages(doc)
        (ours,) = format_messages(doc, blind=True)
        assert theirs["content"] == ours["content"]
        assert all(part["type"] == "text" for part in theirs["content"])
        assert utils.doc_to_visual(doc) == [] and "<image" not in utils.doc_to_text(doc)


def test_outputs_are_parsed_and_scored_like_sureon_eval_sureon(utils, docs):
    both = utils.process_docs_both(docs)
    assert list(both["mode"]) == ["visual"] * len(docs) + ["blind"] * len(docs)
    metrics = [m["metric"] for m in load_task_yaml(Path(utils.__file__).parent / "sureon.yaml")["metric_list"]]
    outputs = {}
    results = {name: [] for name in metrics}
    for doc in both:
        target = utils.doc_to_target(doc)
        # visual: the right answer in a sentence; blind: a wrong option letter or an unparseable reply
        if doc["mode"] == "visual":
            output = f"The answer is {target}." if doc["options"] else target
        else:
            output = "Z, Z" if doc["answer_order"] else ("A" if target != "A" else "B") if doc["options"] else "..."
        outputs[(doc["question_id"], doc["mode"])] = output
        per_doc = utils.process_results_sureon(doc, [output])
        assert set(per_doc) == set(metrics)
        for name, value in per_doc.items():
            results[name].append(value)
    records = [{k: v for k, v in doc.items() if k != "frames"} for doc in docs]
    ours = score_all(records, ["visual", "blind"], outputs, export.MODEL_NAME)
    theirs = sorted(results["mg"], key=lambda p: (p["mode"] != "visual", p["question_id"]))
    assert theirs == sorted(ours, key=lambda p: (p["mode"] != "visual", p["question_id"]))
    summary = summarize(ours, ["visual", "blind"])
    aggregated = {name: getattr(utils, f"aggregate_{name}")(results[name]) for name in metrics}
    assert aggregated["mu_visual"] == summary["modes"]["visual"]["mu"] == 100.0
    assert aggregated["mu_blind"] == summary["modes"]["blind"]["mu"] == 0.0
    assert aggregated["mg"] == summary["multimodal_gain"]["mu"] == 100.0
    for category, entry in summary["modes"]["visual"]["per_category"].items():
        if entry["scored_by"] == "accuracy":
            assert aggregated[f"visual_{category}"] == entry["accuracy"]
            assert aggregated[f"mg_{category}"] == summary["multimodal_gain"]["per_category"][category]
    assert "visual_SM" not in aggregated and "mg_SM" not in aggregated  # SM: left to our judge


def test_task_yamls_name_functions_the_utils_define(tasks, utils, sureon_build):
    base = load_task_yaml(tasks / export.BASE)
    assert Path(base["dataset_path"]) == sureon_build.out.resolve() and base["dataset_name"] == "bench"
    assert "video" not in base.get("dataset_kwargs", {})  # lmms-eval would try the Hub
    assert base["generation_kwargs"] == {"max_new_tokens": 16, "temperature": 0, "do_sample": False}
    manifest = json.loads((tasks / "manifest.json").read_text())
    for task, modes in export.TASK_MODES.items():
        config = load_task_yaml(tasks / f"{task}.yaml")
        assert config["include"] == export.BASE and config["task"] == task
        tags = [config["process_docs"], config["process_results"]] + [m["aggregation"] for m in config["metric_list"]]
        tags += [base[key] for key in ("doc_to_messages", "doc_to_visual", "doc_to_text", "doc_to_target")]
        assert all(isinstance(tag, FunctionTag) and callable(getattr(utils, tag)) for tag in tags)
        assert [m["metric"] for m in config["metric_list"]] == manifest["tasks"][task]["metrics"]
        assert manifest["tasks"][task]["conditions"] == list(modes)
    assert manifest["accuracy_scored"] + manifest["judged_not_scored"] == manifest["questions"]
    assert "SM" not in manifest["categories"]
    assert utils.doc_to_messages is export.doc_to_messages  # the project's function, not a copy


def test_an_annotation_only_build_is_refused(tmp_path):
    from builders.sureon.build import BuildOptions, build_sureon

    report = build_sureon(BuildOptions(release=SAMPLE_RELEASE, out=tmp_path / "annotations", configs=["bench"]))
    with pytest.raises(ValueError, match=r"has no frames \(an annotation-only build\)"):
        export.export_lmms_eval(str(report.out), tmp_path / "tasks")


def test_a_public_corpus_build_is_named_for_what_it_is(tmp_path):
    """Its benchmarks have frames but no Sureon category: the error says so (not "annotation-only")."""
    from public_converters.build import BuildOptions, build_public
    from public_converters.clips import SamplingConfig
    from public_converters.spec import sample_module

    sample_module("cholec80").write(tmp_path / "cholec80")
    sampling = SamplingConfig(min_seconds=4, max_seconds=12, grid_fps=2)
    build_public(BuildOptions(sources={"cholec80": tmp_path / "cholec80"}, out=tmp_path / "public", sampling=sampling))
    for config in ("bench-cholec80-phase-frame", "clip"):
        with pytest.raises(ValueError) as refused:
            export.export_lmms_eval(str(tmp_path / "public"), tmp_path / "tasks", config=config)
        message = str(refused.value)
        assert f"({config}/test) is not a Sureon build (it lacks " in message and "sureon eval public" in message
        assert "annotation-only" not in message and not (tmp_path / "tasks").exists()


def test_a_files_layout_config_exports_with_its_frames_resolved_against_the_build(sureon_build, tmp_path):
    """`db` holds relative frame paths: the task's process_docs resolves them against the build and decodes them
    like an embedded config's frames, whatever folder lmms-eval runs from."""
    out = tmp_path / "db_tasks"
    build = sureon_build.out
    argv = ["export", "lmms-eval", "--dataset", str(build), "--config", "db", "--split", "train", "--out", str(out)]
    assert cli_main(argv) == 0
    spec = importlib.util.spec_from_file_location("exported_db_utils", out / "utils.py")
    utils = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(utils)
    base = load_task_yaml(out / export.BASE)
    docs = load_dataset(base["dataset_path"], base["dataset_name"], split=base["test_split"])
    assert docs[0]["frames"][0].startswith("media/")
    visual = utils.process_docs_visual(docs)
    assert len(visual) == len(docs)
    for doc, stored in zip(visual.select(range(3)), docs.select(range(3)), strict=True):
        images = utils.doc_to_visual(doc)
        assert len(images) == len(stored["frames"]) >= 4
        for image, path in zip(images, stored["frames"], strict=True):
            assert image.tobytes() == Image.open(build / path).convert(image.mode).tobytes()


# --- the real harness, in its own environment ------------------------------------------------------------------------


def lmms_eval_venv(root: Path) -> Path:
    """A virtual environment with lmms-eval 0.7 layered over this one: our packages are visible through a .pth file
    (torch is not downloaded again) and lmms-eval's pins install into the new environment only, shadowing ours
    there. 0.7.3 also imports decord and ``filelock._api`` (filelock < 4) without declaring them."""
    python = root / "bin" / "python"
    if not python.exists():
        subprocess.run([Path(sys.base_prefix) / "bin" / "python3", "-m", "venv", root], check=True)
        (next((root / "lib").glob("python3*/site-packages")) / "_project_stack.pth").write_text(
            "\n".join(site.getsitepackages()) + "\n"
        )
        subprocess.run([python, "-m", "pip", "install", "-q", LMMS_EVAL, "decord", "filelock<4"], check=True)
    return python


@pytest.mark.slow
def test_lmms_eval_runs_the_exported_tasks_like_sureon_eval_sureon(sureon_build, tmp_path):
    from recipes.training.tiny_models import build_tiny_qwen3_vl

    python = lmms_eval_venv(Path(os.environ.get("SUREON_LMMS_EVAL_VENV") or tmp_path / "venv"))
    model = build_tiny_qwen3_vl(tmp_path / "tiny-vl", max_pixels=256 * 256, weight_std=0.3)
    tasks = tmp_path / "tasks"
    argv = ["export", "lmms-eval", "--dataset", str(sureon_build.out), "--out", str(tasks), "--max-new-tokens", "16"]
    assert cli_main(argv) == 0

    ours_dir = tmp_path / "ours"
    argv = ["eval", "sureon", "--model", str(model), "--dataset", str(sureon_build.out), "--mode", "both"]
    argv += ["--frames-as", "images", "--dtype", "bfloat16", "--system-prompt", SYSTEM_PROMPT]
    argv += ["--max-new-tokens", "16", "--batch-size", "1", "--device", "cpu", "--out", str(ours_dir)]
    assert cli_main(argv) == 0
    lines = (ours_dir / "predictions.jsonl").read_text().splitlines()
    ours = {(p["question_id"], p["mode"]): p for p in map(json.loads, lines)}
    summary = json.loads((ours_dir / "summary.json").read_text())

    run_dir = tmp_path / "run"  # lmms-eval reads --tasks as a folder when one of that name is in the cwd
    run_dir.mkdir()
    model_args = f"pretrained={model},device=cpu,device_map=cpu,attn_implementation=sdpa"
    command = [python, "-m", "lmms_eval", "--model", "qwen3_vl", "--model_args", model_args, "--tasks", "sureon"]
    command += ["--include_path", str(tasks), "--batch_size", "1", "--log_samples", "--output_path", str(tmp_path)]
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"HF_HUB_OFFLINE": "1"}
    subprocess.run(command, check=True, cwd=run_dir, env=environment, timeout=1800)

    (samples_file,) = glob.glob(str(tmp_path / "*" / "*_samples_sureon.jsonl"))
    theirs = {}
    for line in Path(samples_file).read_text().splitlines():
        record = json.loads(line)["mg"]
        theirs[(record["question_id"], record["mode"])] = record
    assert set(theirs) == set(ours)
    # lmms-eval strips the generated text; parsing strips it too, so the outcome is the raw text's
    assert {k: p["raw_output"].strip() for k, p in theirs.items()} == {
        k: p["raw_output"].strip() for k, p in ours.items()
    }
    assert {k: (p["parsed"], p["correct"]) for k, p in theirs.items()} == {
        k: (p["parsed"], p["correct"]) for k, p in ours.items()
    }
    assert len({p["raw_output"] for p in ours.values()}) > 2  # the model's outputs depend on its input
    (results_file,) = glob.glob(str(tmp_path / "*" / "*_results.json"))
    results = json.loads(Path(results_file).read_text())["results"]["sureon"]
    assert results["mu_visual,none"] == summary["modes"]["visual"]["mu"]
    assert results["mu_blind,none"] == summary["modes"]["blind"]["mu"]
    assert results["mg,none"] == summary["multimodal_gain"]["mu"]
