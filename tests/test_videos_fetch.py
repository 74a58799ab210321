"""``sureon videos fetch`` against a local video host on 127.0.0.1 (yt-dlp's generic extractor, never the internet)."""

import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pyarrow.parquet as pq
import pytest
from conftest import REPO, SAMPLE_RELEASE
from fake_video_server import FakeVideoHost

from builders.sureon.build import BuildOptions, build_sureon
from builders.sureon.clips import parse_clip_id
from builders.sureon.fetch.error_classes import ErrorClass, classify_error
from builders.sureon.fetch.fetcher import Fetcher, FetchOptions, format_selector
from builders.sureon.fetch.rate_limit import SessionGuard, SessionStopped
from builders.sureon.frames import ClipError, FramePolicy, sample_clip
from builders.sureon.sections import read_section
from builders.video import open_decoder
from sample_data.make_videos import write_video
from sureon.cli import main


yt_dlp = pytest.importorskip("yt_dlp")
from fake_youtube import REASONS, FakeYouTube  # noqa: E402  (imports yt-dlp)


YOUTUBE_SOURCES = ("Tt4Kk9Jj2Hh", "Vq2-Lm7Np0s", "Zx9Qw_8eRt1", "aB3_dE-5fGh")  # the sample's 11-character ids
HASHED = ("0c0368222999f0438acd67df0e414a9f", "9f1e2d3c4b5a69788796a5b4c3d2e1f0")


@pytest.fixture
def served(sample_videos):
    return {source: (sample_videos / f"{source}.mp4").read_bytes() for source in YOUTUBE_SOURCES}


def fetch(host, out, *extra, release=SAMPLE_RELEASE, status=1):
    """``status``: 1 for the sample release, whose MissingVid1 (a 404) and 32-hex sources are never fetched."""
    args = ["videos", "fetch", "--release", str(release), "--out", str(out), "--url-template", host.url_template]
    assert main([*args, "--retry-backoff", "0.01", *extra]) == status
    return json.loads((out / "availability.json").read_text())["sources"]


def manifest_skips(out):
    manifest = json.loads((out / "build_manifest.json").read_text())
    return {s["question_id"]: s for config in manifest["configs"].values() for s in config["skipped"]}


def test_fetch_names_files_reports_the_unavailable_and_the_build_gives_their_reasons(
    served, sample_videos, tmp_path, capsys
):
    out = tmp_path / "videos"
    out.mkdir()
    (out / f"{HASHED[0]}.mp4").write_bytes((sample_videos / f"{HASHED[0]}.mp4").read_bytes())  # supplied by hand
    cookies = tmp_path / "cookies.txt"
    cookies.write_text("# Netscape HTTP Cookie File\n127.0.0.1\tFALSE\t/\tFALSE\t0\tsid\tCOOKIE-SECRET-42\n")
    with FakeVideoHost(served) as host:
        host.url_template += "?token=TOKEN-SECRET-17"
        sources = fetch(host, out, "--cookies", str(cookies), "--concurrency", "2")
        printed = capsys.readouterr()
        assert all(r.cookie == "sid=COOKIE-SECRET-42" for r in host.requests)  # the cookies are sent, not shown
        first_run = len(host.requests)
        again = fetch(host, out)
        asked_again = {r.source_id for r in host.requests[first_run:]}
        assert asked_again == {"MissingVid1"}  # a second run downloads nothing; a new run tries the 404 once more

    for source in YOUTUBE_SOURCES:
        assert (out / f"{source}.mp4").read_bytes() == served[source]
        assert sources[source]["status"] == "downloaded"
        assert sources[source]["duration"] == pytest.approx(90.0) and sources[source]["height"] == 108
    assert sources[HASHED[0]]["status"] == "supplied"
    assert sources[HASHED[1]]["status"] == "not_fetchable" and sources[HASHED[1]]["questions"]["test"] == 4
    assert sources["MissingVid1"]["status"] == "unavailable"
    assert "HTTP 404" in sources["MissingVid1"]["reason"] and sources["MissingVid1"]["questions"]["test"] == 1
    assert sources["Tt4Kk9Jj2Hh"]["questions"] == {"test": 7, "train": 0, "validation": 0}
    assert again == sources
    assert "COOKIE-SECRET-42" in cookies.read_text()  # the user's cookie file is read, never rewritten
    for secret in ("COOKIE-SECRET-42", "TOKEN-SECRET-17"):
        assert secret not in printed.out + printed.err
        assert secret not in (out / "availability.json").read_text()
    assert "MissingVid1" in printed.out and "questions without a video: 5 benchmark, 0 train" in printed.out

    options = BuildOptions(SAMPLE_RELEASE, tmp_path / "built", out, on_missing_video="skip", cache_dir=tmp_path / "c")
    report = build_sureon(options)
    skipped = manifest_skips(report.out)
    assert skipped["sureon_test_0041"]["reason"].startswith("video unavailable: not found (HTTP 404)")
    hashed_skips = [s for s in skipped.values() if s["source_id"] == HASHED[1]]
    assert len(hashed_skips) == 4 and all(s["reason"].startswith("video not fetchable") for s in hashed_skips)
    assert {s["source_id"] for s in skipped.values()} == {"MissingVid1", HASHED[1]}


