"""Which process owns a session, and whether it still runs.  Standard library only.

The owner is the agent, not the one-shot command: the nearest ancestor that outlives the
command, skipping shells and our own interpreter.  Its start time (from /proc) tells a
live agent from a later process that was given the same pid.
"""
from __future__ import annotations

import os

SHELLS = {"sh", "bash", "dash", "zsh", "fish", "ksh", "mksh", "tcsh", "csh", "busybox",
          "env", "timeout", "nohup", "xargs", "sudo", "su", "time", "make", "uv", "npx"}
OURS = ("agent-registry", "agent_registry")


def hostname() -> str:
    if os.environ.get("AGENT_REGISTRY_HOST"):
        return os.environ["AGENT_REGISTRY_HOST"]
    if hasattr(os, "uname"):
        return os.uname().nodename  # what gethostname() returns, without importing socket
    import socket
    return socket.gethostname()


def _stat_fields(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read().decode(errors="replace")
    except OSError:
        return None
    # comm may contain spaces and parentheses: the fields after it follow the last ')'
    return [raw[raw.index("(") + 1:raw.rindex(")")]] + raw[raw.rindex(")") + 2:].split()


def start_time(pid: int) -> int | None:
    """Start time in clock ticks since boot (field 22 of /proc/PID/stat), or None."""
    fields = _stat_fields(pid)
    return int(fields[20]) if fields else None


def parent_of(pid: int) -> int | None:
    fields = _stat_fields(pid)
    return int(fields[2]) if fields else None


def cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def _is_transient(pid: int) -> bool:
    args = cmdline(pid)
    if not args:
        return False
    exe = os.path.basename(args[0])
    if exe in SHELLS or exe.lstrip("-") in SHELLS:
        return True
    return any(mark in arg for arg in args[:3] for mark in OURS)


def owner_pid(start: int | None = None) -> int:
    """The nearest ancestor of *start* (default: our parent) that is not a shell or us."""
    pid = start if start is not None else os.getppid()
    if not os.path.exists("/proc/self/stat"):
        return pid  # no /proc: the parent is the best we know
    candidate = pid
    while pid and pid > 1:
        if not _is_transient(pid):
            return pid
        parent = parent_of(pid)
        if parent is None:
            break
        pid = parent
    return candidate


def is_alive(pid: int | None, started: int | None) -> bool:
    """Is *pid* running, and is it still the process that started at *started*?"""
    if not pid:
        return False
    if os.path.exists("/proc/self/stat"):
        fields = _stat_fields(pid)
        # a zombie (state Z) has exited and only waits for its parent to reap it
        if fields is None or fields[1] == "Z":
            return False
        return started is None or int(fields[20]) == started
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def ancestors(pid: int | None = None) -> list[int]:
    """*pid* (default: this process) and its parents, nearest first."""
    out, pid = [], pid or os.getpid()
    while pid and pid > 1 and len(out) < 64:
        out.append(pid)
        pid = parent_of(pid) or 0
    return out
