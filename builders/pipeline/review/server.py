"""The review app's web server: its own login, sessions and checks in front of the Gradio app.

    sureon review serve --dataset DIR --db review.sqlite --videos DIR [--host 127.0.0.1 --port 7860]
        [--server-name review.example.org] [--trusted-proxy 10.0.0.5] [--tls-cert C --tls-key K]

The Gradio Blocks (:func:`~builders.pipeline.review.app.build_blocks`) are mounted in a FastAPI app served by
uvicorn, behind :class:`Gate`, an ASGI middleware that every request passes first:

- **Sessions.** ``POST /login`` (a plain HTML form, no script) checks the password under the
  :class:`~builders.pipeline.review.store.LoginPolicy` throttle and issues a new random session token in an
  ``HttpOnly; SameSite=Strict`` cookie (``Secure`` when the request came over HTTPS), ending the session the browser
  presented before (rotation at login). Every other route needs a live session: the token is looked up in the
  database on every request (idle and absolute expiry, logout, a password reset or a removed account end it at
  once, in every server process). ``/logout`` ends it. Gradio's ``session_hash`` is bound to the reviewer whose
  session first used it, so a hash read from a proxy log is worthless without that reviewer's cookie; Gradio's own
  ``request.username`` is the session's reviewer (its ``auth_dependency``).
- **Routes.** Only what the page needs is reachable (:data:`SESSION_ROUTES`): the page, its assets, its config and
  the event queue. Uploads, Gradio's file and proxy routes, deep links, the monitoring dashboard, the API docs and
  the direct ``/run`` and ``/call`` routes are not found. Videos come from ``GET /videos/<source_id>``: only files of
  the release's sources that are assigned to the session's reviewer, always with a video content type.
- **Abuse.** Request bodies are capped (:data:`MAX_BODY_BYTES`; notes are capped by the store); the ``Host`` header
  must name this server (``--server-name``; a DNS-rebinding page is refused) and an ``Origin``, when sent, must be
  the same origin (no cross-site form posts or fetches; no CORS headers are ever sent).
- **Clients.** The client address (logged, and counted by the login throttle) is the TCP peer. ``X-Forwarded-For``
  and ``X-Forwarded-Proto`` are believed only from a ``--trusted-proxy`` address (the rightmost address in the
  chain that is not itself a trusted proxy is the client); from anyone else every ``X-Forwarded-*`` and
  ``Forwarded`` header is removed before Gradio sees it (uvicorn's own proxy-header handling, which trusts
  127.0.0.1 by default, is off).
- **Headers.** Every response carries a Content-Security-Policy (:func:`content_security_policy`; the page's inline
  scripts get a per-response nonce, so injected markup cannot run script), ``X-Frame-Options: DENY``,
  ``X-Content-Type-Options: nosniff``, ``Referrer-Policy: same-origin``, ``Cache-Control: no-store`` (the page
  holds the correct answers; hashed static assets excepted) and, over HTTPS, ``Strict-Transport-Security``.

Gradio's telemetry is off (``analytics_enabled=False``), as are its server-side rendering, MCP server, run history
and monitoring. TLS: put a TLS-terminating proxy in front (the README's deployment section) or pass
``--tls-cert``/``--tls-key``.
"""

import ipaddress
import json
import logging
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from html import escape
from pathlib import Path
from urllib.parse import parse_qs, unquote

from builders.errors import InputError
from builders.pipeline.review.store import ReviewStore, SessionPolicy


