"""The review app's security, probed from outside against the real server on 127.0.0.1 (issue 32, items 1-14; issue
39: forwarded chains read from the right, logout by POST from this origin only, unknown events and lone surrogates
refused with a 400, the Origin's scheme compared).

One server for the module (``ReviewServer`` on a free port, in a thread), with a clock the tests move (session
expiry, lock expiry) and a short slow-down; other client addresses are 127.0.0.2-127.0.0.9 (the loopback network),
and 127.0.0.3 is the one ``--trusted-proxy``. Each test uses its own accounts, so the order does not matter.
Skipped without the ``review`` extra.
"""

import io
import json
import shutil
import socket
import sqlite3
import stat
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from builders.pipeline.review.accounts import LoginPolicy, SessionPolicy
from builders.pipeline.review.app import ReviewUI
from builders.pipeline.review.gate import MAX_BODY_BYTES
from builders.pipeline.review.login import COOKIE
from builders.pipeline.review.request_checks import forwarded_address, same_origin
from builders.pipeline.review.samples import load_samples
from builders.pipeline.review.server import ReviewServer, ServerOptions
from builders.pipeline.review.store import Assignment, ReviewStore
from builders.sureon.frames import index_videos
from sureon.cli import main


pytest.importorskip("gradio")


PASSWORD = "correct horse battery"
USERS = ("alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy", "mallory")
TRUSTED_PROXY = "127.0.0.3"
MARKDOWN_ID = "q-[click](http://evil.example/x)![i](http://evil.example/i.png)*b*"
SESSIONS = SessionPolicy(idle_s=600.0, max_age_s=3600.0, touch_every_s=0.0)


