"""Video-level folds stratified by subject (the Sureon paper's B.4.1)."""

from collections import Counter

import pytest

from builders.sureon.folds import assign_folds, fold_table


def corpus():
    subjects = {"Hepatobiliary": 16, "Colon": 12, "Uterus": 8, "Hernia": 4}
    return {f"{subject[:3]}{i:03d}": subject for subject, n in subjects.items() for i in range(n)}


def test_every_subject_is_spread_over_the_folds_and_videos_stay_whole():
    videos = corpus()
    folds = assign_folds(videos, num_folds=4, seed=42)
    assert set(folds) == set(videos) and set(folds.values()) == {0, 1, 2, 3}
    for subject in ("Hepatobiliary", "Colon", "Uterus", "Hernia"):
        per_fold = Counter(folds[v] for v, s in videos.items() if s == subject)
        assert set(per_fold) == {0, 1, 2, 3}
        assert max(per_fold.values()) - min(per_fold.values()) <= 1


def test_folds_depend_only_on_the_videos_and_the_seed():
    videos = corpus()
    shuffled = dict(reversed(list(videos.items())))
    assert assign_folds(videos, seed=7) == assign_folds(shuffled, seed=7)
    assert assign_folds(videos, seed=7) != assign_folds(videos, seed=8)


def test_tiny_corpora_fall_back_to_unstratified_folds_with_a_warning():
    with pytest.warns(UserWarning, match="not stratified"):
        folds = assign_folds({"a": "x", "b": "y", "c": "z"}, num_folds=3)
    assert sorted(folds.values()) == [0, 1, 2]
    with pytest.raises(ValueError, match="cannot fill 4 folds"):
        assign_folds({"a": "x"}, num_folds=4)


def test_fold_table_counts_categories_per_fold():
    folds = {"v1": 0, "v2": 1}
    records = [{"source_id": "v1", "category": "AD"}, {"source_id": "v1", "category": "F"}, {"source_id": "v2"}]
    assert fold_table(records, folds) == {0: Counter({"AD": 1, "F": 1}), 1: Counter({"unknown": 1})}
