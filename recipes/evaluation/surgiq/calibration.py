"""Calibration of multiple-choice predictions (the SurgiQ paper's Table 5 and Figure 5).

- ECE: top-label expected calibration error over ``n_bins`` equal-width confidence bins,
  ``sum_b (n_b / N) * |accuracy_b - confidence_b|``; bin ``b`` holds confidences in ``[b / n, (b + 1) / n)``, the last
  bin also holds 1.0.
- Brier score over all options: the mean over questions of ``sum_k (p_k - y_k)^2`` (0 is perfect, 2 the worst),
  computed by scikit-learn.
- Confidence-accuracy gap: mean top-label confidence minus accuracy (positive: overconfident).
"""

from pathlib import Path

import numpy as np

from builders.errors import InputError
from builders.plots import pyplot, save_figure


DEFAULT_BINS = 10


def _bin_ids(confidence: np.ndarray, n_bins: int) -> np.ndarray:
    return np.minimum((confidence * n_bins).astype(int), n_bins - 1)


def reliability_bins(confidence, correct, n_bins: int = DEFAULT_BINS) -> list[dict]:
    """Per bin: its range, the number of questions, their accuracy and mean confidence (``None`` when empty)."""
    if n_bins < 1:
        raise InputError(f"the number of bins must be at least 1, got {n_bins}")
    confidence = np.asarray(confidence, dtype=float)
    correct = np.asarray(correct, dtype=float)
    ids = _bin_ids(confidence, n_bins)
    bins = []
    for b in range(n_bins):
        members = ids == b
        count = int(members.sum())
        bins.append(
            {
                "lower": b / n_bins,
                "upper": (b + 1) / n_bins,
                "count": count,
                "accuracy": float(correct[members].mean()) if count else None,
                "confidence": float(confidence[members].mean()) if count else None,
            }
        )
    return bins


def expected_calibration_error(confidence, correct, n_bins: int = DEFAULT_BINS) -> float:
    total = len(confidence)
    if total == 0:
        raise InputError("no predictions to calibrate")
    return float(
        sum(
            b["count"] / total * abs(b["accuracy"] - b["confidence"])
            for b in reliability_bins(confidence, correct, n_bins)
            if b["count"]
        )
    )


def brier_score(probabilities, labels) -> float:
    """Multi-class Brier score (sum over options, mean over questions) of ``probabilities`` (N, K), ``labels`` (N,)."""
    from sklearn.metrics import brier_score_loss

    probabilities = np.asarray(probabilities, dtype=float)
    return float(
        brier_score_loss(labels, probabilities, labels=list(range(probabilities.shape[1])), scale_by_half=False)
    )


def confidence_accuracy_gap(confidence, correct) -> float:
    return float(np.mean(confidence) - np.mean(correct))


def calibration_summary(probabilities, labels, n_bins: int = DEFAULT_BINS) -> dict:
    """ECE, Brier, gap, mean confidence and the reliability bins of (N, K) option probabilities and gold labels."""
    probabilities = np.asarray(probabilities, dtype=float)
    labels = np.asarray(labels)
    confidence = probabilities.max(axis=1)
    correct = probabilities.argmax(axis=1) == labels
    return {
        "ece": expected_calibration_error(confidence, correct, n_bins),
        "n_bins": n_bins,
        "brier": brier_score(probabilities, labels),
        "gap": confidence_accuracy_gap(confidence, correct),
        "mean_confidence": float(confidence.mean()),
        "accuracy": float(correct.mean()),
        "bins": reliability_bins(confidence, correct, n_bins),
    }


def plot_reliability(bins: list[dict], path: Path, title: str) -> None:
    """Reliability diagram: accuracy per confidence bin against the diagonal, with the share of questions per bin."""
    plt = pyplot()

    total = sum(b["count"] for b in bins) or 1
    width = bins[0]["upper"] - bins[0]["lower"]
    lefts = [b["lower"] for b in bins]
    fig, (ax, share) = plt.subplots(2, 1, figsize=(5, 6), dpi=100, sharex=True, height_ratios=[3, 1])
    ax.bar(lefts, [b["accuracy"] or 0 for b in bins], width=width, align="edge", edgecolor="black", label="accuracy")
    filled = [b for b in bins if b["count"]]
    ax.plot([b["confidence"] for b in filled], [b["accuracy"] for b in filled], "o", color="C3", label="bin mean")
    ax.plot([0, 1], [0, 1], "--", color="gray", label="perfect calibration")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_ylabel("accuracy")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8, loc="upper left")
    share.bar(lefts, [b["count"] / total for b in bins], width=width, align="edge", edgecolor="black", color="C1")
    share.set_xlabel("confidence (top-label probability)")
    share.set_ylabel("share")
    save_figure(fig, path)
