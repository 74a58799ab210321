"""Shared fixtures, parallel workers and the per-test CPU budget. Everything runs offline: the Hub is never contacted,
fixtures are generated in the session.

Speed (`make test` runs ``pytest -n N --dist loadfile --no-loadscope-reorder``, pytest-xdist, one worker per core
up to four):
- Build anything that costs seconds (a dataset, a tiny model, a short training run) once per run in a session fixture
  through ``build_once``: the workers then share one copy instead of building one each. Fixtures a test may modify
  stay function-scoped copies (``videos_copy``).
- ``--dist loadfile`` keeps each test file on one worker, so a module-scoped fixture is built once too.
- With N workers on C cores, torch in each worker (and every process a test starts, through ``OMP_NUM_THREADS``)
  uses C // N threads, so that the workers do not oversubscribe the cores.
- Each test's CPU seconds (setup and call; this process and the child processes it waited for) are measured, less
  the session- and module-scoped fixtures it happened to set up first, which are measured apart: the slowest tests
  and shared fixtures are listed at the end of the run, and a test over its budget fails. The default budget is
  ``DEFAULT_CPU_BUDGET_S`` (``SUREON_TEST_CPU_BUDGET`` overrides it); a test that needs more says so with
  ``@pytest.mark.cpu_budget(seconds)`` where a reader sees it (tests marked ``slow`` have none). CPU time, not wall
  time: the cores of a shared machine make wall times noisy, and a slower CPU raises both. The costliest files are
  listed too; ``SUREON_TEST_TIMES=FILE.json`` writes the CPU seconds of every file.
- The costliest files start first, by the figures of an earlier run (``FILE_CPU_SECONDS``).
"""

import copy
import json
import os
import pickle
import resource
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from sample_data.make_sample_release import SCHEMA, release_rows, write_release
from sample_data.make_videos import SAMPLE_VIDEOS, write_sample_videos


# Set before any test module imports huggingface_hub or datasets (neither is imported above).
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ.setdefault("MPLBACKEND", "Agg")
os.environ["TOKENIZERS_PARALLELISM"] = "false"

WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))  # set by pytest-xdist in each worker
if WORKERS > 1:  # before torch is imported: it reads OMP_NUM_THREADS once, as do the processes tests start
    os.environ["OMP_NUM_THREADS"] = str(max(1, len(os.sched_getaffinity(0)) // WORKERS))

DEFAULT_CPU_BUDGET_S = float(os.environ.get("SUREON_TEST_CPU_BUDGET", "60"))
SLOWEST_LISTED = 15
COSTLIEST_FILES_LISTED = 10
# CPU seconds of each test file in a run of `make test` (2 workers), which orders the files; rewrite it with
# `SUREON_TEST_TIMES=tests/file_cpu_seconds.json make test` when files are added or their costs change.
FILE_CPU_SECONDS = Path(__file__).with_name("file_cpu_seconds.json")
_STARTED = pytest.StashKey[tuple[float, float]]()  # CPU and wall clock at a test's setup
_MEASURED: list[tuple[float, float, float, str, str]] = []  # (CPU s, wall s, budget s, test id, worker) of each test
_SHARING = [0]  # session- or module-scoped fixtures being set up now (nested ones are counted by the outermost)
_SHARED_NOW: list[tuple[str, float]] = []  # (fixture, CPU s) of the shared fixtures set up for the running test
_SHARED_FIXTURES: list[tuple[float, str, str]] = []  # (CPU s, fixture, worker) of every shared fixture set up
_PER_FILE: dict[str, float] = {}  # CPU s of each test file: its tests and the shared fixtures they set up


REPO = Path(__file__).resolve().parents[1]
SAMPLE_RELEASE = REPO / "sample_data" / "sureon_release"


def pytest_configure(config):
    config.pluginmanager.register(_SharedFixtureClock(), "sureon-shared-fixture-clock")
    if WORKERS > 1 and "torch" in sys.modules:  # imported before this file by a plugin
        import torch

        torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


def build_once(tmp_path_factory, name: str, build: Callable[[Path], object]):
    """``build(folder)`` run once per test run, even across pytest-xdist workers; returns its (pickled) result.

    Under xdist every worker has its own temp folder inside one folder of the run: the first worker to need ``name``
    builds it there under a file lock, the others wait for it and read the result. A build that fails leaves no
    result, so a later worker tries again (and fails with its own error). Tests must not modify what it built.
    """
    if WORKERS <= 1:
        return build(tmp_path_factory.mktemp(name))
    from filelock import FileLock

    folder = tmp_path_factory.getbasetemp().parent / "shared" / name
    folder.parent.mkdir(exist_ok=True)
    result = folder / "build_once_result.pickle"
    with FileLock(str(folder) + ".lock"):
        if not result.is_file():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            built = build(folder)
            result.write_bytes(pickle.dumps(built))  # own file in this run's temp folder
            return built
    return pickle.loads(result.read_bytes())


def _cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def pytest_collection_modifyitems(items):
    """Test files in the order of their CPU seconds in ``FILE_CPU_SECONDS``, the costliest first (a file it does not
    list yet comes first of all); tests keep their order within a file. Under ``make test`` (``--dist loadfile
    --no-loadscope-reorder``) the long files so start at once on separate workers and the short ones fill in after
    them: longest processing time first. pytest-xdist's own order (the files with the most tests first) started the
    two learning files last, and left one worker busy two minutes after the other had finished."""
    recorded = json.loads(FILE_CPU_SECONDS.read_text()) if FILE_CPU_SECONDS.is_file() else {}
    items.sort(key=lambda item: -recorded.get(item.nodeid.split("::")[0], float("inf")))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    item.stash[_STARTED] = (_cpu_seconds(), time.perf_counter())
    _SHARED_NOW.clear()


class _SharedFixtureClock:
    """A session- or module-scoped fixture's CPU seconds are its own, not the first test's that needed it. A plugin
    of its own: pytest asks a session fixture's hooks of the conftest files above the root, not of this one."""

    @pytest.hookimpl(hookwrapper=True)
    def pytest_fixture_setup(self, fixturedef, request):
        if fixturedef.scope == "function" or _SHARING[0]:
            yield
            return
        _SHARING[0] += 1
        start = _cpu_seconds()
        try:
            yield
        finally:
            _SHARING[0] -= 1
            where = f", {request.node.nodeid}" if request.node.nodeid else ""
            _SHARED_NOW.append((f"{fixturedef.argname} ({fixturedef.scope}{where})", _cpu_seconds() - start))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """On the call's report: the test's CPU and wall seconds, and a failure when the CPU is over its budget."""
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" or _STARTED not in item.stash:
        return
    cpu_start, wall_start = item.stash[_STARTED]
    shared = sum(spent for _, spent in _SHARED_NOW)
    cpu, wall = _cpu_seconds() - cpu_start - shared, time.perf_counter() - wall_start
    marker = item.get_closest_marker("cpu_budget")
    budget = float(marker.args[0]) if marker else DEFAULT_CPU_BUDGET_S
    if item.get_closest_marker("slow"):  # `make slow_test` is where long tests go: listed, never failed for it
        budget = 0.0
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    report.user_properties += [("cpu_s", cpu), ("wall_s", wall), ("cpu_budget_s", budget), ("worker", worker)]
    report.user_properties += [("shared_fixtures", list(_SHARED_NOW))]
    if budget and cpu > budget and report.passed:
        report.outcome = "failed"
        report.longrepr = (
            f"{item.nodeid} used {cpu:.1f} CPU seconds (setup and call; {wall:.1f} s wall), over its budget of "
            f"{budget:g} s: check what it checks on a smaller input or share its fixtures across "
            "tests (tests/conftest.py), or give it a budget with @pytest.mark.cpu_budget(seconds) and say why."
        )


def pytest_runtest_logreport(report):
    """Collects the figures of every test (in the controller under xdist: the reports carry them)."""
    figures = dict(report.user_properties)
    if report.when == "call" and "cpu_s" in figures:
        _MEASURED.append(
            (figures["cpu_s"], figures["wall_s"], figures["cpu_budget_s"], report.nodeid, figures["worker"])
        )
        shared = sum(spent for _, spent in figures["shared_fixtures"])
        path = report.nodeid.split("::")[0]
        _PER_FILE[path] = _PER_FILE.get(path, 0.0) + figures["cpu_s"] + shared
        _SHARED_FIXTURES.extend((spent, name, figures["worker"]) for name, spent in figures["shared_fixtures"])


def pytest_terminal_summary(terminalreporter):
    if not _MEASURED:
        return
    total = sum(cpu for cpu, *_ in _MEASURED)
    terminalreporter.write_sep("=", f"slowest {SLOWEST_LISTED} tests by CPU seconds (of {total:.0f} in all tests)")
    for cpu, wall, budget, nodeid, _ in sorted(_MEASURED, reverse=True)[:SLOWEST_LISTED]:
        limit = f"budget {budget:g}" if budget else "no budget"
        terminalreporter.write_line(f"{cpu:6.1f} s CPU {wall:6.1f} s wall  ({limit})  {nodeid}")
    if _SHARED_FIXTURES:
        shared = sum(cpu for cpu, *_ in _SHARED_FIXTURES)
        terminalreporter.write_line(f"slowest shared fixtures (session, module scope; {shared:.0f} CPU s in all):")
        for cpu, name, _ in sorted(_SHARED_FIXTURES, reverse=True)[:SLOWEST_LISTED]:
            terminalreporter.write_line(f"{cpu:6.1f} s CPU  {name}")
    costliest = sorted(_PER_FILE.items(), key=lambda item: -item[1])[:COSTLIEST_FILES_LISTED]
    terminalreporter.write_line(f"costliest {len(costliest)} test files (tests and the shared fixtures they set up):")
    for path, cpu in costliest:
        terminalreporter.write_line(f"{cpu:6.1f} s CPU  {path}")
    per_worker: dict[str, float] = {}
    for cpu, *_, worker in _MEASURED + [(cpu, worker) for cpu, _, worker in _SHARED_FIXTURES]:
        per_worker[worker] = per_worker.get(worker, 0.0) + cpu
    busy: dict[str, float] = {}  # wall seconds in tests (their set-up included), to see how evenly the files spread
    for _, wall, _, _, worker in _MEASURED:
        busy[worker] = busy.get(worker, 0.0) + wall
    # on idle cores the run takes about the busiest worker's share, plus start-up and collection
    if len(per_worker) > 1:
        shares = ", ".join(f"{name} {cpu:.0f} ({busy[name]:.0f} wall)" for name, cpu in sorted(per_worker.items()))
        terminalreporter.write_line(f"CPU seconds of the tests per worker: {shares}")
    if os.environ.get("SUREON_TEST_TIMES"):  # the CPU seconds of each file, as FILE_CPU_SECONDS holds them
        files = {path: round(cpu, 1) for path, cpu in sorted(_PER_FILE.items())}
        Path(os.environ["SUREON_TEST_TIMES"]).write_text(json.dumps(files, indent=1) + "\n")


@pytest.fixture(autouse=True)
def _isolated_caches(tmp_path, monkeypatch):
    """Each test gets its own ``datasets`` cache and frame cache, out of the user's home."""
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf_datasets_cache")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg_cache"))


