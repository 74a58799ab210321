"""`sureon report public` on a hand-made prediction file: groups, exclusions, the three metric kinds, errors."""

import json

import pytest

from recipes.evaluation.public.report import build_report, load_groups, parse_exclusions
from recipes.evaluation.sureon.metrics import PredictionError
from sureon.cli import main as cli


def phase(video, frame, reference, prediction, mode="frame", benchmark="Cholec80"):
    return {
        "model": "ours",
        "benchmark": benchmark,
        "task": "phase",
        "input_mode": mode,
        "video_id": video,
        "frame_index": frame,
        "reference": reference,
        "prediction": prediction,
        "raw_output": json.dumps({"phase": prediction}),
    }


PHASES = [("video41", "Preparation", "Preparation"), ("video41", "Preparation", "ClippingCutting")] + [
    ("video42", "ClippingCutting", "clipping cutting")
] * 2


def rows():
    out = [phase(v, 25 * i, r, p) for i, (v, r, p) in enumerate(PHASES)]
    out += [phase(v, 25 * i, r, p, mode="clip") for i, (v, r, p) in enumerate(PHASES)]
    out += [phase("video43", 0, "Preparation", None, mode="clip")]  # excluded below
    cvs = [("C1", "yes", "Yes"), ("C2", "no", "yes"), ("C3", "no", "No")]
    out += [
        {
            "model": "ours",
            "benchmark": "endoscapes",
            "task": "cvs",
            "input_mode": "frame",
            "video_id": "120",
            "frame_index": 3000,
            "criterion": c,
            "reference": r,
            "prediction": p,
        }
        for c, r, p in cvs
    ]
    out.append(
        {
            "model": "ours",
            "benchmark": "endovis2017",
            "task": "tool_localization",
            "input_mode": "frame",
            "video_id": "seq1",
            "frame_index": 0,
            "reference_boxes": [{"label": "Bipolar Forceps", "bbox": [10, 10, 50, 50]}],
            "boxes": [{"label": "bipolar_forceps", "bbox": [10, 10, 50, 46]}],
        }
    )
    return out


def write(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_public_report_end_to_end(tmp_path):
    predictions = write(tmp_path / "public.jsonl", rows())
    other = write(tmp_path / "other.jsonl", [phase("video41", 0, "Preparation", "Preparation")])
    overlap = tmp_path / "overlap.txt"
    overlap.write_text("# 17 in the Sureon paper; two here\nvideo43\nvideo99\n")
    out = tmp_path / "report"
    args = ["report", "public", str(predictions), f"Baseline={other}", "--out", str(out)]
    assert cli(args + ["--exclude-videos", f"cholec80:clip={overlap}"]) == 0
    data = json.loads((out / "report.json").read_text())
    results = {(r["model"], r["benchmark"], r["task"], r["input_mode"]): r for r in data["results"]}
    frame = results[("ours", "cholec80", "phase", "frame")]["metrics"]
    # video41: Preparation 1 TP + 1 FN, ClippingCutting 1 FP -> macro-F1 (2/3 + 0) / 2; video42 all right
    assert frame["f1"] == pytest.approx(100 * ((2 / 3 + 0) / 2 + 1) / 2)
    assert frame["accuracy"] == pytest.approx(100 * (1 / 2 + 1) / 2)
    clip = results[("ours", "cholec80", "phase", "clip")]
    assert clip["metrics"]["f1"] == pytest.approx(frame["f1"])  # video43 is excluded, not counted as a miss
    assert (clip["records"], clip["excluded_records"], clip["excluded_videos"]) == (5, 1, ["video43"])
    assert results[("ours", "cholec80", "phase", "frame")]["excluded_records"] == 0
    cvs = results[("ours", "endoscapes", "cvs", "frame")]["metrics"]
    assert cvs["per_criterion"] == {"C1": 100.0, "C2": 0.0, "C3": 100.0}
    assert cvs["macro"] == pytest.approx(200 / 3)
    boxes = results[("ours", "endovis2017", "tool_localization", "frame")]["metrics"]
    assert boxes["map50"] == pytest.approx(100.0)  # IoU 0.9, label canonicalised
    assert results[("Baseline", "cholec80", "phase", "frame")]["metrics"]["f1"] == 100.0
    assert data["exclusions"] == {"cholec80:clip": ["video43", "video99"]}
    markdown = (out / "report.md").read_text()
    assert "| ours | cholec80 | phase | clip | 2 | 4 | 66.7 | 75.0 |" in markdown
    assert "| ours | endoscapes | frame | 3 | 100.0 | 0.0 | 100.0 | 66.7 | 0 |" in markdown
    assert "cholec80 phase (clip): 1 record(s) from 1 video(s) excluded" in markdown


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda r: r.update(task="segmentation"), "task 'segmentation'"),
        (lambda r: r.update(input_mode="video"), "input_mode 'video'"),
        (lambda r: r.pop("reference"), "needs reference and prediction"),
        (lambda r: r.update(frame_index="12"), "frame_index must be an integer"),
    ],
)
def test_bad_public_records_name_the_line(tmp_path, edit, message):
    records = rows()
    edit(records[1])
    path = write(tmp_path / "p.jsonl", records)
    with pytest.raises(PredictionError, match=rf"p\.jsonl:2: .*{message}"):
        load_groups([str(path)], {})


