"""Bad input common to every command that writes more than ``--out``: a cache folder, a cache file or a side output
(the ``writes`` of each command's row in ``sureon/cli.py``) at, inside or around an input, or overlapping another path
the command writes; a file given as a cache that no sureon command wrote; a build folder named too long for the cache
file names ``datasets`` derives from it. Cases of ``sureon build sureon``, ``build public`` and ``pipeline`` (the
model-side commands' are in ``test_models.py``, ``sureon plan``'s and ``build surgiq``'s in
``test_plan_and_surgiq.py``). Every refusal comes before anything is read: no case decodes a frame.
"""

import sqlite3
from pathlib import Path

from . import BadInput, Inputs, run_cases


def _build_sureon(*extra: str, videos: bool = False):
    """`sureon build sureon` of the sample release (and videos), with ``extra`` (``{tmp}``: the case's folder,
    ``{videos}``: the videos' copy, ``{release}``: the release's copy)."""

    def argv(inputs: Inputs) -> list[str]:
        release = inputs.release()
        command = ["build", "sureon", "--release", str(release), "--out", str(inputs.out)]
        if videos:
            command += ["--videos", str(inputs.videos), "--no-blur"]
        places = {"{tmp}": inputs.tmp, "{videos}": inputs.tmp / "videos", "{release}": release}
        return command + [_placed(part, places) for part in extra]

    return argv


def _placed(part: str, places: dict[str, Path]) -> str:
    for name, path in places.items():
        part = part.replace(name, str(path))
    return part


def _sources(inputs: Inputs) -> Path:
    """A --source-root with one source folder in it (never read: every case is refused before)."""
    folder = inputs.tmp / "sources" / "cholec80"
    folder.mkdir(parents=True)
    (folder / "keep.txt").write_text("the user's copy of Cholec80\n")
    return folder.parent


def _folder(inputs: Inputs) -> Path:
    folder = inputs.tmp / "caches"
    folder.mkdir()
    return folder


def _database(inputs: Inputs) -> str:
    """Another program's SQLite database (the review app's, a notebook's)."""
    path = inputs.tmp / "experiments.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE runs (name TEXT, score REAL)")
        db.execute("INSERT INTO runs VALUES ('baseline', 0.5)")
    return str(path)


def _stage1(inputs: Inputs, *extra: str) -> list[str]:
    transcripts = inputs.tmp / "t.jsonl"
    transcripts.write_text('{"video_id": "v1", "lines": [{"text": "the dissection", "start": 0, "end": 2}]}\n')
    return [
        "pipeline",
        "stage1",
        "--transcripts",
        str(transcripts),
        "--split-file",
        str(inputs.tmp / "split.json"),
    ] + ["--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--out", str(inputs.out), *extra]


CASES: list[BadInput] = [
    BadInput(
        "build sureon",
        "--cache-dir inside --videos (frames were written into the videos folder)",
        _build_sureon("--cache-dir", "{videos}/cache", videos=True),
        "videos/cache lies inside the input --videos",
    ),
    BadInput(
        "build sureon",
        "--cache-dir the --release folder",
        _build_sureon("--cache-dir", "{release}", videos=True),
        "is the input --release",
    ),
    BadInput(
        "build sureon",
        "--cache-dir inside --out (the cache went with the staged --out, or stopped the build at its end)",
        lambda i: _build_sureon("--cache-dir", str(i.out / "frames"), videos=True)(i),
        "contains --cache-dir",
    ),
    BadInput(
        "build sureon",
        "--out a folder name too long for datasets' cache files (built, then unloadable)",
        lambda i: _build_sureon()(i)[:-1] + [str(i.tmp / ("b" * 230))],
        "a folder name of 230 bytes is too long for `datasets`",
    ),
    BadInput(
        "build public",
        "--cache-dir inside a --source folder",
        lambda i: (
            ["build", "public", "--source", f"cholec80={_sources(i) / 'cholec80'}", "--out", str(i.out)]
            + ["--cache-dir", str(i.tmp / "sources" / "cholec80" / "media-cache")]
        ),
        "lies inside the input --source",
    ),
    BadInput(
        "build public",
        "--llm-cache inside --source-root",
        lambda i: (
            ["build", "public", "--source-root", str(_sources(i)), "--out", str(i.out)]
            + ["--llm-cache", str(i.tmp / "sources" / "paraphrases.sqlite")]
        ),
        "lies inside the input --source-root",
    ),
    BadInput(
        "pipeline stage1",
        "--cache another program's SQLite database (a replies table was created in it)",
        lambda i: _stage1(i, "--cache", _database(i)),
        "is not an LLM reply cache sureon wrote",
    ),
    BadInput(
        "pipeline stage1",
        "--cache a folder",
        lambda i: _stage1(i, "--cache", str(_folder(i))),
        "is a folder: give the path of a file",
    ),
]


test_bad_input = run_cases(CASES)
