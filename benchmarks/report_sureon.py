"""Benchmark a paper-scale Sureon report: 11 models in both modes plus a human baseline, 340 items each.

Times ``recipes.evaluation.sureon.report.build_report`` (every bootstrap and Wilson interval of Tables 3 and 14-17, the
66 McNemar tests and Holm) and, as the baseline measured in the same run, a bare numpy percentile bootstrap of the
same number of accuracy estimates (index draws, means, percentiles; no seeding from ids, no Wilson, no tests). The
ratio is what the protocol's bookkeeping and scipy's bootstrap cost on top of the resampling itself.

    python benchmarks/report_sureon.py [--resamples 10000] [--repeats 3]
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np


REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.timing import parse_with_quick  # noqa: E402
from recipes.evaluation.sureon.metrics import parse_prediction  # noqa: E402
from recipes.evaluation.sureon.report import build_report  # noqa: E402


COUNTS = {"AD": 35, "IAI": 31, "EA": 34, "EE": 37, "PAD": 29, "LAR": 37, "SPI": 31, "F": 31, "TO": 34, "SM": 41}


def synthetic_models(models: int = 11) -> dict:
    """Seeded random correctness, a different skill per model; the human answers visually, without summaries."""
    rng = np.random.default_rng(0)
    out = {}
    for index in range(models + 1):
        name = "Human" if index == 0 else f"model-{index:02d}"
        modes = ("visual",) if index == 0 else ("visual", "blind")
        skill = rng.uniform(0.1, 0.65)
        rows = []
        for mode in modes:
            for category, n in COUNTS.items():
                if name == "Human" and category == "SM":
                    continue
                for i in range(n):
                    fmt = {"SM": "open", "TO": "ordering"}.get(category, "mcq")
                    p = skill if mode == "visual" else skill / 2
                    row = {
                        "question_id": f"{category}-{i:03d}",
                        "model": name,
                        "mode": mode,
                        "category": category,
                        "answer_format": fmt,
                        "num_options": {"open": None, "ordering": 3}.get(fmt, 7),
                        "parsed": "A",
                        "correct": bool(rng.random() < p),
                        "scored_by": "judge" if fmt == "open" else "accuracy",
                    }
                    rows.append(parse_prediction(row, "synthetic"))
        out[name] = rows
    return out


def numpy_bootstrap(vectors: list[np.ndarray], resamples: int) -> None:
    rng = np.random.default_rng(0)
    for vector in vectors:
        draws = rng.integers(0, vector.size, size=(resamples, vector.size))
        np.percentile(vector[draws].mean(axis=1), [2.5, 97.5])


def estimate_vectors(report: dict) -> list[np.ndarray]:
    """One 0/1 vector per estimate in the report, of the same size, for the baseline."""
    vectors = []
    for model in report["models"]:
        for found in model["modes"].values():
            for e in list(found["estimates"].values()) + list(found["judged"].values()):
                vectors.append(np.r_[np.ones(e["correct"]), np.zeros(e["n"] - e["correct"])])
    return vectors


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--resamples", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    return parser


def main(argv=None) -> None:
    args = parse_with_quick(make_parser(), argv, {"resamples": 200, "repeats": 1})
    models = synthetic_models()
    timings, baseline = [], []
    for _ in range(args.repeats):
        start = time.perf_counter()
        report = build_report(models, "Human", n_resamples=args.resamples)
        timings.append(time.perf_counter() - start)
        vectors = estimate_vectors(report)
        start = time.perf_counter()
        numpy_bootstrap(vectors, args.resamples)
        baseline.append(time.perf_counter() - start)
    report_s, numpy_s = statistics.median(timings), statistics.median(baseline)
    print(
        f"{len(models)} models, {len(vectors)} interval estimates, {len(report['pairwise'])} McNemar pairs, "
        f"{args.resamples} resamples; medians of {args.repeats} runs"
    )
    print(f"build_report: {report_s:.2f} s; bare numpy bootstrap of the same estimates: {numpy_s:.2f} s")
    print(f"build_report / numpy bootstrap = {report_s / numpy_s:.2f}x")


if __name__ == "__main__":
    main()
