"""Outputs never destroy inputs, --overwrite replaces only what sureon wrote, and an interrupted build leaves nothing.

The rules live in ``builders/outputs.py``; ``sureon`` checks every command's ``--out`` against every path among its
arguments before the command starts (``sureon/cli.py``).
"""

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from builders.outputs import MARKER, OutputExistsError, remove_stale_staging, staged_output
from sureon import cli


REPO = Path(__file__).resolve().parents[1]
SAMPLE_RELEASE = REPO / "sample_data" / "sureon_release"
SURGIQ_SAMPLE = REPO / "sample_data" / "surgiq" / "surgiq_sample.jsonl"


def _digest(path: Path) -> dict[str, str]:
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    return {str(p.relative_to(path.parent)): hashlib.blake2b(p.read_bytes()).hexdigest() for p in files}


def _inputs(tmp: Path) -> dict[str, Path]:
    """One of each kind of input the commands below read, in ``tmp``."""
    import shutil

    folders = {name: tmp / name for name in ("release", "videos", "cache", "model", "dataset", "sources")}
    shutil.copytree(SAMPLE_RELEASE, folders["release"])
    for name in ("videos", "cache", "model", "dataset", "sources"):
        folders[name].mkdir()
        (folders[name] / "keep.txt").write_text(f"the user's {name}\n")
    (tmp / "surgiq.jsonl").write_bytes(SURGIQ_SAMPLE.read_bytes())
    (tmp / "predictions.jsonl").write_text("{}\n")
    return folders | {"surgiq": tmp / "surgiq.jsonl", "predictions": tmp / "predictions.jsonl"}


# (command line with {out} and the inputs' placeholders, the input that --out is put in, at or around)
COMMANDS = [
    ("build sureon --release {release} --videos {videos} --cache-dir {cache} --out {out} --overwrite", "release"),
    ("build sureon --release {release} --videos {videos} --cache-dir {cache} --out {out} --overwrite", "videos"),
    ("build sureon --release {release} --videos {videos} --cache-dir {cache} --out {out} --overwrite", "cache"),
    ("build surgiq --source {surgiq} --out {out} --overwrite", "surgiq"),
    ("build public --source-root {sources} --out {out} --overwrite", "sources"),
    ("eval sureon --model {model} --dataset {dataset} --out {out}", "model"),
    ("eval sureon --model {model} --dataset {dataset} --out {out}", "dataset"),
    ("curate --dataset {dataset} --config validation --guesser model={model},name=g --out {out} --overwrite", "model"),
    ("report sureon sft={predictions} --out {out} --overwrite", "predictions"),
    ("export sft --format swift --dataset {dataset} --out {out} --overwrite", "dataset"),
    ("videos fetch --release {release} --out {out}", "release"),
]


@pytest.mark.parametrize("relation", ["is", "lies inside", "contains"])
@pytest.mark.parametrize(("command", "target"), COMMANDS, ids=[f"{c.split(' --')[0]}: {t}" for c, t in COMMANDS])
def test_an_out_at_or_around_an_input_is_refused_and_the_input_untouched(command, target, relation, tmp_path, capsys):
    inputs = _inputs(tmp_path)
    given = inputs[target]
    out = {"is": given, "lies inside": given / "sub", "contains": tmp_path}[relation]
    before = {name: _digest(path) for name, path in inputs.items()}

    status = cli.main(command.format(out=out, **inputs).split())

    message = capsys.readouterr().err
    assert status == 2 and f"--out {out} {relation} the input" in message and "Traceback" not in message
    assert {name: _digest(path) for name, path in inputs.items()} == before
    assert not [p for p in tmp_path.iterdir() if ".partial-" in p.name or ".old-" in p.name]


def test_overwrite_replaces_only_a_folder_sureon_wrote(tmp_path):
    foreign, a_file, empty, ours = (tmp_path / name for name in ("foreign", "notes.txt", "empty", "ours"))
    foreign.mkdir()
    (foreign / "thesis.tex").write_text("months of work\n")
    a_file.write_text("a file the user keeps\n")
    empty.mkdir()
    with (
        pytest.raises(OutputExistsError, match="was not written by sureon"),
        staged_output(foreign, overwrite=True) as staging,
    ):
        (staging / "x").write_text("new")
    with pytest.raises(OutputExistsError, match="is a file, not a folder sureon wrote"), staged_output(a_file, True):
        pass
    assert (foreign / "thesis.tex").read_text() == "months of work\n" and list(foreign.iterdir()) == [
        foreign / "thesis.tex"
    ]
    assert a_file.read_text() == "a file the user keeps\n"

    for target in (empty, ours):  # an empty folder loses nothing; a sureon output is replaced
        for _ in range(2):
            with staged_output(target, overwrite=True) as staging:
                (staging / "data.txt").write_text("built")
        assert sorted(p.name for p in target.iterdir()) == [MARKER, "data.txt"]
    with pytest.raises(OutputExistsError, match="pass --overwrite"), staged_output(ours, overwrite=False):
        pass
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty", "foreign", "notes.txt", "ours"]


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077])
def test_an_output_follows_the_umask_not_mkdtemp(umask, tmp_path):
    old = os.umask(umask)
    try:
        with staged_output(tmp_path / "out", overwrite=False) as staging:
            (staging / "config").mkdir()
    finally:
        os.umask(old)
    assert (tmp_path / "out").stat().st_mode & 0o777 == 0o777 & ~umask
    assert (tmp_path / "out" / "config").stat().st_mode & 0o777 == 0o777 & ~umask


