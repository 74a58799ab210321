"""A cache is opened only if sureon wrote it: the append-only JSONL caches (``builders/jsonl_log.py``: generations,
blind scores, SurgiQ scores, the fetch archive) and the LLM reply cache (``builders/llm/cache.py``, SQLite). A file
that is not one (a build's parquet file, a user's notes, another program's database) is refused unchanged, byte for
byte; a cache sureon wrote, or one of an earlier version, resumes as before.
"""

import hashlib
import json
import sqlite3
from pathlib import Path

import pytest

from builders.errors import InputError
from builders.jsonl_log import AppendOnlyJsonl
from builders.llm.cache import LLMCache
from recipes.curation.guessers import ScoreCache
from recipes.evaluation.inference.generation import GenerationCache


def _digest(path: Path) -> str:
    return hashlib.blake2b(path.read_bytes()).hexdigest()


def _entries(count: int) -> list[dict]:
    return [{"key": f"k{i}", "consistency": i / 10} for i in range(count)]


def test_a_killed_cache_resumes_with_its_partial_line_cut(tmp_path):
    path = tmp_path / "scores.jsonl"
    ScoreCache(path).add(_entries(3))
    with path.open("a") as handle:
        handle.write('{"key": "k3", "consis')  # the run was killed mid-write
    resumed = ScoreCache(path)
    assert sorted(resumed.entries) == ["k0", "k1", "k2"]
    resumed.add(_entries(5)[3:])
    assert sorted(ScoreCache(path).entries) == [f"k{i}" for i in range(5)]
    lines = path.read_text().splitlines()
    assert json.loads(lines[0]) == {"sureon_cache": "blind-scores", "format": 1} and len(lines) == 6


def test_a_cache_of_an_earlier_version_without_the_header_is_still_used(tmp_path):
    path = tmp_path / "scores.jsonl"
    path.write_text("".join(json.dumps(entry) + "\n" for entry in _entries(2)) + '{"key": "k2", "cut')
    legacy = ScoreCache(path)
    assert sorted(legacy.entries) == ["k0", "k1"] and path.read_text().endswith("}\n")
    legacy.add(_entries(3)[2:])
    assert sorted(ScoreCache(path).entries) == ["k0", "k1", "k2"]


def _parquet(path: Path) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"question": [f"question {i}\nwith a newline" for i in range(50)]}), path)
    return path


NOT_CACHES = {
    "a build's parquet file": _parquet,
    "notes whose last line has no newline": lambda p: p.write_text("my notes\nthe last line, no newline"),
    "one line without a newline": lambda p: p.write_text('{"key": "k0"}'),
    "JSON Lines of another shape": lambda p: p.write_text('{"key": "k0"}\n{"id": 1}\n'),
    "a cache of another kind": lambda p: GenerationCache(p).add([{"model": "m", "question_id": "q", "mode": "blind"}]),
    "a cache of a newer format": lambda p: p.write_text('{"sureon_cache": "blind-scores", "format": 99}\n'),
}


@pytest.mark.parametrize("make", NOT_CACHES.values(), ids=list(NOT_CACHES))
def test_a_file_sureon_did_not_write_is_refused_byte_for_byte(make, tmp_path):
    path = tmp_path / "given.bin"
    make(path)
    before = _digest(path)
    with pytest.raises(InputError, match="is not a blind-scores cache sureon wrote"):
        ScoreCache(path, label="--cache")
    assert _digest(path) == before


def test_a_folder_is_refused_and_an_empty_file_is_used(tmp_path):
    with pytest.raises(InputError, match="is a folder"):
        AppendOnlyJsonl(tmp_path, key=lambda entry: entry["key"], kind="blind-scores")
    empty = tmp_path / "empty.jsonl"
    empty.touch()
    ScoreCache(empty).add(_entries(1))
    assert json.loads(empty.read_text().splitlines()[0])["sureon_cache"] == "blind-scores"


def _database(path: Path, *statements: str) -> Path:
    with sqlite3.connect(path) as db:
        for statement in statements:
            db.execute(statement)
    return path


LEGACY_REPLIES = (
    "CREATE TABLE replies (key TEXT PRIMARY KEY, model TEXT, stage TEXT, text TEXT, usage TEXT, finish_reason TEXT,"
    " created REAL)"
)


def test_the_llm_cache_opens_its_own_files_only(tmp_path):
    ours = LLMCache(tmp_path / "llm_cache.sqlite")
    ours.put("k", "m", "stage1", "reply", {"prompt_tokens": 1}, "stop")
    ours.close()
    reopened = LLMCache(tmp_path / "llm_cache.sqlite")
    assert reopened.get("k")["text"] == "reply"
    reopened.close()  # closed now, not when collected: an open connection keeps its -wal / -shm files beside it
    legacy = LLMCache(_database(tmp_path / "legacy.sqlite", LEGACY_REPLIES))  # before the application id
    legacy.put("k", "m", "stage1", "reply", {}, "stop")
    assert legacy.get("k")["text"] == "reply"
    legacy.close()

    foreign = {
        "another program's database": _database(tmp_path / "review.sqlite", "CREATE TABLE users (name TEXT)"),
        "a text file": tmp_path / "notes.txt",
    }
    foreign["a text file"].write_text("not a database\n")
    for path in foreign.values():
        before = sorted(p.name for p in tmp_path.iterdir()), _digest(path)
        with pytest.raises(InputError, match="is not an LLM reply cache sureon wrote"):
            LLMCache(path)
        assert (sorted(p.name for p in tmp_path.iterdir()), _digest(path)) == before
    with pytest.raises(InputError, match="is a folder"):
        LLMCache(tmp_path)