COOKIE = "sureon_review_session"
MAX_BODY_BYTES = 64 * 1024  # a note of MAX_NOTE_CHARS, JSON-escaped, fits several times over
VIDEO_TYPES = {
    ".mp4": "video/mp4",
    ".m4v": "video/mp4",
    ".mov": "video/quicktime",
    ".mkv": "video/x-matroska",
    ".webm": "video/webm",
    ".avi": "video/x-msvideo",
    ".mpg": "video/mpeg",
    ".mpeg": "video/mpeg",
    ".ts": "video/mp2t",
}
# (method, path or path prefix ending in "/" or "=") a live session may reach; everything else is 404.
SESSION_ROUTES = {
    ("GET", "/"),
    ("HEAD", "/"),
    ("GET", "/config"),
    ("GET", "/config/"),
    ("GET", "/theme.css"),
    ("GET", "/gradio_api/theme.css"),
    ("GET", "/manifest.json"),
    ("GET", "/assets/"),
    ("GET", "/static/"),
    ("GET", "/svelte/"),
    ("GET", "/gradio_api/info"),
    ("GET", "/gradio_api/info/"),
    ("GET", "/gradio_api/app_id"),
    ("GET", "/gradio_api/app_id/"),
    ("GET", "/gradio_api/login_check"),
    ("GET", "/gradio_api/login_check/"),
    ("GET", "/gradio_api/startup-events"),
    ("GET", "/gradio_api/heartbeat/"),
    ("GET", "/gradio_api/queue/data"),
    ("POST", "/gradio_api/queue/join"),
    ("POST", "/gradio_api/cancel"),
    ("POST", "/gradio_api/reset"),
    ("GET", "/videos/"),
    ("HEAD", "/videos/"),
}
# /logout ends whatever session the cookie names, so it works (and does nothing) after a session has expired.
PUBLIC_ROUTES = {("GET", "/login"), ("HEAD", "/login"), ("POST", "/login"), ("GET", "/logout"), ("POST", "/logout")}
PUBLIC_ROUTES |= {("GET", "/favicon.ico")}
CACHEABLE_PREFIXES = ("/assets/", "/static/", "/svelte/")  # content-hashed file names
FORWARDED_HEADERS = (b"forwarded", b"x-forwarded-for", b"x-forwarded-proto", b"x-forwarded-host", b"x-forwarded-port")
SESSION_HASHES_KEPT = 100_000  # Gradio session hashes remembered for binding (oldest forgotten first)
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
logger = logging.getLogger(__name__)


def content_security_policy(nonce: str | None = None) -> str:
    """The CSP of every response. Gradio's page needs same-origin scripts (its bundle, loaded as modules) plus its few
    inline ``<script>`` blocks (allowed by ``nonce`` only), inline styles (its components set style attributes),
    ``data:``/``blob:`` images and same-origin media, fetches and event streams; nothing from another origin."""
    scripts = f"'self' 'nonce-{nonce}'" if nonce else "'self'"
    return (
        f"default-src 'self'; script-src {scripts}; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; "
        "media-src 'self' blob:; font-src 'self' data:; connect-src 'self'; worker-src 'self' blob:; "
        "frame-src 'none'; object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'"
    )


@dataclass(frozen=True)
class ServerOptions:
    host: str = "127.0.0.1"
    port: int = 7860
    server_names: tuple[str, ...] = ()
    trusted_proxies: tuple[str, ...] = ()
    tls_cert: Path | None = None
    tls_key: Path | None = None

    def allowed_hosts(self) -> frozenset[str]:
        """Host names a request's ``Host`` may carry: ``--server-name`` values, the bound address, and the loopback
        names when bound to loopback. Serving every interface needs ``--server-name``."""
        names = {name.lower() for name in self.server_names}
        if self.host in ("0.0.0.0", "::", ""):
            if not names:
                raise InputError(
                    f"--host {self.host} serves every interface: name the host name(s) reviewers use with "
                    "--server-name NAME (requests naming any other Host are refused, which stops DNS rebinding)"
                )
            return frozenset(names)
        names.add(self.host.lower().strip("[]"))
        if _is_loopback(self.host):
            names.update(LOOPBACK_NAMES)
        return frozenset(names)

    def proxies(self) -> tuple:
        networks = []
        for value in self.trusted_proxies:
            try:
                networks.append(ipaddress.ip_network(value, strict=False))
            except ValueError as err:
                raise InputError(f"--trusted-proxy {value!r} is not an IP address or network: {err}") from err
        return tuple(networks)


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return host.lower() == "localhost"


def _ip(value: str):
    try:
        return ipaddress.ip_address(value.strip().strip("[]"))
    except ValueError:
        return None