class Clock:
    def __init__(self):
        self.now = 2_000_000_000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Served:
    url: str
    ui: ReviewUI
    clock: Clock
    db: Path
    videos: Path
    samples: dict


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def served(sureon_build, sample_videos, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("review_security")
    videos = tmp / "videos"
    shutil.copytree(sample_videos, videos)
    (videos / "page.html").write_text("<script>alert(document.cookie)</script>")  # not a video: never served
    samples = load_samples(sureon_build.out)
    first = next(iter(samples.values()))
    samples[MARKDOWN_ID] = first | {"question_id": MARKDOWN_ID}  # a dataset id full of Markdown
    db = tmp / "review.sqlite"
    store = ReviewStore(db)
    for name in USERS:
        store.add_user(name, PASSWORD)
    ordinary = [s for s in samples if s != MARKDOWN_ID]
    reviewers = [name for name in USERS if name not in ("bob", "mallory")]  # bob has nothing assigned
    store.add_assignments([Assignment(s, name, "single") for name in reviewers for s in ordinary])
    store.add_assignments([Assignment(MARKDOWN_ID, "mallory", "single")])
    clock = Clock()
    policy = LoginPolicy(first_delay_s=0.3, max_delay_s=0.6)
    ui = ReviewUI(store, samples, index_videos(videos), login_policy=policy, session_policy=SESSIONS, clock=clock)
    server = ReviewServer(ui, ServerOptions("127.0.0.1", free_port(), trusted_proxies=(TRUSTED_PROXY,))).start()
    try:
        yield Served(server.url, ui, clock, db, videos, samples)
    finally:
        server.close()


def client(served, source: str = "127.0.0.1", **kwargs) -> httpx.Client:
    transport = httpx.HTTPTransport(local_address=source)
    return httpx.Client(base_url=served.url.rstrip("/"), transport=transport, timeout=30, **kwargs)


def log_in(served, name: str, password: str = PASSWORD, source: str = "127.0.0.1", **kwargs) -> httpx.Client:
    browser = client(served, source, **kwargs)
    response = browser.post("/login", data={"username": name, "password": password})
    assert response.status_code == 303 and response.headers["location"] == "/", response.text
    return browser


def token_of(browser: httpx.Client) -> str:
    return browser.cookies[COOKIE]


def with_cookie(served, token: str, source: str = "127.0.0.1") -> httpx.Client:
    """A browser presenting ``token`` (any string) as its session cookie."""
    return client(served, source, headers={"Cookie": f"{COOKIE}={token}"})


def fn_index(browser: httpx.Client, api_name: str) -> int:
    config = browser.get("/config").json()
    return next(d["id"] for d in config["dependencies"] if d.get("api_name") == api_name)


def event(browser: httpx.Client, api_name: str, data: list, session_hash: str, index: int | None = None):
    """Run one Gradio event the way the page does (queue/join, then its event stream): the completed message, or
    the refusing response."""
    index = fn_index(browser, api_name) if index is None else index
    payload = {"data": data, "fn_index": index, "session_hash": session_hash, "event_data": None, "trigger_id": None}
    joined = browser.post("/gradio_api/queue/join", json=payload)
    if joined.status_code != 200:
        return joined
    with browser.stream("GET", "/gradio_api/queue/data", params={"session_hash": session_hash}) as stream:
        if stream.status_code != 200:
            return stream
        for line in stream.iter_lines():
            if line.startswith("data:"):
                message = json.loads(line[5:])
                if message.get("msg") == "process_completed":
                    return message
    raise AssertionError("the event stream ended without a result")


def decide(browser, session_hash: str, decision: str = "approve", note: str = "", index: int | None = None):
    return event(browser, decision, [None, ["other"], note, "All", "All", "All", False], session_hash, index)


def status_of(message: dict) -> str:
    assert message["success"], message
    return message["output"]["data"][1]


def failures(served, account: str, client_address: str) -> int:
    return served.ui.store.login_failures(served.ui.store.throttle_keys(account, client_address)["pair"])


# -- 1. sessions ----------------------------------------------------------------------------------------------------


def test_login_issues_a_random_httponly_strict_cookie_rotated_at_every_login(served):
    browser = client(served)
    response = browser.post("/login", data={"username": "alice", "password": PASSWORD})
    cookie = response.headers["set-cookie"]
    assert response.status_code == 303 and cookie.startswith(f"{COOKIE}=")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie and "Secure" not in cookie
    first = token_of(browser)
    assert len(first) >= 40 and browser.get("/config").status_code == 200
    again = browser.post("/login", data={"username": "alice", "password": PASSWORD})  # presents the old cookie
    second = token_of(browser)
    assert again.status_code == 303 and second != first
    assert with_cookie(served, first).get("/config").status_code == 401  # rotated: the old one ended
    assert with_cookie(served, second).get("/config").status_code == 200
    planted = with_cookie(served, "chosen-by-an-attacker")  # session fixation: never accepted
    assert planted.get("/config").status_code == 401
    issued = planted.post("/login", data={"username": "alice", "password": PASSWORD}).headers["set-cookie"]
    assert issued.startswith(f"{COOKIE}=") and "chosen-by-an-attacker" not in issued
    assert first.encode() not in served.db.read_bytes() and second.encode() not in served.db.read_bytes()


def test_a_session_hash_without_its_cookie_authorises_nothing(served):
    alice = log_in(served, "alice")
    index = fn_index(alice, "approve")
    session_hash = "alicehash01"
    assert status_of(decide(alice, session_hash, index=index)).startswith("Recorded: approve")
    recorded = len(served.ui.store.log("alice"))

    stranger = client(served)  # the hash from a proxy log, and no cookie
    assert decide(stranger, session_hash, index=index).status_code == 401
    assert stranger.get("/gradio_api/queue/data", params={"session_hash": session_hash}).status_code == 401
    assert stranger.get(f"/gradio_api/heartbeat/{session_hash}").status_code == 401
    assert stranger.get("/gradio_api/deep_link", params={"session_hash": session_hash}).status_code in (401, 404)
    assert stranger.get("/", follow_redirects=False).headers["location"] == "/login"

    bob = log_in(served, "bob")  # another reviewer's cookie with alice's hash
    assert decide(bob, session_hash, index=index).status_code == 403
    assert bob.get("/gradio_api/queue/data", params={"session_hash": session_hash}).status_code == 403
    assert bob.get("/gradio_api/deep_link", params={"session_hash": session_hash}).status_code == 404
    assert len(served.ui.store.log("alice")) == recorded and served.ui.store.log("bob") == []


def origin_of(served) -> dict[str, str]:
    return {"Origin": served.url.rstrip("/")}


def test_logout_ends_the_session_and_clears_the_cookie(served):
    browser = log_in(served, "carol")
    token = token_of(browser)
    response = browser.post("/logout", headers=origin_of(served))
    assert response.status_code == 303 and response.headers["location"].startswith("/login")
    assert "Max-Age=0" in response.headers["set-cookie"]
    assert with_cookie(served, token).get("/config").status_code == 401
    assert decide(with_cookie(served, token), "carolhash01", index=0).status_code == 401


def test_logout_is_a_post_from_this_origin_only(served):
    carol = log_in(served, "carol")
    page = carol.get("/logout")  # what an <img src="/logout"> on another page of the site sends, cookie included
    assert page.status_code == 200 and "method='post' action='/logout'" in page.text
    port = served.url.rsplit(":", 1)[1].strip("/")
    for refused in (
        {"Origin": "http://evil.example"},
        {"Origin": "http://127.0.0.1:1"},  # same site, another origin (another app on the host)
        {"Origin": f"https://127.0.0.1:{port}"},  # another scheme
        {"Origin": "null"},
        {},  # neither Origin nor Referer
        {"Referer": "http://evil.example/page"},
    ):
        assert carol.post("/logout", headers=refused).status_code == 403, refused
    assert carol.get("/config").status_code == 200  # still logged in
    config = carol.get("/config").text
    assert "method='post' action='/logout'" in config and ">Log out</button>" in config  # the page's control
    by_referer = carol.post("/logout", headers={"Referer": f"{served.url}?__theme=light"})  # no Origin: Referer
    assert by_referer.status_code == 303 and carol.get("/config").status_code == 401


def test_a_password_reset_or_a_removed_account_ends_that_reviewers_sessions(served):
    dave, other = log_in(served, "dave"), log_in(served, "dave", source="127.0.0.2")
    grace = log_in(served, "grace")
    with pytest.MonkeyPatch.context() as patch:  # the command an admin runs, on the same database file
        patch.setattr("sys.stdin", io.StringIO("a brand new password\n"))
        assert main(["review", "add-user", "dave", "--reset-password", "--db", str(served.db)]) == 0
    assert dave.get("/config").status_code == 401 and other.get("/config").status_code == 401
    assert grace.get("/config").status_code == 200  # nobody else's
    log_in(served, "dave", "a brand new password")

    assert main(["review", "remove-user", "grace", "--db", str(served.db)]) == 0
    assert grace.get("/config").status_code == 401
    refused = client(served).post("/login", data={"username": "grace", "password": PASSWORD})
    assert refused.status_code == 401 and "grace" not in served.ui.store.users()


def test_sessions_expire_when_idle_and_after_their_maximum_age(served):
    idle = log_in(served, "erin")
    served.clock.now += SESSIONS.idle_s - 1
    assert idle.get("/config").status_code == 200  # used: the idle clock restarts
    served.clock.now += SESSIONS.idle_s - 1
    assert idle.get("/config").status_code == 200
    served.clock.now += SESSIONS.idle_s + 1
    assert idle.get("/config").status_code == 401

    busy = log_in(served, "erin")
    for _ in range(int(SESSIONS.max_age_s // (SESSIONS.idle_s / 2))):
        served.clock.now += SESSIONS.idle_s / 2
        assert busy.get("/config").status_code == 200
    served.clock.now += SESSIONS.idle_s / 2
    assert busy.get("/config").status_code == 401  # never idle, but older than the maximum age


# -- 2-4. login throttling --------------------------------------------------------------------------------------------


def test_failures_from_one_address_do_not_keep_the_reviewer_out_from_another(served):
    attacker = client(served, "127.0.0.6")
    for attempt in range(5):
        assert attacker.post("/login", data={"username": "frank", "password": f"guess {attempt}"}).status_code == 401
    locked = attacker.post("/login", data={"username": "frank", "password": PASSWORD})
    assert locked.status_code == 429 and "try again in 30 s" in locked.text  # that pair is locked ...
    started = time.monotonic()
    log_in(served, "frank", source="127.0.0.7")  # ... the account is not: the right password from elsewhere works
    assert time.monotonic() - started >= 0.3  # after the account's slow-down
    served.clock.now += 31
    assert attacker.post("/login", data={"username": "frank", "password": "guess 5"}).status_code == 401
    assert "try again in 60 s" in attacker.post("/login", data={"username": "frank", "password": PASSWORD}).text

    sprayer = client(served, "127.0.0.8")  # one address guessing at many accounts is slowed, not locked out
    for name in ("root", "admin", "heidi", "nobody", "judy", "ivan"):
        assert sprayer.post("/login", data={"username": name, "password": "hunter2 hunter2"}).status_code == 401
    log_in(served, "heidi", source="127.0.0.8")  # a colleague behind the same NAT address still gets in


def test_forwarded_headers_are_believed_only_from_a_trusted_proxy(served):
    direct = client(served)  # 127.0.0.1 is not a trusted proxy, even though it is the loopback address
    for attempt in range(5):
        forged = {"X-Forwarded-For": f"198.51.100.{attempt}"}
        direct.post("/login", data={"username": "ivan", "password": f"guess {attempt}"}, headers=forged)
    assert failures(served, "ivan", "127.0.0.1") == 5 and failures(served, "ivan", "198.51.100.0") == 0
    response = direct.post(
        "/login", data={"username": "ivan", "password": PASSWORD}, headers={"X-Forwarded-For": "198.51.100.99"}
    )
    assert response.status_code == 429  # the forged address did not escape the lock
    config = log_in(served, "alice").get("/config", headers={"X-Forwarded-Host": "evil.example"}).json()
    assert "evil.example" not in json.dumps(config)

    proxy = client(served, TRUSTED_PROXY)
    chain = {"X-Forwarded-For": "192.0.2.1, 203.0.113.7", "X-Forwarded-Proto": "https"}
    response = proxy.post("/login", data={"username": "ivan", "password": "wrong again"}, headers=chain)
    assert response.status_code == 401 and failures(served, "ivan", "203.0.113.7") == 1  # the proxy's client
    assert failures(served, "ivan", TRUSTED_PROXY) == 0 and failures(served, "ivan", "192.0.2.1") == 0
    secure = proxy.post("/login", data={"username": "judy", "password": PASSWORD}, headers=chain)
    assert secure.status_code == 303 and "Secure" in secure.headers["set-cookie"]  # HTTPS at the proxy
    assert secure.headers["strict-transport-security"].startswith("max-age=")


@pytest.mark.parametrize(
    "forwarded_for, client_address",
    [
        ("garbage, 10.9.9.1", "10.9.9.1"),  # nginx's $proxy_add_x_forwarded_for after a client's own header
        ("unknown, 10.9.9.3", "10.9.9.3"),
        ("10.9.9.2:4711", "10.9.9.2"),
        ("[2001:db8::7]:4711", "2001:db8::7"),
        ("2001:db8::8", "2001:db8::8"),
        ("203.0.113.66, 10.9.9.4", "10.9.9.4"),  # the client's leftmost claim is never its key
        ("198.51.100.9, 10.9.9.5, 127.0.0.3", "10.9.9.5"),  # a second trusted proxy's hop is skipped
        (",, 10.9.9.6,", "10.9.9.6"),
        ("10.9.9.7, not-an-address", "unidentified(not-an-address) via 127.0.0.3"),
        ("10.9.9.8, evil\tlabel" + "x" * 200, "unidentified(" + ("evil_label" + "x" * 200)[:64] + ") via 127.0.0.3"),
        ("127.0.0.3", "127.0.0.3"),  # every hop a trusted proxy: the first
    ],
)
def test_the_client_behind_a_trusted_proxy_is_the_rightmost_untrusted_hop(
    served, caplog, forwarded_for, client_address
):
    caplog.set_level("INFO")
    account = f"nobody-{abs(hash(forwarded_for))}"
    proxy = client(served, TRUSTED_PROXY)
    response = proxy.post(
        "/login", data={"username": account, "password": "wrong password"}, headers={"X-Forwarded-For": forwarded_for}
    )
    assert response.status_code == 401
    assert failures(served, account, client_address) == 1
    assert failures(served, account, TRUSTED_PROXY) == 0 or client_address == TRUSTED_PROXY
    logged = [r.getMessage() for r in caplog.records if account in r.getMessage()]
    assert logged and all(f"from {client_address}" in line for line in logged), logged
    if client_address.startswith("unidentified"):
        assert any("which is no IP address" in r.getMessage() for r in caplog.records)


def test_every_x_forwarded_for_line_counts_in_order(served):
    lines = [("X-Forwarded-For", "10.9.9.20"), ("X-Forwarded-For", "garbage, 10.9.9.21")]
    client(served, TRUSTED_PROXY).post("/login", data={"username": "nobody-lines", "password": "x" * 9}, headers=lines)
    assert failures(served, "nobody-lines", "10.9.9.21") == 1


def test_forwarded_addresses_and_origins_are_parsed_strictly():
    assert str(forwarded_address("10.0.0.1:80")) == "10.0.0.1" and str(forwarded_address("[::1]:80")) == "::1"
    assert str(forwarded_address(" ::ffff:10.0.0.9 ")) == "10.0.0.9"  # IPv4-mapped: the IPv4 address
    for entry in ("unknown", "", "[::1", "[::1]x", "10.0.0.1:80:90x", "_hidden", "10.0.0.300"):
        assert forwarded_address(entry) is None, entry
    assert same_origin("https://Review.Example.org", "review.example.org", "https")
    assert same_origin("https://review.example.org:443", "review.example.org", "https")
    assert same_origin("http://[::1]:7860", "[::1]:7860", "http")
    assert not same_origin("http://review.example.org", "review.example.org", "https")  # an http page, https app
    assert not same_origin("https://review.example.org", "review.example.org", "http")
    assert not same_origin("https://review.example.org:8443", "review.example.org", "https")
    for origin in (
        "null",
        "",
        "review.example.org",
        "https://review.example.org/path",
        "https://a@review.example.org",
    ):
        assert not same_origin(origin, "review.example.org", "https"), origin
    assert not same_origin("https://review.example.org:x", "review.example.org", "https")


def test_concurrent_failures_are_counted_exactly(served):
    def attempt(number: int) -> int:
        with client(served, "127.0.0.5") as browser:
            return browser.post("/login", data={"username": "judy", "password": f"wrong {number}"}).status_code

    with ThreadPoolExecutor(24) as pool:
        statuses = list(pool.map(attempt, range(24)))
    assert statuses.count(401) == 5 and statuses.count(429) == 19  # five password checks, no more
    assert failures(served, "judy", "127.0.0.5") == 5


# -- 5. logs ----------------------------------------------------------------------------------------------------------


def test_a_typed_name_cannot_forge_a_log_line(served, caplog):
    caplog.set_level("INFO")
    forged = "nobody\n2026-01-01 00:00:00 INFO builders.pipeline.review.app: login of 'alice' from 10.0.0.1\r\u2028"
    client(served, "127.0.0.9").post("/login", data={"username": forged, "password": "secret password 1"})
    lines = [record.getMessage() for record in caplog.records if "nobody" in record.getMessage()]
    assert lines and all("\n" not in line and "\r" not in line and "\u2028" not in line for line in lines)
    assert all("secret password" not in record.getMessage() for record in caplog.records)


# -- 6, 8. routes and files -------------------------------------------------------------------------------------------


def test_nothing_is_served_without_a_session_and_uploads_are_off(served):
    source = next(iter(served.ui.videos))
    anonymous = client(served)
    for path in ("/gradio_api/info", "/config", f"/videos/{source}", "/gradio_api/heartbeat/x"):
        assert anonymous.get(path).status_code == 401, path
    for path in ("/monitoring", "/monitoring/summary", f"/gradio_api/file={served.db}", "/gradio_api/openapi.json"):
        assert anonymous.get(path).status_code == 404, path
    assert anonymous.post("/gradio_api/upload", files={"files": ("x.bin", b"x" * 1000)}).status_code == 404
    assert anonymous.get("/login").status_code == 200

    alice = log_in(served, "alice")
    assert alice.get("/gradio_api/info").status_code == 200
    assert alice.post("/gradio_api/upload", files={"files": ("x.bin", b"x" * 1000)}).status_code == 404
    for path in (f"/gradio_api/file={served.db}", "/monitoring/summary", "/gradio_api/upload_progress"):
        assert alice.get(path).status_code == 404, path
    assert alice.post("/gradio_api/run/predict", json={"data": []}).status_code == 404


def test_only_the_reviewers_own_release_videos_are_served(served):
    alice, bob = log_in(served, "alice"), log_in(served, "bob")
    released = served.samples[served.ui.store.assignments("alice")[0].sample_id]["source_id"]
    video = alice.get(f"/videos/{released}", headers={"Range": "bytes=0-99"})
    assert video.status_code == 206 and video.headers["content-type"] == "video/mp4" and len(video.content) == 100
    assert video.headers["x-content-type-options"] == "nosniff"
    assert bob.get(f"/videos/{released}").status_code == 404  # no sample of that video is assigned to bob
    unreleased = sorted(set(index_videos(served.videos)) - set(served.ui.videos))
    assert unreleased and all(alice.get(f"/videos/{s}").status_code == 404 for s in unreleased)
    assert alice.get("/videos/page").status_code == 404  # page.html sits in --videos
    for path in ("/videos/..%2Freview.sqlite", "/videos/%2E%2E/page.html", f"/videos/{served.db}"):
        assert alice.get(path).status_code == 404, path


# -- 7. CORS and Host -------------------------------------------------------------------------------------------------


def test_foreign_origins_and_host_names_are_refused(served):
    alice = log_in(served, "alice")
    evil = {"Origin": "http://evil.example"}
    response = alice.post("/gradio_api/queue/join", json={"session_hash": "x"}, headers=evil)
    assert response.status_code == 403 and "access-control-allow-origin" not in response.headers
    preflight = alice.options("/gradio_api/queue/join", headers=evil | {"Access-Control-Request-Method": "POST"})
    assert preflight.status_code == 403 and "access-control-allow-origin" not in preflight.headers
    assert alice.get("/config", headers=evil).status_code == 403
    login_csrf = client(served).post("/login", data={"username": "alice", "password": PASSWORD}, headers=evil)
    assert login_csrf.status_code == 403
    assert alice.get("/config", headers={"Host": "evil.example"}).status_code == 421  # DNS rebinding
    port = served.url.rsplit(":", 1)[1].strip("/")
    same = alice.get("/config", headers={"Host": f"localhost:{port}", "Origin": f"http://localhost:{port}"})
    assert same.status_code == 200 and "access-control-allow-origin" not in same.headers


def test_the_origin_scheme_must_match_too(served, caplog):
    port = served.url.rsplit(":", 1)[1].strip("/")
    alice = log_in(served, "alice")
    assert alice.get("/config", headers={"Origin": f"https://127.0.0.1:{port}"}).status_code == 403  # http app
    behind = with_cookie(served, token_of(alice), TRUSTED_PROXY)  # the proxy says the browser spoke HTTPS
    https = {"X-Forwarded-Proto": "https", "X-Forwarded-For": "10.9.9.30"}
    assert behind.get("/config", headers=https | {"Origin": f"https://127.0.0.1:{port}"}).status_code == 200
    refused = behind.post("/gradio_api/queue/join", json={}, headers=https | {"Origin": f"http://127.0.0.1:{port}"})
    assert refused.status_code == 403  # an http page posting to the https app
    caplog.set_level("WARNING")
    plain = with_cookie(served, token_of(alice), "127.0.0.2")  # an untrusted TLS proxy: its headers are dropped
    forgot = {"X-Forwarded-Proto": "https", "Origin": f"https://localhost:{port}", "Host": f"localhost:{port}"}
    assert plain.get("/config", headers=forgot).status_code == 403
    assert any("pass --trusted-proxy" in r.getMessage() for r in caplog.records)  # the admin is told why


# -- 9-10. sizes and bad text -----------------------------------------------------------------------------------------


def test_request_bodies_and_notes_are_capped(served):
    heidi = log_in(served, "heidi")
    before = len(served.ui.store.log())
    huge = "x" * (MAX_BODY_BYTES + 1)
    response = decide(heidi, "heidihash01", "flag", huge)
    assert response.status_code == 413
    status = status_of(decide(heidi, "heidihash01", "flag", "x" * 5001))
    assert status.startswith("Not recorded: the note has 5001 characters")
    assert len(served.ui.store.log()) == before
    assert status_of(decide(heidi, "heidihash01", "flag", "x" * 5000)).startswith("Recorded: flag")


def raw_join(browser: httpx.Client, body: str) -> httpx.Response:
    return browser.post("/gradio_api/queue/join", content=body.encode(), headers={"Content-Type": "application/json"})


def test_a_lone_surrogate_anywhere_in_an_event_is_refused_and_the_stream_keeps_working(served, caplog):
    ivan = log_in(served, "ivan", source="127.0.0.2")
    config = ivan.get("/config").json()
    on_filter = next(d["id"] for d in config["dependencies"] if d.get("api_name") == "on_filter")
    reject = fn_index(ivan, "reject")
    bad = "\\ud800"  # JSON's escape of a lone surrogate: valid JSON, not valid Unicode
    for data, index in (
        (f'[null, "{bad}", "All", "All", false]', on_filter),  # a filter value
        (f'[null, "All", "All", "{bad}", false]', on_filter),
        (f'[null, ["other", "{bad}"], "note", "All", "All", "All", false]', reject),  # a reason tag
        (f'[null, ["other"], "bad {bad} note", "All", "All", "All", false]', reject),  # the note
        (f'[null, "All", "All", "All", false], "x{bad}": 1', on_filter),  # a key
    ):
        body = f'{{"data": {data}, "fn_index": {index}, "session_hash": "ivanhash01", "event_data": null}}'
        refused = raw_join(ivan, body)
        assert refused.status_code == 400 and "lone UTF-16 surrogate" in refused.json()["detail"], body
    assert raw_join(ivan, '{"data": [], "fn_index": 1, "session_hash": "x\\udfff"}').status_code == 400
    utf8_surrogate = b'{"data": ["\xed\xa0\x80"], "fn_index": 1, "session_hash": "ivanhash01"}'  # not UTF-8
    assert ivan.post("/gradio_api/queue/join", content=utf8_surrogate).status_code == 400
    assert served.ui.store.log("ivan") == []
    message = event(ivan, "on_filter", [None, "All", "All", "All", False], "ivanhash01", on_filter)
    assert message["success"] and message["output"]["data"][1] == ""  # the same page's stream still works
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"


def test_an_unknown_event_is_a_400_without_a_traceback(served, caplog):
    judy = log_in(served, "judy", source="127.0.0.2")
    for index in ("9999", "-1", '"1"', "true", "null", "[1]", "1.0"):
        body = f'{{"data": [], "fn_index": {index}, "session_hash": "judyhash01", "event_data": null}}'
        refused = raw_join(judy, body)
        assert refused.status_code == 400 and "Unknown event" in refused.json()["detail"], index
    for body in ("[1, 2]", "not json", '{"fn_index": 1, "data": ' + "[" * 5000 + "]" * 5000 + "}"):
        assert raw_join(judy, body).status_code == 400, body[:20]
    assert not [r for r in caplog.records if r.exc_info or "Traceback" in r.getMessage()], "a traceback was logged"
    message = event(judy, "on_filter", [None, "All", "All", "All", False], "judyhash01")
    assert message["success"]


def test_a_bad_password_with_a_lone_surrogate_still_counts(served):
    bad = client(served, "127.0.0.4").post(
        "/login",
        content=b"username=ivan&password=%ED%A0%80xxxxxxx",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert bad.status_code == 401 and failures(served, "ivan", "127.0.0.4") == 1


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl to make a test certificate")
def test_the_app_can_serve_https_itself_with_secure_cookies(served, tmp_path):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1"]
        + ["-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )
    options = ServerOptions("127.0.0.1", free_port(), tls_cert=cert, tls_key=key)
    server = ReviewServer(served.ui, options).start()
    try:
        assert server.url.startswith("https://")
        with httpx.Client(base_url=server.url.rstrip("/"), verify=False) as browser:
            response = browser.post("/login", data={"username": "alice", "password": PASSWORD})
            assert response.status_code == 303 and "Secure" in response.headers["set-cookie"]
            assert response.headers["strict-transport-security"].startswith("max-age=")
            assert browser.get("/config").status_code == 200
    finally:
        server.close()


def test_serving_every_interface_needs_the_host_names_and_proxies_must_be_addresses():
    with pytest.raises(ValueError, match="--server-name"):
        ServerOptions("0.0.0.0").allowed_hosts()
    assert ServerOptions("0.0.0.0", server_names=("Review.Example.org",)).allowed_hosts() == {"review.example.org"}
    assert "localhost" in ServerOptions("127.0.0.1").allowed_hosts()
    assert "localhost" not in ServerOptions("10.0.0.20").allowed_hosts()
    with pytest.raises(ValueError, match="--trusted-proxy 'proxy.example'"):
        ServerOptions(trusted_proxies=("proxy.example",)).proxies()
    assert len(ServerOptions(trusted_proxies=("10.0.0.0/8", "::1")).proxies()) == 2


# -- 11. headers ------------------------------------------------------------------------------------------------------


def test_security_headers_and_a_nonce_for_every_inline_script(served):
    login = client(served).get("/login")
    page = log_in(served, "alice").get("/")
    for response in (login, page):
        assert response.headers["x-frame-options"] == "DENY"
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["referrer-policy"] == "same-origin"
        assert response.headers["cache-control"] == "no-store"
        policy = response.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in policy and "object-src 'none'" in policy and "'unsafe-eval'" not in policy
        assert "script-src 'self'" in policy and "'unsafe-inline'" not in policy.split("script-src")[1].split(";")[0]
    nonce = page.headers["content-security-policy"].split("'nonce-")[1].split("'")[0]
    assert page.text.count("<script") == page.text.count(f'<script nonce="{nonce}"') >= 3
    assert nonce not in log_in(served, "alice").get("/").text  # a fresh nonce per page
    assert "server" not in page.headers


# -- 12. Markdown ----------------------------------------------------------------------------------------------------


def test_markdown_in_a_dataset_id_is_shown_as_text(served):
    MarkdownIt = pytest.importorskip("markdown_it").MarkdownIt  # CommonMark, as Gradio's renderer reads it

    mallory = log_in(served, "mallory")
    status = status_of(decide(mallory, "malloryhash1"))
    rendered = MarkdownIt("commonmark").render(status)
    assert "<a" not in rendered and "<img" not in rendered and "<em>" not in rendered
    assert MARKDOWN_ID in rendered  # shown as typed


# -- 13-14. the database file and telemetry ---------------------------------------------------------------------------


def test_the_database_and_its_wal_files_are_readable_by_their_owner_only(served, tmp_path):
    with closing(sqlite3.connect(served.db)) as reader:  # while a connection is open, the -wal and -shm files exist
        reader.execute("SELECT count(*) FROM users").fetchone()
        log_in(served, "alice")
        for suffix in ("", "-wal", "-shm"):
            path = Path(f"{served.db}{suffix}")
            assert path.exists() and stat.S_IMODE(path.stat().st_mode) == 0o600, path
    legacy = tmp_path / "old.sqlite"
    legacy.touch(mode=0o644)
    legacy.chmod(0o644)
    ReviewStore(legacy)
    assert stat.S_IMODE(legacy.stat().st_mode) == 0o600


def test_an_online_backup_while_the_app_runs_is_complete_and_private(served, tmp_path):
    alice = log_in(served, "alice")
    with closing(sqlite3.connect(served.db)) as reader:  # an open reader keeps recent writes in the -wal file
        reader.execute("SELECT count(*) FROM decisions").fetchone()
        assert status_of(decide(alice, "alicehash-backup", "flag", "kept in the backup")).startswith("Recorded")
        out = tmp_path / "backups" / "review.sqlite"
        assert main(["review", "backup", "--db", str(served.db), "--out", str(out)]) == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    with closing(sqlite3.connect(out)) as copy:
        assert copy.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert ReviewStore(out).log() == served.ui.store.log() and "kept in the backup" in [
        d.note for d in ReviewStore(out).log()
    ]
    assert main(["review", "backup", "--db", str(served.db), "--out", str(out)]) == 2  # never over an old backup


def test_telemetry_is_off(served):
    config = log_in(served, "alice").get("/config").json()
    assert config["analytics_enabled"] is False
