"""Distractor pools: cleaning, the cross-model diversity constraint, and seeded, distinct draws."""

from collections import Counter

import pytest

from builders.sureon.distractor_pool import clean_pool, draw_configurations, draw_distractors, is_diverse


def pool(per_model=6, models=("M1", "M2", "M3")):
    return [{"text": f"{model} option {i}", "model": model} for model in models for i in range(per_model)]


def test_clean_pool_drops_the_answer_repeats_and_blanks():
    raw = [
        {"text": "Clip the artery", "model": "M1"},
        {"text": "clip the artery.", "model": "M2"},
        {"text": "Cut the duct", "model": "M2"},
        {"text": " ", "model": "M3"},
        {"text": "Retract the fundus", "model": None},
    ]
    assert clean_pool(raw, answer="Cut the duct") == [
        {"text": "Clip the artery", "model": "M1"},
        {"text": "Retract the fundus", "model": "unknown"},
    ]


def test_every_draw_is_diverse_distinct_and_stable():
    candidates = pool()
    draws = draw_configurations(candidates, 6, 32, "q1")
    assert len(draws) == 32
    assert all(is_diverse(draw, candidates) for draw in draws)
    assert len({tuple(c["text"] for c in draw) for draw in draws}) == 32
    assert draws == draw_configurations(candidates, 6, 32, "q1")
    assert draws != draw_configurations(candidates, 6, 32, "q2")
    assert draw_distractors(candidates, 6, "q1") == draws[0]


def test_a_small_pool_is_enumerated_and_single_model_sets_are_refused():
    candidates = pool(per_model=2, models=("M1", "M2"))  # 4 candidates: 4 sets of 3, all mixing both models
    draws = draw_configurations(candidates, 3, 32, "q")
    assert len(draws) == 4
    lopsided = pool(per_model=3, models=("M1",)) + pool(per_model=1, models=("M2",))
    draws = draw_configurations(lopsided, 3, 32, "q")
    assert all(Counter(c["model"] for c in draw)["M2"] == 1 for draw in draws) and len(draws) == 3
    assert is_diverse(pool(per_model=3, models=("M1",)), pool(per_model=3, models=("M1",)))


def test_drawing_more_than_the_pool_is_an_error():
    with pytest.raises(ValueError, match="cannot draw 7"):
        draw_distractors(pool(per_model=2), 7, "q")