def host_name(netloc: str) -> str:
    """``host`` of a ``host[:port]`` (IPv6 in brackets), lower-cased."""
    netloc = netloc.strip().lower()
    if netloc.startswith("["):
        return netloc[1 : netloc.find("]")] if "]" in netloc else netloc
    return netloc.rsplit(":", 1)[0] if netloc.count(":") == 1 else netloc


def route_allowed(method: str, path: str, routes: set) -> bool:
    method = "GET" if method == "HEAD" and ("HEAD", path) not in routes else method
    if (method, path) in routes:
        return True
    return any(
        path.startswith(prefix) and len(path) > len(prefix)
        for allowed_method, prefix in routes
        if allowed_method == method and prefix.endswith(("/", "=")) and prefix != "/"
    )


def cookie_token(headers: dict[bytes, bytes]) -> str | None:
    for part in headers.get(b"cookie", b"").decode("latin-1").split(";"):
        name, _, value = part.strip().partition("=")
        if name == COOKIE and value:
            return value
    return None


def session_cookie(token: str, secure: bool, max_age: float) -> str:
    attributes = f"{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict; Max-Age={int(max_age)}"
    return attributes + ("; Secure" if secure else "")


def cleared_cookie(secure: bool) -> str:
    return f"{COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0" + ("; Secure" if secure else "")


