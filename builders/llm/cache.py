"""The chat client's on-disk cache: replies keyed by (model, messages, params) in SQLite.

Apart from the client because it outlives a run: committed after every call, a killed run resumes without paying for
a finished call twice, and two processes may share one file. The API key is never part of the key.

Only a cache sureon wrote is opened (:func:`check_cache_file`): a new cache carries :data:`APPLICATION_ID` in its
SQLite header (``PRAGMA application_id``); a file without it is used only if it is a cache of an earlier version (an
SQLite database whose one table is ``replies`` with this module's columns), and then gets the id. Anything else (a
folder, a file that is not SQLite, another program's database) is refused in one line, read but never written.
"""

import hashlib
import json
import sqlite3
import time
from contextlib import closing
from pathlib import Path

from builders.errors import InputError


APPLICATION_ID = 0x53524C43  # "SRLC" in the SQLite header's application id field: a sureon LLM reply cache
SQLITE_MAGIC = b"SQLite format 3\x00"  # the first 16 bytes of every SQLite database file
REPLY_COLUMNS = {"key", "model", "stage", "text", "usage", "finish_reason", "created"}  # the first version's columns


def check_cache_file(path: str | Path, label: str = "LLM cache") -> None:
    """Refuse ``path`` unless it is absent, empty (nothing to lose) or an LLM reply cache sureon wrote; read-only."""
    path = Path(path)
    if path.is_dir():
        raise InputError(f"{label} {path} is a folder: give the cache's file name, e.g. {path / 'llm_cache.sqlite'}")
    if not path.exists() or path.stat().st_size == 0:
        return

    def not_ours(why: str) -> InputError:
        return InputError(
            f"{label} {path} is not an LLM reply cache sureon wrote ({why}): sureon never writes into a file it did "
            f"not write; choose a new file name for the {label}"
        )

    with path.open("rb") as handle:
        if handle.read(len(SQLITE_MAGIC)) != SQLITE_MAGIC:
            raise not_ours("it is not an SQLite database")
    try:
        with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as db:
            application_id = db.execute("PRAGMA application_id").fetchone()[0]
            tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            columns = {row[1] for row in db.execute("PRAGMA table_info(replies)")}
    except sqlite3.DatabaseError as err:
        raise not_ours(f"SQLite cannot read it: {err}") from None
    if application_id == APPLICATION_ID:
        return
    if application_id == 0 and tables == ["replies"] and REPLY_COLUMNS <= columns:
        return  # a cache of a version before the application id
    if application_id != 0:
        raise not_ours(f"its SQLite application id is {application_id:#x}, another program's")
    raise not_ours(f"its tables are {', '.join(tables) or 'none'}, not one replies table")


class LLMCache:
    """Replies keyed by request hash, in SQLite (WAL): each call is committed as it finishes, so a kill loses nothing
    finished and two processes may share one file."""

    def __init__(self, path: str | Path, label: str = "LLM cache"):
        self.path = Path(path)
        check_cache_file(self.path, label)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, timeout=60, isolation_level=None, check_same_thread=False)
        self._db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS replies (key TEXT PRIMARY KEY, model TEXT, stage TEXT, text TEXT,"
            " usage TEXT, finish_reason TEXT, created REAL, reasoning TEXT)"
        )
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(replies)")}
        if "reasoning" not in columns:  # a cache written before replies kept their reasoning
            self._db.execute("ALTER TABLE replies ADD COLUMN reasoning TEXT")

    def get(self, key: str) -> dict | None:
        row = self._db.execute(
            "SELECT text, usage, finish_reason, reasoning FROM replies WHERE key = ?", (key,)
        ).fetchone()
        if row is None:
            return None
        return {"text": row[0], "usage": json.loads(row[1]), "finish_reason": row[2], "reasoning": row[3]}

    def put(
        self,
        key: str,
        model: str,
        stage: str,
        text: str,
        usage: dict,
        finish_reason: str | None,
        reasoning: str | None = None,
    ) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO replies (key, model, stage, text, usage, finish_reason, created, reasoning)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (key, model, stage, text, json.dumps(usage), finish_reason, time.time(), reasoning),
        )

    def __len__(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM replies").fetchone()[0]

    def close(self) -> None:
        self._db.close()


def cache_key(model: str, messages: list[dict], params: dict) -> str:
    """sha256 of the canonical JSON of (model, messages, params): the same request always maps to the same reply."""
    payload = json.dumps(
        {"model": model, "messages": messages, "params": params}, sort_keys=True, ensure_ascii=False, default=str
    )
    return hashlib.sha256(payload.encode()).hexdigest()
