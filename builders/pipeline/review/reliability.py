"""Inter-rater agreement on the dual-reviewed subset (the Sureon paper, B.5.2): raw agreement and Cohen's kappa, as the
paper reports, plus Fleiss' kappa and Krippendorff's alpha, which do not assume the same two raters on every item (our
pairs rotate over the panel). Computed on two label sets: the decision itself (approve / reject / flag) and the
retention outcome the conservative policy acts on (keep = approve, discard = reject or flag).

Cohen's kappa comes from scikit-learn, its asymptotic 95% interval and Fleiss' kappa from statsmodels, alpha from
the ``krippendorff`` package; nothing is computed by hand. Gwet's AC1 is left out: no maintained library computes
it (``irrCAC`` pins old numpy/scipy). A kappa is ``None`` when undefined (both raters used one single label).
"""

import math
from collections import defaultdict
from dataclasses import asdict, dataclass

import krippendorff
import numpy as np
from sklearn.metrics import cohen_kappa_score, confusion_matrix
from statsmodels.stats.inter_rater import aggregate_raters, cohens_kappa, fleiss_kappa

from builders.pipeline.review.store import DECISIONS, Assignment, Decision


@dataclass(frozen=True)
class RatedPair:
    sample_id: str
    first: str  # reviewer names in sorted order, so "first" never depends on who decided first
    second: str
    first_decision: str
    second_decision: str


@dataclass
class Agreement:
    labels: list[str]
    n_items: int
    percent_agreement: float | None
    cohen_kappa: float | None
    cohen_kappa_ci95: list[float] | None
    fleiss_kappa: float | None
    krippendorff_alpha: float | None

    def as_dict(self) -> dict:
        return asdict(self)


def retention(decision: str) -> str:
    return "keep" if decision == "approve" else "discard"


def rated_pairs(assignments: list[Assignment], latest: dict[tuple[str, str], Decision]) -> list[RatedPair]:
    """Dual-review samples on which both reviewers have decided (their decisions in force)."""
    reviewers = defaultdict(list)
    for a in assignments:
        if a.mode == "dual":
            reviewers[a.sample_id].append(a.reviewer)
    pairs = []
    for sample_id, names in sorted(reviewers.items()):
        first, second = sorted(names)
        if (first, sample_id) in latest and (second, sample_id) in latest:
            decisions = latest[first, sample_id].decision, latest[second, sample_id].decision
            pairs.append(RatedPair(sample_id, first, second, *decisions))
    return pairs


def _finite(value: float) -> float | None:
    return None if value is None or math.isnan(value) else float(value)


def agreement(first: list[str], second: list[str], labels: list[str]) -> Agreement:
    """Agreement statistics of two label sequences over the same items."""
    n = len(first)
    if n == 0:
        return Agreement(labels, 0, None, None, None, None, None)
    observed = float(np.mean([a == b for a, b in zip(first, second, strict=True)]))
    used = sorted({*first, *second}, key=labels.index)
    kappa = ci = alpha = fleiss = None
    if len(used) > 1:
        kappa = _finite(cohen_kappa_score(first, second, labels=labels))
        with np.errstate(invalid="ignore", divide="ignore"):  # a degenerate table has no variance: no interval
            result = cohens_kappa(confusion_matrix(first, second, labels=labels), return_results=True)
        if np.isfinite([result.kappa_low, result.kappa_upp]).all():
            ci = [float(result.kappa_low), float(result.kappa_upp)]
        codes = np.array([[labels.index(x) for x in first], [labels.index(x) for x in second]])
        fleiss = _finite(fleiss_kappa(aggregate_raters(codes.T, n_cat=len(labels))[0], method="fleiss"))
        alpha = _finite(krippendorff.alpha(reliability_data=codes, level_of_measurement="nominal"))
    return Agreement(labels, n, observed, kappa, ci, fleiss, alpha)


def agreement_report(pairs: list[RatedPair]) -> dict:
    """Agreement on decisions and on retention, pooled and per reviewer pair."""
    first = [p.first_decision for p in pairs]
    second = [p.second_decision for p in pairs]
    by_pair = defaultdict(list)
    for p in pairs:
        by_pair[f"{p.first} + {p.second}"].append(p)
    return {
        "n_items": len(pairs),
        "decision": agreement(first, second, list(DECISIONS)).as_dict(),
        "retention": agreement(
            [retention(d) for d in first], [retention(d) for d in second], ["keep", "discard"]
        ).as_dict(),
        "per_pair": {
            name: agreement(
                [p.first_decision for p in group], [p.second_decision for p in group], list(DECISIONS)
            ).as_dict()
            for name, group in sorted(by_pair.items())
        },
    }
