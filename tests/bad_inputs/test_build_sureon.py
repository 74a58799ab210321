"""Bad input to `sureon build sureon`, `world`, `videos fetch` and `pipeline` (the table: see ``__init__.py``)."""

from pathlib import Path

import pyarrow as pa
import pytest

from builders.errors import InputError
from sureon import cli

from . import SAMPLE_RELEASE, BadInput, Inputs, run_cases


def _release_schema(**types: pa.DataType) -> pa.Schema:
    """The release schema with some columns' types changed (or added)."""
    from builders.sureon.release import RELEASE_SCHEMA

    schema = RELEASE_SCHEMA
    for name, kind in types.items():
        index = schema.get_field_index(name)
        schema = schema.set(index, pa.field(name, kind)) if index >= 0 else schema.append(pa.field(name, kind))
    return schema


def _edit(split: str, index: int, **values):
    def edit(rows):
        rows[split][index].update(values)

    return edit


def _times(start, end):
    """The first test row with explicit ``start``/``end`` columns (the other rows' are null: their clip_id says)."""

    def edit(rows):
        for split_rows in rows.values():
            for row in split_rows:
                row.update(start=None, end=None)
        rows["test"][0].update(start=start, end=end)

    return edit


def _build_sureon(*extra: str, edit=None, schema=None, videos=False):
    """`sureon build sureon` on the case's release (edited), with the sample videos when ``videos``."""

    def argv(inputs: Inputs) -> list[str]:
        release = inputs.release(edit, schema)
        command = ["build", "sureon", "--release", str(release), "--out", str(inputs.out), *extra]
        if videos:
            command += ["--videos", str(inputs.videos), "--cache-dir", str(inputs.tmp / "cache"), "--no-blur"]
        return command

    return argv


def _shorter_video(inputs: Inputs, source_id: str, seconds: float) -> Path:
    """The sample videos with ``source_id`` replaced by a copy ``seconds`` long (a re-upload shorter than the
    release's video)."""
    from sample_data.make_videos import SAMPLE_VIDEOS, write_video

    fps = next(spec.fps for spec in SAMPLE_VIDEOS if spec.source_id == source_id)
    write_video(inputs.videos / f"{source_id}.mp4", seconds=seconds, fps=fps)
    return inputs.videos


def _cut_release(inputs: Inputs) -> Path:
    """The sample release with its test file cut in half (a download that broke off)."""
    release = inputs.release()
    path = release / "data" / "test-00000-of-00001.parquet"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    return release


def _unreadable_video(inputs: Inputs) -> None:
    """The sample videos (MissingVid1 is not among them) with Tt4Kk9Jj2Hh not a video."""
    (inputs.videos / "Tt4Kk9Jj2Hh.mp4").write_bytes(b"\x00garbage" * 64)


def _bytes_question(rows):
    for split_rows in rows.values():
        for row in split_rows:
            row["question"] = row["question"].encode()
    rows["test"][1]["question"] = b"What action \xff is performed?"


def _thirty_options(rows):
    row = rows["test"][0]
    row["options"] = [{"letter": f"O{i}", "text": f"option {i}", "correct": i == 0} for i in range(30)]
    row["answer"] = "option 0"


def _empty_split(rows):
    rows["validation"] = []


