"""The dashboard refuses a request body over its limit (413) before reading it, so a
300 MB body never sits in the server's memory (issue 9, section 6).  A real dashboard
served by the CLI on 127.0.0.1, spoken to over a raw socket."""
from __future__ import annotations

import json
import os
import select
import socket
from pathlib import Path
from urllib.parse import urlsplit

import pytest

pytest.importorskip("uvicorn")

from agent_registry.dashboard.security import MAX_BODY  # noqa: E402
from test_dashboard_support import served  # noqa: E402

HUGE = 300 * 1024 * 1024
CHUNK = b"x" * (1024 * 1024)
# The server may grow by some buffers, never by anything near the body it refused.
GROWTH_ALLOWED = 64 * 1024 * 1024


def server_pid() -> int:
    """The dashboard process: this test's child running `agent-registry … dashboard`."""
    me = str(os.getpid())
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = (entry / "stat").read_text().rsplit(")", 1)[1].split()[1]
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if ppid == me and b"dashboard" in cmdline:
            return int(entry.name)
    raise AssertionError("no dashboard process found")


def memory_kib(pid: int, field: str) -> int:
    """VmRSS (now) or VmHWM (the peak so far) of *pid*, in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} for {pid}")


def post_head(start: dict, path: str, framing: str) -> bytes:
    port = urlsplit(start["url"]).port
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"X-Agent-Registry-Token: {start['token']}\r\nContent-Type: application/json\r\n"
            f"{framing}\r\n\r\n").encode()


def read_answer(sock: socket.socket) -> tuple[int, bytes, bytes]:
    """(status, head, body) of one HTTP response with a Content-Length."""
    data = b""
    while b"\r\n\r\n" not in data:
        more = sock.recv(65536)
        assert more, f"the connection closed mid-answer: {data!r}"
        data += more
    head, body = data.split(b"\r\n\r\n", 1)
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length:"))
    while len(body) < length:
        more = sock.recv(65536)
        assert more, "the connection closed mid-answer"
        body += more
    return int(head.split(b" ", 2)[1]), head, body


def send_until_answered(sock: socket.socket, head: bytes, piece: bytes,
                        total: int) -> tuple[int, bytes, bytes]:
    """Send *head*, then *piece* after *piece* (up to *total* bytes) for as long as
    nothing is answered; return the answer."""
    sock.sendall(head)
    sent = 0
    while sent < total and not select.select([sock], [], [], 0)[0]:
        try:
            sock.sendall(piece)
        except (BrokenPipeError, ConnectionResetError):
            break  # the server answered and closed: read what it said
        sent += len(piece)
    return read_answer(sock)


@pytest.fixture
def dashboard(repo, run):
    run("register", "kimi-1", "--provider", "Kimi", "--working-on", "auth")
    with served(repo) as start:
        yield start, server_pid()


def port_of(start: dict) -> int:
    return urlsplit(start["url"]).port


def test_a_huge_content_length_is_refused_before_the_body_is_read(dashboard):
    start, pid = dashboard
    before = memory_kib(pid, "VmHWM")
    with socket.create_connection(("127.0.0.1", port_of(start)), timeout=60) as sock:
        # the body is streamed only while no answer has come: the 413 must not wait for it
        status, head, body = send_until_answered(
            sock, post_head(start, "/api/cleanup", f"Content-Length: {HUGE}"), CHUNK, HUGE)
    assert status == 413, body
    assert json.loads(body)["error"]["message"] == f"request body over {MAX_BODY} bytes"
    assert b"content-security-policy" in head.lower()  # answered like every dashboard error
    assert (memory_kib(pid, "VmHWM") - before) * 1024 < GROWTH_ALLOWED


def test_a_chunked_body_is_cut_off_at_the_limit(dashboard):
    start, pid = dashboard
    before = memory_kib(pid, "VmHWM")
    piece = b"%x\r\n%s\r\n" % (len(CHUNK), CHUNK)
    with socket.create_connection(("127.0.0.1", port_of(start)), timeout=60) as sock:
        status, _, body = send_until_answered(
            sock, post_head(start, "/api/cleanup", "Transfer-Encoding: chunked"), piece, HUGE)
    assert status == 413, body
    assert json.loads(body)["error"]["message"] == f"request body over {MAX_BODY} bytes"
    assert (memory_kib(pid, "VmHWM") - before) * 1024 < GROWTH_ALLOWED


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_a_body_within_the_limit_still_works(dashboard, framing):
    start, _ = dashboard
    body = json.dumps({"reason": "nightly sweep", "by": "ops"}).encode()
    if framing == "chunked":
        head, payload = "Transfer-Encoding: chunked", b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    else:
        head, payload = f"Content-Length: {len(body)}", body
    with socket.create_connection(("127.0.0.1", port_of(start)), timeout=60) as sock:
        sock.sendall(post_head(start, "/api/cleanup", head) + payload)
        status, _, answer = read_answer(sock)
    assert status == 200, answer
    assert json.loads(answer) == {"stopped": []}
