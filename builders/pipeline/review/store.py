"""The review database: reviewer accounts, assignments and the append-only decision log, in one SQLite file.

Safe under concurrent reviewers and restarts: the file is in WAL mode, every write is one ``BEGIN IMMEDIATE``
transaction on its own connection (threads and processes queue on SQLite's lock, ``busy_timeout`` long), and a
decision is never updated or deleted (triggers refuse it) — a reviewer changing their mind appends a new row and the
last one wins. Passwords are stored as salted scrypt hashes. Writes need an existing account and an assignment of
the sample to that account: there are no anonymous decisions.

Failed logins are counted per key (an account name, typed or not, a client address, and the pair of both) in the
same file, so a lock holds across restarts and across server processes: see :class:`LoginPolicy`. The server-issued
login sessions live there too (only a SHA-256 of each token, so a copy of the file cannot be replayed): a password
reset or a removed account ends that reviewer's sessions in every server process at once; see :class:`SessionPolicy`.

The file holds the password hashes and the reviewers' notes: it is created readable by its owner only (0600), and
SQLite gives its ``-wal`` and ``-shm`` files the database file's mode; an existing file readable by others is
tightened, with a warning.

The command line opens it with :func:`open_review_database`, which refuses what is not a review database (a text or
parquet file, a folder, another program's SQLite file, a damaged one) and a path that does not exist, naming the file
and the fix: only ``sureon review add-user`` creates a database, and never in a folder that does not exist (a typo in
``--db`` would otherwise start an empty review).
"""

import hashlib
import hmac
import json
import logging
import os
import re
import secrets
import sqlite3
import threading
from collections.abc import Iterable
from contextlib import closing, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from builders.errors import InputError
from builders.outputs import atomic_file


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
MAX_NOTE_CHARS = 5000  # a note is shown back with every action: a page, not a file
LONE_SURROGATE = re.compile("[\ud800-\udfff]")
SQLITE_HEADER = b"SQLite format 3\x00"
REVIEW_TABLES = ("users", "decisions")  # in every review database, of any version
logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LoginPolicy:
    """Login throttling that an attacker cannot turn into a lockout of someone else.

    - The pair (account name, client address) is *locked*: ``failures_before_lock`` failed logins lock it for
      ``first_lock_s``; each further failure (once the lock has run out) doubles the lock, up to ``max_lock_s``. A
      locked pair is refused without checking the password (so it also stops the scrypt work an attacker could make
      the server do), and refusals do not extend the lock.
    - The account as a whole, and the client address as a whole, are only *slowed down*: after
      ``failures_before_delay`` failures from anywhere (resp. for any account), every further check waits
      ``first_delay_s``, doubling per failure up to ``max_delay_s``, and then still checks the password. So guessing
      from many addresses gets slower, while the reviewer typing the right password from their own address gets in
      after at most ``max_delay_s``; and one attacker behind a hospital's NAT address does not lock out every
      reviewer behind it. The delay is per attempt, not a queue, so flooding cannot stretch it into a lockout.

    Every attempt is counted against its pair *before* its password is checked, in the transaction that checks the
    lock (so concurrent attempts cannot slip past the limit); the account's and the client's counts take only real
    failures (so reviewers logging in at the same moment behind one address do not slow each other down). A key's
    count is forgotten after ``forget_after_s`` without a failure; a successful login clears its pair's and its
    account's counts (a client's only by forgetting, so one valid account cannot reset a client that guesses
    others)."""

    failures_before_lock: int = 5
    first_lock_s: float = 30.0
    max_lock_s: float = 900.0
    failures_before_delay: int = 5
    first_delay_s: float = 1.0
    max_delay_s: float = 8.0
    forget_after_s: float = 3600.0

    def lock_seconds(self, failures: int) -> float:
        if failures < self.failures_before_lock:
            return 0.0
        return min(self.max_lock_s, self.first_lock_s * 2 ** min(failures - self.failures_before_lock, 40))

    def delay_seconds(self, earlier_failures: int) -> float:
        if earlier_failures < self.failures_before_delay:
            return 0.0
        return min(self.max_delay_s, self.first_delay_s * 2 ** min(earlier_failures - self.failures_before_delay, 40))


@dataclass(frozen=True)
class LoginAttempt:
    """What :meth:`ReviewStore.begin_login` decided: refused (``wait_s`` until the pair's lock runs out) or allowed
    after a slow-down of ``wait_s``; ``failures``: ``{"pair": count}`` including this attempt (when allowed)."""

    allowed: bool
    wait_s: float
    failures: dict[str, int]