def test_box_cvs_and_duplicate_errors(tmp_path):
    records = rows()
    records[-1]["boxes"] = [{"label": "hook", "bbox": [1, 2, 3]}]
    with pytest.raises(PredictionError, match=r":13: .*bbox \[x_min"):
        load_groups([str(write(tmp_path / "a.jsonl", records))], {})
    records = rows()
    records[-2]["reference"] = "perhaps"
    with pytest.raises(PredictionError, match=r":12: cvs reference 'perhaps'"):
        load_groups([str(write(tmp_path / "b.jsonl", records))], {})
    with pytest.raises(PredictionError, match=r":14: the same query as .*:1"):
        load_groups([str(write(tmp_path / "c.jsonl", rows() + rows()[:1]))], {})
    nameless = rows()[:1]
    del nameless[0]["model"]
    with pytest.raises(ValueError, match="no model field"):
        load_groups([str(write(tmp_path / "d.jsonl", nameless))], {})
    with pytest.raises(ValueError, match="BENCHMARK:frame"):
        parse_exclusions(["cholec80:video=x.txt"])


CLOSED = ["Preparation", "CalotTriangleDissection", "ClippingCutting", "GallbladderDissection"]


def test_public_report_prints_the_challenge_convention_beside_the_seeds(tmp_path):
    # video41: ClippingCutting predicted once though absent from its ground truth; video42: Preparation likewise
    frames = [("video41", "Preparation", "Preparation"), ("video41", "Preparation", "ClippingCutting")]
    frames += [("video42", "ClippingCutting", "ClippingCutting"), ("video42", "ClippingCutting", "Preparation")]
    records = [phase(v, 25 * i, r, p) | {"labels": CLOSED} for i, (v, r, p) in enumerate(frames)]
    predictions = write(tmp_path / "public.jsonl", records)
    out = tmp_path / "report"
    assert cli(["report", "public", str(predictions), "--out", str(out), "--no-paper"]) == 0
    data = json.loads((out / "report.json").read_text())
    row = data["table5"]["b"][0]
    # the Sureon paper's (union of truth and predictions per video): each video F1 (2/3 + 0) / 2, recall (1/2 + 0) / 2
    assert row["f1"] == pytest.approx(100 / 3)
    assert row["recall"] == pytest.approx(25.0)
    # the challenge's: each phase only where it is in the ground truth: recall 1/2, precision 1, Jaccard 1/2
    assert row["challenge_recall"] == pytest.approx(50.0)
    assert row["challenge_precision"] == pytest.approx(100.0)
    assert row["challenge_jaccard"] == pytest.approx(50.0)
    markdown = (out / "report.md").read_text()
    assert "| Method | Accuracy | Precision (challenge) | Recall (challenge) | Jaccard (challenge) |" in markdown
    assert "| ours | 50.0 | 100.0 | 50.0 | 50.0 |" in markdown
    assert "Cholec80 / M2CAI challenge convention" in markdown
    assert "| ours | cholec80 | phase | frame | 2 | 4 | 33.3 | 50.0 | 50.0 | 25.0 | 0 | benchmark (4) |" in markdown
    assert "| ours | cholec80 | phase | frame | 2 | 2 | 50.0 | 100.0 | 50.0 | 50.0 |" in markdown
    assert "| Preparation | 1 | 100.0 | 50.0 | 50.0 |" in markdown  # one video has it in its ground truth


