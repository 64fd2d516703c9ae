"""The server's stdin and stdout read and written on its event loop.

The SDK's own stdio transport reads each line and writes and flushes each answer
through ``anyio.wrap_file``: three hops to a worker thread and back per tool call, about
half a millisecond of a warm call's round trip (bench/mcp_bench.py, docs/benchmarks.md).
Here the wire is read and written by asyncio's pipe transports instead, and handed to
the SDK's ``stdio_server`` as its streams, so every JSON-RPC detail stays the SDK's,
but for the plain tool calls and pings the lean path answers by the SDK's own handlers
(mcp/lean.py), written by the same writer.

As the SDK does while serving, fd 0 points at the null device and fd 1 at stderr, so a
git process started meanwhile can neither read the client's messages nor write into
the answers; both are put back on the way out.  Where the wire is not a pipe or a socket
(a terminal, a file: asyncio has no transport for them, and a terminal must not be left
non-blocking) or on Windows, the SDK's transport serves as before.
"""
from __future__ import annotations

import asyncio
import os
import stat
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from mcp.server.stdio import stdio_server

TYPE_CHECKING = False
if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from .lean import LeanCalls as Lean

LINE_LIMIT = 1 << 26  # bytes of one JSON-RPC line (asyncio's default, 64 KiB, is too few)


class LineReader:
    """The lines of pipe *fd*, as text (what the SDK's transport iterates); a line *lean*
    answers is written by *writer* instead and never reaches the SDK."""

    def __init__(self, fd: int, lean: Lean | None = None,
                 writer: LineWriter | None = None) -> None:
        self.fd = fd
        self.lean = lean
        self.writer = writer
        self.reader: asyncio.StreamReader | None = None
        self.transport: asyncio.BaseTransport | None = None

    def __aiter__(self) -> LineReader:
        return self

    async def __anext__(self) -> str:
        if self.reader is None:
            loop = asyncio.get_running_loop()
            self.reader = asyncio.StreamReader(limit=LINE_LIMIT)
            self.transport, _ = await loop.connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(self.reader),
                os.fdopen(self.fd, "rb", buffering=0))
        while True:
            line = await self.reader.readline()
            if not line:
                raise StopAsyncIteration
            text = line.decode("utf-8", errors="replace")
            if self.lean is None or self.writer is None:
                return text
            answer = await self.lean.take(text, self.more_waiting())
            if answer is None:
                return text
            await self.writer.write(answer)
            await self.writer.flush()

    def more_waiting(self) -> bool:
        """Whether another whole line is already read behind this one (asyncio has no
        public word for it; without the buffer, assume one is)."""
        return b"\n" in getattr(self.reader, "_buffer", b"\n")

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()
        else:
            os.close(self.fd)


class LineWriter:
    """Text written to pipe *fd*; ``flush`` waits, without holding the event loop, until
    the whole answer is in the pipe (a client reading slowly fills it), then calls
    *answered* (the server's work for between calls)."""

    def __init__(self, fd: int, answered: Callable[[], None] | None = None,
                 said: Callable[[str], None] | None = None) -> None:
        self.fd = fd
        self.answered = answered
        self.said = said
        self.writer: asyncio.StreamWriter | None = None

    async def write(self, text: str) -> None:
        if self.writer is None:
            loop = asyncio.get_running_loop()
            transport, protocol = await loop.connect_write_pipe(
                lambda: asyncio.streams.FlowControlMixin(), os.fdopen(self.fd, "wb", buffering=0))
            transport.set_write_buffer_limits(high=0)  # flush: every answer is on the wire
            self.writer = asyncio.StreamWriter(transport, protocol, None, loop)
        if self.said is not None:
            self.said(text)
        self.writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        if self.writer is not None:
            await self.writer.drain()
            if self.answered is not None:
                self.answered()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        else:
            os.close(self.fd)


def streamable(fd: int) -> bool:
    """Whether asyncio can read or write *fd* without a thread: a pipe or a socket."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def serve(server: MCPServer, answered: Callable[[], None] | None = None,
          lean: Callable[[Any], Lean] | None = None) -> None:
    """Serve the MCPServer *server* on stdin/stdout until the client goes away; call
    *answered* after each message is on the wire, and let the lean path *lean* (made
    from the SDK's low-level server) answer what it takes (not on the SDK's own
    transport)."""
    lowlevel = getattr(server, "_lowlevel_server", None)  # the SDK has no public way in
    if sys.platform == "win32" or lowlevel is None or not (streamable(0) and streamable(1)):
        server.run("stdio")
        return
    import anyio
    anyio.run(_serve, lambda r, w: lowlevel.run(r, w, lowlevel.create_initialization_options()),
              answered, lean(lowlevel) if lean is not None else None)


async def _serve(run: Callable[[Any, Any], Awaitable[None]],
                 answered: Callable[[], None] | None, lean: Lean | None) -> None:
    wire_in, wire_out, saved = _claim()
    writer = LineWriter(wire_out, answered, lean.said if lean is not None else None)
    reader = LineReader(wire_in, lean, writer)
    try:
        async with stdio_server(stdin=reader, stdout=writer) as (read_stream, write_stream):
            await run(read_stream, write_stream)
    finally:
        reader.close()
        writer.close()
        _restore(saved)


def _claim() -> tuple[int, int, tuple[int, int]]:
    """The wire's own descriptors (close-on-exec, above the standard ones), fd 0 and 1
    pointed away from it, and copies to put them back with."""
    saved = (os.dup(0), os.dup(1))
    wire_in, wire_out = (_dup_above_std(fd) for fd in (0, 1))
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
    finally:
        os.close(null)
    os.dup2(2, 1)
    return wire_in, wire_out, saved


def _dup_above_std(fd: int) -> int:
    import fcntl
    return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)


def _restore(saved: tuple[int, int]) -> None:
    for fd, copy in zip((0, 1), saved):
        os.dup2(copy, fd)
        os.set_blocking(fd, True)  # asyncio made the shared pipe non-blocking
        os.close(copy)