@dataclass(frozen=True)
class SessionPolicy:
    """Server-issued login sessions end after ``idle_s`` without a request or ``max_age_s`` after the login, whichever
    comes first. A session's last use is written at most every ``touch_every_s`` (so polling does not write the
    database on every request); idle expiry is therefore exact to within that."""

    idle_s: float = 30 * 60.0
    max_age_s: float = 12 * 3600.0
    touch_every_s: float = 15.0


# scrypt cost: n=2**14, r=8 (~16 MiB, ~50 ms) is the interactive-login setting of the scrypt paper and OWASP.
SCRYPT = {"n": 2**14, "r": 8, "p": 1, "dklen": 32}

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
    # surrogatepass: a lone surrogate (valid in JSON, not in UTF-8) is a wrong password, not a crash
    return hashlib.scrypt(password.encode("utf-8", "surrogatepass"), salt=salt, maxmem=64 * 1024 * 1024, **SCRYPT)


def token_digest(token: str) -> bytes:
    """What the database keeps of a session token: its SHA-256."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


def _kdf_label() -> str:
    return "scrypt:n={n}:r={r}:p={p}:dklen={dklen}".format(**SCRYPT)


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


def check_decision(decision: str, tags: Iterable[str], note: str) -> tuple[str, ...]:
    """Validate one decision as the form must; returns the tags in a canonical order."""
    if decision not in DECISIONS:
        raise InputError(f"decision must be one of {DECISIONS}, got {decision!r}")
    tags = tuple(tags)
    unknown = sorted(set(tags) - set(REASON_TAGS))
    if unknown:
        raise InputError(f"unknown reason tag(s) {unknown}; choose from {list(REASON_TAGS)}")
    if len(note) > MAX_NOTE_CHARS:
        raise InputError(f"the note has {len(note)} characters; {MAX_NOTE_CHARS} at most")
    if LONE_SURROGATE.search(note):
        raise InputError("the note contains an invalid character (a lone UTF-16 surrogate); retype it")
    if decision == "reject" and not note.strip():
        raise InputError("a rejection needs a written note saying what is wrong")
    return tuple(tag for tag in REASON_TAGS if tag in tags)


class ReviewStore:
    """One review database file; cheap to construct, so every process (or request) may open its own."""

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

    # accounts --------------------------------------------------------------------------------------------------

    def add_user(self, username: str, password: str, admin: bool = False) -> None:
        if not USERNAME.match(username):
            raise InputError(f"username {username!r} must be 1-64 letters, digits or _.@-")
        if len(password) < MIN_PASSWORD_LENGTH:
            raise InputError(f"the password must have at least {MIN_PASSWORD_LENGTH} characters")
        salt = secrets.token_bytes(16)
        try:
            with self._write() as conn:
                conn.execute(
                    "INSERT INTO users (username, salt, password_hash, kdf, is_admin, created_at) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    (username, salt, _hash(password, salt), _kdf_label(), int(admin), _now()),
                )
        except sqlite3.IntegrityError as err:
            raise InputError(f"user {username!r} already exists in {self.path}") from err

    def set_password(self, username: str, password: str) -> None:
        """Set a new password; every open session of the account ends (in every server process)."""
        if len(password) < MIN_PASSWORD_LENGTH:
            raise InputError(f"the password must have at least {MIN_PASSWORD_LENGTH} characters")
        salt = secrets.token_bytes(16)
        with self._write() as conn:
            changed = conn.execute(
                "UPDATE users SET salt = ?, password_hash = ?, kdf = ? WHERE username = ? AND removed_at IS NULL",
                (salt, _hash(password, salt), _kdf_label(), username),
            ).rowcount
            conn.execute("DELETE FROM sessions WHERE username = ?", (username,))
        if not changed:
            raise InputError(f"no user {username!r} in {self.path}")

    def remove_user(self, username: str) -> None:
        """Remove an account: it can no longer log in, its open sessions end and it gets no new assignments; its
        decisions stay in the append-only log (and in exports), under its name."""
        with self._write() as conn:
            changed = conn.execute(
                "UPDATE users SET removed_at = ? WHERE username = ? AND removed_at IS NULL", (_now(), username)
            ).rowcount
            conn.execute("DELETE FROM sessions WHERE username = ?", (username,))
        if not changed:
            raise InputError(f"no user {username!r} in {self.path}")

    def users(self) -> list[str]:
        """The accounts that can log in (removed ones left out)."""
        return [row[0] for row in self._read("SELECT username FROM users WHERE removed_at IS NULL ORDER BY username")]

    def authenticate(self, username: str, password: str) -> bool:
        rows = self._read(
            "SELECT salt, password_hash FROM users WHERE username = ? AND removed_at IS NULL", (username,)
        )
        if not rows:
            _hash(password, b"\0" * 16)  # same work for unknown users: no timing oracle for account names
            return False
        salt, expected = rows[0]
        return hmac.compare_digest(_hash(password, salt), expected)

    # login throttling (see LoginPolicy) -------------------------------------------------------------------------

    @staticmethod
    def throttle_keys(account: str, client: str) -> dict[str, str]:
        """The counters one login attempt touches: ``{"pair": ..., "account": ..., "client": ...}``."""
        return {
            "pair": "pair:" + json.dumps([account, client]),
            "account": f"account:{account}",
            "client": f"client:{client}",
        }

    def begin_login(self, account: str, client: str, now: float, policy: LoginPolicy) -> LoginAttempt:
        """Decide, in one transaction, whether a login attempt may check its password: refused while its (account,
        client) pair is locked; otherwise counted as a failure of the pair up front (so concurrent attempts cannot
        slip past the lock; :meth:`login_succeeded` clears it), with the slow-down that the account's and the
        client's earlier failures call for. See :class:`LoginPolicy`."""
        keys = self.throttle_keys(account, client)
        with self._write(durable=False) as conn:
            conn.execute(
                "DELETE FROM login_failures WHERE last_failure < ? AND locked_until < ?",
                (now - policy.forget_after_s, now),
            )
            earlier = {}
            for kind, key in keys.items():
                row = conn.execute(
                    "SELECT failures, locked_until FROM login_failures WHERE key = ?", (key,)
                ).fetchone()
                earlier[kind] = row or (0, 0.0)
            if earlier["pair"][1] > now:
                return LoginAttempt(False, earlier["pair"][1] - now, {})
            pair = earlier["pair"][0] + 1
            conn.execute(
                "INSERT OR REPLACE INTO login_failures VALUES (?, ?, ?, ?)",
                (keys["pair"], pair, now, now + policy.lock_seconds(pair)),
            )
        delay = max(policy.delay_seconds(earlier[kind][0]) for kind in ("account", "client"))
        return LoginAttempt(True, delay, {"pair": pair})

    def login_failed(self, account: str, client: str, now: float) -> dict[str, int]:
        """Count a failed password check against the account and the client as wholes (their slow-down counts only
        real failures, so reviewers logging in at once behind one address do not slow each other down)."""
        keys = self.throttle_keys(account, client)
        counts = {}
        with self._write(durable=False) as conn:
            for kind in ("account", "client"):
                conn.execute(
                    "INSERT INTO login_failures VALUES (?, 1, ?, ?) ON CONFLICT(key) DO UPDATE SET "
                    "failures = failures + 1, last_failure = excluded.last_failure",
                    (keys[kind], now, now),
                )
                counts[kind] = conn.execute(
                    "SELECT failures FROM login_failures WHERE key = ?", (keys[kind],)
                ).fetchone()[0]
        return counts

    def login_failures(self, key: str) -> int:
        rows = self._read("SELECT failures FROM login_failures WHERE key = ?", (key,))
        return rows[0][0] if rows else 0

    # sessions (see SessionPolicy) --------------------------------------------------------------------------------

    def login_succeeded(
        self, account: str, client: str, username: str, now: float, policy: SessionPolicy, replaces: str | None = None
    ) -> str:
        """After a right password: clear the pair's and the account's failure counts (a client's only by forgetting,
        so one valid account cannot reset a client that guesses at others) and open a session, in one transaction.
        Returns the new random session token (only its hash is stored); the session the browser presented before
        logging in (``replaces``) ends, so a token is never carried across a login; expired sessions are swept."""
        keys = self.throttle_keys(account, client)
        token = secrets.token_urlsafe(32)
        with self._write(durable=False) as conn:
            conn.execute("DELETE FROM login_failures WHERE key IN (?, ?)", (keys["pair"], keys["account"]))
            if replaces:
                conn.execute("DELETE FROM sessions WHERE token_hash = ?", (token_digest(replaces),))
            conn.execute(
                "DELETE FROM sessions WHERE last_seen < ? OR created < ?",
                (now - policy.idle_s, now - policy.max_age_s),
            )
            conn.execute("INSERT INTO sessions VALUES (?, ?, ?, ?)", (token_digest(token), username, now, now))
        return token

    def session_user(self, token: str | None, now: float, policy: SessionPolicy) -> str | None:
        """The reviewer a session token belongs to, or None when it is unknown, expired, ended, or its account was
        removed; refreshes the session's last use."""
        if not token:
            return None
        digest = token_digest(token)
        rows = (
            self._session_reader()
            .execute(
                "SELECT s.username, s.created, s.last_seen FROM sessions s JOIN users u ON u.username = s.username "
                "WHERE s.token_hash = ? AND u.removed_at IS NULL",
                (digest,),
            )
            .fetchall()
        )
        if not rows:
            return None
        username, created, last_seen = rows[0]
        if now - last_seen > policy.idle_s or now - created > policy.max_age_s:
            self.end_session(token)
            return None
        if now - last_seen >= policy.touch_every_s:
            with self._write(durable=False) as conn:
                conn.execute("UPDATE sessions SET last_seen = ? WHERE token_hash = ?", (now, digest))
        return username

    def end_session(self, token: str) -> None:
        with self._write() as conn:
            conn.execute("DELETE FROM sessions WHERE token_hash = ?", (token_digest(token),))

    # assignments -----------------------------------------------------------------------------------------------

    def add_assignments(self, assignments: Iterable[Assignment]) -> int:
        """Insert all assignments in one transaction; an unknown reviewer or a repeated pair aborts them all."""
        rows = [(a.sample_id, a.reviewer, a.mode, _now()) for a in assignments]
        known = set(self.users())
        unknown = sorted({row[1] for row in rows} - known)
        if unknown:
            raise InputError(f"no account for reviewer(s) {unknown}; create them with `sureon review add-user`")
        try:
            with self._write() as conn:
                conn.executemany("INSERT INTO assignments VALUES (?, ?, ?, ?)", rows)
        except sqlite3.IntegrityError as err:
            raise InputError(f"an assignment repeats one already in {self.path}: {err}") from err
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