class Gate:
    """The ASGI middleware in front of everything (see the module docstring)."""

    def __init__(self, app, ui, options: ServerOptions):
        self.app = app
        self.ui = ui
        self.hosts = options.allowed_hosts()
        self.proxies = options.proxies()
        self.session_of_hash: OrderedDict[str, str] = OrderedDict()
        self.lock = threading.Lock()

    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":
            return await self.app(scope, receive, send)
        if scope["type"] != "http":  # no websockets: Gradio's queue uses server-sent events
            return await send({"type": "websocket.close", "code": 1008})
        headers = self.resolve_client(scope)
        secure = scope["scheme"] == "https"
        method, path = scope["method"], scope["path"]

        if host_name(headers.get(b"host", b"").decode("latin-1")) not in self.hosts:
            return await self.refuse(send, 421, "This server does not answer for that host name.", secure)
        origin = headers.get(b"origin")
        if (
            origin is not None
            and origin.decode("latin-1").split("://", 1)[-1].lower() != headers[b"host"].decode("latin-1").lower()
        ):
            return await self.refuse(send, 403, "Cross-origin requests are refused.", secure)
        length = headers.get(b"content-length", b"0").strip() or b"0"
        if not length.isdigit() or int(length) > MAX_BODY_BYTES:
            return await self.refuse(send, 413, f"Request bodies are limited to {MAX_BODY_BYTES} bytes.", secure)
        body = b""
        if method not in ("GET", "HEAD"):
            body = await self.read_body(receive)
            if body is None:
                return await self.refuse(send, 413, f"Request bodies are limited to {MAX_BODY_BYTES} bytes.", secure)

        if (method, path) in PUBLIC_ROUTES:
            scope["sureon.review_user"] = None
        elif not route_allowed(method, path, SESSION_ROUTES):
            return await self.refuse(send, 404, "Not found.", secure)
        else:
            import anyio

            token = cookie_token(headers)
            user = await anyio.to_thread.run_sync(self.ui.session_user, token)
            if user is None:
                if method in ("GET", "HEAD") and path == "/":
                    return await self.redirect(send, "/login", secure)
                return await self.refuse(send, 401, "Log in first (or again: your session has ended).", secure)
            if not self.bind_session_hash(scope, body, user):
                return await self.refuse(send, 403, "That Gradio session belongs to another reviewer.", secure)
            scope["sureon.review_user"] = user

        nonce = None
        if method in ("GET", "HEAD") and path == "/":  # the page: nonce its inline scripts (no compression to undo)
            nonce = secrets.token_urlsafe(16)
            scope["headers"] = [(k, v) for k, v in scope["headers"] if k != b"accept-encoding"]
        await self.app(scope, self.replay(body, receive), self.secured(send, path, secure, nonce))

    def resolve_client(self, scope) -> dict[bytes, bytes]:
        """Set ``scope["client"]``/``scope["scheme"]`` from a trusted proxy's headers, or drop those headers."""
        peer = scope.get("client") or ("", 0)
        peer_ip = _ip(peer[0])
        trusted = peer_ip is not None and any(peer_ip in network for network in self.proxies)
        if not trusted:
            scope["headers"] = [(k, v) for k, v in scope["headers"] if k not in FORWARDED_HEADERS]
        headers = dict(scope["headers"])
        if trusted:
            scope["client"] = (str(self.forwarded_client(peer_ip, headers.get(b"x-forwarded-for", b""))), 0)
            proto = headers.get(b"x-forwarded-proto", b"").decode("latin-1").split(",")[0].strip().lower()
            if proto in ("http", "https"):
                scope["scheme"] = proto
        return headers

    def forwarded_client(self, peer, forwarded_for: bytes):
        """The rightmost address of ``X-Forwarded-For`` that is not a trusted proxy (each proxy appends the address
        it saw, so everything left of that could be made up by the client); the peer if the header is absent or
        not a list of addresses."""
        chain = [_ip(part) for part in forwarded_for.decode("latin-1").split(",")] if forwarded_for else []
        if not chain or None in chain:
            return peer
        for address in reversed(chain):
            if not any(address in network for network in self.proxies):
                return address
        return chain[0]

    async def read_body(self, receive) -> bytes | None:
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return b"".join(chunks)
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > MAX_BODY_BYTES:
                return None
            if not message.get("more_body"):
                return b"".join(chunks)

    @staticmethod
    def replay(body: bytes, receive):
        sent = False

        async def replayed():
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return replayed

    def bind_session_hash(self, scope, body: bytes, user: str) -> bool:
        """Tie a Gradio ``session_hash`` (one page load) to the reviewer whose session first uses it; refuse it to
        anyone else. (To the reviewer, not the token: a tab stays usable after its reviewer logs in again elsewhere,
        which rotates the shared cookie.)"""
        path = scope["path"]
        session_hash = None
        if path.startswith("/gradio_api/heartbeat/"):
            session_hash = unquote(path.rsplit("/", 1)[-1])
        elif path == "/gradio_api/queue/data":
            session_hash = (parse_qs(scope.get("query_string", b"").decode("latin-1")).get("session_hash") or [None])[
                0
            ]
        elif path in ("/gradio_api/queue/join", "/gradio_api/cancel") and body:
            try:
                session_hash = json.loads(body).get("session_hash")
            except (ValueError, AttributeError):
                return False
        if not session_hash:
            return True
        with self.lock:
            bound = self.session_of_hash.setdefault(str(session_hash), user)
            self.session_of_hash.move_to_end(str(session_hash))
            while len(self.session_of_hash) > SESSION_HASHES_KEPT:
                self.session_of_hash.popitem(last=False)
        return bound == user

    @staticmethod
    def secured(send, path: str, secure: bool, nonce: str | None):
        """``send`` with the security headers added, and (for the page) the inline scripts nonced."""
        started = {}

        async def send_secured(message):
            if message["type"] == "http.response.start":
                headers = [
                    (k, v) for k, v in message.get("headers", []) if not k.lower().startswith(b"access-control-")
                ]
                names = {k.lower() for k, _ in headers}
                html = any(k.lower() == b"content-type" and v.startswith(b"text/html") for k, v in headers)
                for name, value in security_headers(path, secure, nonce if html else None):
                    if name not in names or name in (b"content-security-policy", b"cache-control"):
                        headers = [(k, v) for k, v in headers if k.lower() != name] + [(name, value)]
                if nonce and html:  # hold the start until the whole page is in, to fix its length
                    started["message"] = message | {"headers": headers}
                    started["body"] = b""
                    return None
                return await send(message | {"headers": headers})
            if message["type"] == "http.response.body" and "message" in started:
                started["body"] += message.get("body", b"")
                if message.get("more_body"):
                    return None
                page = started["body"].replace(b"<script", f'<script nonce="{nonce}"'.encode())
                start = started.pop("message")
                headers = [(k, v) for k, v in start["headers"] if k.lower() != b"content-length"]
                await send(start | {"headers": [*headers, (b"content-length", str(len(page)).encode())]})
                return await send({"type": "http.response.body", "body": page})
            return await send(message)

        return send_secured

    async def refuse(self, send, status: int, message: str, secure: bool) -> None:
        body = json.dumps({"detail": message}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await self.secured(send, "", secure, None)(
            {"type": "http.response.start", "status": status, "headers": headers}
        )
        await send({"type": "http.response.body", "body": body})

    async def redirect(self, send, location: str, secure: bool) -> None:
        headers = [(b"location", location.encode()), (b"content-length", b"0")]
        await self.secured(send, "", secure, None)({"type": "http.response.start", "status": 303, "headers": headers})
        await send({"type": "http.response.body", "body": b""})


def security_headers(path: str, secure: bool, nonce: str | None) -> Iterable[tuple[bytes, bytes]]:
    yield b"content-security-policy", content_security_policy(nonce).encode()
    yield b"x-frame-options", b"DENY"
    yield b"x-content-type-options", b"nosniff"
    yield b"referrer-policy", b"same-origin"  # no-referrer would make browsers send "Origin: null" on form posts
    yield b"cross-origin-opener-policy", b"same-origin"
    yield b"cross-origin-resource-policy", b"same-origin"
    yield b"permissions-policy", b"camera=(), microphone=(), geolocation=()"
    if not path.startswith(CACHEABLE_PREFIXES):
        yield b"cache-control", b"no-store"
    if secure:
        yield b"strict-transport-security", b"max-age=31536000"


LOGIN_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Sureon expert review: log in</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 24rem; margin: 4rem auto; padding: 0 1rem; }}
label, input, button {{ display: block; width: 100%; box-sizing: border-box; font-size: 1rem; }}
input {{ margin: .25rem 0 1rem; padding: .5rem; }} button {{ padding: .6rem; }}
.message {{ padding: .5rem; background: #fef3c7; border-left: 4px solid #d97706; }}
</style></head>
<body><h1>Sureon expert review</h1>{message}
<form method="post" action="/login">
<label for="username">Username</label><input id="username" name="username" autocomplete="username" required>
<label for="password">Password</label>
<input id="password" name="password" type="password" autocomplete="current-password" required>
<button type="submit">Log in</button>
</form></body></html>
"""


def login_page(message: str = "") -> str:
    return LOGIN_PAGE.format(message=f"<p class='message' role='alert'>{escape(message)}</p>" if message else "")


def create_app(ui, options: ServerOptions):
    """The FastAPI app: login/logout/videos routes, the Gradio Blocks mounted at ``/``, all behind :class:`Gate`."""
    import asyncio

    import gradio as gr
    from fastapi import FastAPI, Request
    from fastapi.concurrency import run_in_threadpool
    from fastapi.middleware.cors import CORSMiddleware
    from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response

    from builders.pipeline.review.app import build_blocks

    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)

    def client_of(request: Request) -> str:
        return request.client.host if request.client else "unknown"

    @app.get("/login", response_class=HTMLResponse)
    async def login_form(out: str = ""):
        return HTMLResponse(login_page("You are logged out." if out else ""))

    @app.post("/login", response_class=HTMLResponse)
    async def login(request: Request):
        if request.headers.get("content-type", "").split(";")[0].strip() != "application/x-www-form-urlencoded":
            return HTMLResponse(login_page("Log in with the form."), status_code=415)
        form = await request.form()
        username, password = str(form.get("username", "")), str(form.get("password", ""))
        client = client_of(request)
        attempt = await run_in_threadpool(ui.begin_login, username, client)
        if not attempt.allowed:
            return HTMLResponse(login_page(ui.refusal(attempt)), status_code=429)
        if attempt.wait_s:  # the slow-down: awaited, so it holds no worker thread
            await asyncio.sleep(attempt.wait_s)
        token, message = await run_in_threadpool(
            ui.finish_login, username, password, client, attempt, request.cookies.get(COOKIE)
        )
        if token is None:
            return HTMLResponse(login_page(message), status_code=401)
        response = RedirectResponse("/", status_code=303)
        secure = request.url.scheme == "https"
        response.headers["set-cookie"] = session_cookie(token, secure, ui.session_policy.max_age_s)
        return response

    @app.api_route("/logout", methods=["GET", "POST"])  # GET: the page's "Log out" link (SameSite=Strict: same-site)
    async def logout(request: Request):
        await run_in_threadpool(ui.logout, request.cookies.get(COOKIE), client_of(request))
        response = RedirectResponse("/login?out=1", status_code=303)
        response.headers["set-cookie"] = cleared_cookie(request.url.scheme == "https")
        return response

    @app.api_route("/videos/{source_id}", methods=["GET", "HEAD"])
    async def video(source_id: str, request: Request):
        path = await run_in_threadpool(ui.video_of, request.scope.get("sureon.review_user"), source_id)
        media_type = VIDEO_TYPES.get(path.suffix.lower()) if path else None
        if media_type is None:
            return Response(status_code=404)
        return FileResponse(path, media_type=media_type, content_disposition_type="inline")

    # Starlette's CORS middleware with no allowed origin: Gradio then adds no CORS headers of its own.
    app.add_middleware(CORSMiddleware, allow_origins=[], allow_credentials=False)
    blocks = build_blocks(ui).queue(default_concurrency_limit=8, max_size=256)
    gr.mount_gradio_app(
        app,
        blocks,
        path="/",
        server_name=options.host,
        server_port=options.port,
        footer_links=[],
        run_history=False,
        auth_dependency=lambda request: request.scope.get("sureon.review_user"),
        show_error=False,
        max_file_size=1,  # uploads are refused by the gate anyway; this is Gradio's own limit
        ssr_mode=False,
        enable_monitoring=False,
        pwa=False,
        mcp_server=False,
        # system fonts: the default theme imports Google Fonts, which the CSP (and a hospital network) would block
        theme=gr.themes.Default(
            font=["ui-sans-serif", "system-ui", "sans-serif"], font_mono=["ui-monospace", "monospace"]
        ),
    )
    return Gate(app, ui, options), blocks


class ReviewServer:
    """uvicorn serving :func:`create_app`; :meth:`run` blocks, :meth:`start` serves from a thread (tests)."""

    def __init__(self, ui, options: ServerOptions = ServerOptions()):
        import uvicorn

        if (options.tls_cert is None) != (options.tls_key is None):
            raise InputError("--tls-cert and --tls-key go together")
        self.options = options
        self.app, self.blocks = create_app(ui, options)
        config = uvicorn.Config(
            self.app,
            host=options.host,
            port=options.port,
            proxy_headers=False,  # the Gate believes forwarded headers from --trusted-proxy addresses only
            server_header=False,
            ws="none",
            log_level="warning",
            ssl_certfile=options.tls_cert,
            ssl_keyfile=options.tls_key,
        )
        self.server = uvicorn.Server(config)
        self.thread = None

    @property
    def url(self) -> str:
        scheme = "https" if self.options.tls_cert else "http"
        host = self.options.host if ":" not in self.options.host else f"[{self.options.host}]"
        return f"{scheme}://{host}:{self.options.port}/"

    def run(self) -> None:
        logger.info("serving the review app on %s", self.url)
        self.server.run()

    def start(self, timeout: float = 60.0) -> "ReviewServer":
        self.thread = threading.Thread(target=self.server.run, daemon=True, name="review-server")
        self.thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the review server did not start on {self.url}")
            time.sleep(0.05)
        return self

    def close(self) -> None:
        self.server.should_exit = True
        if self.thread is not None:
            self.thread.join(timeout=30)
        self.blocks.close()


def serve(
    dataset: Path,
    db: Path,
    videos: Path | None = None,
    config: str | None = None,
    options: ServerOptions = ServerOptions(),
    sessions: SessionPolicy | None = None,
) -> None:
    from builders.pipeline.review.app import ReviewUI
    from builders.pipeline.review.samples import DEFAULT_CONFIG, load_samples
    from builders.sureon.frames import index_videos

    options.allowed_hosts()  # a bad --host/--server-name combination fails before the dataset is read
    options.proxies()
    samples = load_samples(dataset, config or DEFAULT_CONFIG)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    ui = ReviewUI(ReviewStore(db), samples, index_videos(videos) if videos else {}, session_policy=sessions)
    ReviewServer(ui, options).run()
