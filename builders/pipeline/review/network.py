"""Where the review server listens: its options (host, server names, trusted proxies, TLS files), checked before
anything slow starts, and the listening socket, bound before the dataset is read.

Apart from the request handling (:mod:`~builders.pipeline.review.gate`) because these run once, at start-up, and
their failures are the operator's (a port in use, a missing certificate): each is one line naming the option and the
fix, before the log claims to serve.
"""

import errno
import ipaddress
import socket
import ssl
from dataclasses import dataclass
from pathlib import Path

from builders.errors import InputError


LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")


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
