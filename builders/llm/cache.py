"""The chat client's on-disk cache: replies keyed by (model, messages, params) in SQLite.

Apart from the client because it outlives a run: committed after every call, a killed run resumes without paying for
a finished call twice, and two processes may share one file. The API key is never part of the key.
"""

import hashlib
import json
import sqlite3
import time
from pathlib import Path


class LLMCache:
    """Replies keyed by request hash, in SQLite (WAL): each call is committed as it finishes, so a kill loses nothing
    finished and two processes may share one file."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, timeout=60, isolation_level=None, check_same_thread=False)
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
