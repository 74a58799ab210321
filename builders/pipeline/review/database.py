"""The review database file: its SQLite connections, its schema, its owner-only mode and its online backup.

A module apart from the rows (:mod:`~builders.pipeline.review.accounts`, :mod:`~builders.pipeline.review.store`)
because these guarantees hold for every table. Safe under concurrent reviewers and restarts: the file is in WAL mode,
every write is one ``BEGIN IMMEDIATE`` transaction on its own connection (threads and processes queue on SQLite's
lock, ``busy_timeout`` long), and a decision is never updated or deleted (the schema's triggers refuse it).

The file holds the password hashes and the reviewers' notes: it is created readable by its owner only (0600), and
SQLite gives its ``-wal`` and ``-shm`` files the database file's mode; an existing file readable by others is
tightened, with a warning.
"""

import logging
import os
import sqlite3
import threading
from contextlib import closing, contextmanager
from datetime import UTC, datetime
from pathlib import Path

from builders.outputs import atomic_file


logger = logging.getLogger(__name__)


SCHEMA = """
CREATE TABLE IF NOT EXISTS users (
    username TEXT PRIMARY KEY,
    salt BLOB NOT NULL,
    password_hash BLOB NOT NULL,
    kdf TEXT NOT NULL,
    is_admin INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    removed_at TEXT
);
CREATE TABLE IF NOT EXISTS assignments (
    sample_id TEXT NOT NULL,
    reviewer TEXT NOT NULL REFERENCES users(username),
    mode TEXT NOT NULL CHECK (mode IN ('single', 'dual')),
    created_at TEXT NOT NULL,
    PRIMARY KEY (sample_id, reviewer)
);
CREATE TABLE IF NOT EXISTS decisions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    reviewer TEXT NOT NULL,
    sample_id TEXT NOT NULL,
    decision TEXT NOT NULL CHECK (decision IN ('approve', 'reject', 'flag')),
    tags TEXT NOT NULL,
    note TEXT NOT NULL,
    created_at TEXT NOT NULL,
    FOREIGN KEY (sample_id, reviewer) REFERENCES assignments(sample_id, reviewer)
);
CREATE TABLE IF NOT EXISTS login_failures (
    key TEXT PRIMARY KEY,
    failures INTEGER NOT NULL,
    last_failure REAL NOT NULL,
    locked_until REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS sessions (
    token_hash BLOB PRIMARY KEY,
    username TEXT NOT NULL,
    created REAL NOT NULL,
    last_seen REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS sessions_by_user ON sessions(username);
CREATE INDEX IF NOT EXISTS decisions_by_reviewer ON decisions(reviewer, sample_id);
CREATE TRIGGER IF NOT EXISTS decisions_append_only_update BEFORE UPDATE ON decisions
BEGIN SELECT RAISE(ABORT, 'the decision log is append-only'); END;
CREATE TRIGGER IF NOT EXISTS decisions_append_only_delete BEFORE DELETE ON decisions
BEGIN SELECT RAISE(ABORT, 'the decision log is append-only'); END;
"""


def utc_now() -> str:
    """When a row is written: UTC, to the millisecond."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _owner_only(path: Path) -> None:
    """Create ``path`` with mode 0600 if absent (SQLite then gives its -wal and -shm files the same mode); tighten an
    existing database (and its -wal/-shm) that others could read."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        return
    except FileExistsError:
        pass
    for file in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        try:  # another connection may remove its -wal/-shm between any two calls: stat once, tolerate its absence
            mode = file.stat().st_mode
            if mode & 0o077:
                logger.warning("%s was readable by other users (mode %o); setting it to 0600", file, mode)
                os.chmod(file, 0o600)
        except FileNotFoundError:
            continue


class ReviewDatabase:
    """The connections to one review database file (creating its tables); the rows are read and written by
    :class:`~builders.pipeline.review.store.ReviewStore`."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._readers = threading.local()  # see _session_reader
        _owner_only(self.path)
        with self._connection() as conn:
            conn.executescript(SCHEMA)
            columns = {row[1] for row in conn.execute("PRAGMA table_info(users)")}
            if "removed_at" not in columns:  # databases made before accounts could be removed
                conn.execute("ALTER TABLE users ADD COLUMN removed_at TEXT")

    @contextmanager
    def _connection(self):
        conn = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        with closing(conn):
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")  # a decision acknowledged to a reviewer survives a power cut
            conn.execute("PRAGMA foreign_keys=ON")
            yield conn

    @contextmanager
    def _write(self, durable: bool = True):
        """One ``BEGIN IMMEDIATE`` transaction. ``durable=False`` (login counters, session bookkeeping) skips the
        fsync at commit (``synchronous=NORMAL``: WAL stays consistent, a power cut may lose that last commit), so
        logins do not queue behind the disk; a later durable commit (a decision) syncs it along."""
        with self._connection() as conn:
            if not durable:
                conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def _session_reader(self) -> sqlite3.Connection:
        """This thread's long-lived read connection, for the session check the server makes on every request
        (opening a connection costs ~50x the query). Autocommit: each query sees the latest commit."""
        reader = getattr(self._readers, "connection", None)
        if reader is None or self._readers.pid != os.getpid():  # never reuse a connection across a fork
            reader = sqlite3.connect(self.path, timeout=60, isolation_level=None)
            self._readers.connection, self._readers.pid = reader, os.getpid()
        return reader

    def _read(self, sql: str, params: tuple = ()) -> list[tuple]:
        with self._connection() as conn:
            return conn.execute(sql, params).fetchall()

    def backup(self, out: str | Path) -> Path:
        """Copy the database to a new file ``out`` while servers may be writing it: SQLite's online backup (a
        consistent snapshot including what is still in the -wal file), written 0600 and renamed into place."""
        out = Path(out)
        if out.exists():
            raise FileExistsError(f"{out} exists; back up to a new file name")
        out.parent.mkdir(parents=True, exist_ok=True)
        with atomic_file(out) as partial:
            _owner_only(partial)
            with (
                closing(sqlite3.connect(self.path, timeout=60)) as source,
                closing(sqlite3.connect(partial)) as target,
            ):
                source.backup(target)
        return out