def test_records_of_one_benchmark_must_carry_one_label_set(tmp_path):
    records = [phase("video41", 0, "Preparation", "Preparation") | {"labels": CLOSED}]
    records.append(phase("video41", 25, "Preparation", "Preparation") | {"labels": CLOSED[:2]})
    groups = load_groups([str(write(tmp_path / "a.jsonl", records))], {})
    with pytest.raises(PredictionError, match="2 different label sets"):
        build_report(groups, {})
    outside = [phase("video41", 0, "GallbladderRetraction", "Preparation") | {"labels": CLOSED}]
    with pytest.raises(PredictionError, match=r"cholec80 phase \(frame\): reference label\(s\) \['GallbladderRetr"):
        build_report(load_groups([str(write(tmp_path / "b.jsonl", outside))], {}), {})
    bad = [phase("video41", 0, "Preparation", "Preparation") | {"labels": "Preparation"}]
    with pytest.raises(PredictionError, match=r"b\.jsonl:1: labels must be"):
        load_groups([str(write(tmp_path / "b.jsonl", bad))], {})


def test_a_model_trained_on_a_benchmark_is_marked_on_that_benchmark_only(tmp_path):
    """`sureon eval public` records which benchmark a model was trained on (summary.json, contamination, with the
    benchmark, task and input mode its rows are reported under): the report marks those rows, no other."""
    run = tmp_path / "ours"
    run.mkdir()
    predictions = write(run / "predictions.jsonl", rows())
    finding = {
        "dataset": "build/public",
        "config": "bench-cholec80-phase-frame",
        "split": "test",
        "trained_in": "runs/ours",
        "stage": None,
        "source": "build/public:bench-cholec80-phase-frame:test",
        "match": "same build, config and split",
        "questions": 4,
        "shared_questions": 4,
        "reported_as": {"benchmark": "cholec80", "task": "phase", "input_mode": "frame"},
    }
    summary = {"model": "ours", "run_settings": {"model": "runs/ours", "backend": "transformers"}}
    (run / "summary.json").write_text(json.dumps(summary | {"contamination": [finding]}))
    other = write(tmp_path / "other.jsonl", [phase("video41", 0, "Preparation", "Preparation")])
    out = tmp_path / "report"
    assert cli(["report", "public", str(predictions), f"Baseline={other}", "--no-paper", "--out", str(out)]) == 0
    markdown = (out / "report.md").read_text()
    assert "| ours (trained on the evaluated rows) | cholec80 | phase | frame |" in markdown
    assert "| ours | cholec80 | phase | clip |" in markdown and "| ours | endoscapes | frame |" in markdown
    assert "| Baseline | cholec80 | phase | frame |" in markdown
    table5 = markdown.split("(a) Macro-F1")[1].split("\n\n")[1]
    assert "| ours (trained on the evaluated rows) | predictions |" in table5
    assert "| ours (clip) | predictions |" in table5
    assert "## Models trained on the evaluated rows" in markdown
    data = json.loads((out / "report.json").read_text())
    flagged = [(r["model"], r["benchmark"], r["input_mode"]) for r in data["results"] if r["contaminated"]]
    assert flagged == [("ours", "cholec80", "frame")]