CASES: list[BadInput] = [
    # ---- sureon build sureon --------------------------------------------------------------------------------------
    BadInput(
        "build sureon",
        "a question column of bytes that are not UTF-8",
        _build_sureon(edit=_bytes_question, schema=_release_schema(question=pa.binary())),
        "column 'question' holds bytes that are not UTF-8 text",
    ),
    BadInput(
        "build sureon", "an empty question", _build_sureon(edit=_edit("test", 2, question="  ")), "empty question"
    ),
    BadInput("build sureon", "a null question", _build_sureon(edit=_edit("test", 3, question=None)), "empty question"),
    BadInput(
        "build sureon",
        "30 options (more than the letters A-Z)",
        _build_sureon(edit=_thirty_options),
        "30 options: a multiple-choice question has 2 to 26",
    ),
    BadInput(
        "build sureon",
        "the answer is not the option flagged correct",
        _build_sureon(edit=_edit("test", 0, answer="Suturing the skin")),
        "but the options flag",
    ),
    *(
        BadInput(
            "build sureon",
            f"a clip time of {start}-{end}",
            _build_sureon(edit=_times(start, end), schema=_release_schema(start=pa.float64(), end=pa.float64())),
            says,
        )
        for start, end, says in [
            (-3.0, 9.0, "window start is -3.0: times must be finite, non-negative seconds"),
            (3.0, float("inf"), "window end is inf"),
            (float("nan"), 9.0, "window start is nan"),
            (9.0, 9.0, "window ends (9.0s) at or before it starts (9.0s)"),
        ]
    ),
    BadInput(
        "build sureon",
        "a split whose file has no rows",
        _build_sureon(edit=_empty_split),
        "the validation split has no rows",
    ),
    BadInput(
        "build sureon",
        "videos shorter than the release's (a 20 s copy of a 90 s video)",
        lambda i: (
            _build_sureon("--configs", "train_all", videos=True)(i)
            + ["--videos", str(_shorter_video(i, "aB3_dE-5fGh", 20))]
        ),
        "runs past the end of this copy of the video (20.00s)",
    ),
    BadInput(
        "build sureon",
        "a source video missing",
        _build_sureon(videos=True),
        "source video(s) not found",
    ),
    BadInput(
        "build sureon",
        "a source video missing and another unreadable (both in one message)",
        lambda i: (_unreadable_video(i), _build_sureon("--configs", "bench", videos=True)(i))[-1],
        "unreadable video Tt4Kk9Jj2Hh.mp4",
    ),
    BadInput(
        "build sureon",
        "a release parquet cut short (a download that broke off)",
        lambda i: ["build", "sureon", "--release", str(_cut_release(i)), "--out", str(i.out)],
        "the download is truncated or damaged: download them again with `hf download aleperez24/sureon "
        "data/test-00000-of-00001.parquet --repo-type dataset",
    ),
    BadInput("build sureon", "--max-frames 0", _build_sureon("--max-frames", "0"), "is not an integer of at least 1"),
    BadInput(
        "build sureon",
        "--min-frames above --max-frames",
        _build_sureon("--min-frames", "9", "--max-frames", "8"),
        "need 1 <= min_frames (9) <= max_frames (8)",
    ),
    BadInput("build sureon", "--max-shard-size 5 apples", _build_sureon("--max-shard-size", "5apples"), "not a size"),
    BadInput(
        "build sureon",
        "--release that does not exist",
        lambda i: ["build", "sureon", "--release", str(i.tmp / "nowhere"), "--out", str(i.out)],
        "does not exist",
    ),
    BadInput(
        "build sureon",
        "--videos that does not exist",
        lambda i: _build_sureon()(i) + ["--videos", str(i.tmp / "no-videos")],
        "videos folder",
    ),
    BadInput(
        "build sureon",
        "--out exists, no --overwrite",
        lambda i: (i.out.mkdir(), (i.out / "kept.txt").write_text("x"), _build_sureon()(i))[-1],
        "exists; pass --overwrite",
    ),
    BadInput(
        "build sureon",
        "--overwrite over a folder sureon did not write",
        lambda i: (i.out.mkdir(), (i.out / "thesis.tex").write_text("x"), _build_sureon("--overwrite")(i))[-1],
        "was not written by sureon",
    ),
    BadInput(
        "build sureon",
        "--overwrite over a file",
        lambda i: (i.out.write_text("x"), _build_sureon("--overwrite")(i))[-1],
        "is a file, not a folder sureon wrote",
    ),
    BadInput(
        "build sureon",
        "--jpeg-quality out of range",
        _build_sureon("--jpeg-quality", "500"),
        "--jpeg-quality: 500 is not an integer from 1 to 100",
    ),
    BadInput(
        "build sureon",
        "--out is the release folder, with --overwrite",
        lambda i: ["build", "sureon", "--release", str(i.release()), "--out", str(i.tmp / "release"), "--overwrite"],
        "is the input --release",
    ),
    BadInput(
        "build sureon",
        "--out is the videos folder, with --overwrite",
        lambda i: [
            "build",
            "sureon",
            "--release",
            str(i.release()),
            "--videos",
            str(i.videos),
            "--out",
            str(i.videos),
            "--overwrite",
        ],
        "is the input --videos",
    ),
]


