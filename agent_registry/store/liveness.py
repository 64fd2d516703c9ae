"""Whether a process on this machine still runs, and is still the one that started then
(the process information backend, store/procbackends.py, chosen once and asked by pid),
and this machine's name, which says whether a session's process is one to ask about.
Apart from :mod:`procinfo` (which re-exports them), whose tables of agent runtimes and
owner choice a `lock check` does not need; the backends are imported at the first
question, which a check of holders elsewhere or bound to no process never asks (issue
35 item 3)."""
import os

_backend = None


def hostname() -> str:
    if os.environ.get("AGENT_REGISTRY_HOST"):
        return os.environ["AGENT_REGISTRY_HOST"]
    if hasattr(os, "uname"):
        return os.uname().nodename  # what gethostname() returns, without importing socket
    import socket
    return socket.gethostname()


def backend():
    """The process information backend this process uses, chosen once: /proc when
    ``/proc/self/stat`` exists, else psutil, else none; ``$AGENT_REGISTRY_PROCINFO``
    forces one."""
    global _backend
    if _backend is None:
        from .procbackends import BACKEND_ENV, choose
        _backend = choose(os.environ.get(BACKEND_ENV, ""))
    return _backend


def use_backend(name: str | None = None):
    """Use the backend *name* in this process from now on; None: choose again at the
    next use (from ``$AGENT_REGISTRY_PROCINFO``).  For tests."""
    global _backend
    from .procbackends import choose
    _backend = None if name is None else choose(name)
    return _backend


def same_process(pid: int | None, started: int | None) -> bool | None:
    """Is *pid* running (not a zombie), and the process that started at *started* (any
    process, when *started* is None)?  False when it has exited or the pid now belongs
    to a later process; None when this cannot be told here (no backend, or a process
    whose start time cannot be read).  Reads; never signals."""
    if not pid or pid < 0:
        return False
    info = backend()
    if not info.available:
        return None
    proc = info.read(pid)
    if proc is None or proc.zombie:  # a zombie has exited, it only waits to be reaped
        return False
    if started is None:
        return True
    return None if proc.start is None else proc.start == started


def is_alive(pid: int | None, started: int | None) -> bool:
    """Is *pid* running, and is it still the process that started at *started*?  True
    when that cannot be told (fail closed: a process nobody saw die keeps its locks
    until the TTL)."""
    if not pid:
        return False
    return same_process(pid, started) is not False
