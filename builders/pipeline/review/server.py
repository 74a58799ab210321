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
  once, in every server process). ``POST /logout`` (the page's "Log out" button, a form) ends it; it must come from
  this origin (an ``Origin``, or else a ``Referer``, naming it), so another page, even of the same site, cannot log a
  reviewer out; ``GET /logout`` changes nothing (it shows that button). Gradio's ``session_hash`` is bound to the
  reviewer whose session first used it, so a hash read from a proxy log is worthless without that reviewer's cookie;
  Gradio's own ``request.username`` is the session's reviewer (its ``auth_dependency``).
- **Routes.** Only what the page needs is reachable (:data:`SESSION_ROUTES`): the page, its assets, its config and
  the event queue. Uploads, Gradio's file and proxy routes, deep links, the monitoring dashboard, the API docs and
  the direct ``/run`` and ``/call`` routes are not found. Videos come from ``GET /videos/<source_id>``: only files of
  the release's sources that are assigned to the session's reviewer, always with a video content type. An event
  (``queue/join``) must name one of the app's events (``fn_index``) and be JSON of valid Unicode: anything else is a
  400, before Gradio sees it (a lone UTF-16 surrogate, valid in JSON, would otherwise break that client's event
  stream).
- **Abuse.** Request bodies are capped (:data:`MAX_BODY_BYTES`; notes are capped by the store); the ``Host`` header
  must name this server (``--server-name``; a DNS-rebinding page is refused) and an ``Origin``, when sent, must be
  the same origin, scheme included (:func:`same_origin`: no cross-site form posts or fetches, no http page posting to
  the https app; no CORS headers are ever sent).
- **Clients.** The client address (logged, and counted by the login throttle) is the TCP peer. ``X-Forwarded-For``
  and ``X-Forwarded-Proto`` are believed only from a ``--trusted-proxy`` address; from anyone else every
  ``X-Forwarded-*`` and ``Forwarded`` header is removed before Gradio sees it (uvicorn's own proxy-header handling,
  which trusts 127.0.0.1 by default, is off). The client behind a trusted proxy is found by the rightmost-untrusted
  rule (:meth:`Gate.forwarded_client`): each proxy appends the address it saw, so the chain is read from the right,
  trusted proxies are skipped, and the first other entry is the client (``ip``, ``ip:port`` or ``[v6]:port``);
  everything left of it may be made up by the client and is never read. An entry there that is no address (a proxy
  that writes ``unknown``) becomes a bounded, printable label of that proxy's (``unidentified(unknown) via
  10.0.0.10``), logged once; it is never the proxy's own address, so such clients are not merged with direct ones.
- **Headers.** Every response carries a Content-Security-Policy (:func:`content_security_policy`; the page's inline
  scripts get a per-response nonce, so injected markup cannot run script), ``X-Frame-Options: DENY``,
  ``X-Content-Type-Options: nosniff``, ``Referrer-Policy: same-origin``, ``Cache-Control: no-store`` (the page
  holds the correct answers; hashed static assets excepted) and, over HTTPS, ``Strict-Transport-Security``.

