"""The review database: reviewer accounts, assignments and the append-only decision log, in one SQLite file.

Safe under concurrent reviewers and restarts: the file is in WAL mode, every write is one ``BEGIN IMMEDIATE``
transaction on its own connection (threads and processes queue on SQLite's lock, ``busy_timeout`` long), and a
decision is never updated or deleted (triggers refuse it) — a reviewer changing their mind appends a new row and the
last one wins. Passwords are stored as salted scrypt hashes. Writes need an existing account and an assignment of
the sample to that account: there are no anonymous decisions.

Failed logins are counted per key (an account name, typed or not, and a client address) in the same file, so a lock
holds across restarts and across server processes: see :class:`LoginPolicy`.
"""

import hashlib
import hmac
import json
import re
import secrets
import sqlite3
from collections.abc import Iterable
from contextlib import closing, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path


DECISIONS = ("approve", "reject", "flag")
# Quick reason tags of the review form (issue 10): slug -> label shown to reviewers.
REASON_TAGS = {
    "ambiguous": "Ambiguous / multiple correct",
    "inaccurate": "Inaccurate",
    "insufficient_context": "Too short / insufficient context",
    "not_visible": "Not visible in the video",
    "other": "Other",
}
MODES = ("single", "dual")
MIN_PASSWORD_LENGTH = 8
USERNAME = re.compile(r"^[A-Za-z0-9_.@-]{1,64}$")


@dataclass(frozen=True)
class LoginPolicy:
    """Login throttling: ``failures_before_lock`` failed logins of a key lock it for ``first_lock_s``; each further
    failure (once the lock has run out) doubles the lock, up to ``max_lock_s``. A locked key is refused without
    checking the password (so a lock also stops the scrypt work an attacker could make the server do) and refusals
    do not extend the lock. A key's count is forgotten after ``forget_after_s`` without a failure, and an account's
    on a successful login (a client's only by forgetting, so one valid account cannot reset a client that guesses
    others)."""

    failures_before_lock: int = 5
    first_lock_s: float = 30.0
    max_lock_s: float = 900.0
    forget_after_s: float = 3600.0

    def lock_seconds(self, failures: int) -> float:
        if failures < self.failures_before_lock:
            return 0.0
        return min(self.max_lock_s, self.first_lock_s * 2 ** min(failures - self.failures_before_lock, 40))


# scrypt cost: n=2**14, r=8 (~16 MiB, ~50 ms) is the interactive-login setting of the scrypt paper and OWASP.
SCRYPT = {"n": 2**14, "r": 8, "p": 1, "dklen": 32}

SCHEMA = """
CREATE TABLE IF NOT EXISTS users (
    username TEXT PRIMARY KEY,
    salt BLOB NOT NULL,
    password_hash BLOB NOT NULL,
    kdf TEXT NOT NULL,
    is_admin INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL
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
CREATE INDEX IF NOT EXISTS decisions_by_reviewer ON decisions(reviewer, sample_id);
CREATE TRIGGER IF NOT EXISTS decisions_append_only_update BEFORE UPDATE ON decisions
BEGIN SELECT RAISE(ABORT, 'the decision log is append-only'); END;
CREATE TRIGGER IF NOT EXISTS decisions_append_only_delete BEFORE DELETE ON decisions
BEGIN SELECT RAISE(ABORT, 'the decision log is append-only'); END;
"""


@dataclass(frozen=True)
class Decision:
    id: int
    reviewer: str
    sample_id: str
    decision: str
    tags: tuple[str, ...]
    note: str
    created_at: str


@dataclass(frozen=True)
class Assignment:
    sample_id: str
    reviewer: str
    mode: str


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _hash(password: str, salt: bytes) -> bytes:
    return hashlib.scrypt(password.encode(), salt=salt, maxmem=64 * 1024 * 1024, **SCRYPT)


def _kdf_label() -> str:
    return "scrypt:n={n}:r={r}:p={p}:dklen={dklen}".format(**SCRYPT)