TRANSCRIPT = '{"video_id": "v1", "lines": [{"text": "we divide the duct", "start": 1, "end": 3}]}\n'


def _file(inputs: Inputs, name: str, content: str | bytes) -> str:
    path = inputs.tmp / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return str(path)


def _nothing_listens() -> str:
    """A base URL at a loopback port nobody listens on (bound, then closed): connecting to it is refused."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}/v1"


def _stage2(inputs: Inputs, *generators: str) -> list[str]:
    """``sureon pipeline stage2`` of the sample release (a stage-1-shaped folder) with these ``--generators``."""
    return [
        "pipeline",
        "stage2",
        "--input",
        str(inputs.release()),
        "--out",
        str(inputs.out),
        "--generators",
        *generators,
    ]


CASES += [
    # ---- sureon world ---------------------------------------------------------------------------------------------
    BadInput(
        "world",
        "--config that is not YAML",
        lambda i: ["world", "--out", str(i.out), "--config", _file(i, "w.yaml", "videos: [3\n")],
        "w.yaml: not YAML (line 2",
    ),
    BadInput(
        "world",
        "--config with a misspelled key",
        lambda i: ["world", "--out", str(i.out), "--config", _file(i, "w.yaml", "vidoes: 3\n")],
        "unknown key(s) ['vidoes']",
    ),
    BadInput(
        "world",
        "--config that does not exist",
        lambda i: ["world", "--out", str(i.out), "--config", str(i.tmp / "nope.yaml")],
        "nope.yaml: no such file",
    ),
    BadInput(
        "world",
        "a shortcut share above 1",
        lambda i: ["world", "--out", str(i.out), "--shortcut", "train:length=5"],
        "shares must lie in [0, 1]",
    ),
    # ---- sureon videos fetch --------------------------------------------------------------------------------------
    BadInput(
        "videos fetch",
        "--release that does not exist",
        lambda i: ["videos", "fetch", "--release", str(i.tmp / "nowhere"), "--out", str(i.out)],
        "does not exist",
    ),
    BadInput(
        "videos fetch",
        "--concurrency 0",
        lambda i: ["videos", "fetch", "--release", str(i.release()), "--out", str(i.out), "--concurrency", "0"],
        "--concurrency: 0 is not an integer of at least 1",
    ),
    BadInput(
        "videos fetch",
        "--out inside the release folder",
        lambda i: ["videos", "fetch", "--release", str(i.release()), "--out", str(i.tmp / "release" / "videos")],
        "lies inside the input --release",
    ),
    # ---- sureon reproduce -----------------------------------------------------------------------------------------
    BadInput(
        "reproduce",
        "an SFT recipe with max_frames: eight",
        lambda i: (
            ["reproduce", "--out", str(i.out), "--sft-config"]
            + [_file(i, "sft.yaml", "model_name_or_path: m\nmax_frames: eight\ndataset_mixture: [{path: d}]\n")]
        ),
        "max_frames: 'eight' is not an integer",
    ),
    BadInput(
        "reproduce",
        "--num-folds 1",
        lambda i: ["reproduce", "--out", str(i.out), "--num-folds", "1"],
        "--num-folds: 1 is not an integer of at least 2",
    ),
    # ---- sureon pipeline ------------------------------------------------------------------------------------------
    BadInput(
        "pipeline split",
        "--fraction above 1",
        lambda i: (
            ["pipeline", "split", "--transcripts", _file(i, "t.jsonl", ""), "--split-file", str(i.tmp / "s.json")]
            + ["--fraction", "1.5"]
        ),
        "--fraction: 1.5 is not a number from 0.0 to 1.0",
    ),
    BadInput(
        "pipeline split",
        "an empty transcripts file",
        lambda i: ["pipeline", "split", "--transcripts", _file(i, "t.jsonl", ""), "--split-file", str(i.tmp / "s")],
        "t.jsonl: holds no transcript",
    ),
    BadInput(
        "pipeline split",
        "a transcript that is not UTF-8",
        lambda i: (
            ["pipeline", "split", "--transcripts", _file(i, "t.srt", "1\n00:00:01,000 --> 00:00:02,000\n")]
            + ["--split-file", str(i.tmp / "s")]
            + [(i.tmp / "t.srt").write_bytes(b"1\n00:00:01,000 --> 00:00:02,000\nCaf\xe9\n") and ""][:0]
        ),
        "t.srt: line 3 is not UTF-8 (byte 0xe9)",
    ),
    BadInput(
        "pipeline split",
        "a transcript line at NaN seconds",
        lambda i: (
            ["pipeline", "split", "--split-file", str(i.tmp / "s"), "--transcripts"]
            + [_file(i, "t.jsonl", '{"video_id": "v1", "lines": [{"text": "cut", "start": NaN, "end": 2}]}\n')]
        ),
        "line 0: start nan / end 2.0 are not finite, non-negative seconds",
    ),
    BadInput(
        "pipeline stage2",
        "--input that does not exist",
        lambda i: [
            "pipeline",
            "stage2",
            "--input",
            str(i.tmp / "stage1"),
            "--out",
            str(i.out),
            "--method",
            "resampled",
        ],
        "stage1: no such folder; give a stage-1 output",
    ),
    BadInput(
        "pipeline stage2",
        "--input a release that also holds its benchmark (a test split)",
        lambda i: ["pipeline", "stage2", "--input", str(i.release()), "--out", str(i.out), "--method", "resampled"],
        "holds the split(s) test beside train and validation",
    ),
    BadInput(
        "pipeline stage2",
        "a --generators NAME=URL endpoint nothing listens at",
        lambda i: _stage2(i, f"m1={_nothing_listens()}", f"m2={_nothing_listens()}"),
        "generator m1: cannot connect to http://127.0.0.1:",
    ),
    BadInput(
        "pipeline stage2",
        "a --generators item with a URL but no name",
        lambda i: _stage2(i, "m1", "=http://127.0.0.1:8001/v1"),
        "--generators '=http://127.0.0.1:8001/v1': write KEY=VALUE",
    ),
    BadInput(
        "pipeline stage2",
        "a --generators URL without http://",
        lambda i: _stage2(i, "m1=localhost:8001/v1"),
        "'localhost:8001/v1' is not an http:// or https:// URL; write NAME=URL",
    ),
    BadInput(
        "pipeline stage1",
        "--prices that is not a mapping",
        lambda i: (
            [
                "pipeline",
                "stage1",
                "--transcripts",
                _file(i, "t.jsonl", TRANSCRIPT),
                "--split-file",
                str(i.tmp / "s.json"),
            ]
            + ["--model", "m", "--out", str(i.out), "--prices", _file(i, "p.yaml", "- 1\n- 2\n")]
        ),
        "p.yaml: expected a mapping of key: value, got a YAML list",
    ),
]


test_bad_input = run_cases(CASES)


def test_ctrl_c_is_one_line_and_a_bug_keeps_its_traceback(monkeypatch, tmp_path, capsys):
    import builders.sureon.build

    argv = ["build", "sureon", "--release", str(SAMPLE_RELEASE), "--out", str(tmp_path / "out")]

    def interrupted(options):
        raise KeyboardInterrupt

    monkeypatch.setattr(builders.sureon.build, "build_sureon", interrupted)
    assert cli.main(argv) == 130
    assert capsys.readouterr().err.strip() == "error: interrupted (Ctrl-C); nothing half-written was left in place"

    def bug(options):
        return {}["a key the code forgot"]

    monkeypatch.setattr(builders.sureon.build, "build_sureon", bug)
    with pytest.raises(KeyError):  # a bug is no user's mistake: its traceback shows
        cli.main(argv)

    def mistake(options):
        raise InputError("a user's mistake")

    monkeypatch.setattr(builders.sureon.build, "build_sureon", mistake)
    assert cli.main(argv) == 2
    monkeypatch.setenv("SUREON_DEBUG", "1")
    with pytest.raises(ValueError, match="a user's mistake"):  # --debug / SUREON_DEBUG=1: the traceback of a mistake
        cli.main(argv)
