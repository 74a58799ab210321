"""Calibration metrics on hand-made vectors, the paper's tables from prediction files with known contents, and the
shortcut baselines on questions built to favour each."""

import json

import numpy as np
import pytest

from recipes.evaluation.surgiq.calibration import (
    brier_score,
    calibration_summary,
    confidence_accuracy_gap,
    expected_calibration_error,
    reliability_bins,
)
from recipes.evaluation.surgiq.report import build_report, load_runs, report_markdown
from recipes.evaluation.surgiq.shortcuts import expected_credit, shortcut_accuracy
from sureon.cli import main as cli_main


# Four questions, computed by hand: confidences .92 (right), .88 (wrong), .55 (right), .31 (wrong).
PROBABILITIES = [
    [0.92, 0.04, 0.02, 0.02],
    [0.02, 0.02, 0.88, 0.08],
    [0.55, 0.25, 0.15, 0.05],
    [0.31, 0.29, 0.20, 0.20],
]
LABELS = [0, 3, 0, 1]


def test_ece_brier_gap_on_known_vectors():
    confidence = np.max(PROBABILITIES, axis=1)
    correct = np.argmax(PROBABILITIES, axis=1) == LABELS
    # 10 bins: every question alone in its bin -> mean |correct - confidence| = (.08 + .88 + .45 + .31) / 4
    assert expected_calibration_error(confidence, correct, 10) == pytest.approx(0.43)
    # 2 bins: [.31] -> .31 * 1/4; [.92, .88, .55] -> |2/3 - 2.35/3| * 3/4 = .0875
    assert expected_calibration_error(confidence, correct, 2) == pytest.approx(0.0775 + 0.0875)
    # Brier: .0088 + 1.6216 + .29 + .6802, over 4
    assert brier_score(PROBABILITIES, LABELS) == pytest.approx(2.6006 / 4)
    assert confidence_accuracy_gap(confidence, correct) == pytest.approx(2.66 / 4 - 0.5)
    summary = calibration_summary(PROBABILITIES, LABELS, n_bins=10)
    assert summary["n_bins"] == 10 and summary["accuracy"] == 0.5
    assert [b["count"] for b in summary["bins"]] == [0, 0, 0, 1, 0, 1, 0, 0, 1, 1]


def test_calibration_extremes():
    one_hot = np.eye(4)[[0, 1, 2, 3]]
    assert brier_score(one_hot, [0, 1, 2, 3]) == 0
    assert brier_score(one_hot, [1, 2, 3, 0]) == 2
    assert expected_calibration_error([1.0, 1.0], [True, True]) == 0  # confidence 1.0 falls in the last bin
    # 0.75 confident, 3 of 4 right: perfectly calibrated, no gap
    assert expected_calibration_error([0.75] * 4, [True, True, True, False]) == pytest.approx(0)
    assert confidence_accuracy_gap([0.75] * 4, [True, True, True, False]) == pytest.approx(0)
    bins = reliability_bins([0.75] * 4, [True, True, True, False], n_bins=4)
    assert bins[3] == {"lower": 0.75, "upper": 1.0, "count": 4, "accuracy": 0.75, "confidence": 0.75}
    with pytest.raises(ValueError, match="no predictions"):
        expected_calibration_error([], [])


DOMAINS = ("general_surgery", "neurosurgery", "orthopedic_surgery")


def write_run(folder, model, config, shots, correct_per_domain, skip=()):
    """A run of 10 questions per domain whose first ``k`` are right; even positions case-based, odd negative.
    A right answer puts .7 on its letter A; a wrong one has answer B and the same probabilities."""
    folder.mkdir(parents=True)
    lines = []
    for d, (domain, k) in enumerate(zip(DOMAINS, correct_per_domain, strict=True)):
        for i in range(10):
            qid = f"q{10 * d + i:02d}"
            if qid in skip:
                continue
            right = i < k
            lines.append(
                {
                    "id": qid,
                    "domain": domain,
                    "question_type": "case_based" if i % 2 == 0 else "negative",
                    "answer": "A" if right else "B",
                    "prediction": "A",
                    "correct": right,
                    "confidence": 0.7,
                    "probabilities": {"A": 0.7, "B": 0.1, "C": 0.1, "D": 0.1},
                    "scores": {},
                }
            )
    (folder / "predictions.jsonl").write_text("".join(json.dumps(p) + "\n" for p in lines))
    (folder / "report.json").write_text(json.dumps({"model": model, "config": config, "shots": shots}))
    return folder


