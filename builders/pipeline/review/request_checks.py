"""The rules the review server's gate applies to one request, as pure functions of its parts: which routes are
reachable, whether its ``Host`` and ``Origin`` (scheme included) name this server, which client an
``X-Forwarded-For`` chain names, and whether an event's JSON holds a lone UTF-16 surrogate.

Apart from :class:`~builders.pipeline.review.gate.Gate`, which applies them to the ASGI messages, so each rule reads
(and is tested) alone; :data:`SESSION_ROUTES` is what to revisit when Gradio's routes change.
"""

import ipaddress
from urllib.parse import urlsplit

from builders.pipeline.review.store import LONE_SURROGATE


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
DEFAULT_PORTS = {"http": 80, "https": 443}


def ip_address_of(value: str):
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
        return ip_address_of(text[1:end])
    if text.count(":") == 1:  # IPv4:port (a bare IPv6 address has several colons)
        text = text.split(":", 1)[0]
    return ip_address_of(text)


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