def test_stale_staging_of_dead_runs_is_removed_and_live_ones_kept(tmp_path):
    out = tmp_path / "out"
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True
    )
    with staged_output(out, overwrite=False) as staging:
        host_pid = staging.name.removeprefix(".out.partial-").rsplit("-", 1)[0]
        host = host_pid.rsplit("-", 1)[0]
    leftovers = {
        "dead": tmp_path / f".out.partial-{host}-{dead.stdout.strip()}-abcd1234",
        "dead_replaced": tmp_path / f".out.old-{host}-{dead.stdout.strip()}",
        "alive": tmp_path / f".out.partial-{host}-{os.getppid()}-efgh5678",
        "other_host": tmp_path / f".out.partial-otherhost-{dead.stdout.strip()}-ijkl9012",
    }
    for folder in leftovers.values():
        folder.mkdir()
    removed = remove_stale_staging(out)
    assert sorted(removed) == sorted([leftovers["dead"], leftovers["dead_replaced"]])
    assert leftovers["alive"].is_dir() and leftovers["other_host"].is_dir()


def test_an_unwritable_out_is_refused_before_any_decoding(tmp_path, sample_videos, monkeypatch, capsys):
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    argv = ["build", "sureon", "--release", str(SAMPLE_RELEASE), "--videos", str(sample_videos)]
    assert cli.main([*argv, "--out", str(a_file / "out"), "--cache-dir", str(tmp_path / "c1")]) == 2
    assert f"{a_file} is a file, not a folder" in capsys.readouterr().err

    read_only = tmp_path / "read_only"
    read_only.mkdir()
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: Path(path) != read_only and real_access(path, mode))
    assert cli.main([*argv, "--out", str(read_only / "out"), "--cache-dir", str(tmp_path / "c2")]) == 2
    assert f"{read_only} is not writable" in capsys.readouterr().err
    assert not (tmp_path / "c1").exists() and not (tmp_path / "c2").exists()  # no frame was decoded


def _start_build(tmp_path: Path, videos: Path) -> subprocess.Popen:
    argv = [
        "build",
        "sureon",
        "--release",
        str(SAMPLE_RELEASE),
        "--videos",
        str(videos),
        "--no-blur",
        "--configs",
        "bench",
    ]
    argv += ["--on-missing-video", "skip", "--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / "out")]
    return subprocess.Popen(
        [sys.executable, "-c", "import sys; from sureon.cli import main; sys.exit(main(sys.argv[1:]))", *argv],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ | {"PYTHONPATH": str(REPO)},
    )


def _staging(tmp_path: Path) -> list[Path]:
    return [p for p in tmp_path.iterdir() if p.name.startswith(".out.")]


def _wait_for_staging(process: subprocess.Popen, tmp_path: Path) -> None:
    deadline = time.monotonic() + 120
    while not _staging(tmp_path):
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the build never staged its output"
        time.sleep(0.02)


@pytest.mark.cpu_budget(90)
def test_a_sigtermed_build_leaves_nothing_and_a_killed_ones_leftovers_go_with_the_next_run(tmp_path, sample_videos):
    build = _start_build(tmp_path, sample_videos)
    _wait_for_staging(build, tmp_path)
    build.send_signal(signal.SIGTERM)
    _, err = build.communicate(timeout=120)
    assert build.returncode == 143 and "error: terminated (SIGTERM)" in err and "Traceback" not in err
    assert not _staging(tmp_path) and not (tmp_path / "out").exists()

    killed = _start_build(tmp_path, sample_videos)  # SIGKILL cannot be caught: its staging folder stays ...
    _wait_for_staging(killed, tmp_path)
    killed.kill()
    killed.wait(timeout=60)
    assert _staging(tmp_path)
    rerun = _start_build(tmp_path, sample_videos)  # ... until the next run beside the same output finishes
    _, err = rerun.communicate(timeout=300)
    assert rerun.returncode == 0, err
    assert not _staging(tmp_path) and (tmp_path / "out" / MARKER).is_file()