@pytest.fixture
def runs(tmp_path):
    # general: 9..5 right per model; neuro: the same; ortho: 8, 6, 4, 2, 0 -> general - ortho = .1 .. .5
    paths = [write_run(tmp_path / f"m{m}", f"model-{m}", "default", 0, (9 - m, 9 - m, 8 - 2 * m)) for m in range(5)]
    paths.append(write_run(tmp_path / "m0-shuffled", "model-0", "shuffled", 0, (9, 9, 9), skip={"q29"}))
    paths.append(write_run(tmp_path / "m0-2shot", "model-0", "default", 2, (10, 9, 9)))
    return paths


def test_accuracy_table_and_calibration_table(runs):
    report = build_report(load_runs(runs))
    table = report["table4_accuracy"]
    assert table["columns"] == ["case_based", "negative"] and table["random"] == 0.25
    first = table["rows"][0]
    # model-0: 9, 9, 8 right: case-based 5 + 5 + 4 of 15, negative 4 + 4 + 4 of 15
    assert first == {"model": "model-0", "n": 30, "case_based": 14 / 15, "negative": 12 / 15, "avg": 26 / 30}
    assert [row["model"] for row in table["rows"]] == [f"model-{m}" for m in range(5)]
    calibration = report["table5_calibration"][0]
    # every confidence is .7: ECE = |26/30 - .7|; Brier = (26 * .12 + 4 * 1.32) / 30
    assert calibration["ece"] == pytest.approx(26 / 30 - 0.7)
    assert calibration["gap"] == pytest.approx(0.7 - 26 / 30)
    assert calibration["brier"] == pytest.approx((26 * 0.12 + 4 * 1.32) / 30)


def test_shuffled_delta_on_common_questions(runs):
    (row,) = build_report(load_runs(runs))["tableA3_shuffled"]
    # q29 (ortho, wrong in the original) was not scored in the shuffled run: 29 common questions
    assert (row["model"], row["shots"], row["n"]) == ("model-0", 0, 29)
    assert (row["original"], row["shuffled"]) == (26 / 29, 27 / 29) and row["delta"] == pytest.approx(1 / 29)


def test_domain_means_and_wilcoxon(runs):
    table = build_report(load_runs(runs))["table6_domains"]
    general, neuro, ortho = table["domains"]
    assert neuro["mean"] == general["mean"]
    assert general["domain"] == "general_surgery" and general["models"] == 5
    assert general["mean"] == pytest.approx(0.7) and general["std"] == pytest.approx(np.sqrt(0.1 / 4))
    assert ortho["mean"] == pytest.approx(0.4)
    tests = {(t["a"], t["b"]): t for t in table["wilcoxon"]}
    assert tests[("general_surgery", "neurosurgery")]["note"] == "identical accuracies"
    # five positive, distinct differences: the exact two-sided p is 2 / 2^5
    assert tests[("general_surgery", "orthopedic_surgery")]["p"] == pytest.approx(0.0625)
    assert tests[("general_surgery", "orthopedic_surgery")]["p_holm"] == pytest.approx(0.125)


def test_fewshot_table_and_markdown(runs):
    report = build_report(load_runs(runs))
    assert report["fewshot"][0] == {"model": "model-0", "by_shots": {0: 26 / 30, 2: 28 / 30}}
    markdown = report_markdown(report)
    assert "| model-0 | 93.33 | 80.00 | 86.67 |" in markdown
    assert "| Random | 25.00 | 25.00 | 25.00 |" in markdown
    assert "| model-0 | 0 | 29 | 89.66 | 93.10 | +3.45 |" in markdown
    assert "| general_surgery | orthopedic_surgery | 5 | 0.0 | 0.0625 | 0.1250 |" in markdown


