"""Accuracy statistics of the Sureon paper's protocol (Sureon D.1): bootstrap and Wilson intervals, McNemar, Holm.

Everything that scipy / statsmodels already do is delegated to them; this module only fixes the protocol's
choices (10,000 percentile-bootstrap resamples over items, seeded from stable ids; 95% intervals; McNemar on paired
per-item correctness; Holm-Bonferroni across all pairs) and returns plain dataclasses the reports render.

McNemar: the Sureon paper's Table 18 prints p-values that only the *exact* (binomial) McNemar test reproduces, for
every row, including discordant counts well above 100 (e.g. 36 vs 23 discordant -> p = 0.1175, the Molmo2 / MedGemma
row). So the default is the exact test for every pair; ``exact_below=N`` switches to the chi-square test with
continuity correction once the discordant count reaches ``N`` (the textbook rule uses 25).
"""

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from builders.errors import InputError
from builders.options import stable_seed


N_RESAMPLES = 10_000
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Estimate:
    """An accuracy in percent with its 95% bootstrap (percentile) and Wilson intervals, also in percent."""

    n: int
    correct: int
    accuracy: float
    bootstrap: tuple[float, float]
    wilson: tuple[float, float]

    @property
    def half_width(self) -> float:
        """The paper's "± x" next to μ: half the bootstrap interval's width."""
        return (self.bootstrap[1] - self.bootstrap[0]) / 2

    def as_dict(self) -> dict:
        return {
            "n": self.n,
            "correct": self.correct,
            "accuracy": self.accuracy,
            "bootstrap_ci": list(self.bootstrap),
            "wilson_ci": list(self.wilson),
        }


def _as_outcomes(correct: Sequence[bool] | np.ndarray) -> np.ndarray:
    outcomes = np.asarray(correct, dtype=float)
    if outcomes.ndim != 1 or not np.isin(outcomes, (0.0, 1.0)).all():
        raise InputError("correctness must be a flat sequence of booleans (or 0/1)")
    return outcomes


def accuracy(correct: Sequence[bool] | np.ndarray) -> float:
    """Percent correct."""
    outcomes = _as_outcomes(correct)
    if outcomes.size == 0:
        raise InputError("accuracy of an empty set of items is undefined")
    return 100.0 * float(outcomes.mean())


def bootstrap_ci(
    correct: Sequence[bool] | np.ndarray,
    *seed_parts: str,
    n_resamples: int = N_RESAMPLES,
    confidence: float = CONFIDENCE,
) -> tuple[float, float]:
    """Non-parametric percentile bootstrap of the mean over items, in percent, seeded from ``seed_parts``.

    Seed it from the subset and its item ids, not the model: every model is then resampled with the same item
    draws, and two runs give the same interval.
    """
    from scipy import stats

    outcomes = _as_outcomes(correct)
    if outcomes.size == 0:
        raise InputError("bootstrap of an empty set of items is undefined")
    if outcomes.size == 1:  # every resample is that one item (scipy needs two observations)
        return 100.0 * outcomes[0], 100.0 * outcomes[0]
    result = stats.bootstrap(
        (outcomes,),
        np.mean,
        n_resamples=n_resamples,
        confidence_level=confidence,
        method="percentile",
        vectorized=True,
        rng=np.random.default_rng(stable_seed("bootstrap", *seed_parts)),
    )
    return 100.0 * float(result.confidence_interval.low), 100.0 * float(result.confidence_interval.high)


