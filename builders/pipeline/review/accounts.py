"""Reviewer accounts and how they log in: salted scrypt password hashes, the login throttle's counters and the
server-issued sessions, all in the review database.

Apart from the review's own rows (:mod:`~builders.pipeline.review.store`) because this is what the server's login
checks on every request, and what a security review reads alone. Failed logins are counted per key (an account name,
typed or not, a client address, and the pair of both) in the same file, so a lock holds across restarts and across
server processes: see :class:`LoginPolicy`. The server-issued login sessions live there too (only a SHA-256 of each
token, so a copy of the file cannot be replayed): a password reset or a removed account ends that reviewer's sessions
in every server process at once; see :class:`SessionPolicy`.
"""

import hashlib
import hmac
import json
import re
import secrets
import sqlite3
from dataclasses import dataclass

from builders.errors import InputError
from builders.pipeline.review.database import ReviewDatabase, utc_now


MIN_PASSWORD_LENGTH = 8
USERNAME = re.compile(r"^[A-Za-z0-9_.@-]{1,64}$")


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
    """What :meth:`ReviewAccounts.begin_login` decided: refused (``wait_s`` until the pair's lock runs out) or allowed
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


def _hash(password: str, salt: bytes) -> bytes:
    # surrogatepass: a lone surrogate (valid in JSON, not in UTF-8) is a wrong password, not a crash
    return hashlib.scrypt(password.encode("utf-8", "surrogatepass"), salt=salt, maxmem=64 * 1024 * 1024, **SCRYPT)


def token_digest(token: str) -> bytes:
    """What the database keeps of a session token: its SHA-256."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


def _kdf_label() -> str:
    return "scrypt:n={n}:r={r}:p={p}:dklen={dklen}".format(**SCRYPT)


class ReviewAccounts(ReviewDatabase):
    """The accounts, login throttle and sessions of one review database (see the module docstring)."""

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
                    (username, salt, _hash(password, salt), _kdf_label(), int(admin), utc_now()),
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
                "UPDATE users SET removed_at = ? WHERE username = ? AND removed_at IS NULL", (utc_now(), username)
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
