"""What index work says on a terminal: one self-redrawing line on stderr while the index
is built or updated, then a summary line.  Off (None) when stderr is not a terminal, so
scripts, agents' captured output and the JSON on stdout never see it (``Progress(None)``
says nothing)."""
from __future__ import annotations

import io  # already loaded by the interpreter; typing would cost a query ~2 ms
import sys
import time

WIDTH = 24  # characters of the bar
EVERY = 0.1  # seconds between redraws: a 10,000-entry build must not spend its time here


class Progress:
    def __init__(self, stream: io.TextIOBase | None) -> None:
        self.stream = stream
        self.label, self.total, self.started, self.drawn = "", 0, 0.0, 0.0
        self.unit = "entries"

    @classmethod
    def on_terminal(cls, stream: io.TextIOBase | None = None) -> "Progress | None":
        stream = stream or sys.stderr
        return cls(stream) if stream.isatty() else None

    def _line(self, text: str, end: str = "") -> None:
        if self.stream is None:
            return
        self.stream.write(f"\r\033[Kagent-registry: {text}{end}")
        self.stream.flush()

    def waiting(self) -> None:
        self._line("waiting for another process updating the wiki index...")

    def start(self, label: str, total: int, unit: str = "entries") -> None:
        """A new bar of *total* *unit* (import-home counts files, gc commits)."""
        self.label, self.total, self.started = label, total, time.monotonic()
        self.unit = unit
        self.step(0, force=True)

    def step(self, done: int, force: bool = False) -> None:
        if self.stream is None:
            return
        now = time.monotonic()
        if not force and done < self.total and now - self.drawn < EVERY:
            return
        self.drawn = now
        filled = WIDTH * done // self.total if self.total else WIDTH
        self._line(f"{self.label} [{'#' * filled}{'.' * (WIDTH - filled)}] "
                   f"{done:,}/{self.total:,} {self.unit}")

    def phase(self, text: str) -> None:
        self._line(f"{self.label}: {text}")

    def finish(self, text: str) -> None:
        self._line(f"{text} in {time.monotonic() - self.started:.1f} s", end="\n")