def check_decision(decision: str, tags: Iterable[str], note: str) -> tuple[str, ...]:
    """Validate one decision as the form must; returns the tags in a canonical order."""
    if decision not in DECISIONS:
        raise ValueError(f"decision must be one of {DECISIONS}, got {decision!r}")
    tags = tuple(tags)
    unknown = sorted(set(tags) - set(REASON_TAGS))
    if unknown:
        raise ValueError(f"unknown reason tag(s) {unknown}; choose from {list(REASON_TAGS)}")
    if decision == "reject" and not note.strip():
        raise ValueError("a rejection needs a written note saying what is wrong")
    return tuple(tag for tag in REASON_TAGS if tag in tags)


class ReviewStore:
    """One review database file; cheap to construct, so every process (or request) may open its own."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connection() as conn:
            conn.executescript(SCHEMA)

    @contextmanager
    def _connection(self):
        conn = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        with closing(conn):
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")  # a decision acknowledged to a reviewer survives a power cut
            conn.execute("PRAGMA foreign_keys=ON")
            yield conn

    @contextmanager
    def _write(self):
        with self._connection() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def _read(self, sql: str, params: tuple = ()) -> list[tuple]:
        with self._connection() as conn:
            return conn.execute(sql, params).fetchall()

    # accounts --------------------------------------------------------------------------------------------------

    def add_user(self, username: str, password: str, admin: bool = False) -> None:
        if not USERNAME.match(username):
            raise ValueError(f"username {username!r} must be 1-64 letters, digits or _.@-")
        if len(password) < MIN_PASSWORD_LENGTH:
            raise ValueError(f"the password must have at least {MIN_PASSWORD_LENGTH} characters")
        salt = secrets.token_bytes(16)
        try:
            with self._write() as conn:
                conn.execute(
                    "INSERT INTO users VALUES (?, ?, ?, ?, ?, ?)",
                    (username, salt, _hash(password, salt), _kdf_label(), int(admin), _now()),
                )
        except sqlite3.IntegrityError as err:
            raise ValueError(f"user {username!r} already exists in {self.path}") from err

    def set_password(self, username: str, password: str) -> None:
        if len(password) < MIN_PASSWORD_LENGTH:
            raise ValueError(f"the password must have at least {MIN_PASSWORD_LENGTH} characters")
        salt = secrets.token_bytes(16)
        with self._write() as conn:
            changed = conn.execute(
                "UPDATE users SET salt = ?, password_hash = ?, kdf = ? WHERE username = ?",
                (salt, _hash(password, salt), _kdf_label(), username),
            ).rowcount
        if not changed:
            raise ValueError(f"no user {username!r} in {self.path}")

    def users(self) -> list[str]:
        return [row[0] for row in self._read("SELECT username FROM users ORDER BY username")]

    def authenticate(self, username: str, password: str) -> bool:
        rows = self._read("SELECT salt, password_hash FROM users WHERE username = ?", (username,))
        if not rows:
            _hash(password, b"\0" * 16)  # same work for unknown users: no timing oracle for account names
            return False
        salt, expected = rows[0]
        return hmac.compare_digest(_hash(password, salt), expected)

    # login throttling (see LoginPolicy) -------------------------------------------------------------------------

    def login_locked_until(self, keys: Iterable[str], now: float, policy: LoginPolicy) -> float:
        """The latest time (epoch seconds) until which any of ``keys`` is locked; ``now`` or earlier when none is."""
        keys = list(keys)
        marks = ",".join("?" * len(keys))
        rows = self._read(
            f"SELECT locked_until FROM login_failures WHERE key IN ({marks}) AND last_failure >= ?",
            (*keys, now - policy.forget_after_s),
        )
        return max([now, *(row[0] for row in rows)])

    def login_failed(self, keys: Iterable[str], now: float, policy: LoginPolicy) -> dict[str, int]:
        """Count one failed login against each key (forgetting stale counts first); returns ``key -> failures``."""
        counts = {}
        with self._write() as conn:
            conn.execute(
                "DELETE FROM login_failures WHERE last_failure < ? AND locked_until < ?",
                (now - policy.forget_after_s, now),
            )
            for key in keys:
                row = conn.execute("SELECT failures FROM login_failures WHERE key = ?", (key,)).fetchone()
                counts[key] = (row[0] if row else 0) + 1
                conn.execute(
                    "INSERT OR REPLACE INTO login_failures VALUES (?, ?, ?, ?)",
                    (key, counts[key], now, now + policy.lock_seconds(counts[key])),
                )
        return counts

    def login_succeeded(self, key: str) -> None:
        with self._write() as conn:
            conn.execute("DELETE FROM login_failures WHERE key = ?", (key,))

    # assignments -----------------------------------------------------------------------------------------------

    def add_assignments(self, assignments: Iterable[Assignment]) -> int:
        """Insert all assignments in one transaction; an unknown reviewer or a repeated pair aborts them all."""
        rows = [(a.sample_id, a.reviewer, a.mode, _now()) for a in assignments]
        known = set(self.users())
        unknown = sorted({row[1] for row in rows} - known)
        if unknown:
            raise ValueError(f"no account for reviewer(s) {unknown}; create them with `sureon review add-user`")
        try:
            with self._write() as conn:
                conn.executemany("INSERT INTO assignments VALUES (?, ?, ?, ?)", rows)
        except sqlite3.IntegrityError as err:
            raise ValueError(f"an assignment repeats one already in {self.path}: {err}") from err
        return len(rows)

    def assignments(self, reviewer: str | None = None) -> list[Assignment]:
        sql = "SELECT sample_id, reviewer, mode FROM assignments"
        if reviewer is None:
            return [Assignment(*row) for row in self._read(sql + " ORDER BY rowid")]
        return [Assignment(*row) for row in self._read(sql + " WHERE reviewer = ? ORDER BY rowid", (reviewer,))]

    # decisions -------------------------------------------------------------------------------------------------

    def record(
        self, reviewer: str, sample_id: str, decision: str, tags: Iterable[str] = (), note: str = ""
    ) -> Decision:
        """Append one decision of ``reviewer`` on a sample assigned to them; the note is stored verbatim."""
        tags = check_decision(decision, tags, note)
        with self._write() as conn:
            if not conn.execute("SELECT 1 FROM users WHERE username = ?", (reviewer,)).fetchone():
                raise PermissionError(f"no account {reviewer!r}: decisions need a logged-in reviewer")
            assigned = conn.execute(
                "SELECT 1 FROM assignments WHERE sample_id = ? AND reviewer = ?", (sample_id, reviewer)
            ).fetchone()
            if not assigned:
                raise PermissionError(f"sample {sample_id!r} is not assigned to {reviewer!r}")
            created = _now()
            cursor = conn.execute(
                "INSERT INTO decisions (reviewer, sample_id, decision, tags, note, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (reviewer, sample_id, decision, json.dumps(tags), note, created),
            )
            return Decision(cursor.lastrowid, reviewer, sample_id, decision, tags, note, created)

    def log(self, reviewer: str | None = None) -> list[Decision]:
        """Every decision in order of recording (one reviewer's only, when given)."""
        sql = "SELECT id, reviewer, sample_id, decision, tags, note, created_at FROM decisions"
        rows = self._read(sql + " WHERE reviewer = ? ORDER BY id", (reviewer,)) if reviewer else self._read(sql)
        return [Decision(i, r, s, d, tuple(json.loads(t)), n, c) for i, r, s, d, t, n, c in sorted(rows)]

    def latest(self, reviewer: str | None = None) -> dict[tuple[str, str], Decision]:
        """``(reviewer, sample_id) -> decision`` in force: each reviewer's last decision on each sample."""
        return {(d.reviewer, d.sample_id): d for d in self.log(reviewer)}
