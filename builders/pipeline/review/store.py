"""The review database: reviewer accounts, assignments and the append-only decision log, in one SQLite file.

Writes need an existing account and an assignment of the sample to that account: there are no anonymous decisions.
A decision is never updated or deleted — a reviewer changing their mind appends a new row and the last one wins.
:class:`ReviewStore` is the whole database: the file and its connections (:mod:`~builders.pipeline.review.database`)
and the accounts, login throttle and sessions (:mod:`~builders.pipeline.review.accounts`) are its base classes, in
modules of their own; this one holds what is reviewed.

The command line opens it with :func:`open_review_database`, which refuses what is not a review database (a text or
parquet file, a folder, another program's SQLite file, a damaged one) and a path that does not exist, naming the file
and the fix: only ``sureon review add-user`` creates a database, and never in a folder that does not exist (a typo in
``--db`` would otherwise start an empty review).
"""

import json
import re
import sqlite3
from collections.abc import Iterable
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from builders.errors import InputError
from builders.pipeline.review.accounts import ReviewAccounts
from builders.pipeline.review.database import utc_now


DECISIONS = ("approve", "reject", "flag")
# Quick reason tags of the review form (issue 10): slug -> label shown to reviewers.
REASON_TAGS = {
    "ambiguous": "Ambiguous / multiple correct",
    "inaccurate": "Inaccurate",
    "insufficient_context": "Too short / insufficient context",
    "not_visible": "Not visible in the video",
    "other": "Other",
}
MAX_NOTE_CHARS = 5000  # a note is shown back with every action: a page, not a file
LONE_SURROGATE = re.compile("[\ud800-\udfff]")
SQLITE_HEADER = b"SQLite format 3\x00"
REVIEW_TABLES = ("users", "decisions")  # in every review database, of any version


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


class ReviewStore(ReviewAccounts):
    """One review database file; cheap to construct, so every process (or request) may open its own."""

    # assignments -----------------------------------------------------------------------------------------------

    def add_assignments(self, assignments: Iterable[Assignment]) -> int:
        """Insert all assignments in one transaction; an unknown reviewer or a repeated pair aborts them all."""
        rows = [(a.sample_id, a.reviewer, a.mode, utc_now()) for a in assignments]
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
            created = utc_now()
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
