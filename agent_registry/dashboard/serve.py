"""Where and how the dashboard runs: choosing the port, and serving with uvicorn.

The port is bound here, before uvicorn starts, and the bound socket is handed to uvicorn,
so no other process can take it between the check and the start.  A port in use is
probed (GET /api/health): another dashboard of the same repository is reused, anything
else is skipped for the next port.
"""
from __future__ import annotations

import errno
import ipaddress
import json
import os
import secrets
import socket
import urllib.request
from dataclasses import dataclass, field

from ..errors import BadInput
from .app import APP_NAME

TOKEN_ENV = "AGENT_REGISTRY_DASHBOARD_TOKEN"
PORT_ATTEMPTS = 20


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def access_token(host: str) -> str | None:
    """The token every request must carry: from the environment, made up for a bind
    other than loopback, else none."""
    if os.environ.get(TOKEN_ENV):
        return os.environ[TOKEN_ENV]
    return None if is_loopback(host) else secrets.token_urlsafe(24)


def url_host(host: str) -> str:
    """*host* as a URL writes it: an IPv6 address in brackets."""
    return f"[{host}]" if ":" in host else host


@dataclass
class Placement:
    host: str
    port: int
    reused: bool
    sock: socket.socket | None = None
    notes: list[str] = field(default_factory=list)
    answer: dict | None = None  # the reused dashboard's /api/health

    def url(self, token: str | None = None) -> str:
        return f"http://{url_host(self.host)}:{self.port}/" + (f"?token={token}" if token else "")


def probe(host: str, port: int, timeout: float = 1.0) -> dict | None:
    """The /api/health answer of whatever listens on host:port, or None."""
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    try:
        with urllib.request.urlopen(f"http://{url_host(host)}:{port}/api/health",
                                    timeout=timeout) as r:
            answer = json.loads(r.read(65536))
    except (OSError, ValueError):
        return None
    return answer if isinstance(answer, dict) else None


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # not past a live listener
    try:
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock


def place(host: str, port: int, repo_id: str, attempts: int = PORT_ATTEMPTS) -> Placement:
    """Bind host:port, or reuse the dashboard of the same repository already there, or
    move on to the next port, saying why."""
    notes = []
    for candidate in range(port, port + attempts) if port else [0]:
        try:
            sock = bind(host, candidate)
        except socket.gaierror:
            raise BadInput(f"--host {host}: not an address of this machine") from None
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise BadInput(f"cannot listen on {host}:{candidate}: {exc.strerror}") from None
            answer = probe(host, candidate)
            if answer and answer.get("app") == APP_NAME and answer.get("repo_id") == repo_id:
                notes.append(f"port {candidate} already serves this repository's dashboard: reusing it")
                return Placement(host, candidate, True, None, notes, answer)
            what = "another repository's dashboard" if answer and answer.get("app") == APP_NAME \
                else "something else"
            notes.append(f"port {candidate} is taken by {what}; trying {candidate + 1}")
            continue
        return Placement(host, sock.getsockname()[1], False, sock, notes)
    raise BadInput(f"no free port among {port}-{port + attempts - 1} on {host}")


def serve(app, placement: Placement) -> None:
    """Run *app* on the socket *placement* bound, until interrupted."""
    import uvicorn
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on",
                            timeout_graceful_shutdown=2)
    uvicorn.Server(config).run(sockets=[placement.sock])
