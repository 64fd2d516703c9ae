"""Facts about a process, from one of three backends behind one interface (:class:`Proc`,
``read``, ``cmdline``; and ``pids``, ``cwd``, ``environ`` for store/reflocks.py, None
where they cannot be read): ``/proc`` on Linux (the fast path, standard library only),
psutil where there is no ``/proc`` (macOS, Windows), or none.  :mod:`procinfo` decides
with them which process owns a session and whether it still runs.  Nothing here signals
a process to learn whether it runs (on Windows ``os.kill(pid, 0)`` is not a probe: it
sends CTRL_C_EVENT).
"""
import os
from .tuples import named

BACKEND_ENV = "AGENT_REGISTRY_PROCINFO"


# What a backend knows of one running (or zombie) process (store/tuples.named, not
# typing.NamedTuple: importing typing costs the guard's and the claim's path ~6 ms):
# name: the kernel's name for it (``comm`` on Linux), "" when unreadable; parent;
# start: names this process's start on this host: clock ticks since boot on Linux (both
# backends agree), milliseconds elsewhere; None when unreadable; zombie: exited, waiting
# for its parent to reap it.
Proc = named("Proc", "name parent start zombie")


class ProcBackend:
    """Linux: /proc/PID/stat and /proc/PID/cmdline.  Standard library only."""
    name = "proc"
    available = True

    @staticmethod
    def read(pid: int) -> Proc | None:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                raw = f.read().decode(errors="replace")
        except OSError:
            return None
        # comm may contain spaces and parentheses: the fields after it follow the last ')'
        rest = raw[raw.rindex(")") + 2:].split()
        return Proc(raw[raw.index("(") + 1:raw.rindex(")")], int(rest[1]), int(rest[19]),
                    rest[0] == "Z")

    @staticmethod
    def cmdline(pid: int) -> list[str]:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
        except OSError:
            return []

    @staticmethod
    def pids() -> list[int] | None:
        try:
            return [int(name) for name in os.listdir("/proc") if name.isdigit()]
        except OSError:
            return None

    @staticmethod
    def cwd(pid: int) -> str | None:
        try:
            return os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            return None

    @staticmethod
    def environ(pid: int) -> dict[str, str] | None:
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                pairs = [a.decode(errors="replace").partition("=")
                         for a in f.read().split(b"\0") if a]
        except OSError:
            return None
        return {key: value for key, _, value in pairs}


class NoBackend:
    """Neither /proc nor psutil: nothing is known about any process."""
    name = "none"
    available = False

    @staticmethod
    def read(pid: int) -> Proc | None:
        return None

    @staticmethod
    def cmdline(pid: int) -> list[str]:
        return []

    @staticmethod
    def pids() -> list[int] | None:
        return None

    @staticmethod
    def cwd(pid: int) -> str | None:
        return None

    @staticmethod
    def environ(pid: int) -> dict[str, str] | None:
        return None


class PsutilBackend:
    """Where there is no /proc (macOS, Windows): psutil, imported only when this backend
    is chosen (importing it and reading one process costs ~25 ms, too much for the Linux
    claim path).  ``psutil.pid_exists`` is used on Windows only (it reads the exit code
    there; on POSIX it signals the process)."""
    name = "psutil"
    available = True

    def __init__(self) -> None:
        import psutil  # ImportError: not installed here
        self.psutil = psutil
        # /proc counts start times in clock ticks since boot; psutil divides them by this
        self.ticks = os.sysconf("SC_CLK_TCK") if psutil.LINUX else 0

    def start(self, process) -> int | None:
        """A token naming *process*'s start on this host that does not move when the
        clock is set: on Linux the kernel's clock ticks since boot (what /proc gives),
        elsewhere milliseconds of the start time the kernel keeps.  psutil's public
        ``create_time()`` adds the boot time as the wall clock sees it now, which moves;
        psutil tells a process from a later one by the raw value, as this does."""
        psutil = self.psutil
        try:
            try:  # Linux, macOS, NetBSD (psutil >= 7.1, the pyproject's floor)
                seconds = process._proc.create_time(monotonic=True)
            except (AttributeError, TypeError):  # Windows: creation time, a fixed instant
                seconds = process.create_time()
        except psutil.AccessDenied:
            return None
        return round(seconds * self.ticks) if self.ticks else round(seconds * 1000)

    def read(self, pid: int) -> Proc | None:
        psutil = self.psutil
        if pid <= 0:
            return None
        try:
            if psutil.WINDOWS and not psutil.pid_exists(pid):  # exits are kept by handles
                return None
            process = psutil.Process(pid)
            try:
                zombie = process.status() == psutil.STATUS_ZOMBIE
            except psutil.ZombieProcess:
                zombie = True
            except psutil.AccessDenied:
                zombie = False
            start = self.start(process)
            parent = name = None
            try:
                parent = process.ppid()
                name = process.name()
            except (psutil.ZombieProcess, psutil.AccessDenied):
                pass
        except psutil.ZombieProcess:  # a NoSuchProcess: caught first
            return Proc("", None, None, True)
        except psutil.NoSuchProcess:
            return None
        return Proc(name or "", parent, start, zombie)

    def cmdline(self, pid: int) -> list[str]:
        if pid <= 0:
            return []
        try:
            return [a for a in self.psutil.Process(pid).cmdline() if a]
        except (self.psutil.Error, OSError):
            return []

    def pids(self) -> list[int] | None:
        try:
            return self.psutil.pids()
        except (self.psutil.Error, OSError):
            return None

    def cwd(self, pid: int) -> str | None:
        try:
            return self.psutil.Process(pid).cwd() or None
        except (self.psutil.Error, OSError):
            return None

    def environ(self, pid: int) -> dict[str, str] | None:
        try:
            return self.psutil.Process(pid).environ()
        except (self.psutil.Error, OSError):
            return None


def choose(wanted: str):
    """The backend *wanted* names (``proc``, ``psutil``, ``none``; anything else: the
    platform's own), or NoBackend when it is missing here."""
    wanted = wanted.strip().lower()
    if wanted == "none":
        return NoBackend()
    has_proc = os.path.exists("/proc/self/stat")
    if wanted != "psutil" and has_proc:
        return ProcBackend()
    if wanted == "proc":
        return NoBackend()
    try:
        return PsutilBackend()
    except ImportError:
        return NoBackend()
