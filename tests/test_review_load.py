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

from builders.pipeline.review.app import ALL, VIDEO_ROUTE, ReviewUI
from builders.pipeline.review.login import COOKIE
from builders.pipeline.review.samples import load_samples
from builders.pipeline.review.server import ReviewServer, ServerOptions
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
    login = httpx.post(f"{url}login", data={"username": name, "password": PASSWORD}, timeout=60)
    assert login.status_code == 303, login.text
    cookie = {"Cookie": f"{COOKIE}={login.cookies[COOKIE]}"}
    client = Client(url, verbose=False, headers=cookie, httpx_kwargs={"timeout": 60})  # 5 s timed out on busy cores
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
        acks.append((name, recorded.group(1).replace("\\", ""), decision, note))  # the id is Markdown-escaped
        step += 1
    return acks


def test_twenty_concurrent_reviewers_lose_and_duplicate_nothing(sureon_build, sample_videos, tmp_path):
    samples = load_samples(sureon_build.out)
    store = ReviewStore(tmp_path / "review.sqlite")
    names = [f"reviewer{i:02d}" for i in range(SESSIONS)]
    for name in names:
        store.add_user(name, PASSWORD)
    store.add_assignments([Assignment(s, name, "single") for name in names for s in samples])
    ui = ReviewUI(store, samples, index_videos(sample_videos))
    server = ReviewServer(ui, ServerOptions("127.0.0.1", free_port())).start()
    try:
        with ThreadPoolExecutor(SESSIONS) as pool:
            acks = [ack for session in pool.map(review_for_a_while, [server.url] * SESSIONS, names) for ack in session]
        source = next(iter(ui.videos))
        assert httpx.get(f"{server.url.rstrip('/')}{VIDEO_ROUTE}{source}").status_code == 401  # no session, no video
    finally:
        server.close()
    assert len(acks) >= SESSIONS * 2
    logged = Counter((d.reviewer, d.sample_id, d.decision, d.note) for d in ReviewStore(store.path).log())
    assert logged == Counter(acks)
