"""`sureon export vlmevalkit`: the exported TSVs hold every benchmark row once with the build's frames, options and
answers; the prompt is our formatter's; a VLMEvalKit prediction table (xlsx or tsv) is scored, by the dataset's
`evaluate` and by `sureon report`, exactly as `sureon eval` scores the same outputs. The slow test runs VLMEvalKit
itself (ms-vlmeval 0.0.20, in a virtual environment of its own) on a tiny Qwen3-VL and compares every output, every
parsed answer and every accuracy with `sureon eval sureon`.

VLMEvalKit pulls ~170 packages (decord, opencv-python, an omegaconf pre-release) that clash with the project's
environment, so CI checks the export through its own functions and files; only the slow test meets the harness.
"""

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO
from datasets import Image, List, load_dataset

from builders.options import LETTERS
from builders.prompt import answer_target, format_messages
from recipes.evaluation.prediction_tables import TableError, read_table, records_of
from recipes.evaluation.public.evaluate import prediction_record
from recipes.evaluation.sureon.evaluate import score_all, summarize
from recipes.export import vlmevalkit as export
from recipes.export import vlmevalkit_dataset
from recipes.export.sureon_benchmark import metric_value
from sureon.cli import main as cli_main


CONDITIONS = {"Sureon_visual": ["visual"], "Sureon_blind": ["blind"], "Sureon": ["visual", "blind"]}
MODEL = "tiny-qwen3-vl"
PUBLIC_BENCHMARK = "bench-cholec80-phase-frame"
PUBLIC_DATASET = f"Sureon_{PUBLIC_BENCHMARK}"


