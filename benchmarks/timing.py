"""Helpers shared by the benchmark scripts: timing, one process against two ranks, and the ``--quick`` setting that
keeps each script runnable."""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path


REPO = Path(__file__).resolve().parents[1]


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


def one_process_and_two_ranks(
    command: Callable[[Path], list[str]], work: Path, port: int
) -> list[tuple[float, float]]:
    """``(wall seconds of the whole command, seconds of its generation phase: the slowest rank's)`` of an evaluation
    command run as one process and under ``torchrun`` on two ranks, one CPU thread each, each from an empty output
    folder. ``command(out)``: the module and its arguments after ``python -m`` (its ``summary.json`` records each
    rank's ``generation`` seconds); the two runs must write the same ``predictions.jsonl``."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    times = []
    for world in (1, 2):
        out = work / f"ranks-{world}"
        shutil.rmtree(out, ignore_errors=True)
        launcher = [sys.executable, "-m"]
        if world > 1:
            launcher += ["torch.distributed.run", "--nproc-per-node", str(world), "--master-port", str(port), "-m"]
        start = time.perf_counter()
        done = subprocess.run([*launcher, *command(out)], env=env, capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr[-3000:]
        wall = time.perf_counter() - start
        summary = json.loads((out / "summary.json").read_text())
        times.append((wall, max(rank["seconds"] for rank in summary["generation"]["ranks"])))
    first, second = (work / f"ranks-{world}" / "predictions.jsonl" for world in (1, 2))
    assert first.read_bytes() == second.read_bytes(), "2 ranks wrote other predictions than 1 process"
    return times


def print_ranks(times: list[tuple[float, float]]) -> None:
    """The speed-ups :func:`one_process_and_two_ranks` measured, for the whole command and its generation phase."""
    (one, one_generation), (two, two_generation) = times
    print(f"whole command: 1 process {one:.1f} s, 2 ranks {two:.1f} s   speed-up {one / two:.2f}x")
    print(
        f"generation phase (slowest rank): 1 process {one_generation:.1f} s, 2 ranks {two_generation:.1f} s   "
        f"speed-up {one_generation / two_generation:.2f}x"
    )
    print(f"  (this machine has {os.cpu_count()} CPU cores; identical predictions.jsonl checked)")
