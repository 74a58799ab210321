"""Benchmark the review decision log (builders/pipeline/review/store.py) under concurrent reviewers.

Times the same number of decisions written

- by one reviewer after another (the baseline),
- by ``--reviewers`` threads at once (reviewers clicking at the same time in the app's worker threads),
- by ``--reviewers`` processes at once (several app workers, or an admin script, on the same database file),

and prints decisions per second and each concurrent run as a ratio against the baseline measured in the same run,
after checking that no decision was lost or duplicated. Every decision is one durable transaction
(``synchronous=FULL``), so the figures are bounded by the disk's fsync rate, not by Python.

    python benchmarks/review_store.py [--reviewers 20] [--decisions 50] [--workdir build/bench]
"""

import argparse
import multiprocessing
import shutil
import sys
import threading
import time
from collections import Counter
from pathlib import Path


REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.timing import parse_with_quick  # noqa: E402
from builders.pipeline.review.store import Assignment, ReviewStore  # noqa: E402


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reviewers", type=int, default=20)
    parser.add_argument("--decisions", type=int, default=50, help="decisions per reviewer")
    parser.add_argument("--workdir", type=Path, default=REPO / "build" / "bench" / "review_store")
    return parser


def fresh_store(path: Path, reviewers: list[str], samples: list[str]) -> ReviewStore:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    store = ReviewStore(path)
    for name in reviewers:
        store.add_user(name, "benchmark-password")
    store.add_assignments([Assignment(s, r, "single") for r in reviewers for s in samples])
    return store


def write(db: Path, reviewer: str, samples: list[str]) -> None:
    store = ReviewStore(db)
    for sample in samples:
        store.record(reviewer, sample, "reject", ["other"], f"note of {reviewer} on {sample}")


def timed(store: ReviewStore, reviewers: list[str], samples: list[str], mode: str) -> float:
    start = time.perf_counter()
    if mode == "sequential":
        for name in reviewers:
            write(store.path, name, samples)
    else:
        make = threading.Thread if mode == "threads" else multiprocessing.get_context("fork").Process
        workers = [make(target=write, args=(store.path, name, samples)) for name in reviewers]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    elapsed = time.perf_counter() - start
    expected = Counter((r, s) for r in reviewers for s in samples)
    if Counter((d.reviewer, d.sample_id) for d in store.log()) != expected:
        raise RuntimeError(f"{mode}: decisions lost or duplicated")
    return elapsed


def main(argv=None) -> None:
    args = parse_with_quick(make_parser(), argv, {"reviewers": 3, "decisions": 4})
    args.workdir.mkdir(parents=True, exist_ok=True)
    reviewers = [f"r{i:02d}" for i in range(args.reviewers)]
    samples = [f"q{i:04d}" for i in range(args.decisions)]
    total = len(reviewers) * len(samples)
    baseline = None
    for mode in ("sequential", "threads", "processes"):
        store = fresh_store(args.workdir / "review.sqlite", reviewers, samples)
        elapsed = timed(store, reviewers, samples, mode)
        baseline = baseline or elapsed
        print(f"{mode:<10} {total} decisions in {elapsed:6.2f} s  {total / elapsed:8.0f}/s  {baseline / elapsed:.2f}x")
    shutil.rmtree(args.workdir)


if __name__ == "__main__":
    main()