@pytest.fixture(scope="module")
def exported(bench, tmp_path_factory):
    out = tmp_path_factory.mktemp("vlmevalkit") / "export"
    assert cli_main(["export", "vlmevalkit", "--dataset", str(bench), "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def build_rows(bench):
    """The build's bench split with each frame's stored bytes."""
    docs = load_dataset(str(bench), "bench", split="test")
    return docs.cast_column("frames", List(Image(decode=False))).to_list()


def tsv(exported: Path, name: str) -> list[dict]:
    return read_table(exported / f"{name}.tsv")


def test_every_question_once_per_condition_with_the_builds_frames_options_and_answers(exported, build_rows):
    manifest = json.loads((exported / export.MANIFEST).read_text())
    by_id = {row["question_id"]: row for row in build_rows}
    for name, modes in CONDITIONS.items():
        rows = tsv(exported, name)
        assert manifest["datasets"][name]["rows"] == len(rows) == len(build_rows) * len(modes)
        assert [(r["question_id"], r["mode"]) for r in rows] == [(q, m) for m in modes for q in by_id]
        assert [int(r["index"]) for r in rows] == list(range(len(rows)))
        root = exported / manifest["datasets"][name]["frames_root"]
        for row in rows:
            built = by_id[row["question_id"]]
            options = built["options"] or []
            assert [row[letter] for letter in LETTERS[: len(options)]] == options
            assert all(row[letter] == "" for letter in LETTERS[len(options) : 7] if letter in row)
            assert row["answer"] == answer_target(built) and row["category"] == built["category"]
            assert json.loads(row[export.RECORD_COLUMN]) == {k: v for k, v in built.items() if k != "frames"}
            frames = json.loads(row["image_path"])
            if row["mode"] == "blind":
                assert frames == [] and json.loads(row["frame_timestamps"]) == []
                continue
            assert json.loads(row["frame_timestamps"]) == built["frame_timestamps"]
            assert [(root / f).read_bytes() for f in frames] == [f["bytes"] for f in built["frames"]]
    written = [p.read_bytes() for p in (exported / export.FRAMES).rglob("*") if p.is_file()]
    # each distinct frame once, shared by the questions that show it and by the visual and both TSVs
    assert sorted(written) == sorted({f["bytes"] for r in build_rows for f in r["frames"]})
    assert {"SM", "TO", "AD"} <= {r["category"] for r in build_rows}  # the demo covers options, orders, summaries


def test_max_frames_shows_the_frames_training_and_evaluation_keep(bench, build_rows, tmp_path):
    """The one frame rule: `--max-frames 4` exports the 4 frames `select_frames` keeps, labelled off protocol."""
    from builders.prompt import select_frames

    out = tmp_path / "export4"
    assert cli_main(["export", "vlmevalkit", "--dataset", str(bench), "--out", str(out), "--max-frames", "4"]) == 0
    manifest = json.loads((out / export.MANIFEST).read_text())
    assert manifest["datasets"]["Sureon_visual"]["frames"]["frames_shown"] == 4
    assert manifest["datasets"]["Sureon_visual"]["frames"]["at_protocol"] is False
    root = out / manifest["datasets"]["Sureon_visual"]["frames_root"]
    by_id = {row["question_id"]: row for row in build_rows}
    for row in tsv(out, "Sureon_visual"):
        kept = select_frames(by_id[row["question_id"]], 4)
        assert json.loads(row["frame_timestamps"]) == kept["frame_timestamps"]
        assert [(root / f).read_bytes() for f in json.loads(row["image_path"])] == [f["bytes"] for f in kept["frames"]]


def test_the_prompt_is_our_formatter_over_the_same_frames(exported):
    root = exported / "frames" / "Sureon"
    for row in tsv(exported, "Sureon"):
        record = json.loads(row[export.RECORD_COLUMN])
        message = vlmevalkit_dataset.vlmevalkit_message(row, root)
        blind = row["mode"] == "blind"
        paths = [str(root / f) for f in json.loads(row["image_path"])]
        (ours,) = format_messages(record | {"frames": paths}, blind=blind, frames_as="images")
        assert [(p["type"], p["value"]) for p in message] == [
            (p["type"], p["image"] if p["type"] == "image" else p["text"]) for p in ours["content"]
        ]
        images = [p["value"] for p in message if p["type"] == "image"]
        assert len(images) == (0 if blind else len(record["frame_timestamps"]))
        if not blind:
            assert message[0]["value"].startswith("Clip: ") and message[1]["value"].startswith("\nFrame at ")
            assert all(Path(p).is_file() for p in images)


def outputs_for(rows: list[dict]) -> dict:
    """Visual: the right answer in a sentence; blind: a wrong letter, "None" (pandas would read NaN) or a control
    character inside an order (xlsxwriter writes it as _x0003_)."""
    outputs = {}
    for row in rows:
        record = json.loads(row[export.RECORD_COLUMN])
        target = answer_target(record)
        if row["mode"] == "visual":
            outputs[row["index"]] = f"The answer is {target}." if record["options"] else target
        elif record["options"]:
            outputs[row["index"]] = "None" if target == "A" else "A"
        else:
            outputs[row["index"]] = "C,\x03 B, A" if record["answer_order"] else "None"
    return outputs


def write_prediction_table(rows: list[dict], outputs: dict, path: Path) -> Path:
    """A table as VLMEvalKit writes it (every column but image, plus prediction), with openpyxl for .xlsx (VLMEvalKit
    uses xlsxwriter, which stores a control character as its OOXML escape: written here as that escape)."""
    import pandas as pd

    frame = pd.DataFrame([row | {"prediction": outputs[row["index"]]} for row in rows])
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".xlsx":
        frame["prediction"] = [text.replace("\x03", "_x0003_") for text in frame["prediction"]]
        frame.to_excel(path, index=False, engine="openpyxl")
    else:
        frame.to_csv(path, sep="\t", index=False, encoding="utf-8", quoting=1)  # VLMEvalKit's dump: QUOTE_ALL
    return path


@pytest.mark.parametrize("suffix", [".xlsx", ".tsv"])
def test_a_vlmevalkit_table_is_scored_as_sureon_eval_scores_it(exported, tmp_path, suffix):
    manifest = json.loads((exported / export.MANIFEST).read_text())
    rows = tsv(exported, "Sureon")
    outputs = outputs_for(rows)
    table = write_prediction_table(rows, outputs, tmp_path / MODEL / f"{MODEL}_Sureon{suffix}")
    metrics = vlmevalkit_dataset.score_predictions(table, "Sureon", manifest["datasets"]["Sureon"])

    records = [json.loads(r[export.RECORD_COLUMN]) for r in rows if r["mode"] == "visual"]
    by_mode = {(r["question_id"], r["mode"]): outputs[r["index"]] for r in rows}
    ours = score_all(records, ["visual", "blind"], by_mode, MODEL)
    written = [json.loads(line) for line in table.with_name(f"{table.stem}_sureon_predictions.jsonl").open()]
    assert written == ours
    assert any(p["raw_output"] == "None" for p in written) and any("\x03" in p["raw_output"] for p in written)
    summary = summarize(ours, ["visual", "blind"])
    assert metrics == {name: metric_value(summary, name) for name in metrics}
    assert metrics["mu_visual"] == 100.0 and metrics["mu_blind"] == 0.0 and metrics["mg"] == 100.0
    assert {f"visual_{c}" for c in ("AD", "TO")} <= set(metrics) and "visual_SM" not in metrics
    assert json.loads(table.with_name(f"{table.stem}_score.json").read_text()) == metrics

    # sureon report reads the table itself: the same figures as from the records sureon eval writes
    jsonl = tmp_path / "ours" / "predictions.jsonl"
    jsonl.parent.mkdir()
    jsonl.write_text("".join(json.dumps(p) + "\n" for p in ours))
    reports = {}
    for source in (str(table), f"{MODEL}={jsonl}"):
        out = tmp_path / f"report-{len(reports)}"
        argv = ["report", "sureon", source, "--out", str(out), "--resamples", "200", "--no-paper"]
        assert cli_main(argv) == 0
        reports[source] = json.loads((out / "report.json").read_text())
    from_table, from_jsonl = reports.values()
    assert from_table["models"] == from_jsonl["models"] and from_table["items"] == from_jsonl["items"]
    assert from_table["models"][0]["name"] == MODEL  # named after VLMEvalKit's MODEL/MODEL_DATASET file


def test_tables_that_cannot_be_scored_name_the_file_and_the_fix(exported, tmp_path):
    rows = tsv(exported, "Sureon_visual")
    outputs = outputs_for(rows)
    unnamed = write_prediction_table(rows, outputs, tmp_path / "loose.tsv")
    with pytest.raises(TableError, match=r"loose\.tsv: the model cannot be read .* NAME="):
        list(records_of(unnamed, None, "sureon"))
    foreign = write_prediction_table(
        [{"index": r["index"], "question": r["question"]} for r in rows], outputs, tmp_path / "m" / "m_X.tsv"
    )
    with pytest.raises(TableError, match=r"no column\(s\) sureon_record, mode"):
        list(records_of(foreign, None, "sureon"))
    with pytest.raises(TableError, match=r"not a public benchmark row"):
        list(records_of(unnamed, "tiny", "public"))
    with pytest.raises(ValueError, match="nothing to export"):
        export.export_vlmevalkit(tmp_path / "nothing")
    manifest = json.loads((exported / export.MANIFEST).read_text())
    short = write_prediction_table(rows[:-1], outputs, tmp_path / MODEL / f"{MODEL}_Sureon_visual.tsv")
    with pytest.raises(ValueError, match=r"10 predictions for the 11 rows"):
        vlmevalkit_dataset.score_predictions(short, "Sureon_visual", manifest["datasets"]["Sureon_visual"])


def test_the_launcher_is_the_dataset_module_and_registers_then_runs_vlmevalkit(exported):
    launcher = (exported / export.LAUNCHER).read_text()
    assert launcher == Path(vlmevalkit_dataset.__file__).read_text()  # a copy of the module, no generated code
    main = launcher[launcher.index("def main(") :]
    assert main.index("register(folder)") < main.index("from vlmeval.run import")
    manifest = json.loads((exported / export.MANIFEST).read_text())
    assert manifest["project_root"] == str(REPO)  # the checkout the datasets' code comes from


def test_the_launcher_imports_only_the_standard_library_until_it_has_found_the_project():
    """It starts in VLMEvalKit's environment, where the project is importable only once main() put it on sys.path."""
    tree = ast.parse(Path(vlmevalkit_dataset.__file__).read_text())
    imported = [alias.name for node in tree.body if isinstance(node, ast.Import) for alias in node.names]
    imported += [node.module for node in tree.body if isinstance(node, ast.ImportFrom)]
    assert imported and all(name.split(".")[0] in sys.stdlib_module_names for name in imported)


# --- the public benchmarks ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def public_export(tmp_path_factory):
    from public_converters.build import BuildOptions, build_public
    from public_converters.clips import SamplingConfig
    from public_converters.spec import sample_module

    root = tmp_path_factory.mktemp("public")
    sample_module("cholec80").write(root / "cholec80")
    sampling = SamplingConfig(min_seconds=4, max_seconds=12, grid_fps=2)
    build_public(BuildOptions(sources={"cholec80": root / "cholec80"}, out=root / "build", sampling=sampling))
    out = root / "export"
    assert cli_main(["export", "vlmevalkit", "--public", str(root / "build"), "--out", str(out)]) == 0
    return root / "build", out


def test_public_benchmarks_keep_the_builds_rows_frames_and_answers(public_export):
    build, out = public_export
    manifest = json.loads((out / export.MANIFEST).read_text())
    assert set(manifest["datasets"]) == {"Sureon_bench-cholec80-phase-frame", "Sureon_bench-cholec80-phase-clip"}
    for name, entry in manifest["datasets"].items():
        docs = load_dataset(str(build), entry["source"]["config"], split="test").to_list()
        rows = tsv(out, name)
        assert [r["question_id"] for r in rows] == [d["question_id"] for d in docs] and entry["rows"] == len(docs)
        assert Path(entry["frames_root"]) == build.resolve()  # read in place: the build's own files
        for row, doc in zip(rows, docs, strict=True):
            assert json.loads(row["image_path"]) == doc["frames"] and row["answer"] == doc["answer"]
            message = vlmevalkit_dataset.vlmevalkit_message(row, build)
            (ours,) = format_messages(doc | {"frames": [str(build / f) for f in doc["frames"]]}, frames_as="images")
            assert [p["value"] for p in message if p["type"] == "image"] == [
                p["image"] for p in ours["content"] if p["type"] == "image"
            ]
        assert not (out / export.FRAMES).exists()


def test_a_public_table_is_scored_as_sureon_report_public_scores_the_runners_records(public_export, tmp_path):
    _, out = public_export
    manifest = json.loads((out / export.MANIFEST).read_text())
    name = "Sureon_bench-cholec80-phase-frame"
    rows = tsv(out, name)
    docs = [json.loads(r[export.RECORD_COLUMN]) for r in rows]
    # every third answer right, the others a wrong in-set label or prose
    outputs = {
        r["index"]: d["answer"] if k % 3 == 0 else ('{"phase": "Preparation"}' if k % 3 == 1 else "no idea")
        for k, (r, d) in enumerate(zip(rows, docs, strict=True))
    }
    table = write_prediction_table(rows, outputs, tmp_path / MODEL / f"{MODEL}_{name}.xlsx")
    metrics = vlmevalkit_dataset.score_predictions(table, name, manifest["datasets"][name])
    records = [prediction_record(d, outputs[r["index"]], MODEL) for r, d in zip(rows, docs, strict=True)]
    written = [json.loads(line) for line in table.with_name(f"{table.stem}_sureon_predictions.jsonl").open()]
    assert written == records
    jsonl = tmp_path / "ours.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in records))
    reports = []
    for source in (str(table), str(jsonl)):
        report_dir = tmp_path / f"report-{len(reports)}"
        assert cli_main(["report", "public", source, "--out", str(report_dir), "--no-paper"]) == 0
        reports.append(json.loads((report_dir / "report.json").read_text())["results"])
    assert reports[0] == reports[1]
    (result,) = reports[0]
    assert metrics["f1"] == result["metrics"]["f1"] and metrics["accuracy"] == result["metrics"]["accuracy"]
    assert 0 < metrics["accuracy"] < 100 and metrics["misses"] > 0


# --- the real harness, in its own environment ------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_vlmevalkit_runs_the_export_like_sureon_eval_sureon(bench, public_export, tmp_path):
    from recipes.training.tiny_models import build_tiny_qwen3_vl

    venv = Path(os.environ.get("SUREON_VLMEVALKIT_VENV") or REPO / "build" / "vlmevalkit-venv")
    interpreter = Path(sys.base_prefix) / "bin" / "python3"
    subprocess.run(
        ["bash", REPO / "tests" / "vlmevalkit_venv.sh", venv],
        check=True,
        env=os.environ | {"PYTHON": str(interpreter)},
        timeout=3000,
    )
    model = build_tiny_qwen3_vl(tmp_path / "tiny-vl", max_pixels=256 * 256, weight_std=0.3)
    public_build, _ = public_export
    out = tmp_path / "export"
    argv = ["export", "vlmevalkit", "--dataset", str(bench), "--public", str(public_build), "--out", str(out)]
    assert cli_main(argv + ["--benchmark", PUBLIC_BENCHMARK]) == 0

    ours_dir = tmp_path / "ours"
    argv = ["eval", "sureon", "--model", str(model), "--model-name", MODEL, "--dataset", str(bench)]
    argv += ["--mode", "both", "--frames-as", "images", "--max-new-tokens", "16", "--batch-size", "1"]
    assert cli_main(argv + ["--device", "cpu", "--out", str(ours_dir)]) == 0
    ours = {(p["question_id"], p["mode"]): p for p in map(json.loads, (ours_dir / "predictions.jsonl").open())}
    summary = json.loads((ours_dir / "summary.json").read_text())

    config = {  # greedy: the tiny model's generation config does not sample; 16 new tokens as ours
        "model": {MODEL: {"class": "Qwen3VLChat", "model_path": str(model), "max_new_tokens": 16}},
        "data": {name: {"class": export.CLASS_NAME, "dataset": name} for name in ("Sureon", PUBLIC_DATASET)},
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    work = tmp_path / "vlmeval"
    command = [venv / "bin" / "python", REPO / "tests" / "vlmevalkit_cpu.py", out / export.LAUNCHER]
    command += ["--config", tmp_path / "config.json", "--work-dir", work]
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        command, cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=1800, check=False
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert '"mu_visual"' in done.stdout + done.stderr  # VLMEvalKit printed what evaluate returned

    table = work / MODEL / f"{MODEL}_Sureon.xlsx"
    theirs = {
        (p["question_id"], p["mode"]): p
        for p in map(json.loads, table.with_name(f"{table.stem}_sureon_predictions.jsonl").open())
    }
    assert set(theirs) == set(ours)
    assert {k: p["raw_output"] for k, p in theirs.items()} == {k: p["raw_output"] for k, p in ours.items()}
    assert {k: (p["parsed"], p["correct"]) for k, p in theirs.items()} == {
        k: (p["parsed"], p["correct"]) for k, p in ours.items()
    }
    assert len({p["raw_output"] for p in ours.values()}) > 2  # the outputs depend on the input
    score = json.loads(table.with_name(f"{table.stem}_score.json").read_text())
    assert (
        score["mu_visual"] == summary["modes"]["visual"]["mu"] and score["mu_blind"] == summary["modes"]["blind"]["mu"]
    )
    assert score["mg"] == summary["multimodal_gain"]["mu"]
    for category, entry in summary["modes"]["visual"]["per_category"].items():
        if entry["scored_by"] == "accuracy":
            assert score[f"visual_{category}"] == entry["accuracy"]
            assert score[f"mg_{category}"] == summary["multimodal_gain"]["per_category"][category]

    reports = []
    for source in (str(table), str(ours_dir / "predictions.jsonl")):
        report_dir = tmp_path / f"report-{len(reports)}"
        assert cli_main(["report", "sureon", source, "--out", str(report_dir), "--resamples", "500"]) == 0
        reports.append(json.loads((report_dir / "report.json").read_text())["models"])
    assert reports[0] == reports[1]
    # a public benchmark, as `sureon eval public` shows it with frames as images
    public_dir = tmp_path / "ours_public"
    argv = ["eval", "public", "--model", str(model), "--model-name", MODEL, "--dataset", str(public_build)]
    argv += ["--benchmark", PUBLIC_BENCHMARK, "--frames-as", "images", "--max-new-tokens", "16", "--batch-size", "1"]
    assert cli_main(argv + ["--device", "cpu", "--out", str(public_dir)]) == 0
    ours_public = [json.loads(line) for line in (public_dir / "predictions.jsonl").open()]
    public_table = work / MODEL / f"{MODEL}_{PUBLIC_DATASET}.xlsx"
    written = public_table.with_name(f"{public_table.stem}_sureon_predictions.jsonl")
    assert [json.loads(line) for line in written.open()] == ours_public  # every output, parsed answer and field
    public_reports = []
    for source in (str(public_table), str(public_dir / "predictions.jsonl")):
        report_dir = tmp_path / f"public-report-{len(public_reports)}"
        assert cli_main(["report", "public", source, "--out", str(report_dir), "--no-paper"]) == 0
        public_reports.append(json.loads((report_dir / "report.json").read_text())["results"])
    assert public_reports[0] == public_reports[1]
    print(
        f"\nVLMEvalKit vs sureon eval sureon: {len(ours)} outputs identical; mu visual {score['mu_visual']}, "
        f"blind {score['mu_blind']}, MG {score['mg']}; {PUBLIC_BENCHMARK}: {len(ours_public)} outputs identical"
    )