@pytest.fixture(scope="session")
def sample_videos(tmp_path_factory) -> Path:
    """The sample source videos (written once per session with PyAV)."""

    def write(out: Path) -> Path:
        write_sample_videos(out)
        return out

    return build_once(tmp_path_factory, "videos", write)


@pytest.fixture
def videos_copy(sample_videos, tmp_path) -> Path:
    """A private copy of the sample videos that a test may delete from or corrupt."""
    out = tmp_path / "videos"
    shutil.copytree(sample_videos, out)
    return out


@pytest.fixture
def rows():
    """The sample release rows per split, a fresh copy a test may edit."""
    return copy.deepcopy(release_rows())


@pytest.fixture
def write_rows(tmp_path):
    """Write edited rows as a release folder: ``write_rows(rows, schema=None)`` -> folder."""
    counter = iter(range(1000))

    def write(rows_by_split, schema=SCHEMA):
        return write_release(tmp_path / f"release{next(counter)}", rows_by_split, schema)

    return write


@pytest.fixture
def fps_of():
    return {spec.source_id: spec.fps for spec in SAMPLE_VIDEOS}


@pytest.fixture(scope="session")
def sureon_build(sample_videos, tmp_path_factory):
    """The sample release built once per session with frames (all configs); tests must not modify it."""
    from builders.sureon.build import BuildOptions, build_sureon

    def build(tmp: Path):
        options = BuildOptions(
            release=SAMPLE_RELEASE,
            out=tmp / "out",
            videos=sample_videos,
            cache_dir=tmp / "cache",
            on_missing_video="skip",
        )
        return build_sureon(options)

    return build_once(tmp_path_factory, "sureon_build", build)


@pytest.fixture(scope="session")
def bench(sample_videos, tmp_path_factory) -> Path:
    """The demo benchmark, built once per session as `make demo` builds it (the sample release's bench config, the
    missing video skipped); read-only for tests. A module may still define its own ``bench``."""
    import datasets

    from builders.sureon.build import BuildOptions, build_sureon

    def build(tmp: Path) -> Path:
        with pytest.MonkeyPatch.context() as patch:  # datasets' cache out of the user's home for a session fixture
            patch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp / "hf_datasets_cache")
            options = BuildOptions(
                release=SAMPLE_RELEASE,
                out=tmp / "sureon",
                videos=sample_videos,
                configs=["bench"],
                on_missing_video="skip",
                cache_dir=tmp / "frame-cache",
            )
            return build_sureon(options).out

    return build_once(tmp_path_factory, "demo_bench", build)


@pytest.fixture(scope="session")
def tiny_qwen3_vl(tmp_path_factory) -> Path:
    """A random 2-layer Qwen3-VL with its processor, saved once per session (read-only for tests)."""
    from recipes.training.tiny_models import build_tiny_qwen3_vl

    return build_once(tmp_path_factory, "tiny-qwen3-vl", lambda tmp: build_tiny_qwen3_vl(tmp / "qwen3-vl"))


@pytest.fixture(scope="session")
def tiny_causal_lm(tmp_path_factory) -> Path:
    """A random 2-layer text-only Qwen3 with its tokenizer, saved once per session (read-only for tests)."""
    from recipes.training.tiny_models import build_tiny_causal_lm

    return build_once(tmp_path_factory, "tiny-causal-lm", lambda tmp: build_tiny_causal_lm(tmp / "qwen3"))
