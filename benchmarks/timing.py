"""Helpers shared by the benchmark scripts: timing, and the ``--quick`` setting that keeps each script runnable."""

import argparse
import time


def best_of(repeats: int, fn) -> float:
    """The fastest of ``repeats`` runs of ``fn()`` in seconds (the least disturbed by a noisy machine)."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def parse_with_quick(parser: argparse.ArgumentParser, argv, quick: dict) -> argparse.Namespace:
    """``parser.parse_args(argv)`` with a ``--quick`` flag that swaps the defaults for ``quick`` (tiny sizes, seconds
    on a laptop): what ``tests/test_benchmarks.py`` runs, so that a script that no longer follows the code it measures
    fails the test suite instead of rotting. Options given explicitly still win over the quick defaults."""
    parser.add_argument("--quick", action="store_true", help=f"tiny sizes, a few seconds: {quick} (the tests run it)")
    args = parser.parse_args(argv)
    if not args.quick:
        return args
    parser.set_defaults(**quick)
    return parser.parse_args(argv)
