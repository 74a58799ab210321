"""Sureon metrics and report on hand-made prediction files, every number computed here by hand."""

import json
from pathlib import Path

import pytest

from recipes.evaluation.sureon.metrics import (
    PredictionError,
    item_table,
    parse_prediction,
    random_baseline,
    read_predictions,
    score_model,
)
from recipes.evaluation.sureon.report_rendering import render_accuracies, render_markdown
from recipes.evaluation.sureon.report_statistics import PAPER_TABLE14, accuracies_report, build_report, load_models
from sureon.cli import main as cli


def record(qid, model, mode, category, correct, fmt="mcq", options=7, scored_by="accuracy", parsed="A"):
    return {
        "question_id": qid,
        "model": model,
        "mode": mode,
        "category": category,
        "answer_format": fmt,
        "num_options": options,
        "raw_output": f"Answer: {parsed}",
        "parsed": parsed,
        "answer": "A",
        "correct": correct,
        "scored_by": scored_by,
    }


# question id -> (category, format, options, visual outcome, blind outcome); None: not judged
HAND_MADE = {
    "ad-1": ("AD", "mcq", 7, True, True),
    "ad-2": ("AD", "mcq", 7, True, False),
    "ad-3": ("AD", "mcq", 7, True, False),
    "ad-4": ("AD", "mcq", 7, False, False),
    "ee-1": ("EE", "mcq", 4, True, False),
    "ee-2": ("object_existence", "mcq", 4, False, False),  # the release slug resolves to EE
    "lar-1": ("LAR", "mcq", 7, True, True),
    "lar-2": ("LAR", "mcq", 7, True, False),
    "to-1": ("TO", "ordering", 3, True, False),
    "to-2": ("TO", "ordering", None, False, False),
    "sm-1": ("SM", "open", None, True, False),
    "sm-2": ("SM", "open", None, None, False),
    "dr-1": ("decision_reasoning", "mcq", 5, True, False),  # a category outside the ten
}


def hand_made_records(model="alpha", modes=("visual", "blind"), flip=()):
    rows = []
    for mode in modes:
        for qid, (category, fmt, options, visual, blind) in HAND_MADE.items():
            correct = visual if mode == "visual" else blind
            if qid in flip and correct is not None:
                correct = not correct
            scored_by = "judge" if fmt == "open" else "accuracy"
            rows.append(record(qid, model, mode, category, correct, fmt, options, scored_by))
    return rows


def parsed(rows):
    return [parse_prediction(row, f"row {i}") for i, row in enumerate(rows)]


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def test_accuracy_aggregates_and_gain_on_a_hand_made_file(tmp_path):
    path = write_jsonl(tmp_path / "predictions.jsonl", hand_made_records())
    (predictions,) = read_predictions(path).values()
    result = score_model("alpha", predictions, n_resamples=500)
    visual, blind = result.modes["visual"], result.modes["blind"]
    expected_visual = {
        "overall": 8 / 11,
        "perception": 4 / 6,
        "reasoning": 3 / 4,
        "AD": 3 / 4,
        "EE": 1 / 2,
        "LAR": 1,
        "TO": 1 / 2,
        "decision_reasoning": 1,
    }
    expected_blind = {
        "overall": 2 / 11,
        "perception": 1 / 6,
        "reasoning": 1 / 4,
        "AD": 1 / 4,
        "EE": 0,
        "LAR": 1 / 2,
        "TO": 0,
        "decision_reasoning": 0,
    }
    assert {k: e.accuracy for k, e in visual.estimates.items()} == pytest.approx(
        {k: 100 * v for k, v in expected_visual.items()}
    )
    assert {k: e.accuracy for k, e in blind.estimates.items()} == pytest.approx(
        {k: 100 * v for k, v in expected_blind.items()}
    )
    assert visual.estimates["overall"].n == 11  # SM is not in μ
    assert visual.estimates["perception"].n == 6 and visual.estimates["reasoning"].n == 4
    # sequence summaries: judged verdicts only, the unjudged one counted apart
    assert (visual.judged["SM"].n, visual.judged["SM"].accuracy, visual.unjudged) == (1, 100.0, {"SM": 1})
    assert (blind.judged["SM"].n, blind.judged["SM"].accuracy, blind.unjudged) == (2, 0.0, {})
    expected_gain = {k: 100 * (expected_visual[k] - expected_blind[k]) for k in expected_visual} | {"SM": 100.0}
    assert result.gain == pytest.approx(expected_gain)


def test_random_baseline_is_one_over_options_and_one_sixth_for_ordering():
    items = item_table(parsed(hand_made_records()))
    baseline = random_baseline(items)
    assert baseline["AD"] == pytest.approx(100 / 7)
    assert baseline["EE"] == pytest.approx(100 / 4)
    assert baseline["TO"] == pytest.approx(100 / 6)  # 3 events given, or none given: 1/3!
    assert baseline["overall"] == pytest.approx(100 * (4 / 7 + 2 / 4 + 2 / 7 + 2 / 6 + 1 / 5) / 11)
    assert baseline["perception"] == pytest.approx(100 * (4 / 7 + 2 / 4) / 6)
    assert "SM" not in baseline


