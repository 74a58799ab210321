"""Fetch the source videos a Sureon release needs into the folder ``sureon build sureon --videos`` reads.

    sureon videos fetch --release DIR --out VIDEOS_DIR [--configs bench ...] [--max-height 720]
        [--cookies FILE | --cookies-from-browser NAME] [--sleep-interval S] [--concurrency N] [--sections [--pad S]]
        [--on-rate-limit stop|wait] [--rate-limit-wait 3600]

The release is annotation-only: its ``clip_id`` s name the source (an 11-character YouTube id, or a 32-hex id for
sources with no public URL, which the user supplies). Only the sources of the chosen configs are fetched, with yt-dlp
through its Python API (the ``videos`` extra), as ``<source_id>.<ext>``:

- **format**: the best video-only stream up to ``--max-height`` (no audio: transcripts ship with the release),
  H.264 preferred; LEMON's and SurgLaVi's downloaders ask for progressive formats, which YouTube now serves at 360p
  only [yt-dlp issues #11681, #11807];
- **resumable**: a file enters ``.fetch_archive.jsonl`` only once verified, and is never fetched again; a killed
  download resumes from its ``.part`` file (HTTP range requests);
- **errors** fall in four kinds (:func:`classify_error`, on yt-dlp's own wording, see ``SESSION_ERRORS``):
  *transient* ones (network, HTTP 5xx, 429) are retried with exponential backoff; *permanent* ones (removed,
  private, copyright, terminated account, age gate, members-only, region-blocked, HTTP 404 / 410) are recorded
  ``unavailable`` with their reason and not retried; a video *not yet* available (an upcoming premiere or live
  event) is recorded ``deferred``; a *session* block (YouTube rate-limited the session, or asks for a bot check or
  captcha) says nothing about the video: it is ``deferred`` too, and no new download starts (``--on-rate-limit
  stop``, the default) or, for a rate limit, none starts until the advised hour has passed (``--on-rate-limit
  wait``). A deferred source is retried by the next run; the build reports it as not fetched yet, never as removed;
- **integrity**: each file is opened with torchcodec and must cover every clip window the release asks of it
  (``VIDEO_END_TOLERANCE`` past the end is accepted, as the frame sampler clamps there); a file that fails is
  reported and set aside as ``<name>.rejected``;
- ``availability.json`` (:mod:`builders.sureon.availability`) records every source's outcome, read by the build;
- ``--sections``: one span per source, from its first clip's start to its last clip's end, padded by ``--pad``;
  its sidecar (:mod:`builders.sureon.sections`) tells the frame sampler where the span sits in the source.
  Downloading a section needs the ``ffmpeg`` program and cannot resume mid-file (FFmpeg restarts it).

``--on-rate-limit`` defaults to ``stop`` because the fetch is resumable (stopping loses no verified file, and the
next run picks up the deferred sources) and a command that sits idle for an hour unasked is worse, in a terminal, than
one that says "rerun in an hour"; an unattended run passes ``wait``. A wait is never cut short, and the run stops when
it is rate-limited again before any download succeeded after the wait (YouTube's hour was not enough: rerun later).

Exit status: 0 when every source has a good file; 1 when some have none (the summary says which, why, and what to do);
2 when none has (one line naming the cause and the fix). Cookies and tokens are never printed: messages name the
source id, never the URL or the options.
"""

import itertools
import json
import math
import re
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.parquet as pq
from tqdm.auto import tqdm

from builders.arguments import non_negative_float, positive_int
from builders.errors import InputError
from builders.jsonl_log import AppendOnlyJsonl
from builders.sureon.availability import GOOD, read_availability, write_availability
from builders.sureon.build import CONFIGS, passes_curation, select_configs
from builders.sureon.clips import _HASH_ID
from builders.sureon.frames import index_videos
from builders.sureon.release import read_release
from builders.sureon.sections import Section, read_section, sidecar_path, write_section
from builders.video import open_decoder


