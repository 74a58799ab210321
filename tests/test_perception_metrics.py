"""Public perception metrics (the Sureon paper, D.3) on planted predictions, against values computed by hand or per
video."""

import pytest
from sklearn.metrics import f1_score

from recipes.evaluation.public.metrics import (
    canonical_label,
    clip_window,
    cvs_accuracy,
    map50,
    match_label,
    parse_yes_no,
    read_video_list,
    video_averaged_scores,
)


# three videos of different lengths: (video, reference, prediction); None is an unparseable answer
FRAMES = (
    [("v1", "a", "a"), ("v1", "a", "b"), ("v1", "b", "b"), ("v1", "b", "b")]
    + [("v2", "c", "c"), ("v2", "c", None)]
    + [("v3", "a", "a")] * 6
)


def _columns(frames):
    return [list(column) for column in zip(*frames, strict=True)]


def test_video_averaged_scores_by_hand():
    scores = video_averaged_scores(*_columns(FRAMES))
    # v1: F1(a) = 2/3, F1(b) = 0.8, P = (1 + 2/3) / 2, R = (1/2 + 1) / 2, accuracy 3/4
    # v2: one class, half missed: F1 = 2/3, P = 1, R = 1/2, accuracy 1/2;  v3: all right
    assert scores["f1"] == pytest.approx(100 * ((2 / 3 + 0.8) / 2 + 2 / 3 + 1) / 3)
    assert scores["accuracy"] == pytest.approx(100 * (3 / 4 + 1 / 2 + 1) / 3)
    assert scores["precision"] == pytest.approx(100 * ((1 + 2 / 3) / 2 + 1 + 1) / 3)
    assert scores["recall"] == pytest.approx(100 * (3 / 4 + 1 / 2 + 1) / 3)
    assert (scores["videos"], scores["frames"], scores["misses"]) == (3, 12, 1)
    assert scores["per_video"]["v2"]["frames"] == 2


def test_video_average_is_the_mean_of_per_video_sklearn_not_the_pooled_f1():
    frames = [("v1", "a", "a"), ("v1", "b", "a")] + [("v2", "a", "a")] * 8 + [("v2", "b", "b")] * 2
    scores = video_averaged_scores(*_columns(frames))
    per_video = []
    for video in ("v1", "v2"):
        truth = [r for v, r, _ in frames if v == video]
        guess = [p for v, _, p in frames if v == video]
        per_video.append(f1_score(truth, guess, average="macro"))
    assert scores["f1"] == pytest.approx(100 * sum(per_video) / 2) == pytest.approx(100 * (1 / 3 + 1) / 2)
    _, truth, guess = _columns(frames)
    assert 100 * f1_score(truth, guess, average="macro") > scores["f1"] + 15  # pooled, the long v2 dominates


def test_labels_compare_loosely_and_out_of_set_answers_are_misses():
    scores = video_averaged_scores(
        ["v", "v", "v"],
        ["CalotTriangleDissection", "CalotTriangleDissection", "Preparation"],
        ["calot triangle dissection", "Dancing", "preparation"],
    )
    # classes: the two references only; "Dancing" is a miss of Calot: F1(Calot) = 2/3, F1(Preparation) = 1
    assert scores["f1"] == pytest.approx(100 * (2 / 3 + 1) / 2)
    assert scores["misses"] == 1
    with pytest.raises(ValueError, match="no frames"):
        video_averaged_scores([], [], [])


def test_cvs_per_criterion_accuracy_and_macro_average():
    result = cvs_accuracy(
        ["C1", "C1", "C1", "C2", "C2", "C3"],
        [True, False, True, False, False, True],
        [True, True, None, False, False, False],
    )
    assert result["per_criterion"] == pytest.approx({"C1": 100 / 3, "C2": 100.0, "C3": 0.0})
    assert result["macro"] == pytest.approx((100 / 3 + 100 + 0) / 3)
    assert (result["n"], result["misses"]) == ({"C1": 3, "C2": 2, "C3": 1}, 1)
    assert [parse_yes_no(v) for v in ("Yes", "no.", True, "maybe", None)] == [True, False, True, None, None]


