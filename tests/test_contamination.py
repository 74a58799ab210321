"""Whether a model was trained on the rows it is scored on, from hand-written training records (no training): the same
build, config and split; a copy of the build; a record reached through the runs a model was trained from; and what
is not contamination. `sureon eval sureon` and the reports end to end: tests/test_eval_sureon.py."""

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from recipes.evaluation.contamination import find_contamination
from sureon.cli import main as cli_main


REPO = Path(__file__).resolve().parents[1]
SURGIQ_SAMPLE = REPO / "sample_data" / "surgiq" / "surgiq_sample.jsonl"


def run_folder(folder: Path, mixture: list[dict], **record) -> str:
    """A training run's folder as far as its record goes: training_complete.json (the weights are not read)."""
    folder.mkdir(parents=True)
    entries = [{"split": "train"} | source for source in mixture]
    (folder / "training_complete.json").write_text(json.dumps({"name": None, "mixture": entries} | record))
    return str(folder)


@pytest.fixture(scope="module")
def bench_ids(bench) -> list[str]:
    (shard,) = (bench / "bench").glob("*.parquet")
    return pq.read_table(shard, columns=["question_id"]).column("question_id").to_pylist()


def test_a_copy_of_the_benchmark_elsewhere_shares_its_question_ids(bench, bench_ids, tmp_path):
    copy = tmp_path / "copy-of-bench"
    shutil.copytree(bench, copy)
    model = run_folder(tmp_path / "run", [{"path": str(copy), "name": "bench", "split": "test"}])
    (finding,) = find_contamination(model, None, str(bench), "bench", "test", bench_ids)
    assert finding["match"] == "shared question ids"
    assert (finding["questions"], finding["shared_questions"]) == (11, 11)
    assert finding["examples"] == sorted(bench_ids)[:5]
    assert find_contamination(model, None, str(bench), "bench", "test", ["not-a-bench-id"]) == []


def test_what_a_model_trained_from_another_run_trained_on_is_found_in_that_run(bench, bench_ids, tmp_path):
    """GRPO from an SFT run, and the later stage of a multi-stage run, name the run they started from as `model`."""
    sft = run_folder(tmp_path / "sft", [{"path": str(bench), "name": "bench", "split": "test"}], model="Qwen/base")
    other = {"path": str(tmp_path / "elsewhere"), "name": "db"}
    grpo = run_folder(tmp_path / "grpo", [other], model=sft, started_from_sft=True, stage="grpo")
    (finding,) = find_contamination(grpo, None, str(bench), "bench", "test", bench_ids)
    assert (finding["trained_in"], finding["match"]) == (sft, "same build, config and split")
    stage1 = run_folder(tmp_path / "run" / "stage1-warmup", [{"path": str(bench), "name": "bench", "split": "test"}])
    stage2 = run_folder(tmp_path / "run" / "stage2-main", [other], model=stage1, name="main")
    (finding,) = find_contamination(stage2, None, str(bench), "bench", "test", bench_ids)
    assert finding["trained_in"] == stage1


def test_other_configs_splits_and_unrelated_sources_are_not_contamination(bench, bench_ids, tmp_path):
    sources = [
        {"path": str(bench), "name": "bench", "split": "train"},  # the split the benchmark does not have
        {"path": str(bench), "name": "db"},  # another config of the same build
        {"path": "my-org/sureon", "name": "bench", "split": "test"},  # a Hub id is not this local folder
        {"path": str(tmp_path / "not-on-this-machine"), "name": "bench", "split": "test"},
    ]
    model = run_folder(tmp_path / "run", sources)
    assert find_contamination(model, None, str(bench), "bench", "test", bench_ids) == []
    assert find_contamination(str(tmp_path / "no-record"), None, str(bench), "bench", "test", bench_ids) == []


def test_hub_ids_and_relative_paths_name_the_same_build(bench, bench_ids, tmp_path, monkeypatch):
    hub = run_folder(tmp_path / "hub", [{"path": "My-Org/Sureon", "name": "bench", "split": "test"}])
    assert find_contamination(hub, None, "my-org/sureon", "bench", "test", ["q1"])[0]["shared_questions"] == 1
    monkeypatch.chdir(bench.parent)  # where the recipe was launched: its paths are relative to it
    relative = run_folder(tmp_path / "relative", [{"path": bench.name, "name": "bench", "split": "test"}])
    (finding,) = find_contamination(relative, None, str(bench), "bench", "test", bench_ids)
    assert finding["match"] == "same build, config and split"


def test_surgiq_scores_of_a_model_trained_on_its_questions_say_so(tiny_causal_lm, tmp_path, capsys):
    from builders.surgiq.build import BuildOptions, build_surgiq

    build = build_surgiq(BuildOptions(sources=[SURGIQ_SAMPLE], out=tmp_path / "surgiq", configs=["default"])).out
    model = tmp_path / "trained"
    shutil.copytree(tiny_causal_lm, model)
    source = {"path": str(build), "name": "default", "split": "test", "format": "messages"}
    (model / "training_complete.json").write_text(json.dumps({"name": None, "mixture": [source]}))
    out = tmp_path / "eval"
    argv = ["eval", "surgiq", "--model", str(model), "--dataset", str(build), "--limit", "2", "--out", str(out)]
    assert cli_main(argv) == 0
    assert f"warning: {model} was trained on the rows it is scored on" in capsys.readouterr().err
    (finding,) = json.loads((out / "report.json").read_text())["contamination"]
    assert (finding["source"], finding["shared_questions"]) == (f"{build}:default:test", 2)
    assert "**Trained on the evaluated questions**" in (out / "report.md").read_text()


def test_a_hub_model_offline_mode_never_downloaded_is_passed_over_quietly(bench_ids, bench, caplog):
    """Its record cannot be read (HF_HUB_OFFLINE=1 in the tests): the system prompt's lookup already says so once."""
    assert find_contamination("my-org/never-downloaded", None, str(bench), "bench", "test", bench_ids) == []
    assert "training_complete.json" not in caplog.text