def test_truncated_and_too_short_files_fail_integrity(served, tmp_path):
    short = tmp_path / "short.mp4"
    write_video(short, 10, 25)
    served = served | {"aB3_dE-5fGh": served["aB3_dE-5fGh"][:60000], "Zx9Qw_8eRt1": short.read_bytes()}
    out = tmp_path / "videos"
    with FakeVideoHost(served) as host:
        sources = fetch(host, out, "--configs", "train_all", status=2)  # no good file at all
    assert sources["aB3_dE-5fGh"]["status"] == "invalid" and "unreadable" in sources["aB3_dE-5fGh"]["reason"]
    assert sources["Zx9Qw_8eRt1"]["status"] == "invalid"
    assert "duration is 10.00s but a clip ends at 85.00s" in sources["Zx9Qw_8eRt1"]["reason"]
    assert not list(out.glob("*.mp4"))  # neither is kept as good, both are set aside for inspection
    assert sorted(p.name for p in out.glob("*.rejected")) == ["Zx9Qw_8eRt1.mp4.rejected", "aB3_dE-5fGh.mp4.rejected"]
    assert set(sources) == {"aB3_dE-5fGh", "Zx9Qw_8eRt1", HASHED[0]}  # only the sources of train_all


def test_sigkill_mid_download_then_rerun_resumes_without_downloading_again(served, tmp_path):
    out = tmp_path / "videos"
    first, killed, *_ = sorted(served)
    with FakeVideoHost(served) as host:
        host.pause_at[killed] = 0.5
        command = [sys.executable, "-m", "sureon.cli", "videos", "fetch", "--release", str(SAMPLE_RELEASE)]
        command += ["--out", str(out), "--url-template", host.url_template, "--concurrency", "1"]
        process = subprocess.Popen(command, cwd=REPO, env=os.environ | {"PYTHONPATH": str(REPO)})
        part = out / f"{killed}.mp4.part"
        deadline = time.monotonic() + 120
        while not (part.is_file() and part.stat().st_size >= 0.25 * len(served[killed])):
            assert process.poll() is None and time.monotonic() < deadline, "the download never got under way"
            time.sleep(0.05)
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        assert (out / f"{first}.mp4").is_file() and not (out / f"{killed}.mp4").exists()
        host.pause_at.clear()
        host.resume.set()
        before = len(host.requests)
        sources = fetch(host, out, "--concurrency", "1")
        rerun = host.requests[before:]

    assert not [r for r in rerun if r.source_id == first]  # finished before the kill: not asked again
    resumed = [r for r in rerun if r.source_id == killed and r.range_start > 0]
    assert resumed and resumed[0].range_start >= 0.25 * len(served[killed])  # continued from the .part file
    for source in served:
        assert sources[source]["status"] == "downloaded"
        assert (out / f"{source}.mp4").read_bytes() == served[source]