PLANTED_IMAGES = [
    {  # a right grasper (plural, capitalised), and a label outside the class universe
        "references": [("Grasper", [0, 0, 10, 10])],
        "predictions": [("Graspers", [0, 0, 10, 10]), ("stapler", [50, 50, 60, 60])],
    },
    {  # a grasper in the wrong place (IoU 0), a hook at IoU 0.8
        "references": [("grasper", [0, 0, 10, 10]), ("Hook", [20, 20, 40, 40])],
        "predictions": [("grasper", [30, 30, 40, 40]), ("hook", [20, 20, 40, 36])],
    },
    {"references": [], "predictions": None},  # unparseable output on an empty frame
]


def test_map50_by_hand_on_planted_boxes():
    result = map50(PLANTED_IMAGES)
    # grasper: TP then FP at one score -> precision 1 up to recall 0.5, nothing beyond: 51 of COCO's 101 recall
    # points; hook: one TP for one box -> 1
    assert result["per_class"] == pytest.approx({"grasper": 100 * 51 / 101, "hook": 100.0})
    assert result["map50"] == pytest.approx(100 * (51 / 101 + 1) / 2)
    assert (result["images"], result["reference_boxes"], result["predicted_boxes"]) == (3, 3, 4)
    assert (result["ignored_labels"], result["misses"]) == (1, 1)


def test_map50_ties_follow_image_order_and_iou_threshold_is_half():
    swapped = map50([PLANTED_IMAGES[1], PLANTED_IMAGES[0]])
    # the false positive now comes first: precision 1/2 at recall 1/2
    assert swapped["per_class"]["grasper"] == pytest.approx(100 * 0.5 * 51 / 101)
    low_iou = map50([{"references": [("hook", [0, 0, 10, 10])], "predictions": [("hook", [0, 0, 10, 4.5])]}])
    assert low_iou["map50"] == 0.0  # IoU 0.45
    nothing = map50([{"references": [("hook", [0, 0, 10, 10])], "predictions": None}])
    assert nothing["map50"] == 0.0 and nothing["misses"] == 1
    with pytest.raises(ValueError, match="no reference boxes"):
        map50([{"references": [], "predictions": []}])


def test_label_canonicalisation():
    universe = ["grasper", "scissors", "specimen bag", "clip applier"]
    assert canonical_label("  Specimen_Bag ") == "specimen bag"
    assert match_label("Graspers", universe) == "grasper"
    assert match_label("scissor", universe) == "scissors"
    assert match_label("Scissors", universe) == "scissors"
    assert match_label("clip-appliers", universe) == "clip applier"
    assert match_label("stapler", universe) is None


def test_clip_window_is_online_with_stride_four():
    assert clip_window(range(100), 40) == [12, 16, 20, 24, 28, 32, 36, 40]
    assert clip_window(range(100), 10) == [2, 6, 10]
    assert clip_window(range(100), 10, pad=True) == [2, 2, 2, 2, 2, 2, 6, 10]
    one_fps = list(range(0, 25 * 60, 25))  # frame numbers of 1 fps extraction from a 25 fps video
    window = clip_window(one_fps, 750)
    assert window == [50, 150, 250, 350, 450, 550, 650, 750] and (window[-1] - window[0]) / 25 == 28
    with pytest.raises(ValueError, match="not among"):
        clip_window(one_fps, 760)


def test_video_list_reading(tmp_path):
    path = tmp_path / "overlap.txt"
    path.write_text("# Cholec80 videos in training sources\nvideo41\n\nvideo42  # CholecT50\n")
    assert read_video_list(path) == ["video41", "video42"]
    path.write_text("video41\nvideo41\n")
    with pytest.raises(ValueError, match="listed twice: video41"):
        read_video_list(path)


# v1: phase "c" predicted but absent from v1's ground truth, one unparseable answer; v2: "b" predicted but absent,
# "c" present but never predicted
CHALLENGE_FRAMES = [("v1", "a", "a"), ("v1", "a", "c"), ("v1", "b", "b"), ("v1", "b", "b"), ("v1", "b", None)] + [
    ("v2", "a", "a"),
    ("v2", "a", "a"),
    ("v2", "a", "b"),
    ("v2", "c", "a"),
]


