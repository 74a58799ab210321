"""``sureon videos fetch`` against a local video host on 127.0.0.1 (yt-dlp's generic extractor, never the internet)."""

import itertools
import json
import os
import signal
import subprocess
import sys
import time

import pyarrow.parquet as pq
import pytest
from conftest import REPO, SAMPLE_RELEASE
from fake_video_server import FakeVideoHost

from builders.sureon.build import BuildOptions, build_sureon
from builders.sureon.clips import parse_clip_id
from builders.sureon.fetch import classify_error, format_selector
from builders.sureon.frames import ClipError, FramePolicy, sample_clip
from builders.sureon.sections import read_section
from builders.video import open_decoder
from sample_data.make_videos import write_video
from sureon.cli import main


pytest.importorskip("yt_dlp")

YOUTUBE_SOURCES = ("Tt4Kk9Jj2Hh", "Vq2-Lm7Np0s", "Zx9Qw_8eRt1", "aB3_dE-5fGh")  # the sample's 11-character ids
HASHED = ("0c0368222999f0438acd67df0e414a9f", "9f1e2d3c4b5a69788796a5b4c3d2e1f0")


@pytest.fixture
def served(sample_videos):
    return {source: (sample_videos / f"{source}.mp4").read_bytes() for source in YOUTUBE_SOURCES}


def fetch(host, out, *extra, release=SAMPLE_RELEASE, capsys=None):
    args = ["videos", "fetch", "--release", str(release), "--out", str(out), "--url-template", host.url_template]
    assert main([*args, "--retry-backoff", "0.01", *extra]) == 0
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
        sources = fetch(host, out, "--configs", "train_all")
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
        whole = fetch(host, tmp_path / "whole", release=release)
        sections = fetch(host, tmp_path / "sections", "--sections", "--pad", "2", release=release)
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
        again = fetch(host, tmp_path / "sections", release=wider)
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
    assert all(b - a >= 0.45 for a, b in itertools.pairwise(starts))


def test_transient_errors_are_retried_with_backoff_and_permanent_ones_are_not(served, tmp_path):
    with FakeVideoHost(served) as host:
        host.fail = {"Tt4Kk9Jj2Hh": [503, 429], "Vq2-Lm7Np0s": [503] * 10, "aB3_dE-5fGh": [410]}
        sources = fetch(host, tmp_path / "videos", "--retries", "3")
        asked = {source: len(host.requests_for(source)) for source in served}
    assert sources["Tt4Kk9Jj2Hh"]["status"] == "downloaded"  # two transient failures, then the file
    assert asked["Tt4Kk9Jj2Hh"] == 4  # 503, 429, then extraction + download
    assert sources["Vq2-Lm7Np0s"]["status"] == "unavailable" and asked["Vq2-Lm7Np0s"] == 3
    assert sources["Vq2-Lm7Np0s"]["reason"].startswith("server error (HTTP 5xx)")
    assert sources["Vq2-Lm7Np0s"]["reason"].endswith("(after 3 attempts)")
    assert sources["aB3_dE-5fGh"]["status"] == "unavailable" and asked["aB3_dE-5fGh"] == 1  # gone: asked once
    assert sources["aB3_dE-5fGh"]["reason"].startswith("gone (HTTP 410)")


def test_a_built_folder_names_the_same_sources_and_windows(sureon_build):
    from builders.sureon.fetch import needed_sources

    from_release = needed_sources(SAMPLE_RELEASE, ["bench", "validation"])
    from_build = needed_sources(sureon_build.out, ["bench", "validation"])
    del from_release["MissingVid1"]  # its question was skipped by the build (no video)
    assert {s: n.windows for s, n in from_build.items()} == {s: n.windows for s, n in from_release.items()}
    assert {s: n.counts() for s, n in from_build.items()} == {s: n.counts() for s, n in from_release.items()}


def test_error_classes_and_format():
    assert classify_error("ERROR: [youtube] x: Private video. Sign in if you've been granted access") == (
        True,
        "private video",
    )
    assert classify_error("ERROR: [youtube] x: Sign in to confirm you’re not a bot")[1].startswith("bot check")
    assert classify_error("ERROR: [youtube] x: Video unavailable. This video has been removed by the uploader")[0]
    assert classify_error("The uploader has not made this video available in your country")[1] == "region-blocked"
    assert classify_error("HTTP Error 503: Service Unavailable") == (False, "server error (HTTP 5xx)")
    assert classify_error("HTTP Error 429: Too Many Requests") == (False, "throttled (HTTP 429)")
    assert classify_error("Read timed out") == (False, "timed out")
    assert format_selector(720).startswith("bv[height<=?720][vcodec^=avc1]/bv[height<=?720]/")