def test_sections_give_the_frames_and_timestamps_of_the_whole_video(rows, write_rows, served, tmp_path):
    source = "Tt4Kk9Jj2Hh"
    windows = {r["clip_id"]: parse_clip_id(r["clip_id"]) for r in rows["test"]}
    test_rows = [
        r
        for r in rows["test"]
        if windows[r["clip_id"]].source_id == source
        and 12 <= windows[r["clip_id"]].start
        and windows[r["clip_id"]].end <= 34
    ]
    assert len(test_rows) >= 3
    release = write_rows({"test": test_rows})
    with FakeVideoHost(served) as host:
        whole = fetch(host, tmp_path / "whole", release=release, status=0)
        sections = fetch(host, tmp_path / "sections", "--sections", "--pad", "2", release=release, status=0)
    section = read_section(tmp_path / "sections" / f"{source}.mp4")
    assert section.start <= 10.0 and section.first_index == round(section.start * 25) > 0  # a keyframe before 10 s
    assert section.end < 60 and sections[source]["size"] < whole[source]["size"] / 2
    section_file = open_decoder(tmp_path / "sections" / f"{source}.mp4")
    with pytest.raises(ClipError, match="before the downloaded section"):  # never a frame from the wrong place
        sample_clip(section_file, 1.0, 5.0, FramePolicy(), section)

    built = {}
    for name in ("whole", "sections"):
        options = BuildOptions(release=release, out=tmp_path / f"built-{name}", videos=tmp_path / name)
        build_sureon(options)
        table = pq.read_table(next((tmp_path / f"built-{name}" / "bench").glob("*.parquet")))
        built[name] = {r["question_id"]: r for r in table.to_pylist()}
    assert built["whole"].keys() == built["sections"].keys() == {r["question_id"] for r in test_rows}
    for question_id, row in built["whole"].items():
        assert row["frame_timestamps"] == built["sections"][question_id]["frame_timestamps"]
        assert [f["bytes"] for f in row["frames"]] == [f["bytes"] for f in built["sections"][question_id]["frames"]]
        assert row["frame_timestamps"][0] >= row["start"]

    # a later run asking for windows outside the section replaces it with the whole video
    wider = write_rows({"test": [r for r in rows["test"] if windows[r["clip_id"]].source_id == source]})
    with FakeVideoHost(served) as host:
        again = fetch(host, tmp_path / "sections", release=wider, status=0)
    assert again[source]["status"] == "downloaded" and "section" not in again[source]
    assert (tmp_path / "sections" / f"{source}.mp4").read_bytes() == served[source]
    assert read_section(tmp_path / "sections" / f"{source}.mp4") is None


def test_concurrency_cap_and_sleep_interval_hold_at_the_server(served, tmp_path):
    with FakeVideoHost(served, chunk_delay=0.02) as host:
        fetch(host, tmp_path / "a", "--concurrency", "2", "--configs", "train_all", "validation", "bench")
        assert host.max_active_sources == 2
    with FakeVideoHost(served) as host:
        fetch(host, tmp_path / "b", "--concurrency", "3", "--sleep-interval", "0.5")
        starts = sorted(min(r.started for r in host.requests_for(s)) for s in [*served, "MissingVid1"])
        assert host.max_active_sources <= 3
    gaps = [b - a for a, b in itertools.pairwise(starts)]  # 0.5 s at the gate; a busy machine delays a request
    assert all(gap >= 0.3 for gap in gaps), gaps  # (without the gate: three at once)