def seed_shaped_records(model, visual_correct, blind_correct=None):
    """The benchmark's shape: the per-category counts of the Sureon paper's Tables 16-17 (299 items) plus 41
    summaries."""
    counts = {"AD": 35, "IAI": 31, "EA": 34, "EE": 37, "PAD": 29, "LAR": 37, "SPI": 31, "F": 31, "TO": 34, "SM": 41}
    rows = []
    for mode, correct_ids in (("visual", visual_correct), ("blind", blind_correct)):
        if correct_ids is None:
            continue
        for category, n in counts.items():
            for i in range(n):
                qid = f"{category}-{i:03d}"
                if category == "SM":
                    rows.append(record(qid, model, mode, "SM", qid in correct_ids, "open", None, "judge"))
                elif category == "TO":
                    rows.append(record(qid, model, mode, "TO", qid in correct_ids, "ordering", 3))
                else:
                    rows.append(record(qid, model, mode, category, qid in correct_ids))
    return rows


def test_seed_shaped_benchmark_counts_and_random_row():
    rows = seed_shaped_records("m", {"AD-000"}, set())
    report = build_report({"m": parsed(rows)}, n_resamples=200)
    assert report["items"]["overall"] == 299
    assert (report["items"]["perception"], report["items"]["reasoning"]) == (166, 133)
    assert report["judged_items"]["SM"] == 41
    # Table 3's Random row: 14.6 overall, 14.3 per multiple-choice category, 16.7 for TO
    assert round(report["random"]["overall"], 1) == 14.6
    assert round(report["random"]["AD"], 1) == 14.3 and round(report["random"]["TO"], 1) == 16.7


def test_report_tables_show_the_hand_made_numbers(tmp_path):
    alpha = write_jsonl(tmp_path / "alpha.jsonl", hand_made_records())
    beta = write_jsonl(tmp_path / "beta.jsonl", hand_made_records("beta", ("visual",), flip={"ad-4", "lar-1"}))
    human_rows = [r for r in hand_made_records("rater-3", ("visual",), flip={"ee-2"}) if r["category"] != "SM"]
    human = write_jsonl(tmp_path / "human.jsonl", human_rows)
    models, human_name = load_models([str(alpha), f"Beta={beta}"], str(human))
    assert list(models) == ["Human", "alpha", "Beta"] and human_name == "Human"
    report = build_report(models, human_name, n_resamples=500)
    markdown = render_markdown(report)
    lines = markdown.splitlines()
    alpha_visual = next(line for line in lines if line.startswith("| alpha | visual |"))
    cells = [cell.strip() for cell in alpha_visual.strip("|").split("|")]
    # μ ±, AD EE LAR TO decision_reasoning, SM (llmj)
    assert cells[2].startswith("72.7 ±")
    assert cells[3:] == ["75.0", "50.0", "100.0", "50.0", "100.0", "100.0"]
    mg = lines[lines.index(alpha_visual) + 2]
    gains = ["+54.5", "+50.0", "+50.0", "+50.0", "+50.0", "+100.0", "+100.0"]
    assert [c.strip() for c in mg.strip("|").split("|")] == ["", "MG", *gains]
    assert any(line.startswith("| Human | visual | 81.8 ±") for line in lines)  # 9/11 after flipping ee-2
    # Table 18 style: beta differs from alpha on two items (ad-4 right, lar-1 wrong): 1 vs 1 discordant
    pair = next(r for r in report["pairwise"] if {r["model_a"], r["model_b"]} == {"alpha", "Beta"})
    assert (pair["only_a_correct"], pair["only_b_correct"], pair["p_raw"]) == (1, 1, 1.0)
    assert len(report["pairwise"]) == 3
    assert "| Model A | Model B | Δ Acc. (pts)" in markdown
    assert "unparseable" in markdown


def test_visual_and_blind_must_cover_the_same_items(tmp_path):
    rows = [r for r in hand_made_records() if not (r["mode"] == "blind" and r["question_id"] == "ad-1")]
    with pytest.raises(ValueError, match="1 only visual, 0 only blind, e.g. ad-1"):
        score_model("alpha", parsed(rows))


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda r: r.pop("correct"), r"missing field\(s\) correct"),
        (lambda r: r.update(mode="video"), "mode 'video'"),
        (lambda r: r.update(correct=None), "needs correct true/false"),
        (lambda r: r.update(num_options=None), "needs num_options"),
        (lambda r: r.update(scored_by="rouge"), "scored_by 'rouge'"),
    ],
)
def test_bad_records_name_the_file_and_line(tmp_path, edit, message):
    rows = hand_made_records()
    edit(rows[2])
    path = write_jsonl(tmp_path / "p.jsonl", rows)
    with pytest.raises(PredictionError, match=rf"p\.jsonl:3: .*{message}"):
        read_predictions(path)