Gradio's telemetry is off (``analytics_enabled=False``), as are its server-side rendering, MCP server, run history
and monitoring. TLS: put a TLS-terminating proxy in front (the README's deployment section) or pass
``--tls-cert``/``--tls-key``. The port is taken (:func:`bind_socket`) before the dataset is read and before the log
says it serves, so a port in use is one line naming it, not a traceback after a claim to serve.
"""

import errno
import ipaddress
import json
import logging
import re
import secrets
import socket
import ssl
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from html import escape
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

from builders.errors import InputError
from builders.pipeline.review.store import LONE_SURROGATE, SessionPolicy, open_review_database


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
# POST /logout ends whatever session the cookie names, so it works (and does nothing) after a session has expired;
# GET /logout only shows the button that posts it (a GET never changes anything: an <img> could send it).
PUBLIC_ROUTES = {("GET", "/login"), ("HEAD", "/login"), ("POST", "/login"), ("GET", "/logout"), ("POST", "/logout")}
PUBLIC_ROUTES |= {("GET", "/favicon.ico")}
EVENT_PATHS = ("/gradio_api/queue/join", "/gradio_api/cancel")  # JSON bodies the gate reads (session hash, event)
CACHEABLE_PREFIXES = ("/assets/", "/static/", "/svelte/")  # content-hashed file names
FORWARDED_HEADERS = (b"forwarded", b"x-forwarded-for", b"x-forwarded-proto", b"x-forwarded-host", b"x-forwarded-port")
SESSION_HASHES_KEPT = 100_000  # Gradio session hashes remembered for binding (oldest forgotten first)
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
DEFAULT_PORTS = {"http": 80, "https": 443}
MAX_CLIENT_LABEL = 64  # characters of an X-Forwarded-For entry that is no address, kept as the client's label
LABEL_UNSAFE = re.compile(r"[^A-Za-z0-9._:\[\]-]")
WARNINGS_KEPT = 1000  # distinct one-time warnings remembered (labels, origins), so a flood cannot grow memory
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

    def check_tls(self) -> None:
        """Load ``--tls-cert``/``--tls-key`` once up front (uvicorn would load them only after the log said it serves),
        so a missing, unreadable or mismatched file is one line naming it."""
        if self.tls_cert is None and self.tls_key is None:
            return
        if self.tls_cert is None or self.tls_key is None:
            raise InputError("--tls-cert and --tls-key go together: give both, or neither (and a TLS proxy in front)")
        for option, path in (("--tls-cert", self.tls_cert), ("--tls-key", self.tls_key)):
            if not Path(path).is_file():
                raise InputError(f"{option} {path} is not a file: give the PEM file")
        try:
            ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(self.tls_cert, self.tls_key)
        except (OSError, ssl.SSLError) as err:
            raise InputError(
                f"--tls-cert {self.tls_cert} and --tls-key {self.tls_key} cannot be loaded ({err}): give a PEM "
                "certificate and its own private key (unencrypted)"
            ) from err

    def check(self) -> None:
        """Every option check that needs no dataset: fails before anything slow starts."""
        self.allowed_hosts()
        self.proxies()
        self.check_tls()


def bind_socket(options: ServerOptions) -> socket.socket:
    """The listening address taken now, before the slow start: a port in use (or a --host that is not this
    machine's) is one line naming it and the fix, and the log never claims to serve first. uvicorn serves on it."""
    host = options.host.strip("[]")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    where = f"port {options.port} on {options.host}"
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn: not over a listening socket
        sock.bind((host, options.port))
    except OSError as err:
        sock.close()
        if isinstance(err, socket.gaierror):
            message = f"--host {options.host} is neither an address nor a known host name of this machine"
        elif err.errno == errno.EADDRINUSE:
            message = f"{where} is already in use: choose another --port, or stop the other process that serves on it"
        elif err.errno == errno.EACCES:
            message = f"{where} needs administrator rights (ports below 1024): choose a --port of 1024 or above"
        elif err.errno == errno.EADDRNOTAVAIL:
            message = f"--host {options.host} is not an address of this machine: give one of its addresses"
        else:
            message = f"cannot listen on {where}: {err.strerror or err}"
        raise InputError(message + " (nothing is served)") from err
    return sock


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return host.lower() == "localhost"


def _ip(value: str):
    """``value`` as an IP address (an IPv4-mapped IPv6 address as its IPv4 one), or None."""
    try:
        address = ipaddress.ip_address(value.strip().strip("[]"))
    except ValueError:
        return None
    return getattr(address, "ipv4_mapped", None) or address


def forwarded_address(entry: str):
    """One ``X-Forwarded-For`` entry as an IP address: ``ip``, ``ip:port``, ``[v6]`` or ``[v6]:port`` (the port is
    dropped); None when it is not one."""
    text = entry.strip().strip('"')
    if text.startswith("["):
        end = text.find("]")
        if end < 0 or (text[end + 1 :] and not text[end + 1 :].startswith(":")):
            return None
        return _ip(text[1:end])
    if text.count(":") == 1:  # IPv4:port (a bare IPv6 address has several colons)
        text = text.split(":", 1)[0]
    return _ip(text)


def same_origin(origin: str, host: str, scheme: str) -> bool:
    """Whether a browser's ``Origin`` (``scheme://host[:port]``) is this server as the request reached it: the scheme
    (``https`` under TLS or from a trusted proxy's ``X-Forwarded-Proto``), the ``Host`` and the port, a default port
    written or not."""
    try:
        page, served = urlsplit(origin.strip()), urlsplit(f"//{host.strip()}")
        if page.scheme not in DEFAULT_PORTS or page.path or page.query or page.fragment or page.username:
            return False
        page_port = page.port or DEFAULT_PORTS[page.scheme]
        served_port = served.port or DEFAULT_PORTS.get(scheme)
    except ValueError:  # a port that is no number
        return False
    same_host = bool(page.hostname) and page.hostname == served.hostname
    return page.scheme == scheme and same_host and page_port == served_port


def referer_origin(referer: str) -> str:
    """The origin part of a ``Referer`` URL."""
    try:
        parts = urlsplit(referer.strip())
    except ValueError:
        return ""
    return f"{parts.scheme}://{parts.netloc}"


def lone_surrogate_in(value) -> bool:
    """Whether any string in a parsed JSON value (keys included) holds a lone UTF-16 surrogate (walked without
    recursion: a deeply nested body cannot exhaust the stack)."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if LONE_SURROGATE.search(item):
                return True
        elif isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return False


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
    """The ASGI middleware in front of everything (see the module docstring). ``events``: the ``fn_index`` values of
    the app's events (None: not checked)."""

    def __init__(self, app, ui, options: ServerOptions, events: Iterable[int] | None = None):
        self.app = app
        self.ui = ui
        self.hosts = options.allowed_hosts()
        self.proxies = options.proxies()
        self.events = frozenset(events) if events is not None else None
        self.session_of_hash: OrderedDict[str, str] = OrderedDict()
        self.warned: set[str] = set()
        self.lock = threading.Lock()

    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":
            return await self.app(scope, receive, send)
        if scope["type"] != "http":  # no websockets: Gradio's queue uses server-sent events
            return await send({"type": "websocket.close", "code": 1008})
        headers = self.resolve_client(scope)
        secure = scope["scheme"] == "https"
        method, path = scope["method"], scope["path"]

        host = headers.get(b"host", b"").decode("latin-1")
        if host_name(host) not in self.hosts:
            return await self.refuse(send, 421, "This server does not answer for that host name.", secure)
        origin = headers.get(b"origin")
        if origin is not None and not same_origin(origin.decode("latin-1"), host, scope["scheme"]):
            self.warn_scheme(origin.decode("latin-1"), host, scope)
            return await self.refuse(send, 403, "Cross-origin requests are refused.", secure)
        if (method, path) == ("POST", "/logout") and origin is None:  # no Origin (an old browser): the Referer then
            referer = headers.get(b"referer", b"").decode("latin-1")
            if not same_origin(referer_origin(referer), host, scope["scheme"]):
                return await self.refuse(send, 403, "Log out with the app's own Log out button.", secure)
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
            payload = None
            if path in EVENT_PATHS and body:
                payload, problem = self.event_payload(path, body)
                if problem:
                    client = (scope.get("client") or "?")[0]
                    logger.warning("refused an event of %r from %s: %s", user, client, problem)
                    return await self.refuse(send, 400, problem, secure)
            if not self.bind_session_hash(scope, payload, user):
                return await self.refuse(send, 403, "That Gradio session belongs to another reviewer.", secure)
            scope["sureon.review_user"] = user

        nonce = None
        if method in ("GET", "HEAD") and path == "/":  # the page: nonce its inline scripts (no compression to undo)
            nonce = secrets.token_urlsafe(16)
            scope["headers"] = [(k, v) for k, v in scope["headers"] if k != b"accept-encoding"]
        await self.app(scope, self.replay(body, receive), self.secured(send, path, secure, nonce))

    def event_payload(self, path: str, body: bytes) -> tuple[dict | None, str]:
        """The JSON body of an event request and ``""``, or ``(None, why it is refused)``: not a JSON object, a lone
        UTF-16 surrogate in any string (valid JSON, but Gradio's event stream cannot encode it back and breaks), or
        an event (``fn_index``) the app does not have (Gradio would answer a 500 with a ``KeyError``)."""
        try:
            payload = json.loads(body)
        except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
            return None, "The request is not valid JSON (UTF-8)."
        if not isinstance(payload, dict):
            return None, "The request is not a JSON object."
        if lone_surrogate_in(payload):
            return None, "The request holds an invalid character (a lone UTF-16 surrogate): retype the text."
        index = payload.get("fn_index")
        known = type(index) is int and (self.events is None or index in self.events)
        if path.endswith("/queue/join") and not known:
            return None, f"Unknown event (fn_index {str(index)[:20]!r}): reload the page."
        return payload, ""

    def resolve_client(self, scope) -> dict[bytes, bytes]:
        """Set ``scope["client"]``/``scope["scheme"]`` from a trusted proxy's headers, or drop those headers."""
        peer = scope.get("client") or ("", 0)
        peer_ip = _ip(peer[0])
        trusted = peer_ip is not None and self.is_proxy(peer_ip)
        if not trusted:
            scope["headers"] = [(k, v) for k, v in scope["headers"] if k not in FORWARDED_HEADERS]
        headers = dict(scope["headers"])
        if trusted:
            chain = [v.decode("latin-1") for k, v in scope["headers"] if k == b"x-forwarded-for"]  # every such line
            scope["client"] = (self.forwarded_client(peer_ip, ",".join(chain)), 0)
            proto = headers.get(b"x-forwarded-proto", b"").decode("latin-1").split(",")[0].strip().lower()
            if proto in ("http", "https"):
                scope["scheme"] = proto
        return headers

    def is_proxy(self, address) -> bool:
        return any(address in network for network in self.proxies)

    def forwarded_client(self, peer, forwarded_for: str) -> str:
        """The client behind trusted proxies, by the rightmost-untrusted rule: each proxy appends the address it saw,
        so read ``X-Forwarded-For`` from the right, skip trusted proxies, and the first other entry is the client;
        whatever lies left of it may be made up by the client and is never read (it cannot choose its own throttle
        key). Ports are dropped (``ip:port``, ``[v6]:port``); empty entries are skipped. An entry there that is no
        address (a proxy writing ``unknown``) is the client's label in a bounded, printable form, tied to the proxy
        that sent it, and logged once. The peer when the header is absent (logged once: the proxy is misconfigured);
        the leftmost entry when every entry is a trusted proxy."""
        entries = [entry.strip() for entry in forwarded_for.split(",") if entry.strip()]
        if not entries:
            self.warn_once(
                f"no chain {peer}",
                "trusted proxy %s sent a request without X-Forwarded-For: such requests count as the proxy's own "
                "(have it send the client's address; nginx: $proxy_add_x_forwarded_for)",
                peer,
            )
            return str(peer)
        address = None
        for entry in reversed(entries):
            address = forwarded_address(entry)
            if address is None:
                label = LABEL_UNSAFE.sub("_", entry)[:MAX_CLIENT_LABEL]
                client = f"unidentified({label}) via {peer}"
                self.warn_once(
                    f"label {client}",
                    "trusted proxy %s forwarded for %r, which is no IP address: that client is %s (check the "
                    "proxy's X-Forwarded-For; nginx: $proxy_add_x_forwarded_for)",
                    peer,
                    label,
                    client,
                )
                return client
            if not self.is_proxy(address):
                return str(address)
        return str(address)

    def warn_once(self, key: str, message: str, *values) -> None:
        with self.lock:
            if key in self.warned or len(self.warned) >= WARNINGS_KEPT:
                return
            self.warned.add(key)
        logger.warning(message, *values)

    def warn_scheme(self, origin: str, host: str, scope) -> None:
        """Say once why same-host requests are refused when only the scheme differs (a TLS proxy that does not send
        ``X-Forwarded-Proto``, or is not a ``--trusted-proxy``)."""
        scheme = scope["scheme"]
        if not same_origin(origin, host, "https" if scheme == "http" else "http"):
            return
        self.warn_once(
            f"scheme {origin}",
            "refused requests from the page %s: this server was reached over %s (behind a TLS proxy: pass "
            "--trusted-proxy with its address and have it send X-Forwarded-Proto)",
            LABEL_UNSAFE.sub("_", origin)[:200],
            scheme,
        )

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

    def bind_session_hash(self, scope, payload: dict | None, user: str) -> bool:
        """Tie a Gradio ``session_hash`` (one page load) to the reviewer whose session first uses it; refuse it to
        anyone else. (To the reviewer, not the token: a tab stays usable after its reviewer logs in again elsewhere,
        which rotates the shared cookie.) ``payload``: an event request's JSON body (:meth:`event_payload`)."""
        path = scope["path"]
        session_hash = None
        if path.startswith("/gradio_api/heartbeat/"):
            session_hash = unquote(path.rsplit("/", 1)[-1])
        elif path == "/gradio_api/queue/data":
            session_hash = (parse_qs(scope.get("query_string", b"").decode("latin-1")).get("session_hash") or [None])[
                0
            ]
        elif payload is not None:
            session_hash = payload.get("session_hash")
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


LOGOUT_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Sureon expert review: log out</title>
<style>body {{ font-family: system-ui, sans-serif; max-width: 24rem; margin: 4rem auto; padding: 0 1rem; }}</style>
</head><body><h1>Sureon expert review</h1>{form}<p><a href="/">Back to the review</a></p></body></html>
"""


def create_app(ui, options: ServerOptions):
    """The FastAPI app: login/logout/videos routes, the Gradio Blocks mounted at ``/``, all behind :class:`Gate`."""
    import asyncio

    import gradio as gr
    from fastapi import FastAPI, Request
    from fastapi.concurrency import run_in_threadpool
    from fastapi.middleware.cors import CORSMiddleware
    from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response

    from builders.pipeline.review.app import LOGOUT_FORM, build_blocks

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

    @app.get("/logout", response_class=HTMLResponse)
    async def logout_form():  # changes nothing (an <img> may send a GET): the button that posts /logout
        return HTMLResponse(LOGOUT_PAGE.format(form=LOGOUT_FORM))

    @app.post("/logout")  # the gate checked that it comes from this origin (Origin, else Referer)
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
    return Gate(app, ui, options, events=blocks.fns), blocks


class ReviewServer:
    """uvicorn serving :func:`create_app`; :meth:`run` blocks, :meth:`start` serves from a thread (tests). Both serve
    on a socket bound first (:func:`bind_socket`; or the one given), so nothing claims to serve a port it cannot."""

    def __init__(self, ui, options: ServerOptions = ServerOptions()):
        import uvicorn

        options.check_tls()
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

    def run(self, sock: socket.socket | None = None) -> None:
        sock = sock or bind_socket(self.options)
        logger.info("serving the review app on %s", self.url)
        self.server.run(sockets=[sock])

    def start(self, timeout: float = 60.0) -> "ReviewServer":
        sock = bind_socket(self.options)
        self.thread = threading.Thread(target=self.server.run, args=([sock],), daemon=True, name="review-server")
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
    """``sureon review serve``: every cheap check first (options, the database, the dataset's card, --videos, the
    port), then the slow start (reading the dataset, building the page), then serving until stopped."""
    from builders.pipeline.review.app import ReviewUI
    from builders.pipeline.review.samples import DEFAULT_CONFIG, check_dataset, load_samples
    from builders.sureon.frames import index_videos

    config = config or DEFAULT_CONFIG
    options.check()
    store = open_review_database(db)
    check_dataset(dataset, config)
    if videos is not None and not Path(videos).is_dir():
        raise InputError(
            f"--videos {videos} is not a folder: give the folder of source videos named <source_id>.<ext>"
        )
    sock = bind_socket(options)
    try:
        samples = load_samples(dataset, config)
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        found = index_videos(videos) if videos else {}
        ui = ReviewUI(store, samples, found, session_policy=sessions)
        if videos and not ui.videos:
            logger.warning("none of the dataset's source videos is in --videos %s: reviewers will see no clip", videos)
        ReviewServer(ui, options).run(sock)
    finally:
        sock.close()