YOUTUBE_URL = "https://www.youtube.com/watch?v={id}"
ARCHIVE = ".fetch_archive.jsonl"
VIDEO_END_TOLERANCE = 1.0  # seconds a clip window may run past the end of its video
RATE_LIMIT_WAIT = 3600.0  # yt-dlp: the session "has been rate-limited by YouTube for up to an hour"
ON_RATE_LIMIT = ("stop", "wait")
SPLIT_KEYS = ("test", "train", "validation")

# (pattern in yt-dlp's error message, reason). yt-dlp's YouTube extractor builds its messages from YouTube's
# playability reason (yt_dlp/extractor/youtube/_video.py, where it raises "no formats"): it appends "The current
# session (or: Your account) has been rate-limited by YouTube for up to an hour" to "This content isn't available,
# try again later", "YouTube is requiring a captcha challenge before playback" to a captcha screen, and its cookies
# hint to any reason saying "sign in". A session error says nothing about the video (the rate-limit message starts
# with "Video unavailable"): matched before everything else.
SESSION_ERRORS = (
    (
        r"rate-limited by youtube|isn['’]t available, try again later",
        "rate-limited",
        "YouTube rate-limited this session (for up to an hour)",
    ),
    (
        r"not a bot|captcha|ip is likely being blocked",
        "bot-check",
        "bot check: YouTube asks this session to prove it is not a bot",
    ),
)
PERMANENT_ERRORS = (
    (r"confirm your age|age[- ]restricted|inappropriate for some users", "age-restricted: sign-in (cookies) needed"),
    (r"private video|video is private", "private video"),
    (r"members[- ]only|join this channel", "members-only video"),
    (
        r"not (?:made this video )?available in your country|geo[- ]?restrict|blocked it in your country",
        "region-blocked",
    ),
    (r"copyright", "removed (copyright claim)"),
    (r"account associated with this video has been terminated", "removed (account terminated)"),
    (
        r"video has been removed|video unavailable|no longer available|does not exist|"
        + r"(?:video|recording) is not available|drm protected",
        "removed or unavailable",
    ),
    (
        r"sign in|login required|log in|registered users|login details",
        "sign-in required: pass --cookies FILE or --cookies-from-browser NAME",
    ),
    (r"http error 404|404: not found", "not found (HTTP 404)"),
    (r"http error 410", "gone (HTTP 410)"),
    (r"requested format is not available", "no video format within --max-height"),
    (r"unsupported url", "unsupported URL (check --url-template)"),
)
LATER_ERRORS = (
    (r"live event will begin|premieres in|premiere will begin", "not yet available (upcoming premiere or live event)"),
)
TRANSIENT_ERRORS = (
    (r"http error 429|too many requests", "throttled (HTTP 429)"),
    (r"http error 5\d\d", "server error (HTTP 5xx)"),
    (r"http error 403", "forbidden (HTTP 403)"),
    (r"timed? ?out", "timed out"),
    (r"incomplete|connection|reset by peer|temporar|unreachable|refused", "network error"),
)
_SECRET = re.compile(r"(?i)((?:token|key|sig|signature|auth|cookie|session)[^=&\s]*=)[^&\s]+")


class IntegrityError(RuntimeError):
    """A file that cannot serve the clips the release asks of it."""


@dataclass
class SourceNeed:
    """One source video: the clip windows asked of it and the questions it feeds, per split."""

    source_id: str
    windows: set[tuple[float, float]] = field(default_factory=set)
    questions: dict[str, set[str]] = field(default_factory=dict)

    @property
    def fetchable(self) -> bool:
        return not _HASH_ID.match(self.source_id)

    def span(self, pad: float) -> tuple[float, float]:
        return max(0.0, min(s for s, _ in self.windows) - pad), max(e for _, e in self.windows) + pad

    def counts(self) -> dict[str, int]:
        return {split: len(self.questions.get(split, ())) for split in SPLIT_KEYS}


def _add(needs: dict[str, SourceNeed], split: str, question_id: str, source_id: str, start: float, end: float):
    need = needs.setdefault(source_id, SourceNeed(source_id))
    need.windows.add((float(start), float(end)))
    need.questions.setdefault(split, set()).add(question_id)


