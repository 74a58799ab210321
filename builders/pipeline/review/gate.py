"""The ASGI middleware that every request to the review server passes first (:class:`Gate`), and the security
headers of every response. A module apart from the serving (:mod:`~builders.pipeline.review.server`), so that what a
request must pass reads in one place; the rules it applies are pure functions in
:mod:`~builders.pipeline.review.request_checks`.

- **Sessions.** ``POST /login`` (a plain HTML form, no script) checks the password under the
  :class:`~builders.pipeline.review.accounts.LoginPolicy` throttle and issues a new random session token in an
  ``HttpOnly; SameSite=Strict`` cookie (``Secure`` when the request came over HTTPS), ending the session the browser
  presented before (rotation at login; :mod:`~builders.pipeline.review.login`). Every other route needs a live
  session: the token is looked up in the database on every request (idle and absolute expiry, logout, a password
  reset or a removed account end it at once, in every server process). ``POST /logout`` (the page's "Log out"
  button, a form) ends it; it must come from this origin (an ``Origin``, or else a ``Referer``, naming it), so
  another page, even of the same site, cannot log a reviewer out; ``GET /logout`` changes nothing (it shows that
  button). Gradio's ``session_hash`` is bound to the reviewer whose session first used it, so a hash read from a
  proxy log is worthless without that reviewer's cookie; Gradio's own ``request.username`` is the session's reviewer
  (its ``auth_dependency``).
- **Routes.** Only what the page needs is reachable
  (:data:`~builders.pipeline.review.request_checks.SESSION_ROUTES`): the page, its assets, its config and the event
  queue. Uploads, Gradio's file and proxy routes, deep links, the monitoring dashboard, the API docs and the direct
  ``/run`` and ``/call`` routes are not found. Videos come from ``GET /videos/<source_id>``: only files of the
  release's sources that are assigned to the session's reviewer, always with a video content type. An event
  (``queue/join``) must name one of the app's events (``fn_index``) and be JSON of valid Unicode: anything else is a
  400, before Gradio sees it (a lone UTF-16 surrogate, valid in JSON, would otherwise break that client's event
  stream).
- **Abuse.** Request bodies are capped (:data:`MAX_BODY_BYTES`; notes are capped by the store); the ``Host`` header
  must name this server (``--server-name``; a DNS-rebinding page is refused) and an ``Origin``, when sent, must be
  the same origin, scheme included (:func:`~builders.pipeline.review.request_checks.same_origin`: no cross-site form
  posts or fetches, no http page posting to the https app; no CORS headers are ever sent).
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
"""

import json
import logging
import re
import secrets
import threading
from collections import OrderedDict
from collections.abc import Iterable
from urllib.parse import parse_qs, unquote

from builders.pipeline.review.login import cookie_token
from builders.pipeline.review.network import ServerOptions
from builders.pipeline.review.request_checks import (
    EVENT_PATHS,
    PUBLIC_ROUTES,
    SESSION_ROUTES,
    forwarded_address,
    host_name,
    ip_address_of,
    lone_surrogate_in,
    referer_origin,
    route_allowed,
    same_origin,
)


MAX_BODY_BYTES = 64 * 1024  # a note of MAX_NOTE_CHARS, JSON-escaped, fits several times over
CACHEABLE_PREFIXES = ("/assets/", "/static/", "/svelte/")  # content-hashed file names
FORWARDED_HEADERS = (b"forwarded", b"x-forwarded-for", b"x-forwarded-proto", b"x-forwarded-host", b"x-forwarded-port")
SESSION_HASHES_KEPT = 100_000  # Gradio session hashes remembered for binding (oldest forgotten first)
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
        peer_ip = ip_address_of(peer[0])
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
