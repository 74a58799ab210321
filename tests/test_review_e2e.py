"""End to end in a real browser: the served review app driven by headless Chromium through Playwright.

Log in, approve one sample, try to reject the next without a note (refused), reject it with a note, log out (the
page's button posts a form; the page is gone until the next login), restart the server, see both decisions again
after logging back in, then check the database and the export. Throughout, the page must run under the server's
Content-Security-Policy without a single violation, and every request it makes must be one the server allows. Needs
the ``review`` extra, ``pip install playwright`` and Debian's ``chromium`` (Playwright's own browser download is not
used); skipped cleanly otherwise.
"""

import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from builders.pipeline.review.export import export_review
from builders.pipeline.review.samples import load_samples
from builders.pipeline.review.store import Assignment, ReviewStore


pytest.importorskip("gradio")
sync_api = pytest.importorskip("playwright.sync_api")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium"),
]

REPO = Path(__file__).resolve().parents[1]
PASSWORD = "correct horse battery"
NOTE = "Two options are correct: <b>B</b> & C — see 0:01:02"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_server(dataset: Path, db: Path, videos: Path, port: int) -> subprocess.Popen:
    command = [sys.executable, "-m", "sureon.cli", "review", "serve", "--dataset", str(dataset), "--db", str(db)]
    command += ["--videos", str(videos), "--port", str(port)]
    server = subprocess.Popen(command, cwd=REPO)  # telemetry is off by the app itself, no env needed
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/login", timeout=2).status_code == 200:
                return server
        except httpx.TransportError:
            time.sleep(0.5)
    server.terminate()
    raise RuntimeError("the review server did not start within 90 s")


def stop(server: subprocess.Popen) -> None:
    server.terminate()
    server.wait(timeout=30)


def watched_page(browser, problems: list[str]):
    """A page that records CSP violations, script errors and refused requests into ``problems``."""
    page = browser.new_page()
    page.on("console", lambda m: problems.append(m.text) if "Content Security Policy" in m.text else None)
    page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    refused = (401, 403, 404, 413, 421)
    page.on("response", lambda r: problems.append(f"{r.status} {r.url}") if r.status in refused else None)
    return page


def log_in(page, url: str) -> None:
    page.goto(url)  # no session: the login page
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.get_by_text("Logged in as alice.").wait_for()


def test_browser_review_session_survives_a_restart(sureon_build, sample_videos, tmp_path):
    samples = list(load_samples(sureon_build.out))
    db = tmp_path / "review.sqlite"
    store = ReviewStore(db)
    store.add_user("alice", PASSWORD)
    store.add_assignments([Assignment(s, "alice", "single") for s in samples])
    port = free_port()
    url = f"http://127.0.0.1:{port}/"

    problems: list[str] = []
    server = start_server(sureon_build.out, db, sample_videos, port)
    try:
        with sync_api.sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            page = watched_page(browser, problems)
            log_in(page, url)
            assert page.locator("video").count() >= 2  # the clip and the full video
            page.wait_for_function("document.querySelector('video').readyState >= 1")  # its metadata loaded
            page.get_by_role("button", name="Approve").click()
            page.get_by_text(f"Recorded: approve on {samples[0]}.").wait_for()
            page.get_by_role("button", name="Reject").click()
            page.get_by_text("Not recorded: a rejection needs a written note").wait_for()
            page.get_by_label("Note (required to reject, encouraged to flag)").fill(NOTE)
            page.get_by_label("Inaccurate").check()
            page.get_by_role("button", name="Reject").click()
            page.get_by_text(f"Recorded: reject on {samples[1]}.").wait_for()
            page.get_by_role("button", name="Log out").click()  # a form posting /logout (from this origin)
            page.get_by_text("You are logged out.").wait_for()
            page.goto(url)  # the review page needs a new login
            page.get_by_role("button", name="Log in").wait_for()
            assert page.get_by_text("Approve").count() == 0
            browser.close()
    finally:
        stop(server)
    assert problems == []
    assert [(d.sample_id, d.decision, d.note) for d in store.log()] == [
        (samples[0], "approve", ""),
        (samples[1], "reject", NOTE),
    ]

    server = start_server(sureon_build.out, db, sample_videos, port)
    try:
        with sync_api.sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            page = watched_page(browser, problems)
            log_in(page, url)
            note_cell = page.get_by_test_id("cell-0-4")  # "My decisions", newest first: the rejection's note
            note_cell.get_by_text(NOTE).wait_for()  # shown as text ...
            assert note_cell.locator("b").count() == 0  # ... never as markup
            assert page.get_by_text(samples[2]).count() >= 1  # the queue resumes after the decided samples
            browser.close()
    finally:
        stop(server)
    assert problems == []

    report = export_review(sureon_build.out, ReviewStore(db), tmp_path / "verified")
    assert report.counts["approved"] == 1 and report.counts["rejected"] == 1
    assert report.counts["pending"] == len(samples) - 2
