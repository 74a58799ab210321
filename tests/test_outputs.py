"""Outputs never destroy inputs, --overwrite replaces only what sureon wrote, and an interrupted build leaves nothing.

The rules live in ``builders/outputs.py``; ``sureon`` checks every path a command writes (``--out``, ``--cache``,
``--cache-dir``, ``--json``: the ``writes`` of its row in ``sureon/cli.py``) against every other path among its
arguments before the command starts.
"""

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from builders.errors import InputError
from builders.outputs import (
    DATASETS_CACHE_FILE,
    MARKER,
    NAME_MAX,
    OutputExistsError,
    check_build_name,
    remove_stale_staging,
    staged_output,
    write_owned_file,
)
from sureon import cli


REPO = Path(__file__).resolve().parents[1]
SAMPLE_RELEASE = REPO / "sample_data" / "sureon_release"
SURGIQ_SAMPLE = REPO / "sample_data" / "surgiq" / "surgiq_sample.jsonl"
SFT_RECIPE = REPO / "recipes" / "qwen3-vl-8b" / "sft" / "config_sureon_vlm.yaml"


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
    (tmp / "recipe.yaml").write_bytes(SFT_RECIPE.read_bytes())
    (tmp / "t.jsonl").write_text("{}\n")
    files = {
        "surgiq": "surgiq.jsonl",
        "predictions": "predictions.jsonl",
        "recipe": "recipe.yaml",
        "transcripts": "t.jsonl",
    }
    return folders | {name: tmp / file for name, file in files.items()}


