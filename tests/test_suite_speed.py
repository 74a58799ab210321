"""The suite's own speed machinery (tests/conftest.py). Under `make test`, this worker's torch has its share of the
cores. On a small suite of its own run by two pytest-xdist workers that each run every test (``--dist each``): a
``build_once`` fixture is built by one worker and read by both, and a test over its CPU budget fails with what to do
while a test that states a larger budget, or is marked ``slow``, or whose cost is a module fixture's, passes."""

import json
import os
import re
import subprocess
import sys

import pytest
from conftest import REPO, WORKERS


pytest.importorskip("xdist")

INNER_CONFTEST = """
import os
import pytest
from conftest_under_test import *  # noqa: F403
from conftest_under_test import build_once


@pytest.fixture(scope="session")
def built_once(tmp_path_factory):
    def build(folder):
        with open(os.environ["BUILD_LOG"], "a") as log:
            log.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")
        (folder / "made").write_text("by " + os.environ["PYTEST_XDIST_WORKER"])
        return folder / "made"

    return build_once(tmp_path_factory, "built-once", build)
"""

USES_THE_BUILD = """
import os


def test_reads_the_shared_build(built_once):
    assert built_once.read_text().startswith("by gw")
    with open(os.environ["USERS_LOG"], "a") as log:
        log.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")
"""

BUDGETS = """
import time
import pytest


def burn(seconds):
    start = time.process_time()
    while time.process_time() - start < seconds:
        pass


def test_over_the_budget():
    burn(0.2)


@pytest.mark.cpu_budget(30)
def test_with_a_budget_of_its_own():
    burn(0.2)


@pytest.mark.slow
def test_slow_tests_have_no_budget():
    burn(0.2)


@pytest.fixture(scope="module")
def costly_module_fixture():
    burn(0.2)
    return 1


def test_a_shared_fixture_is_not_the_first_tests_cost(costly_module_fixture):
    assert costly_module_fixture == 1
"""


@pytest.mark.skipif(WORKERS <= 1, reason="checks a pytest-xdist worker (make test runs them)")
def test_torch_in_a_worker_has_its_share_of_the_cores():
    import torch

    share = max(1, len(os.sched_getaffinity(0)) // WORKERS)
    assert torch.get_num_threads() == share and os.environ["OMP_NUM_THREADS"] == str(share)


def test_shared_builds_and_the_cpu_budget_under_two_workers(tmp_path):
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "conftest_under_test.py").write_text((REPO / "tests" / "conftest.py").read_text())
    (suite / "conftest.py").write_text(INNER_CONFTEST)
    (suite / "pytest.ini").write_text("[pytest]\nmarkers =\n    slow: long\n    cpu_budget(seconds): budget\n")
    (suite / "test_shared.py").write_text(USES_THE_BUILD)
    (suite / "test_budgets.py").write_text(BUDGETS)
    build_log, users_log, times = tmp_path / "builds.log", tmp_path / "users.log", tmp_path / "times.json"
    env = os.environ | {"BUILD_LOG": str(build_log), "USERS_LOG": str(users_log), "SUREON_TEST_CPU_BUDGET": "0.1"}
    env["SUREON_TEST_TIMES"] = str(times)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    command = [sys.executable, "-m", "pytest", "-n", "2", "--dist", "each", "-p", "no:cacheprovider", "-rf"]
    done = subprocess.run(command, cwd=suite, env=env, capture_output=True, text=True, timeout=300, check=False)
    out = done.stdout
    assert done.returncode == 1, out[-3000:] + done.stderr[-3000:]
    assert "8 passed" in out and "2 failed" in out, out[-3000:]
    assert "FAILED test_budgets.py::test_over_the_budget" in out
    assert "CPU seconds" in out and "over its budget of 0.1 s" in out and "@pytest.mark.cpu_budget(seconds)" in out
    assert len(build_log.read_text().splitlines()) == 1  # built by one worker ...
    assert len(set(users_log.read_text().splitlines())) == 2  # ... and read by both
    assert "slowest 15 tests by CPU seconds" in out and "(no budget)  test_budgets.py::test_slow" in out
    assert "s CPU  costly_module_fixture (module, test_budgets.py)" in out
    assert "costliest 2 test files" in out
    assert re.search(r"per worker: gw0 \d+ \(\d+ wall\), gw1 \d+ \(\d+ wall\)", out)
    recorded = json.loads(times.read_text())
    assert set(recorded) == {"test_shared.py", "test_budgets.py"}  # FILE_CPU_SECONDS's format
    assert recorded["test_budgets.py"] >= 0.6  # three tests and a fixture that burn 0.2 s each


def test_the_costliest_files_recorded_run_first_and_unrecorded_ones_before_them(tmp_path):
    """Longest processing time first: ``make test`` (``--dist loadfile --no-loadscope-reorder``) hands the files
    to the workers in the order ``pytest_collection_modifyitems`` leaves them."""
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "conftest_under_test.py").write_text((REPO / "tests" / "conftest.py").read_text())
    (suite / "conftest.py").write_text("from conftest_under_test import *  # noqa: F403\n")
    for name in ("test_cheap", "test_costly", "test_new", "test_middling"):
        (suite / f"{name}.py").write_text("def test_one():\n    pass\n\n\ndef test_two():\n    pass\n")
    recorded = {"test_cheap.py": 0.5, "test_costly.py": 90.0, "test_middling.py": 12.0}
    (suite / "file_cpu_seconds.json").write_text(json.dumps(recorded))
    env = os.environ | {"PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
    done = subprocess.run(command, cwd=suite, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    files = [line.split("::")[0] for line in done.stdout.splitlines() if "::" in line]
    assert files == [f"{name}.py" for name in ("test_new", "test_costly", "test_middling", "test_cheap") for _ in "12"]