def open_review_database(path: str | Path, create: bool = False) -> ReviewStore:
    """The review database at ``path`` (``--db``) for a command: it must exist and be one, unless ``create``
    (``add-user`` of a new account), which makes a new one in an existing folder. Anything else is an
    :class:`InputError` naming the file and the fix; nothing is created or changed on the way."""
    path = Path(path)
    made_by = "give the file `sureon review add-user` created"
    if path.is_dir():
        raise InputError(
            f"--db {path} is a folder, not a review database: give the database file (e.g. {path / 'review.sqlite'})"
        )
    if not path.exists():
        if not path.parent.is_dir():
            raise InputError(
                f"--db {path}: the folder {path.parent} does not exist (a typo?); fix the path, or create the folder"
            )
        if not create:
            raise InputError(
                f"no review database {path} (a typo?): give an existing one, or create it with "
                f"`sureon review add-user NAME --db {path}`"
            )
        return _opened(path)
    try:
        with open(path, "rb") as file:
            head = file.read(len(SQLITE_HEADER))
    except OSError as err:
        raise InputError(f"cannot read --db {path}: {err.strerror or err}") from err
    if head and head != SQLITE_HEADER:
        raise InputError(f"--db {path} is not a review database (not an SQLite file): {made_by}")
    try:
        with closing(sqlite3.connect(path, timeout=60)) as conn:
            tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.DatabaseError as err:
        raise InputError(
            f"--db {path} is not a review database, or it is damaged ({err}): {made_by}, or restore a backup"
        ) from err
    if not set(REVIEW_TABLES) <= tables and (tables or not create):  # never add tables to another program's file
        what = f"its tables: {', '.join(sorted(tables)[:8])}" if tables else "it is empty"
        raise InputError(
            f"--db {path} is not a review database (an SQLite file without the review tables; {what}): {made_by}"
        )
    return _opened(path)


def _opened(path: Path) -> ReviewStore:
    try:
        return ReviewStore(path)
    except sqlite3.DatabaseError as err:  # read-only file or folder (SQLite writes -wal/-shm beside it), locked
        raise InputError(
            f"cannot open the review database {path} ({err}): check the permissions of the file and its folder"
        ) from err