def test_transient_errors_are_retried_with_backoff_and_permanent_ones_are_not(served, tmp_path):
    with FakeVideoHost(served) as host:
        host.fail = {"Tt4Kk9Jj2Hh": [503, 429], "Vq2-Lm7Np0s": [503] * 10, "aB3_dE-5fGh": [410]}
        sources = fetch(host, tmp_path / "videos", "--retries", "3")
        asked = {source: len(host.requests_for(source)) for source in served}
    assert sources["Tt4Kk9Jj2Hh"]["status"] == "downloaded"  # two transient failures, then the file
    assert asked["Tt4Kk9Jj2Hh"] == 4  # 503, 429, then extraction + download
    assert sources["Vq2-Lm7Np0s"]["status"] == "deferred" and asked["Vq2-Lm7Np0s"] == 3  # missing for now
    assert sources["Vq2-Lm7Np0s"]["reason"].startswith("server error (HTTP 5xx)")
    assert sources["Vq2-Lm7Np0s"]["reason"].endswith("(after 3 attempts)")
    assert sources["aB3_dE-5fGh"]["status"] == "unavailable" and asked["aB3_dE-5fGh"] == 1  # gone: asked once
    assert sources["aB3_dE-5fGh"]["reason"].startswith("gone (HTTP 410)")


def test_a_built_folder_names_the_same_sources_and_windows(sureon_build):
    from builders.sureon.fetch.needs import needed_sources

    from_release = needed_sources(SAMPLE_RELEASE, ["bench", "validation"])
    from_build = needed_sources(sureon_build.out, ["bench", "validation"])
    del from_release["MissingVid1"]  # its question was skipped by the build (no video)
    assert {s: n.windows for s, n in from_build.items()} == {s: n.windows for s, n in from_release.items()}
    assert {s: n.counts() for s, n in from_build.items()} == {s: n.counts() for s, n in from_release.items()}


def test_error_classes_and_format():
    assert classify_error("HTTP Error 503: Service Unavailable") == ErrorClass("transient", "server error (HTTP 5xx)")
    assert classify_error("HTTP Error 429: Too Many Requests") == ErrorClass("transient", "throttled (HTTP 429)")
    assert classify_error("Read timed out") == ErrorClass("transient", "timed out")
    assert format_selector(720).startswith("bv[height<=?720][vcodec^=avc1]/bv[height<=?720]/")


class _Quiet:
    def debug(self, msg):
        pass

    info = warning = error = debug


def ytdlp_error(url: str) -> str:
    """The error yt-dlp itself reports for ``url``."""
    with (
        yt_dlp.YoutubeDL({"logger": _Quiet(), "allowed_extractors": ["generic"]}) as ydl,
        pytest.raises(yt_dlp.utils.DownloadError) as caught,
    ):
        ydl.extract_info(url, download=False)
    return str(caught.value)


def ytdlp_says(youtube, kind: str, authenticated: bool = False) -> str:
    """The error yt-dlp reports when YouTube refuses a video with ``REASONS[kind]``."""
    youtube.says["Xx0Yy1Zz2Ww"], youtube.authenticated = kind, authenticated
    return ytdlp_error("http://127.0.0.1:9/Xx0Yy1Zz2Ww.mp4")


CLASSES = {  # what each of YouTube's refusals means for the fetch: the session, the video for good, or not yet
    "rate-limited": ErrorClass("rate-limited", "YouTube rate-limited this session (for up to an hour)"),
    "bot-check": ErrorClass("bot-check", "bot check: YouTube asks this session to prove it is not a bot"),
    "captcha": ErrorClass("bot-check", "bot check: YouTube asks this session to prove it is not a bot"),
    "ip-blocked": ErrorClass("bot-check", "bot check: YouTube asks this session to prove it is not a bot"),
    "private": ErrorClass("permanent", "private video"),
    "removed-by-uploader": ErrorClass("permanent", "removed or unavailable"),
    "removed-for-policy": ErrorClass("permanent", "removed or unavailable"),
    "does-not-exist": ErrorClass("permanent", "removed or unavailable"),
    "not-available": ErrorClass("permanent", "removed or unavailable"),
    "unavailable": ErrorClass("permanent", "removed or unavailable"),
    "copyright": ErrorClass("permanent", "removed (copyright claim)"),
    "terminated": ErrorClass("permanent", "removed (account terminated)"),
    "age-restricted": ErrorClass("permanent", "age-restricted: sign-in (cookies) needed"),
    "members-only": ErrorClass("permanent", "members-only video"),
    "region-blocked": ErrorClass("permanent", "region-blocked"),
    "premiere": ErrorClass("later", "not yet available (upcoming premiere or live event)"),
    "live-event": ErrorClass("later", "not yet available (upcoming premiere or live event)"),
}


