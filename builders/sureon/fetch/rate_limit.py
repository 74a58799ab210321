"""How fast downloads start, and what a session block (a rate limit, a bot check) does to those not started yet.

``--on-rate-limit`` defaults to ``stop`` because the fetch is resumable (stopping loses no verified file, and the
next run picks up the deferred sources) and a command that sits idle for an hour unasked is worse, in a terminal, than
one that says "rerun in an hour"; an unattended run passes ``wait``. A wait is never cut short, and the run stops when
it is rate-limited again before any download succeeded after the wait (YouTube's hour was not enough: rerun later).

Apart from the fetcher because it is shared state across its download threads, with its own clock: tests inject one
that waits an hour at once.
"""

import sys
import threading
import time

from tqdm.auto import tqdm

from builders.sureon.fetch.error_classes import ErrorClass


RATE_LIMIT_WAIT = 3600.0  # yt-dlp: the session "has been rate-limited by YouTube for up to an hour"
ON_RATE_LIMIT = ("stop", "wait")


class StartGate:
    """At least ``interval`` seconds between the starts of two downloads, whatever the concurrency."""

    def __init__(self, interval: float):
        self.interval = interval
        self.next_start = 0.0
        self.lock = threading.Lock()

    def wait(self) -> None:
        with self.lock:
            now = time.monotonic()
            if now < self.next_start:
                time.sleep(self.next_start - now)
            self.next_start = max(now, self.next_start) + self.interval


class SessionStopped(Exception):
    """No new download starts: the session was blocked (``kind``: that of the error which blocked it)."""

    def __init__(self, kind: str, reason: str):
        super().__init__(reason)
        self.kind = kind


class SessionGuard:
    """What a session block (a rate limit, a bot check) does to the downloads that have not started yet.

    ``stop``: none starts (they are deferred). ``wait``, for a rate limit only (a bot check needs cookies, not time):
    none starts for ``wait_s`` seconds, then they go on, the blocked one first; a rate limit again before any download
    succeeded since the last wait stops the run. ``clock`` and ``sleep`` are injectable (a test waits an hour at once);
    the default sleep ends early on :meth:`cancel`, so that Ctrl+C does not wait out the hour.
    """

    def __init__(self, policy: str, wait_s: float, clock=time.monotonic, sleep=None, say=None):
        self.cancelled = threading.Event()
        self.policy, self.wait_s, self.clock = policy, wait_s, clock
        self.sleep = sleep or self.cancelled.wait
        self.say = say or (lambda line: tqdm.write(line, file=sys.stderr))
        self.lock = threading.Lock()
        self.resume_at: float | None = None
        self.pauses = 0
        self.progress = True  # a download succeeded since the last pause
        self.stopped: SessionStopped | None = None

    def admit(self) -> None:
        """Right before a download's first request: wait out a pause; raise :class:`SessionStopped` once stopped."""
        while True:
            with self.lock:
                if self.stopped is not None:
                    raise self.stopped
                remaining = (self.resume_at or 0.0) - self.clock()
            if remaining <= 0:
                return
            self.sleep(remaining)

    def blocked(self, error: ErrorClass, source_id: str) -> str | None:
        """A download hit a session block: None to try it again after the pause, else why it stopped."""
        with self.lock:
            if self.stopped is not None:
                return str(self.stopped)
            now = self.clock()
            if error.kind == "rate-limited" and self.policy == "wait":
                if self.resume_at is not None and now < self.resume_at:
                    return None  # started before the pause began: it waits with the others
                if self.pauses == 0 or self.progress:
                    self.resume_at, self.progress = now + self.wait_s, False
                    self.pauses += 1
                    until = time.strftime("%H:%M", time.localtime(time.time() + self.wait_s))
                    self.say(
                        f"YouTube rate-limited this session (at {source_id}): no new download for "
                        f"{self.wait_s / 60:.0f} min, until {until} (--on-rate-limit stop stops instead)"
                    )
                    return None
                reason = f"{error.reason}, again after waiting {self.wait_s / 60:.0f} min"
            else:
                reason = error.reason
            self.stopped = SessionStopped(error.kind, reason)
            return reason

    def succeeded(self) -> None:
        with self.lock:
            self.progress = True

    def cancel(self) -> None:
        """The run is interrupted: no download starts any more, and a sleeping one wakes up."""
        with self.lock:
            self.stopped = SessionStopped("interrupted", "the run was interrupted")
        self.cancelled.set()