def needed_sources(release: Path, configs: list[str] | None = None) -> dict[str, SourceNeed]:
    """The sources of ``configs`` (default: all) of a release folder, or of a folder built by ``sureon build``."""
    needs: dict[str, SourceNeed] = {}
    manifest = release / "build_manifest.json"
    if manifest.is_file():
        built = json.loads(manifest.read_text())["configs"]
        unknown = sorted(set(configs or ()) - set(built))
        if unknown:
            raise InputError(f"{release} was built without config(s) {unknown} (it has {sorted(built)})")
        for name in configs or sorted(built):
            for path in sorted((release / name).glob("*.parquet")):
                table = pq.read_table(path, columns=["question_id", "source_id", "start", "end"])
                for row in table.to_pylist():
                    _add(needs, built[name]["split"], row["question_id"], row["source_id"], row["start"], row["end"])
        return needs
    parsed = read_release(release)
    for spec in select_configs(parsed, configs):
        for record in parsed.splits[spec.split].records:
            if not spec.curated_only or passes_curation(record):
                _add(needs, spec.split, record["question_id"], record["source_id"], record["start"], record["end"])
    return needs


def format_selector(max_height: int) -> str:
    """Best video-only stream up to ``max_height``, H.264 first; a muxed one only where no video-only exists."""
    h = f"[height<=?{max_height}]"
    return f"bv{h}[vcodec^=avc1]/bv{h}/bv*{h}[vcodec^=avc1]/bv*{h}/b{h}"


@dataclass(frozen=True)
class ErrorClass:
    """``kind``: ``rate-limited`` or ``bot-check`` (the session, not the video), ``permanent``, ``later`` (this video,
    not yet) or ``transient`` (retried in this run)."""

    kind: str
    reason: str

    @property
    def session(self) -> bool:
        return self.kind in ("rate-limited", "bot-check")


def classify_error(message: str) -> ErrorClass:
    """What a yt-dlp error message says of the video, or of the session; an unknown one is transient."""
    text = message.lower()
    for pattern, kind, reason in SESSION_ERRORS:
        if re.search(pattern, text):
            return ErrorClass(kind, reason)
    for kind, table in (("permanent", PERMANENT_ERRORS), ("later", LATER_ERRORS), ("transient", TRANSIENT_ERRORS)):
        for pattern, reason in table:
            if re.search(pattern, text):
                return ErrorClass(kind, reason)
    return ErrorClass("transient", "download error")


def redact(text: str, url: str, source_id: str) -> str:
    """A message safe to print, on one line: the URL becomes the source id, query secrets are masked."""
    return " ".join(_SECRET.sub(r"\1***", text.replace(url, f"<url of {source_id}>")).split())


def _frame_times(video: Path) -> list[float]:
    """Presentation times of every video frame, from the packets alone (no decoding)."""
    import av

    with av.open(str(video)) as container:
        stream = container.streams.video[0]
        times = [float(p.pts * p.time_base) for p in container.demux(stream) if p.pts is not None and p.size]
    return sorted(times)


