"""`sureon reproduce` and its report (sureon/reproduce.py, recipes/evaluation/sureon/miniature.py).

The unit tests check each figure on inputs whose answer is known; the slow test runs the whole `make reproduce` and
asserts what its three arms show: the paired differences of the Sureon paper's Table 4 in miniature above 0, the
ordering on most training seeds, and what each arm removed (stage 2 the length prior, stage 3 the narrated rows).
"""

import json

import pytest

from builders.sureon import world
from recipes.evaluation.sureon import miniature
from sureon.cli import main as sureon
from sureon.reproduce import curated_release, grpo_start


def write_predictions(path, model, outcomes):
    """``outcomes``: {(question_id, mode): correct} for seven-option MCQs."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = []
    for (qid, mode), correct in sorted(outcomes.items()):
        lines.append(
            {"question_id": qid, "model": model, "mode": mode, "category": "EE", "answer_format": "mcq",
             "num_options": 7, "raw_output": "A", "parsed": "A", "answer": "A" if correct else "B",
             "correct": correct, "scored_by": "accuracy"}
        )  # fmt: skip
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_shortcut_recovery_counts_recall_and_precision_over_scored_questions():
    truth = {"a": "length", "b": "length", "c": None, "d": None, "e": "position", "s": None}
    decisions = {
        "a": {"passes": False, "scores": {"g": 0.8}},
        "b": {"passes": True, "scores": {"g": 0.2}},
        "c": {"passes": False, "scores": {"g": 0.6}},
        "d": {"passes": True, "scores": {"g": 0.0}},
        "e": {"passes": False, "scores": {"g": 1.0}},
        "s": {"passes": True, "scores": {}},  # a summary: passed through unscored, not counted
    }
    figures = miniature.shortcut_recovery(decisions, truth)
    assert figures["scored"] == 5 and figures["removed"] == 3 and figures["planted"] == 3
    assert figures["recall"] == pytest.approx(2 / 3) and figures["precision"] == pytest.approx(2 / 3)
    assert figures["plain_removed_rate"] == pytest.approx(1 / 2)
    assert figures["by_kind"]["length"] == {"planted": 2, "removed": 1, "recall": 0.5}
    with pytest.raises(ValueError, match="no ground truth"):
        miniature.shortcut_recovery(decisions | {"x": {"passes": True, "scores": {"g": 0}}}, truth)


def test_table4_gain_interval_and_mcnemar(tmp_path):
    ids = [f"q{i:02d}" for i in range(40)]
    raw = {(q, "visual"): i < 24 for i, q in enumerate(ids)} | {(q, "blind"): i < 12 for i, q in enumerate(ids)}
    curated = {(q, "visual"): i < 32 for i, q in enumerate(ids)} | {(q, "blind"): i < 4 for i, q in enumerate(ids)}
    table = miniature.table4(
        {
            "raw": write_predictions(tmp_path / "raw.jsonl", "raw", raw),
            "curated": write_predictions(tmp_path / "curated.jsonl", "curated", curated),
        }
    )
    assert table["runs"]["raw"]["S_v"]["accuracy"] == 60 and table["runs"]["raw"]["S_wv"]["accuracy"] == 30
    gain = table["runs"]["curated"]["MG"]
    assert gain["gain"] == pytest.approx(70) and gain["ci_low"] < 70 < gain["ci_high"]
    visual = next(t for t in table["mcnemar"] if t["mode"] == "visual")
    assert (visual["a"], visual["b"], visual["items"]) == ("raw", "curated", 40)
    assert visual["pvalue"] < 0.05
    again = miniature.table4({"raw": tmp_path / "raw.jsonl", "curated": tmp_path / "curated.jsonl"})
    assert again == table  # seeded from the items: the same intervals every run
    kinds = {q: "shortcut" if i < 10 else "decoy" if i < 20 else "plain" for i, q in enumerate(ids)}
    by_kind = miniature.table4({"raw": tmp_path / "raw.jsonl"}, row_kinds=kinds)["runs"]["raw"]["by_row_kind"]
    assert by_kind["shortcut"] == {"items": 10, "S_v": 100.0, "S_wv": 100.0}
    assert by_kind["decoy"] == {"items": 10, "S_v": 100.0, "S_wv": 20.0}
    assert by_kind["plain"] == {"items": 20, "S_v": 20.0, "S_wv": 0.0}
    with pytest.raises(ValueError, match="no ground truth"):
        miniature.table4({"raw": tmp_path / "raw.jsonl"}, row_kinds={})


def test_arms_over_seeds_pool_each_question_and_test_the_steps_between_arms(tmp_path):
    """Three arms over two seeds with gains known by construction: 20, 50 and 80 points on 40 questions."""
    ids = [f"q{i:02d}" for i in range(40)]

    def arm(name, seed, visual_right, blind_right):
        outcomes = {(q, "visual"): i < visual_right for i, q in enumerate(ids)}
        outcomes |= {(q, "blind"): i < blind_right for i, q in enumerate(ids)}
        return write_predictions(tmp_path / f"{name}-{seed}.jsonl", name, outcomes)

    runs = {
        "stage1": [arm("stage1", 0, 20, 12), arm("stage1", 1, 20, 12)],  # MG 20
        "stage2": [arm("stage2", 0, 28, 8), arm("stage2", 1, 28, 8)],  # MG 50
        "stage3": [arm("stage3", 0, 36, 4), arm("stage3", 1, 36, 4)],  # MG 80
    }
    table = miniature.arms_over_seeds(runs)
    assert [round(table["pooled"][a]["MG"]["gain"]) for a in runs] == [20, 50, 80]
    assert table["pooled"]["stage1"]["S_v"] == 50 and table["pooled"]["stage1"]["S_wv"] == 30
    assert table["ordered"] == [True, True]
    first, second = table["differences"]
    assert (first["a"], first["b"], round(first["gain"])) == ("stage1", "stage2", 30)
    assert first["ci_low"] > 0 and first["p_zero"] < 0.01 and first["items"] == 40
    assert round(second["gain"]) == 30 and second["ci_low"] > 0
    # an arm that gains nothing over the one before: its interval spans 0 and the seed is not ordered
    runs["stage3"] = [arm("stage3b", 0, 28, 8), arm("stage3b", 1, 28, 8)]
    flat = miniature.arms_over_seeds(runs)
    assert flat["ordered"] == [False, False] and flat["differences"][1]["gain"] == 0
    assert flat["differences"][1]["p_zero"] == 1.0
    with pytest.raises(ValueError, match="same number of seeds"):
        miniature.arms_over_seeds({"stage1": runs["stage1"], "stage2": runs["stage2"][:1]})


def test_length_cue_and_hardening_room_read_the_options_and_pools():
    def row(texts, correct, pool=()):
        options = [{"letter": "ABC"[i], "text": t, "correct": i == correct} for i, t in enumerate(texts)]
        return {"options": options, "distractor_pool": [{"text": t, "model": "m"} for t in pool]}

    stage1 = [row(["Grasper held in view", "Hook", "Clip"], 0), row(["Grasper", "Hook", "Clip"], 1)]
    cue = miniature.length_cue(stage1)
    assert cue["rows"] == 2 and cue["correct_longest"] == 0.5 and cue["distractor_longest"] == 0.0
    assert cue["length_ratio"] == pytest.approx((4 / 1 + 1 / 1) / 2)
    refined = [row(["Grasper held in view", "Hook held in view", "Clip held in view"], 0, ["a", "b"])]
    assert miniature.length_cue(refined)["correct_longest"] == 0.0
    decoys = [row(["Grasper", "Hook held in view", "Clip"], 0), row(["Grasper", "Hook held", "Clip held"], 0)]
    assert miniature.length_cue(decoys)["distractor_longest"] == 0.5  # one distractor longer than all, not a tie
    room = miniature.hardening_room([*refined, row(["x", "y", "z"], 0, ["a", "b", "c", "d"])])
    assert room == {"rows": 2, "one_configuration": 1, "median_configurations": 3.5}


def test_early_and_late_parts_of_a_curve():
    curve = [(step, value) for step, value in enumerate([0.1, 0.2, 0.1, 0.5, 0.6, 0.7])]
    assert miniature.early_late(curve) == (pytest.approx(0.15), pytest.approx(0.65))
    with pytest.raises(ValueError):
        miniature.early_late(curve[:1])


def test_grpo_starts_from_the_checkpoint_asked_for_or_says_which_exist(tmp_path):
    run = tmp_path / "sft"
    (run / "checkpoint-100").mkdir(parents=True)
    (run / "checkpoint-200").mkdir()
    assert grpo_start(run, 100) == run / "checkpoint-100"
    assert grpo_start(run, 0) == run
    with pytest.raises(FileNotFoundError, match="saved: checkpoint-100, checkpoint-200"):
        grpo_start(run, 150)


def test_the_curated_release_builds_a_db_of_exactly_the_passing_questions(tmp_path):
    settings = world.WorldConfig.from_dict(
        {"videos": {"train": 4, "validation": 1, "test": 1}, "questions_per_video": {"train": 5}}
    )
    world.write_world(tmp_path / "world", settings, videos=False)
    truth = world.read_shortcuts(tmp_path / "world")
    train_ids = sorted(q for q in truth if q.startswith("world_train"))
    decisions = {q: {"passes": i % 3 != 0} for i, q in enumerate(train_ids)}
    counts = curated_release(tmp_path / "world" / "release", decisions, tmp_path / "curated")
    assert counts == {"set": len(train_ids), "kept": len(truth) - len(train_ids)}
    assert sureon(["build", "sureon", "--release", str(tmp_path / "curated"), "--out", str(tmp_path / "build"),
                   "--configs", "db"]) == 0  # fmt: skip
    from datasets import load_dataset

    db = load_dataset(str(tmp_path / "build"), "db", split="train")
    assert {r["question_id"] for r in db} == {q for q in train_ids if decisions[q]["passes"]}


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_make_reproduce_raises_the_multimodal_gain_across_table4s_three_arms(tmp_path):
    """The whole `make reproduce` (three training seeds, about 20 minutes on 2 cores): both paired differences,
    MG(stage 2) - MG(stage 1) and MG(stage 3) - MG(stage 2) over questions pooled over the seeds, with 95 % intervals
    above 0; MG rising across the three arms on every seed (measured on two worlds: the smallest step of six runs 3.9
    points, docs/reproduce.md) and stage 3 above both other arms by 10 points; stage 2 removes the length cue of stage
    1's distractors and the length prior that fails the benchmark's length decoys; stage 3 removes the narrated rows,
    and with them the letter prior that fails the narrated decoys."""
    assert sureon(["reproduce", "--out", str(tmp_path / "reproduce")]) == 0
    report = json.loads((tmp_path / "reproduce" / "report" / "report.json").read_text())
    table = report["table4"]
    assert len(table["per_seed"]) == 3 and all(table["ordered"]), table["ordered"]
    assert all(difference["ci_low"] > 0 for difference in table["differences"]), table["differences"]
    for seed in table["per_seed"]:
        mg = {arm: run["MG"]["gain"] for arm, run in seed["runs"].items()}
        assert mg["stage3"] > max(mg["stage1"], mg["stage2"]) + 10, mg
    cue = report["length_cue"]
    assert cue["stage1"]["length_ratio"] > 2 and cue["stage2"]["length_ratio"] < 1.2
    rows = {arm: row["by_row_kind"] for arm, row in table["pooled"].items()}
    assert rows["stage2"]["length decoy"]["S_v"] > rows["stage1"]["length decoy"]["S_v"] + 20, rows
    assert rows["stage3"]["narrated decoy"]["S_v"] > rows["stage2"]["narrated decoy"]["S_v"] + 20, rows
    stage3 = report["stage3"]["train"]
    assert stage3["by_kind"]["narrated"]["recall"] > 0.9 and stage3["precision"] > 0.6, stage3