# (command line with {out} and the inputs' placeholders, the input that --out is put in, at or around)
COMMANDS = [
    ("build sureon --release {release} --videos {videos} --cache-dir {cache} --out {out} --overwrite", "release"),
    ("build sureon --release {release} --videos {videos} --cache-dir {cache} --out {out} --overwrite", "videos"),
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


BUILD_SUREON = "build sureon --release {release} --videos {videos} --out {out}"
GUESSER = "--guesser model={model},name=g"
# (command line with {written} and the inputs' placeholders, the option that writes {written}, the input it is put in)
WRITTEN = [
    (f"{BUILD_SUREON} --cache-dir {{written}}", "--cache-dir", "videos"),
    (f"{BUILD_SUREON} --cache-dir {{written}}", "--cache-dir", "release"),
    ("build public --source-root {sources} --out {out} --cache-dir {written}", "--cache-dir", "sources"),
    ("build public --source-root {sources} --out {out} --llm-cache {written}", "--llm-cache", "sources"),
    (f"audit --dataset {{dataset}} {GUESSER} --out {{out}} --cache {{written}}", "--cache", "dataset"),
    (f"curate --dataset {{dataset}} {GUESSER} --out {{out}} --cache {{written}}", "--cache", "dataset"),
    ("plan --config {recipe} --json {written}", "--json", "recipe"),
    (
        "pipeline stage1 --transcripts {transcripts} --split-file {split} --model m --out {out} --cache {written}",
        "--cache",
        "transcripts",
    ),
]


@pytest.mark.parametrize("relation", ["is", "lies inside", "contains"])
@pytest.mark.parametrize(
    ("command", "option", "target"), WRITTEN, ids=[f"{c.split(' --')[0]} {o}: {t}" for c, o, t in WRITTEN]
)
def test_every_path_a_command_writes_is_kept_off_its_inputs(command, option, target, relation, tmp_path, capsys):
    """Before, only --out was compared with the inputs: a cache went into the videos, the sources or the build."""
    inputs = _inputs(tmp_path)
    given = inputs[target]
    written = {"is": given, "lies inside": given / "sub", "contains": tmp_path}[relation]
    before = {name: _digest(path) for name, path in inputs.items()}
    out, split = tmp_path / "new" / "out", tmp_path / "new" / "split.json"

    status = cli.main(command.format(out=out, split=split, written=written, **inputs).split())

    message = capsys.readouterr().err
    assert status == 2 and f"{option} {written} {relation} the input" in message and "Traceback" not in message
    assert {name: _digest(path) for name, path in inputs.items()} == before
    assert not (tmp_path / "new").exists()


# (command line, the option whose path overlaps another written path, how, and that option)
OVERLAPPING = [
    (
        f"{BUILD_SUREON.replace('{out}', '{cache}/out')} --cache-dir {{cache}}",
        "--out {cache}/out lies inside --cache-dir",
    ),
    (f"{BUILD_SUREON.replace('{out}', '{cache}')} --cache-dir {{cache}}", "--out {cache} is --cache-dir"),
    (f"audit --dataset {{dataset}} {GUESSER} --out {{new}} --cache {{new}}/scores.jsonl", "contains --cache"),
    (f"curate --dataset {{dataset}} {GUESSER} --out {{new}} --cache {{new}}/s.jsonl", "contains --cache"),
    (
        "pipeline stage1 --transcripts {transcripts} --split-file {new}/split.json --model m --out {new}",
        "--out {new} contains --split-file",
    ),
]


@pytest.mark.parametrize(("command", "says"), OVERLAPPING, ids=[c.split(" --")[0] for c, _ in OVERLAPPING])
def test_no_two_paths_a_command_writes_overlap(command, says, tmp_path, capsys):
    """A cache inside an --out that is replaced whole would go with it (or stop the run at its very end)."""
    inputs = _inputs(tmp_path)
    new = tmp_path / "new"
    before = {name: _digest(path) for name, path in inputs.items()}

    status = cli.main(command.format(new=new, **inputs).split())

    message = " ".join(capsys.readouterr().err.split())
    assert status == 2 and says.format(new=new, **inputs) in message and "which this command writes too" in message
    assert {name: _digest(path) for name, path in inputs.items()} == before
    assert not new.exists()


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


def test_a_single_file_output_replaces_only_the_file_sureon_wrote_there(tmp_path):
    plan = tmp_path / "plan.json"
    write_owned_file(plan, "[1]\n", kind="sureon plan --json", overwrite=True)
    write_owned_file(plan, "[2]\n", kind="sureon plan --json", overwrite=True)  # its own earlier plan: replaced
    assert plan.read_text() == "[2]\n"
    with pytest.raises(OutputExistsError, match="pass --overwrite"):
        write_owned_file(plan, "[3]\n", kind="sureon plan --json", overwrite=False)
    with pytest.raises(OutputExistsError, match="was written by sureon plan --json, not sureon export sft"):
        write_owned_file(plan, "{}\n", kind="sureon export sft", overwrite=True)

    plan.write_text("[2, 'edited by hand']\n")
    notes = tmp_path / "notes.jsonl"
    notes.write_text('{"mine": true}\n')
    for path, says in ((plan, "has changed since sureon wrote it"), (notes, "is a file sureon did not write")):
        with pytest.raises(OutputExistsError, match=says):
            write_owned_file(path, "[4]\n", kind="sureon plan --json", overwrite=True)
    assert plan.read_text() == "[2, 'edited by hand']\n" and notes.read_text() == '{"mine": true}\n'
    with pytest.raises(InputError, match="is a folder"):
        write_owned_file(tmp_path, "[5]\n", kind="sureon plan --json", overwrite=True)


def _tiny_build(folder: Path, split: str) -> Path:
    """A one-config build as ``datasets`` reads it: ``default/<split>-00000-of-00001.parquet``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    (folder / "default").mkdir(parents=True)
    pq.write_table(pa.table({"question": ["q"]}), folder / "default" / f"{split}-00000-of-00001.parquet")
    return folder


@pytest.mark.parametrize("split", ["test", "validation"])
def test_the_longest_build_name_datasets_can_load_is_the_one_refused_beyond(split, tmp_path):
    """``datasets`` names a split's cache files after the build folder: one byte over the limit and loading fails
    with ``OSError: [Errno 36] File name too long``; a build command refuses such an --out, and a command that loads
    one names it in one line."""
    from datasets import load_dataset

    from builders.hub import check_build_path

    longest = NAME_MAX - len(DATASETS_CACHE_FILE.format(name="", split=split))
    fits = _tiny_build(tmp_path / ("b" * longest), split)
    assert len(load_dataset(str(fits), split=split)) == 1
    check_build_path(fits, "--dataset")
    check_build_name(fits, splits=[split])

    too_long = _tiny_build(tmp_path / ("c" * (longest + 1)), split)
    with pytest.raises(Exception) as failed:  # datasets wraps it in its DatasetGenerationError
        load_dataset(str(too_long), split=split)
    assert "File name too long" in str(failed.value.__cause__)
    with pytest.raises(InputError, match=f"give the folder a name of at most {longest} bytes"):
        check_build_path(too_long, "--dataset")
    with pytest.raises(InputError, match="too long for `datasets`"):
        check_build_name(too_long, splits=[split])
    camel = tmp_path / ("Ab" * (longest // 2))  # datasets writes it in snake_case: ab_ab_..., longer
    with pytest.raises(InputError, match="too long for `datasets`"):
        check_build_name(camel, splits=[split])


def test_an_out_whose_staging_name_would_not_fit_is_refused_before_any_work(tmp_path, capsys):
    out = tmp_path / ("w" * 240)
    assert cli.main(["world", "--out", str(out)]) == 2
    assert "too long for what sureon stages beside it" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


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