def test_every_youtube_refusal_is_classified_by_what_it_says_of_the_video(monkeypatch):
    youtube = FakeYouTube(monkeypatch)
    assert set(CLASSES) == {*REASONS, "ip-blocked"}
    said = {kind: ytdlp_says(youtube, kind) for kind in CLASSES}
    assert said["rate-limited"] == (  # the message of the issue, word for word, as yt-dlp prints it
        "ERROR: [youtube] Xx0Yy1Zz2Ww: Video unavailable. This content isn't available, try again later. The "
        "current session has been rate-limited by YouTube for up to an hour. It is recommended to use `-t sleep` to "
        "add a delay between video requests to avoid exceeding the rate limit. For more information, refer to  "
        "https://github.com/yt-dlp/yt-dlp/wiki/Extractors#this-content-isnt-available-try-again-later"
    )
    assert {kind: classify_error(message) for kind, message in said.items()} == CLASSES
    assert classify_error(ytdlp_says(youtube, "rate-limited", authenticated=True)) == CLASSES["rate-limited"]
    with socket.socket() as probe:  # a port nothing listens on: yt-dlp's own network error
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    refused = ytdlp_error(f"http://127.0.0.1:{port}/Nn0Ee1Tt2Ww.mp4")
    assert classify_error(refused) == ErrorClass("transient", "network error")


def test_a_rate_limited_session_defers_the_rest_and_a_later_run_fetches_them(served, tmp_path, monkeypatch, capsys):
    youtube = FakeYouTube(monkeypatch)
    youtube.rate_limit(after=2)  # MissingVid1 (a 404), Tt4Kk9Jj2Hh, then YouTube rate-limits the session
    cookies = tmp_path / "cookies.txt"
    cookies.write_text("# Netscape HTTP Cookie File\n127.0.0.1\tFALSE\t/\tFALSE\t0\tsid\tCOOKIE-SECRET-42\n")
    out = tmp_path / "videos"
    with FakeVideoHost(served) as host:
        sources = fetch(host, out, "--concurrency", "1", "--cookies", str(cookies))  # --on-rate-limit stop
        printed = capsys.readouterr()
        assert [source for source, _, _ in youtube.extractions] == ["MissingVid1", "Tt4Kk9Jj2Hh", "Vq2-Lm7Np0s"]
        assert not host.requests_for("Zx9Qw_8eRt1") and not host.requests_for("aB3_dE-5fGh")  # none started after

        deferred = ("Vq2-Lm7Np0s", "Zx9Qw_8eRt1", "aB3_dE-5fGh")
        assert sources["Tt4Kk9Jj2Hh"]["status"] == "downloaded"
        assert sources["MissingVid1"]["status"] == "unavailable"  # a 404 is a removal; the rate limit is not
        assert all(sources[s]["status"] == "deferred" and sources[s]["cause"] == "rate-limited" for s in deferred)
        assert sources["Vq2-Lm7Np0s"]["reason"].startswith("YouTube rate-limited this session (for up to an hour): ")
        assert sources["Zx9Qw_8eRt1"]["reason"] == "not tried: YouTube rate-limited this session (for up to an hour)"
        assert "removed" not in json.dumps({s: sources[s] for s in deferred})
        assert "3 deferred (missing for now, not removed)" in printed.out.splitlines()[0]
        assert "3 deferred: YouTube rate-limited this session: rerun the same command in an hour" in printed.out
        assert "COOKIE-SECRET-42" not in printed.out + printed.err + (out / "availability.json").read_text()

        # train_all's videos are all deferred or gone: bench (with the one fetched video) keeps the build loadable
        options = BuildOptions(
            SAMPLE_RELEASE, tmp_path / "built", out, ["bench", "train_all"], on_missing_video="skip"
        )
        skipped = manifest_skips(build_sureon(options).out)
        waiting = [s for s in skipped.values() if s["source_id"] in deferred]
        assert waiting and all(
            s["reason"].startswith("video not fetched yet (rerun `sureon videos fetch`)") for s in waiting
        )

        youtube.limit_after = None  # an hour later
        again = fetch(host, out, "--concurrency", "1")
    assert all(again[s]["status"] == "downloaded" for s in deferred)
    assert youtube.asked("Tt4Kk9Jj2Hh") == [None]  # verified in the first run: not asked again


