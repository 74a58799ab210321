"""Accuracy intervals, McNemar and Holm checked against values computed independently of recipes.evaluation.stats."""

import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from recipes.evaluation.stats import (
    bootstrap_ci,
    estimate,
    estimate_from_count,
    holm,
    mcnemar_test,
    pairwise_mcnemar,
    wilson_ci,
)


def _vector(correct: int, n: int) -> np.ndarray:
    """``correct`` ones spread through ``n`` items (not sorted, as real results are not)."""
    outcomes = np.zeros(n, dtype=bool)
    outcomes[np.random.default_rng(7).permutation(n)[:correct]] = True
    return outcomes


def _wilson_by_formula(k: int, n: int) -> tuple[float, float]:
    z = scipy_stats.norm.ppf(0.975)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return 100 * (centre - half), 100 * (centre + half)


def test_299_items_194_correct_match_the_human_baseline_and_wilson():
    outcomes = _vector(194, 299)
    result = estimate(outcomes, "test", "overall")
    assert (result.n, result.correct) == (299, 194)
    assert round(result.accuracy, 1) == 64.9
    assert result.wilson == pytest.approx(_wilson_by_formula(194, 299), abs=1e-9)
    low, high = result.bootstrap
    assert abs(low - result.wilson[0]) <= 0.6 and abs(high - result.wilson[1]) <= 0.6
    # the Sureon paper prints [59.5, 70.2] for the human baseline's 64.9 (Table 14)
    assert abs(low - 59.5) <= 0.6 and abs(high - 70.2) <= 0.6
    assert result.half_width == pytest.approx((high - low) / 2)


def test_bootstrap_matches_a_numpy_percentile_bootstrap_and_is_seeded():
    outcomes = _vector(120, 299).astype(float)
    ours = bootstrap_ci(outcomes, "seed", "a")
    assert bootstrap_ci(outcomes, "seed", "a") == ours  # same stable id, same interval
    draws = np.random.default_rng(123).integers(0, outcomes.size, size=(10_000, outcomes.size))
    means = 100 * outcomes[draws].mean(axis=1)
    reference = np.percentile(means, [2.5, 97.5])
    assert ours == pytest.approx(tuple(reference), abs=0.7)  # Monte Carlo error: about two 1/299 steps


def test_degenerate_and_tiny_samples():
    assert bootstrap_ci([True] * 12, "all") == (100.0, 100.0)
    assert bootstrap_ci([False], "one") == (0.0, 0.0)
    assert estimate([True], "one").wilson == pytest.approx(_wilson_by_formula(1, 1))
    with pytest.raises(ValueError, match="empty"):
        estimate([], "none")
    with pytest.raises(ValueError, match="booleans"):
        estimate([0.5, 1.0], "bad")


def test_estimate_from_count_is_the_estimate_of_such_a_vector():
    from_count = estimate_from_count(69, 299, "x")
    assert (from_count.correct, from_count.n) == (69, 299)
    assert from_count.wilson == pytest.approx(wilson_ci(69, 299))
    assert from_count.bootstrap == estimate(np.r_[np.ones(69), np.zeros(230)], "x").bootstrap
    with pytest.raises(ValueError, match="impossible"):
        estimate_from_count(300, 299)


def _paired(only_a: int, only_b: int, both: int, neither: int) -> tuple[list[bool], list[bool]]:
    a = [True] * only_a + [False] * only_b + [True] * both + [False] * neither
    b = [False] * only_a + [True] * only_b + [True] * both + [False] * neither
    return a, b


def test_mcnemar_exact_reproduces_the_sureon_papers_table18_row():
    # Molmo2 vs MedGemma 1.5 in Table 18: +4.35 points, p = 0.1175: 36 vs 23 discordant items out of 299
    a, b = _paired(36, 23, 20, 220)
    result = mcnemar_test(a, b)
    assert (result.n, result.only_a, result.only_b, result.method) == (299, 36, 23, "exact")
    assert result.pvalue == pytest.approx(scipy_stats.binomtest(23, 59, 0.5).pvalue)
    assert round(result.pvalue, 4) == 0.1175
    assert round(result.delta, 2) == 4.35


