"""Timing helper shared by the benchmark scripts."""

import time


def best_of(repeats: int, fn) -> float:
    """The fastest of ``repeats`` runs of ``fn()`` in seconds (the least disturbed by a noisy machine)."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)