def test_challenge_convention_by_hand_leaves_phases_absent_from_a_videos_truth_out():
    scores = video_averaged_scores(*_columns(CHALLENGE_FRAMES), labels=["a", "b", "c"])
    challenge = scores["challenge"]
    # per phase per video (TP / truth, TP / predicted, TP / union), only the phases of the video's ground truth:
    # a: v1 1/2, 1, 1/2; v2 2/3, 2/3, 2/4    b: v1 2/3, 1, 2/3    c: v2 0, undefined (never predicted), 0
    per_phase = challenge["per_phase"]
    assert per_phase["a"] == pytest.approx(
        {"videos": 2, "recall": 100 * 7 / 12, "precision": 100 * 5 / 6, "jaccard": 100 * 1 / 2}
    )
    assert per_phase["b"] == pytest.approx(
        {"videos": 1, "recall": 100 * 2 / 3, "precision": 100.0, "jaccard": 100 * 2 / 3}
    )
    assert per_phase["c"] == {"videos": 1, "recall": 0.0, "precision": None, "jaccard": 0.0}
    # then the mean over phases (precision over the two phases where it is defined)
    assert challenge["recall"] == pytest.approx(100 * (7 / 12 + 2 / 3 + 0) / 3)
    assert challenge["jaccard"] == pytest.approx(100 * (1 / 2 + 2 / 3 + 0) / 3)
    assert challenge["precision"] == pytest.approx(100 * (5 / 6 + 1) / 2)
    assert challenge["phases"] == 3
    # the Sureon paper's convention on the same frames: v1's classes are a, b and the predicted c (F1 0), v2's a, b, c
    v1_f1 = (2 / 3 + 0.8 + 0) / 3
    v2_f1 = (2 / 3 + 0 + 0) / 3  # a: TP 2, FP 1, FN 1; b: FP only; c: FN only
    assert scores["f1"] == pytest.approx(100 * (v1_f1 + v2_f1) / 2)
    assert scores["recall"] == pytest.approx(100 * ((1 / 2 + 2 / 3 + 0) / 3 + (2 / 3 + 0 + 0) / 3) / 2)
    assert scores["recall"] < challenge["recall"]  # the predicted-but-absent phases count 0 only in the Sureon paper's


def test_challenge_averages_over_videos_per_phase_before_phases():
    # a long video where everything is right and a short one where phase b is always missed: the per-phase mean
    # weighs each video once per phase, never by its frame count
    frames = [("long", "a", "a")] * 50 + [("long", "b", "b")] * 50 + [("short", "b", "a")] * 2
    challenge = video_averaged_scores(*_columns(frames), labels=["a", "b"])["challenge"]
    assert challenge["per_phase"]["b"]["recall"] == pytest.approx(50.0)  # (100 + 0) / 2, not 50 / 52
    assert challenge["per_phase"]["a"]["recall"] == 100.0  # "a" is absent from the short video's truth
    assert challenge["per_phase"]["a"]["jaccard"] == 100.0
    assert challenge["recall"] == pytest.approx(75.0)


def test_the_closed_label_set_makes_an_unseen_phase_a_class_not_a_miss():
    columns = _columns([("v", "a", "a"), ("v", "a", "d"), ("v", "b", "b")])
    closed = video_averaged_scores(*columns, labels=["a", "b", "c", "d"])
    # "d" is in the benchmark's set though no reference uses it: a class of v (F1 0), not an unparseable answer
    assert closed["f1"] == pytest.approx(100 * (2 / 3 + 1 + 0) / 3)
    assert (closed["misses"], closed["label_set"], closed["classes"]) == (0, "benchmark", 4)
    seen = video_averaged_scores(*columns)  # records without their label set: the references' labels only
    assert seen["f1"] == pytest.approx(100 * (2 / 3 + 1) / 2)
    assert (seen["misses"], seen["label_set"]) == (1, "references")
    with pytest.raises(ValueError, match=r"reference label\(s\) \['e'\] are not in the label set"):
        video_averaged_scores(["v"], ["e"], ["a"], labels=["a", "b"])