def wilson_ci(correct: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Wilson score interval, in percent."""
    from statsmodels.stats.proportion import proportion_confint

    if n <= 0:
        raise InputError("a Wilson interval needs at least one item")
    low, high = proportion_confint(correct, n, alpha=1 - confidence, method="wilson")
    return 100.0 * float(low), 100.0 * float(high)


def estimate(correct: Sequence[bool] | np.ndarray, *seed_parts: str, n_resamples: int = N_RESAMPLES) -> Estimate:
    outcomes = _as_outcomes(correct)
    k, n = int(outcomes.sum()), int(outcomes.size)
    return Estimate(
        n=n,
        correct=k,
        accuracy=accuracy(outcomes),
        bootstrap=bootstrap_ci(outcomes, *seed_parts, n_resamples=n_resamples),
        wilson=wilson_ci(k, n),
    )


def estimate_from_count(correct: int, n: int, *seed_parts: str, n_resamples: int = N_RESAMPLES) -> Estimate:
    """The same estimate from a count alone: a 0/1 bootstrap depends only on how many items are correct."""
    if not 0 <= correct <= n:
        raise InputError(f"{correct} correct out of {n} items is impossible")
    return estimate(np.r_[np.ones(correct), np.zeros(n - correct)], *seed_parts, n_resamples=n_resamples)


@dataclass(frozen=True)
class McNemar:
    """Paired comparison of A and B: ``only_a`` items A got right and B wrong, ``only_b`` the reverse."""

    n: int
    only_a: int
    only_b: int
    method: str  # "exact" | "chi2"
    statistic: float
    pvalue: float

    @property
    def delta(self) -> float:
        """Accuracy of A minus accuracy of B, in points (the paired items only)."""
        return 100.0 * (self.only_a - self.only_b) / self.n


def mcnemar_test(a: Sequence[bool], b: Sequence[bool], exact_below: int | None = None) -> McNemar:
    """McNemar's test on paired correctness vectors (same items, same order).

    Exact binomial test by default; with ``exact_below``, the chi-square test with continuity correction once
    ``only_a + only_b >= exact_below``.
    """
    from statsmodels.stats.contingency_tables import mcnemar

    x, y = _as_outcomes(a).astype(bool), _as_outcomes(b).astype(bool)
    if x.shape != y.shape:
        raise InputError(f"paired vectors differ in length ({x.size} vs {y.size})")
    if x.size == 0:
        raise InputError("McNemar needs at least one paired item")
    table = [[int((x & y).sum()), int((x & ~y).sum())], [int((~x & y).sum()), int((~x & ~y).sum())]]
    discordant = table[0][1] + table[1][0]
    exact = exact_below is None or discordant < exact_below
    result = mcnemar(table, exact=exact, correction=True)
    return McNemar(
        n=int(x.size),
        only_a=table[0][1],
        only_b=table[1][0],
        method="exact" if exact else "chi2",
        statistic=float(result.statistic),
        pvalue=float(result.pvalue),
    )


def holm(pvalues: Sequence[float], alpha: float = 0.05) -> tuple[list[bool], list[float]]:
    """Holm-Bonferroni: ``(rejected, adjusted p-values)`` in the input order."""
    from statsmodels.stats.multitest import multipletests

    if not len(pvalues):
        return [], []
    rejected, adjusted, _, _ = multipletests(list(pvalues), alpha=alpha, method="holm")
    return [bool(r) for r in rejected], [float(p) for p in adjusted]


@dataclass(frozen=True)
class PairwiseTest:
    model_a: str
    model_b: str
    test: McNemar
    p_holm: float
    significant: bool

    def as_dict(self) -> dict:
        return {
            "model_a": self.model_a,
            "model_b": self.model_b,
            "n_paired": self.test.n,
            "only_a_correct": self.test.only_a,
            "only_b_correct": self.test.only_b,
            "delta_points": self.test.delta,
            "method": self.test.method,
            "statistic": self.test.statistic,
            "p_raw": self.test.pvalue,
            "p_holm": self.p_holm,
            "significant": self.significant,
        }


def pairwise_mcnemar(
    outcomes: Mapping[str, Mapping[str, bool]], alpha: float = 0.05, exact_below: int | None = None
) -> list[PairwiseTest]:
    """McNemar on every pair of models (per-item correctness keyed by item id), Holm-corrected across all pairs.

    Each pair is tested on the items both answered. Rows come sorted by corrected, then raw p-value, like the
    Sureon paper's Table 18; ties keep the models' given order.
    """
    pairs, tests = [], []
    for name_a, name_b in itertools.combinations(outcomes, 2):
        shared = sorted(outcomes[name_a].keys() & outcomes[name_b].keys())
        if not shared:
            raise InputError(f"{name_a} and {name_b} answered no common item: nothing to pair")
        a = [outcomes[name_a][item] for item in shared]
        b = [outcomes[name_b][item] for item in shared]
        pairs.append((name_a, name_b))
        tests.append(mcnemar_test(a, b, exact_below=exact_below))
    rejected, adjusted = holm([t.pvalue for t in tests], alpha=alpha)
    rows = [
        PairwiseTest(a, b, test, p, r) for (a, b), test, p, r in zip(pairs, tests, adjusted, rejected, strict=True)
    ]
    order = sorted(range(len(rows)), key=lambda i: (rows[i].p_holm, rows[i].test.pvalue, i))
    return [rows[i] for i in order]
