"""The fetcher: download each needed source with yt-dlp (through its Python API, the ``videos`` extra), verify it,
record it, on a pool of download threads.

- **format**: the best video-only stream up to ``--max-height`` (no audio: transcripts ship with the release),
  H.264 preferred; LEMON's and SurgLaVi's downloaders ask for progressive formats, which YouTube now serves at 360p
  only [yt-dlp issues #11681, #11807];
- **resumable**: a file enters ``.fetch_archive.jsonl`` only once verified, and is never fetched again; a killed
  download resumes from its ``.part`` file (HTTP range requests);
- **errors**: retried, recorded or deferred by their kind (:mod:`builders.sureon.fetch.error_classes`); a session
  block holds back the downloads not started yet (:mod:`builders.sureon.fetch.rate_limit`). A deferred source is
  retried by the next run; the build reports it as not fetched yet, never as removed;
- ``availability.json`` (:mod:`builders.sureon.availability`) records every source's outcome, read by the build;
- ``--sections``: one span per source, from its first clip's start to its last clip's end, padded by ``--pad``;
  its sidecar (:mod:`builders.sureon.sections`) tells the frame sampler where the span sits in the source.
  Downloading a section needs the ``ffmpeg`` program and cannot resume mid-file (FFmpeg restarts it).

Cookies and tokens are never printed: yt-dlp's logger is silenced, and messages name the source id, never the URL or
the options.
"""

import math
import shutil
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from tqdm.auto import tqdm

from builders.errors import InputError
from builders.jsonl_log import AppendOnlyJsonl
from builders.sureon.availability import read_availability, write_availability
from builders.sureon.fetch.error_classes import classify_error, redact
from builders.sureon.fetch.integrity import IntegrityError, covers, measure_section, reject, verify_video
from builders.sureon.fetch.needs import SourceNeed, needed_sources
from builders.sureon.fetch.rate_limit import ON_RATE_LIMIT, RATE_LIMIT_WAIT, SessionGuard, SessionStopped, StartGate
from builders.sureon.fetch.report import FetchReport
from builders.sureon.frames import index_videos
from builders.sureon.sections import read_section, write_section


YOUTUBE_URL = "https://www.youtube.com/watch?v={id}"
ARCHIVE = ".fetch_archive.jsonl"


def format_selector(max_height: int) -> str:
    """Best video-only stream up to ``max_height``, H.264 first; a muxed one only where no video-only exists."""
    h = f"[height<=?{max_height}]"
    return f"bv{h}[vcodec^=avc1]/bv{h}/bv*{h}[vcodec^=avc1]/bv*{h}/b{h}"


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
        archive = AppendOnlyJsonl(opts.out / ARCHIVE, key=lambda entry: entry["source_id"], kind="fetch-archive")
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
