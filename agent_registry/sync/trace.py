"""An opt-in timeline of one process's sync phases (issue 35): where a slow claim spent
its wait.

``AGENT_REGISTRY_SYNC_TRACE=FILE`` makes a process append one line per phase of its sync
to FILE: ``start<TAB>end<TAB>phase<TAB>detail``, times in seconds since the epoch (so a
benchmark lines them up with when it started the process: the gap before the first
line is the interpreter, the imports and opening the registry).  Phases: ``begin`` (the
synced transaction starts), ``fetch``, ``push`` (detail ``ok`` or ``lost``), ``sleep``
(backoff after a lost push), ``intent`` (publishing one, detail ``landed`` or
``failed``), ``poll`` (a fetch while our intent is out: ``waiting`` or not), ``flock``
(detail: the wait to take the clone's lock, then how long it was held) and ``end``.
``bench/scale_bench.py --trace`` collects them.  Unset (always, outside a benchmark):
each call below returns at its first line.
"""
from __future__ import annotations

import os
import time

PATH = os.environ.get("AGENT_REGISTRY_SYNC_TRACE") or ""


def start() -> float:
    """When a phase starts (0 when tracing is off: nothing reads it)."""
    return time.time() if PATH else 0.0


def note(phase: str, since: float = 0.0, detail: str = "") -> None:
    """Append *phase*, from *since* (now when 0) to now, with *detail*."""
    if not PATH:
        return
    now = time.time()
    try:
        with open(PATH, "a", encoding="utf-8") as f:
            f.write(f"{since or now:.4f}\t{now:.4f}\t{phase}\t{detail}\n")
    except OSError:
        pass  # a trace that cannot be written changes nothing of the sync


class _Timed:
    """A context manager *cm* whose entering (the wait) and holding are traced."""

    def __init__(self, phase: str, cm) -> None:
        self.phase, self.cm, self.began, self.entered = phase, cm, 0.0, 0.0

    def __enter__(self):
        self.began = time.time()
        value = self.cm.__enter__()
        self.entered = time.time()
        return value

    def __exit__(self, *exc):
        held = time.time() - self.entered
        note(self.phase, self.began, f"wait {self.entered - self.began:.4f} held {held:.4f}")
        return self.cm.__exit__(*exc)


def timed(phase: str, cm):
    """*cm* itself when tracing is off; else *cm* with its wait and hold traced."""
    return _Timed(phase, cm) if PATH else cm