def test_mcnemar_switches_to_chi_square_at_the_stated_rule():
    a, b = _paired(36, 23, 20, 220)
    chi2 = mcnemar_test(a, b, exact_below=25)
    assert chi2.method == "chi2"
    assert chi2.statistic == pytest.approx((abs(36 - 23) - 1) ** 2 / 59)
    assert chi2.pvalue == pytest.approx(scipy_stats.chi2.sf((abs(36 - 23) - 1) ** 2 / 59, df=1))
    small = mcnemar_test(*_paired(8, 2, 30, 10), exact_below=25)
    assert small.method == "exact"
    assert small.pvalue == pytest.approx(scipy_stats.binomtest(2, 10, 0.5).pvalue)
    with pytest.raises(ValueError, match="length"):
        mcnemar_test([True, False], [True])


def _holm_by_hand(pvalues: list[float]) -> list[float]:
    order = sorted(range(len(pvalues)), key=lambda i: pvalues[i])
    adjusted, running = [0.0] * len(pvalues), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(pvalues) - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


def test_holm_matches_the_step_down_by_hand():
    raw = [0.01, 0.04, 0.03, 0.005, 0.2]
    rejected, adjusted = holm(raw)
    assert adjusted == pytest.approx(_holm_by_hand(raw))
    assert rejected == [p < 0.05 for p in _holm_by_hand(raw)]
    assert holm([]) == ([], [])


def test_pairwise_mcnemar_on_a_planted_pattern():
    """Four models on 100 items: the p-values come from binomial tests, the correction from Holm by hand."""
    n = 100
    truth = {
        "strong": [i < 80 for i in range(n)],
        "medium": [i < 60 for i in range(n)],
        "weak": [i < 30 for i in range(n)],
        "weak-too": [i < 28 or i in (95, 96) for i in range(n)],
    }
    outcomes = {name: {f"q{i:03d}": v for i, v in enumerate(vector)} for name, vector in truth.items()}
    rows = pairwise_mcnemar(outcomes)
    assert len(rows) == 6
    by_pair = {(r.model_a, r.model_b): r for r in rows}
    expected_raw = {}
    for (a, b), row in by_pair.items():
        only_a = sum(x and not y for x, y in zip(truth[a], truth[b], strict=True))
        only_b = sum(y and not x for x, y in zip(truth[a], truth[b], strict=True))
        assert (row.test.only_a, row.test.only_b) == (only_a, only_b)
        expected_raw[(a, b)] = scipy_stats.binomtest(min(only_a, only_b), only_a + only_b, 0.5).pvalue
        assert row.test.pvalue == pytest.approx(expected_raw[(a, b)])
    pairs = list(expected_raw)
    expected_holm = dict(zip(pairs, _holm_by_hand([expected_raw[p] for p in pairs]), strict=True))
    for pair, row in by_pair.items():
        assert row.p_holm == pytest.approx(expected_holm[pair])
        assert row.significant == (expected_holm[pair] < 0.05)
    assert [r.p_holm for r in rows] == sorted(r.p_holm for r in rows)
    assert not by_pair[("weak", "weak-too")].significant
    assert by_pair[("strong", "weak")].significant


def test_pairwise_mcnemar_pairs_on_shared_items_only():
    outcomes = {"a": {"q1": True, "q2": True, "q3": False}, "b": {"q2": False, "q3": False, "q4": True}}
    (row,) = pairwise_mcnemar(outcomes)
    assert (row.test.n, row.test.only_a, row.test.only_b) == (2, 1, 0)
    with pytest.raises(ValueError, match="no common item"):
        pairwise_mcnemar({"a": {"q1": True}, "b": {"q2": True}})