def test_report_cli_and_duplicate_runs(runs, tmp_path, capsys):
    assert cli_main(["report", "surgiq", *map(str, runs), "--out", str(tmp_path / "tables")]) == 0
    assert "## Calibration" in capsys.readouterr().out
    saved = json.loads((tmp_path / "tables" / "surgiq_tables.json").read_text())
    assert saved["table4_accuracy"]["rows"][0]["avg"] == pytest.approx(26 / 30)
    assert cli_main(["report", "surgiq", str(runs[0]), str(runs[0])]) == 2
    assert "two runs of ('model-0', 'default', 0)" in capsys.readouterr().err
    assert cli_main(["report", "surgiq", str(runs[0]), str(runs[0]), "--labels", "a", "b"]) == 0


def record(question, options, answer_index, qtype="reasoning"):
    return {"question": question, "options": options, "answer_index": answer_index, "question_type": qtype}


FAVOURS_LONGEST = record(
    "Which option is right?", ["red blue green", "supercalifragilisticexpialidocious", "cat dog fox", "one two six"], 1
)
FAVOURS_OVERLAP = record(
    "The gallbladder wall is thickened next to the cystic duct.",
    ["pancreatic head tissue mass", "hepatic arterial branch variant", "cystic duct", "splenic vein thrombosis seen"],
    2,
)
FAVOURS_UNIQUE = record(
    "Pick one.", ["alpha beta gamma delta epsilon", "x y", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "p q"], 0
)


def test_each_shortcut_baseline_wins_on_the_set_built_for_it():
    accuracy = {
        name: {b: v["accuracy"] for b, v in shortcut_accuracy([rec])["baselines"].items()}
        for name, rec in (("longest", FAVOURS_LONGEST), ("overlap", FAVOURS_OVERLAP), ("unique", FAVOURS_UNIQUE))
    }
    # ties share the credit: on FAVOURS_LONGEST no option overlaps the stem (4-way tie -> 1/4)
    assert accuracy["longest"] == {"longest_option": 1.0, "lexical_overlap": 0.25, "unique_tokens": 0.0}
    assert accuracy["overlap"] == {"longest_option": 0.0, "lexical_overlap": 1.0, "unique_tokens": 0.0}
    assert accuracy["unique"] == {"longest_option": 0.0, "lexical_overlap": 0.25, "unique_tokens": 1.0}
    mixed = shortcut_accuracy([FAVOURS_LONGEST, FAVOURS_OVERLAP, FAVOURS_UNIQUE])
    assert mixed["baselines"]["longest_option"]["accuracy"] == pytest.approx(1 / 3)
    assert mixed["random"] == 0.25


def test_stop_words_do_not_count_and_ties_split_credit():
    stem_only_stop_words = record("What is the one of these?", ["the one", "of these", "is what", "cystic"], 0)
    # "the one" shares only "one" (a stop word in scikit-learn's list): every option overlaps 0 -> 4-way tie
    result = shortcut_accuracy([stem_only_stop_words])["baselines"]
    assert result["lexical_overlap"]["accuracy"] == 0.25
    assert expected_credit([3, 3, 1, 0], 1) == 0.5 and expected_credit([3, 3, 1, 0], 2) == 0


def test_shortcuts_cli_on_a_built_dataset(tmp_path, capsys):
    from conftest import REPO

    source = REPO / "sample_data" / "surgiq" / "surgiq_sample.jsonl"
    assert cli_main(["build", "surgiq", "--source", str(source), "--out", str(tmp_path / "surgiq")]) == 0
    capsys.readouterr()
    assert cli_main(["shortcuts", "surgiq", "--dataset", str(tmp_path / "surgiq"), "--out", str(tmp_path / "s")]) == 0
    saved = json.loads((tmp_path / "s" / "shortcuts.json").read_text())
    assert saved["num_questions"] == 30 and set(saved["baselines"]) == {
        "longest_option",
        "lexical_overlap",
        "unique_tokens",
    }
    assert "| longest_option |" in capsys.readouterr().out