class FakeClock:
    """A monotonic clock that ``sleep`` moves on at once."""

    def __init__(self):
        self.now, self.sleeps = 1000.0, []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def train_all_videos(sample_videos, tmp_path):
    """The videos folder of the ``train_all`` config, its 32-hex source supplied: the rest comes from the host."""
    out = tmp_path / "videos"
    out.mkdir()
    (out / f"{HASHED[0]}.mp4").write_bytes((sample_videos / f"{HASHED[0]}.mp4").read_bytes())
    return out


@pytest.mark.parametrize("lasts", [3000.0, None])
def test_on_rate_limit_wait_pauses_for_the_advised_hour_then_goes_on(
    lasts, served, sample_videos, tmp_path, monkeypatch
):
    clock, youtube = FakeClock(), FakeYouTube(monkeypatch)
    youtube.rate_limit(after=0, lasts=lasts, clock=clock)  # from the first request on
    out = train_all_videos(sample_videos, tmp_path)
    with FakeVideoHost(served) as host:
        opts = FetchOptions(SAMPLE_RELEASE, out, ["train_all"], host.url_template, concurrency=1, on_rate_limit="wait")
        report = Fetcher(opts, clock=clock, sleep=clock.sleep).run()
    assert clock.sleeps == [3600.0]  # one pause, of the hour yt-dlp's message advises, and no request during it
    assert [(s, t - 1000.0, kind) for s, t, kind in youtube.extractions][:2] == [
        ("Zx9Qw_8eRt1", 0.0, "rate-limited"),
        ("Zx9Qw_8eRt1", 3600.0, None if lasts else "rate-limited"),
    ]
    if lasts:  # over within the hour: everything is fetched
        assert report.exit_status() == 0 and report.paused_s == 3600.0
        assert {s: e["status"] for s, e in report.sources.items()} == {
            HASHED[0]: "supplied",
            "Zx9Qw_8eRt1": "downloaded",
            "aB3_dE-5fGh": "downloaded",
        }
    else:  # still rate-limited after the hour, with nothing fetched since: the run stops
        assert report.exit_status() == 1 and len(youtube.extractions) == 2
        assert report.sources["Zx9Qw_8eRt1"]["reason"].startswith(
            "YouTube rate-limited this session (for up to an hour), again after waiting 60 min: "
            "[youtube] Zx9Qw_8eRt1: Video unavailable. This content isn't available, try again later."
        )
        assert report.sources["aB3_dE-5fGh"]["status"] == "deferred"
        assert report.sources["aB3_dE-5fGh"]["reason"].startswith("not tried: ")


def test_on_rate_limit_wait_starts_no_download_during_the_pause(served, sample_videos, tmp_path, monkeypatch, capsys):
    youtube = FakeYouTube(monkeypatch)
    youtube.rate_limit(after=1, lasts=0.6)
    out = train_all_videos(sample_videos, tmp_path)
    with FakeVideoHost(served) as host:
        fetch(host, out, "--configs", "train_all", "--on-rate-limit", "wait", "--rate-limit-wait", "0.8", status=0)
    limited = [t for _, t, kind in youtube.extractions if kind == "rate-limited"]
    assert 1 <= len(limited) <= 2  # only the downloads already started when the pause began (--concurrency 2)
    assert all(t >= limited[0] + 0.8 for _, t, kind in youtube.extractions if kind is None and t > limited[0])
    assert "YouTube rate-limited this session (at " in capsys.readouterr().err