def test_duplicates_conflicts_and_names(tmp_path):
    rows = hand_made_records()
    duplicated = write_jsonl(tmp_path / "dup.jsonl", rows + rows[:1])
    with pytest.raises(PredictionError, match=r"dup\.jsonl:27: alpha answered ad-1 in visual mode twice"):
        read_predictions(duplicated)
    two_models = write_jsonl(tmp_path / "two.jsonl", hand_made_records("a") + hand_made_records("b"))
    assert list(read_predictions(two_models)) == ["a", "b"]
    with pytest.raises(ValueError, match="several models"):
        read_predictions(two_models, "renamed")
    other = hand_made_records("b")
    other[0]["num_options"] = 5
    with pytest.raises(ValueError, match="question ad-1 .* same benchmark build"):
        item_table(parsed(hand_made_records("a") + other))
    with pytest.raises(ValueError, match="in both"):
        load_models([str(two_models), str(two_models)])


def test_cli_writes_a_deterministic_report(tmp_path, capsys):
    alpha = write_jsonl(tmp_path / "alpha.jsonl", hand_made_records())
    beta = write_jsonl(tmp_path / "beta.jsonl", hand_made_records("beta", flip={"ad-4", "ee-2", "ad-1"}))
    outputs = []
    for run in ("one", "two"):
        out = tmp_path / run
        args = ["report", "sureon", str(alpha), str(beta), "--out", str(out), "--resamples", "500"]
        assert cli(args) == 0
        outputs.append(out)
    printed = capsys.readouterr().out
    assert "report.md" in printed
    files = sorted(p.name for p in outputs[0].iterdir() if not p.name.startswith("."))  # not the output marker
    assert files == ["accuracy.png", "multimodal_gain.png", "report.json", "report.md"]
    for name in files:
        assert (outputs[0] / name).read_bytes() == (outputs[1] / name).read_bytes(), name
    assert (outputs[0] / "accuracy.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    data = json.loads((outputs[0] / "report.json").read_text())
    beta_visual = next(m for m in data["models"] if m["name"] == "beta")["modes"]["visual"]["estimates"]
    assert beta_visual["overall"]["correct"] == 8 + 2 - 1  # ad-4 and ee-2 turned right, ad-1 wrong
    for model in data["models"]:  # the headline `make demo` ends with: each model's overall visual, blind and MG
        visual, blind = (model["modes"][mode]["estimates"]["overall"]["accuracy"] for mode in ("visual", "blind"))
        line = f"{model['name']}: visual {visual:.1f} %, blind {blind:.1f} %, MG {visual - blind:+.1f} points"
        assert line in printed, printed
    assert cli(["report", "sureon", str(alpha), "--out", str(outputs[0])]) == 2  # exists, no --overwrite
    assert "--overwrite" in capsys.readouterr().err
    assert cli(["report", "sureon", "--out", str(tmp_path / "none")]) == 2


def test_published_table14_wilson_agrees_with_the_printed_bootstrap(tmp_path):
    """The Sureon paper's Table 14 rendered from its accuracies: Wilson and our bootstrap within 0.6 of the printed
    CIs."""
    data = accuracies_report(PAPER_TABLE14, n_resamples=10_000)
    assert [row["model"] for row in data["rows"]][:3] == ["Human", "Gemini 3.1 Pro", "Sureon-VLM"]
    assert len(data["rows"]) == 12 and all(row["n"] == 299 for row in data["rows"])
    far = {row["model"]: row["wilson_vs_printed"] for row in data["rows"] if row["wilson_vs_printed"] > 0.6}
    assert not far, f"Wilson intervals more than 0.6 points from the printed bootstrap: {far}"
    assert max(row["bootstrap_vs_printed"] for row in data["rows"]) <= 0.6
    gaps = [row["wilson_vs_printed"] for row in data["rows"]]
    assert sum(gaps) / len(gaps) == pytest.approx(0.25, abs=0.05)  # the Sureon paper: mean discrepancy 0.25 points
    # every stated accuracy is reproduced by a count out of 299, except Molmo2's 15.0 (45/299 = 15.05)
    assert [row["model"] for row in data["rows"] if not row["count_reproduces_stated"]] == ["Molmo2"]
    markdown = render_accuracies(data)
    assert "| Human | 299 | 194 | 64.9 | [59.5, 70.2] |" in markdown
    assert cli(["report", "sureon", "--accuracies", str(PAPER_TABLE14), "--out", str(tmp_path / "t14")]) == 0
    assert (tmp_path / "t14" / "report.md").read_text().startswith("# Accuracy intervals from stated accuracies")
