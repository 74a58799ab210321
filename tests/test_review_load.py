"""A load test of the served review app on loopback: 20 reviewer sessions deciding concurrently over HTTP for a
bounded time; every acknowledged decision is in the database exactly once, with its note verbatim, and no
response carries a note or dataset text unescaped. Skipped without the ``review`` extra."""

import re
import socket
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from builders.pipeline.review.app import ALL, FILE_ROUTE, ReviewUI, launch_app
from builders.pipeline.review.samples import load_samples
from builders.pipeline.review.store import Assignment, ReviewStore
from builders.sureon.frames import index_videos


pytest.importorskip("gradio")
from gradio_client import Client  # installed with gradio


PASSWORD = "correct horse battery"
HOSTILE = '<img src=x onerror=alert(1)> & "q" ünï'
SESSIONS = 20
SECONDS = 4.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def review_for_a_while(url: str, name: str) -> list[tuple]:
    """One reviewer's session: log in, then alternate reject / approve until time is up; returns the acks."""
    client = Client(url, verbose=False)
    message, *_ = client.predict(name, PASSWORD, api_name="/login")
    assert message == f"Logged in as {name}."
    acks, deadline, step = [], time.monotonic() + SECONDS, 0
    while time.monotonic() < deadline:
        decision = ("reject", "approve")[step % 2]
        note = f"{HOSTILE} {name} #{step}"
        message, clip, question, context, *_ = client.predict(
            ["other"], note, ALL, ALL, ALL, True, api_name=f"/{decision}"
        )
        recorded = re.fullmatch(rf"Recorded: {decision} on (\S+)\.", message)
        assert recorded, message
        assert "<img" not in clip + question + context and "<video" in clip
        acks.append((name, recorded.group(1), decision, note))
        step += 1
    return acks


def test_twenty_concurrent_reviewers_lose_and_duplicate_nothing(sureon_build, sample_videos, tmp_path):
    samples = load_samples(sureon_build.out)
    store = ReviewStore(tmp_path / "review.sqlite")
    names = [f"reviewer{i:02d}" for i in range(SESSIONS)]
    for name in names:
        store.add_user(name, PASSWORD)
    store.add_assignments([Assignment(s, name, "single") for name in names for s in samples])
    port = free_port()
    videos = index_videos(sample_videos)
    blocks = launch_app(ReviewUI(store, samples, videos), "127.0.0.1", port, sample_videos, block=False)
    try:
        files = f"http://127.0.0.1:{port}{FILE_ROUTE}"
        video = httpx.get(f"{files}{next(iter(videos.values())).resolve()}", headers={"Range": "bytes=0-99"})
        assert video.status_code == 206 and video.headers["content-type"] == "video/mp4"
        assert httpx.get(f"{files}{store.path.resolve()}").status_code == 403  # password hashes stay private
        with ThreadPoolExecutor(SESSIONS) as pool:
            acks = [
                ack
                for session in pool.map(review_for_a_while, [f"http://127.0.0.1:{port}/"] * SESSIONS, names)
                for ack in session
            ]
    finally:
        blocks.close()
    assert len(acks) >= SESSIONS * 2
    logged = Counter((d.reviewer, d.sample_id, d.decision, d.note) for d in ReviewStore(store.path).log())
    assert logged == Counter(acks)