def test_a_bot_check_stops_new_downloads_and_asks_for_cookies(served, tmp_path, monkeypatch, capsys):
    youtube = FakeYouTube(monkeypatch)
    youtube.says |= {"MissingVid1": "age-restricted", "Vq2-Lm7Np0s": "bot-check"}
    with FakeVideoHost(served) as host:
        sources = fetch(host, tmp_path / "videos", "--concurrency", "1", "--on-rate-limit", "wait")  # waits not
    assert sources["Tt4Kk9Jj2Hh"]["status"] == "downloaded"
    assert sources["Vq2-Lm7Np0s"]["status"] == "deferred" and sources["Vq2-Lm7Np0s"]["cause"] == "bot-check"
    assert all(sources[s]["reason"].startswith("not tried: bot check") for s in ("Zx9Qw_8eRt1", "aB3_dE-5fGh"))
    assert youtube.asked("Zx9Qw_8eRt1") == youtube.asked("aB3_dE-5fGh") == []
    assert sources["MissingVid1"]["status"] == "unavailable"  # age-restricted: this video, for good without cookies
    printed = capsys.readouterr().out
    assert "3 deferred: YouTube asks for a bot check: pass --cookies FILE or --cookies-from-browser NAME" in printed
    assert "1 need sign-in (age-restricted or sign-in only): pass --cookies FILE" in printed


@pytest.mark.parametrize("cause", ["network", "rate-limited"])
def test_no_source_fetched_exits_2_with_one_line_naming_the_fix(cause, tmp_path, monkeypatch, capsys):
    out = tmp_path / "videos"
    args = ["videos", "fetch", "--release", str(SAMPLE_RELEASE), "--out", str(out), "--retry-backoff", "0.01"]
    if cause == "network":
        with socket.socket() as probe:  # nothing listens there
            probe.bind(("127.0.0.1", 0))
            template = f"http://127.0.0.1:{probe.getsockname()[1]}/{{id}}.mp4"
        assert main([*args, "--url-template", template, "--retries", "2"]) == 2
    else:
        FakeYouTube(monkeypatch).rate_limit(after=0)
        with FakeVideoHost({}) as host:
            assert main([*args, "--url-template", host.url_template]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and error[0].startswith("error: none of the 7 source video(s) was fetched into ")
    assert {"network": "check the connection", "rate-limited": "rerun the same command in an hour"}[cause] in error[0]
    statuses = {e["status"] for e in json.loads((out / "availability.json").read_text())["sources"].values()}
    assert statuses == {"deferred", "not_fetchable"}  # missing for now (and the 32-hex ids): none recorded removed


def test_a_bad_rate_limit_wait_is_refused_before_anything_is_written(tmp_path, capsys):
    out = tmp_path / "videos"
    args = ["videos", "fetch", "--release", str(SAMPLE_RELEASE), "--out", str(out), "--on-rate-limit", "wait"]
    assert main([*args, "--rate-limit-wait", "0"]) == 2
    assert capsys.readouterr().err.strip() == "error: --rate-limit-wait must be a positive number of seconds, got 0.0"
    assert not out.exists()


def test_ctrl_c_wakes_a_download_waiting_out_a_rate_limit():
    guard = SessionGuard("wait", 3600.0, say=lambda line: None)
    assert guard.blocked(CLASSES["rate-limited"], "Tt4Kk9Jj2Hh") is None  # the hour's pause begins
    outcome = []

    def next_download():
        try:
            guard.admit()
            outcome.append("started")
        except SessionStopped as stopped:
            outcome.append(str(stopped))

    waiting = threading.Thread(target=next_download)
    waiting.start()
    time.sleep(0.3)
    assert waiting.is_alive() and not outcome  # it waits out the pause
    interrupted = time.monotonic()
    guard.cancel()  # what Fetcher.run does on Ctrl+C
    waiting.join(timeout=10)
    assert outcome == ["the run was interrupted"] and time.monotonic() - interrupted < 2