def measure_section(video: Path, source_id: str, requested: tuple[float, float], windows) -> Section:
    """Where a section downloaded with ``-copyts`` sits in its source; raise :class:`IntegrityError` if unusable."""
    times = _frame_times(video)
    if len(times) < 2:
        raise IntegrityError(f"{video.name}: the section holds {len(times)} frame(s)")
    steps = sorted(b - a for a, b in itertools.pairwise(times))
    fps = 1.0 / steps[len(steps) // 2]
    first_index = round(times[0] * fps)
    if abs(times[0] * fps - first_index) > 0.01:
        raise IntegrityError(
            f"{video.name}: the section's first frame ({times[0]:.4f}s) is off the {fps:.3f} fps grid (a source "
            "with a variable rate or a non-zero start): fetch it without --sections"
        )
    last_needed = max(e for _, e in windows)
    for k, t in enumerate(times):  # every frame up to the last window is present, so file index = source index
        if t > last_needed + 1.0 / fps:
            break
        if abs(t - (first_index + k) / fps) > 0.5 / fps:
            raise IntegrityError(f"{video.name}: frames missing or out of order near {t:.2f}s of the source")
    return Section(source_id, first_index, round(fps, 9), times[0], times[-1], requested)


def verify_video(video: Path, windows, section: Section | None = None) -> dict:
    """Open ``video`` with torchcodec and check it covers every window; return its duration and resolution."""
    try:
        decoder = open_decoder(video)
        metadata = decoder.metadata
        begin, end = metadata.begin_stream_seconds or 0.0, metadata.end_stream_seconds
        if not metadata.num_frames or end is None:
            raise IntegrityError(f"{video.name}: no video frames")
        first_needed = min(s for s, _ in windows)
        last_needed = max(e for _, e in windows)
        if section is not None and first_needed < section.start - 1e-6:
            raise IntegrityError(
                f"{video.name}: the section starts at {section.start:.2f}s, after the first clip ({first_needed:.2f}s)"
            )
        covered_until = end if section is not None else end - begin
        if last_needed > covered_until + (0.0 if section is not None else VIDEO_END_TOLERANCE):
            raise IntegrityError(
                f"{video.name}: {'section ends' if section else 'duration is'} {covered_until:.2f}s but a clip "
                f"ends at {last_needed:.2f}s (truncated, or not the video the release used)"
            )
        decoder.get_frame_played_at(min(last_needed, end - 1e-3))  # the last frame needed decodes
    except IntegrityError:
        raise
    except (RuntimeError, ValueError, IndexError, OSError) as err:
        raise IntegrityError(f"{video.name}: unreadable ({str(err).splitlines()[0] if str(err) else err!r})") from err
    return {
        "duration": round(end - begin, 3),
        "width": metadata.width,
        "height": metadata.height,
        "fps": round(metadata.average_fps, 6),
    }


def covers(entry: dict, windows) -> bool:
    """Whether a verified file's span (section, or duration) holds every window."""
    start, end = entry["section"] if "section" in entry else (0.0, entry["duration"] + VIDEO_END_TOLERANCE)
    return start - 1e-6 <= min(s for s, _ in windows) and max(e for _, e in windows) <= end


def reject(video: Path) -> None:
    """Set a failed file aside as ``<name>.rejected`` (the build never reads it; the user may inspect it)."""
    video.replace(video.with_name(video.name + ".rejected"))
    sidecar_path(video).unlink(missing_ok=True)


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


class _Logger:
    """yt-dlp's logger: nothing printed (messages come back in the errors, redacted)."""

    def debug(self, msg):
        pass

    info = warning = error = debug


@dataclass
class FetchOptions:
    release: Path
    out: Path
    configs: list[str] | None = None
    url_template: str = YOUTUBE_URL
    max_height: int = 720
    cookies: Path | None = None
    cookies_from_browser: str | None = None
    sleep_interval: float = 0.0
    concurrency: int = 2
    sections: bool = False
    pad: float = 5.0
    retries: int = 5
    retry_backoff: float = 2.0
    on_rate_limit: str = "stop"
    rate_limit_wait: float = RATE_LIMIT_WAIT


# what to do about a deferred source, by the kind of error that deferred it
NEXT_STEP = {
    "rate-limited": "YouTube rate-limited this session: rerun the same command in an hour (verified files are kept), "
    "with --sleep-interval 10 to space the downloads out, or pass --on-rate-limit wait to pause instead of stopping",
    "bot-check": "YouTube asks for a bot check: pass --cookies FILE or --cookies-from-browser NAME (a signed-in "
    "browser's cookies), then rerun",
    "later": "not yet available (an upcoming premiere or live event): rerun once it has aired",
    "transient": "network or server errors on every attempt: check the connection (and --url-template), then rerun",
}
UNAVAILABLE_STEP = "build with --on-missing-video skip to leave their questions out (each one's reason is listed)"
SIGN_IN_STEP = "pass --cookies FILE or --cookies-from-browser NAME (a signed-in account's), then rerun"
SIGN_IN_REASONS = ("age-restricted", "sign-in required")  # PERMANENT_ERRORS that cookies fix


@dataclass
class FetchReport:
    sources: dict[str, dict]
    downloaded_bytes: int
    seconds: float
    availability: Path
    paused_s: float = 0.0

    def ready(self) -> list[str]:
        return [s for s, e in self.sources.items() if e["status"] in GOOD]

    def headline(self) -> str:
        """One line: how many sources have a file, are deferred (missing for now) or unavailable (removed, ...)."""
        statuses = Counter(entry["status"] for entry in self.sources.values())
        parts = [
            f"{len(self.ready())} fetched ({statuses['downloaded']} downloaded, {statuses['supplied']} supplied)",
            *(
                f"{statuses[status]} {label}"
                for status, label in (
                    ("deferred", "deferred (missing for now, not removed)"),
                    ("unavailable", "unavailable (removed, private, blocked, ...)"),
                    ("invalid", "invalid (failed the integrity check)"),
                    ("not_fetchable", "not fetchable (supply them)"),
                )
                if statuses[status]
            ),
        ]
        return f"{len(self.sources)} source video(s): " + ", ".join(parts)

    def next_steps(self) -> list[str]:
        missing = Counter(
            e.get("cause", "transient") if e["status"] == "deferred" else e["status"] for e in self.missing().values()
        )
        steps = [f"{missing[kind]} deferred: {step}" for kind, step in NEXT_STEP.items() if missing[kind]]
        sign_in = sum(
            1
            for e in self.missing().values()
            if e["status"] == "unavailable" and e["reason"].startswith(SIGN_IN_REASONS)
        )
        if sign_in:
            steps.append(f"{sign_in} need sign-in (age-restricted or sign-in only): {SIGN_IN_STEP}")
        if missing["unavailable"] + missing["invalid"] > sign_in:
            steps.append(
                f"{missing['unavailable'] + missing['invalid'] - sign_in} unavailable or invalid: {UNAVAILABLE_STEP}"
            )
        if missing["not_fetchable"]:
            steps.append(
                f"{missing['not_fetchable']} not fetchable: put <source_id>.<ext> in {self.availability.parent} "
                "yourself"
            )
        return steps

    def missing(self) -> dict[str, dict]:
        return {s: e for s, e in self.sources.items() if e["status"] not in GOOD}

    def summary(self) -> str:
        lines = [
            self.headline(),
            f"downloaded {self.downloaded_bytes / 1e6:.1f} MB in {self.seconds:.1f} s"
            + (f" (paused {self.paused_s / 60:.0f} min for YouTube's rate limit)" if self.paused_s else "")
            + f"; see {self.availability}",
        ]
        missing = self.missing()
        if missing:
            lines.append(f"{'source_id':<34} {'status':<14} {'test':>5} {'train':>6} {'val':>5}  reason")
            for source, entry in missing.items():
                q = entry["questions"]
                lines.append(
                    f"{source:<34} {entry['status']:<14} {q['test']:>5} {q['train']:>6} {q['validation']:>5}  "
                    f"{entry['reason']}"
                )
            lost = {k: sum(e["questions"][k] for e in missing.values()) for k in SPLIT_KEYS}
            lines.append(
                f"questions without a video: {lost['test']} benchmark, {lost['train']} train, "
                f"{lost['validation']} validation"
            )
            lines += self.next_steps()
        return "\n".join(lines)

    def exit_status(self) -> int:
        """0: every source has a file; 1: some have none; 2: none has (:meth:`nothing_fetched` says why)."""
        if self.sources and not self.ready():
            return 2
        return 1 if self.missing() else 0

    def nothing_fetched(self) -> str:
        """The one line of an exit status 2: no source has a file, why, and what to do."""
        return (
            f"none of the {len(self.sources)} source video(s) was fetched into {self.availability.parent}; "
            + "; ".join(self.next_steps())
        )


class Fetcher:
    """``clock`` and ``sleep`` (backoff, rate-limit waits) are injectable, so that tests wait in no time."""

    def __init__(self, opts: FetchOptions, clock=time.monotonic, sleep=None):
        if "{id}" not in opts.url_template:
            raise InputError(f"--url-template {opts.url_template!r} has no {{id}}")
        if opts.cookies and opts.cookies_from_browser:
            raise InputError("pass --cookies or --cookies-from-browser, not both")
        if opts.concurrency < 1 or opts.retries < 1:
            raise InputError("--concurrency and --retries must be at least 1")
        if opts.on_rate_limit not in ON_RATE_LIMIT:
            raise InputError(f"--on-rate-limit must be one of {ON_RATE_LIMIT}, got {opts.on_rate_limit!r}")
        if not (math.isfinite(opts.rate_limit_wait) and opts.rate_limit_wait > 0):
            raise InputError(f"--rate-limit-wait must be a positive number of seconds, got {opts.rate_limit_wait}")
        if opts.cookies and not opts.cookies.is_file():
            raise FileNotFoundError(f"--cookies {opts.cookies} does not exist (a Netscape cookies.txt file)")
        if opts.sections and shutil.which("ffmpeg") is None:
            raise FileNotFoundError("--sections needs the ffmpeg program on PATH (apt-get install ffmpeg)")
        self.opts = opts
        self.gate = StartGate(opts.sleep_interval)
        self.guard = SessionGuard(opts.on_rate_limit, opts.rate_limit_wait, clock, sleep)
        self.bytes_lock = threading.Lock()
        self.archive_lock = threading.Lock()
        self.downloaded_bytes = 0
        self.private_dir: str | None = None

    def _archive(self, archive: AppendOnlyJsonl, source_id: str, entry: dict) -> None:
        with self.archive_lock:
            archive.add([{"source_id": source_id} | entry])

    def _params(self, source_id: str, need: SourceNeed, progress) -> dict:
        opts = self.opts
        seen: dict[str, int] = {}

        def on_progress(status: dict) -> None:
            done = status.get("downloaded_bytes") or 0
            name = status.get("filename") or ""
            with self.bytes_lock:
                self.downloaded_bytes += done - seen.get(name, 0)
                progress.set_postfix_str(f"{self.downloaded_bytes / 1e6:.1f} MB", refresh=False)
            seen[name] = done

        params = {
            "format": format_selector(opts.max_height),
            "outtmpl": {"default": str(opts.out / f"{source_id}.%(ext)s")},
            "logger": _Logger(),
            "quiet": True,
            "noprogress": True,
            "noplaylist": True,
            "continuedl": True,
            "retries": 3,
            "fragment_retries": 3,
            "socket_timeout": 30,
            "cachedir": False,
            "allowed_extractors": ["youtube", "generic"],  # not ~1,900 URL patterns: benchmarks/videos_fetch.py
            "progress_hooks": [on_progress],
        }
        if opts.cookies:  # a private copy per download: yt-dlp writes its cookie file back when it closes
            private = Path(self.private_dir) / f"cookies-{threading.get_ident()}.txt"
            shutil.copyfile(opts.cookies, private)
            private.chmod(0o600)
            params["cookiefile"] = str(private)
        if opts.cookies_from_browser:
            browser, _, profile = opts.cookies_from_browser.partition(":")
            params["cookiesfrombrowser"] = (browser, profile or None, None, None)
        if opts.sections:
            from yt_dlp.utils import download_range_func

            params["download_ranges"] = download_range_func(None, [need.span(opts.pad)])
            params["external_downloader_args"] = {"ffmpeg_o": ["-copyts"]}  # keep the source's timestamps
        return params

    def _download(self, need: SourceNeed, progress) -> Path:
        import yt_dlp

        url = self.opts.url_template.format(id=need.source_id)
        with yt_dlp.YoutubeDL(self._params(need.source_id, need, progress)) as ydl:
            self.gate.wait()  # right before the first request
            self.guard.admit()
            info = ydl.extract_info(url, download=True)
        downloads = info.get("requested_downloads") or []
        if not downloads or not Path(downloads[0]["filepath"]).is_file():
            raise yt_dlp.utils.DownloadError("yt-dlp reported no downloaded file")
        return Path(downloads[0]["filepath"])

    def _verified(self, need: SourceNeed, video: Path, status: str, fresh: bool) -> dict:
        """Verify a file; ``fresh``: just downloaded by this run (a section is then measured, not read)."""
        if fresh and self.opts.sections:
            section = measure_section(video, need.source_id, need.span(self.opts.pad), need.windows)
        else:
            try:
                section = read_section(video)
            except ValueError as err:
                raise IntegrityError(str(err)) from err
        facts = verify_video(video, need.windows, section)
        if section is not None:
            write_section(video, section)
            facts["section"] = [section.start, section.end]
        return {"status": status, "file": video.name, "size": video.stat().st_size} | facts

    def fetch_one(self, need: SourceNeed, present: Path | None, archive: AppendOnlyJsonl, progress) -> dict:
        """Fetch (or verify) one source; return its availability entry."""
        import yt_dlp

        source_id = need.source_id
        done = archive.entries.get(source_id)
        if (
            present is not None
            and done
            and (done["file"], done["size"]) == (present.name, present.stat().st_size)
            and covers(done, need.windows)
        ):
            return done  # verified in an earlier run, for windows that include these
        if present is not None:  # put there by hand or by another tool, or downloaded before verification ended
            try:
                entry = self._verified(need, present, "downloaded" if need.fetchable else "supplied", fresh=False)
                self._archive(archive, source_id, entry)
                return entry
            except IntegrityError as err:
                reject(present)
                if not need.fetchable:
                    return {"status": "invalid", "reason": f"integrity: {err}"}
        if not need.fetchable:
            return {
                "status": "not_fetchable",
                "reason": f"not a YouTube id: put {source_id}.<ext> in the videos folder yourself",
            }
        url = self.opts.url_template.format(id=source_id)
        attempts = 0
        while True:
            try:
                video = self._download(need, progress)
            except SessionStopped as stopped:
                return {"status": "deferred", "cause": stopped.kind, "reason": f"not tried: {stopped}"}
            except yt_dlp.utils.DownloadError as err:
                error = classify_error(str(err))
                said = redact(str(err).removeprefix("ERROR: "), url, source_id)
                if error.session:
                    why = self.guard.blocked(error, source_id)
                    if why is None:
                        continue  # after the pause
                    return {"status": "deferred", "cause": error.kind, "reason": f"{why}: {said}"}
                if error.kind == "permanent":
                    return {"status": "unavailable", "reason": f"{error.reason}: {said}"}
                if error.kind == "later":
                    return {"status": "deferred", "cause": "later", "reason": f"{error.reason}: {said}"}
                attempts += 1
                if attempts == self.opts.retries:
                    reason = f"{error.reason}: {said} (after {attempts} attempts)"
                    return {"status": "deferred", "cause": "transient", "reason": reason}
                self.guard.sleep(min(60.0, self.opts.retry_backoff * 2 ** (attempts - 1)))
                continue
            self.guard.succeeded()
            try:
                entry = self._verified(need, video, "downloaded", fresh=True)
            except IntegrityError as err:
                reject(video)
                return {"status": "invalid", "reason": f"integrity: {err}"}
            self._archive(archive, source_id, entry)
            return entry

    def run(self) -> FetchReport:
        opts = self.opts
        started = time.monotonic()
        needs = needed_sources(opts.release, opts.configs)
        opts.out.mkdir(parents=True, exist_ok=True)
        archive = AppendOnlyJsonl(opts.out / ARCHIVE, key=lambda entry: entry["source_id"])
        present = index_videos(opts.out)
        results: dict[str, dict] = {}
        with (
            tempfile.TemporaryDirectory(prefix="sureon-fetch-") as self.private_dir,
            tqdm(total=len(needs), desc="fetching videos", unit="video", disable=None) as progress,
            ThreadPoolExecutor(max_workers=opts.concurrency) as pool,
        ):
            futures = {
                pool.submit(self.fetch_one, need, present.get(source), archive, progress): source
                for source, need in sorted(needs.items())
            }
            try:
                for future in as_completed(futures):
                    results[futures[future]] = future.result()
                    progress.update()
            except BaseException:  # Ctrl+C: no download waits out a pause (or starts) while the pool shuts down
                self.guard.cancel()
                pool.shutdown(wait=False, cancel_futures=True)
                raise
        sources = read_availability(opts.out)  # sources of other configs, from earlier runs, are kept
        for source, entry in sorted(results.items()):
            kept = {k: v for k, v in entry.items() if k != "source_id"}
            sources[source] = kept | {"questions": needs[source].counts()}
        path = write_availability(opts.out, sources)
        report_sources = {s: sources[s] for s in sorted(results)}
        paused = self.guard.pauses * opts.rate_limit_wait
        return FetchReport(report_sources, self.downloaded_bytes, time.monotonic() - started, path, paused)


def add_arguments(parser) -> None:
    parser.add_argument("--release", required=True, type=Path, help="the release folder, or a built Sureon folder")
    parser.add_argument("--out", required=True, type=Path, help="the videos folder (then: build --videos OUT)")
    parser.add_argument("--configs", nargs="+", choices=list(CONFIGS), help="fetch only these configs' sources")
    parser.add_argument(
        "--url-template", default=YOUTUBE_URL, help="URL of a source, {id} = its YouTube id (mirrors, tests)"
    )
    parser.add_argument(
        "--max-height", type=positive_int, default=720, help="best video-only stream up to this height"
    )
    cookies = parser.add_mutually_exclusive_group()
    cookies.add_argument("--cookies", type=Path, help="Netscape cookies file (never printed)")
    cookies.add_argument("--cookies-from-browser", metavar="BROWSER[:PROFILE]", help="read cookies from a browser")
    parser.add_argument(
        "--sleep-interval", type=non_negative_float, default=0.0, help="seconds between two download starts"
    )
    parser.add_argument("--concurrency", type=positive_int, default=2, help="downloads at a time")
    parser.add_argument("--sections", action="store_true", help="download only the span each source's clips need")
    parser.add_argument("--pad", type=non_negative_float, default=5.0, help="seconds added around that span")
    parser.add_argument("--retries", type=positive_int, default=5, help="attempts per source on transient errors")
    parser.add_argument(
        "--retry-backoff", type=non_negative_float, default=2.0, help="first backoff in seconds (then doubled)"
    )
    parser.add_argument(
        "--on-rate-limit",
        choices=ON_RATE_LIMIT,
        default="stop",
        help="when YouTube rate-limits the session: stop starting downloads (default; rerun in an hour, nothing is "
        "lost) or wait --rate-limit-wait seconds and go on",
    )
    parser.add_argument(
        "--rate-limit-wait",
        type=non_negative_float,
        default=RATE_LIMIT_WAIT,
        help="seconds of that wait (YouTube: up to an hour)",
    )


def run(args) -> int:
    if not math.isfinite(args.pad) or args.pad < 0:
        raise InputError(f"--pad must be >= 0, got {args.pad}")
    try:
        import yt_dlp  # noqa: F401
    except ImportError as err:
        raise RuntimeError('sureon videos fetch needs yt-dlp: pip install -e ".[videos]"') from err
    opts = FetchOptions(**{k: v for k, v in vars(args).items() if k in FetchOptions.__dataclass_fields__})
    report = Fetcher(opts).run()
    print(report.summary())
    status = report.exit_status()
    if status == 2:
        print(f"error: {report.nothing_fetched()}", file=sys.stderr)
        return 2
    print(f"Build with: sureon build sureon --release {args.release} --videos {args.out} --out OUT")
    return status
