"""Which process owns a session, and whether it still runs.  Standard library only on Linux.

The owner is the agent, not the one-shot command.  A pid is recorded only when its
process is known to live exactly as long as the agent (see :func:`choose_owner`): one
given explicitly (``register --pid``, ``AGENT_REGISTRY_PID``, a harness hook), or an
ancestor recognised as an agent runtime (:data:`AGENT_RUNTIMES`).  Guessing "the nearest
ancestor that is not a shell" fails both ways: a per-command helper (a sandbox launcher,
a Python wrapper, ``ssh host cmd``) exits at once, and a terminal multiplexer outlives
every window.  Its start time tells a live agent from a later process that was given the
same pid.

Facts about a process (its kernel name, parent, start time, zombie state, command line)
come from one of three backends (:mod:`procbackends`, chosen once by :func:`backend`):
``/proc`` on Linux (the fast path, standard library only), psutil where there is no
``/proc`` (macOS, Windows: a platform-conditional dependency, imported only there), or
none.  ``AGENT_REGISTRY_PROCINFO`` (``proc``, ``psutil``, ``none``) forces one, for tests.  Nothing here signals a process to
learn whether it runs (on Windows ``os.kill(pid, 0)`` is not a probe: it sends
CTRL_C_EVENT).  With no backend nothing can be vouched for: :func:`same_process` answers
None, :func:`is_alive` True (fail closed), so heartbeats and the TTL decide, a lock is
never handed over for a process nobody could see die, and ``kill`` signals nothing.
"""
import os

from .procbackends import (  # noqa: F401 (some re-exported)
    BACKEND_ENV, NoBackend, Proc, ProcBackend, PsutilBackend, choose)
from .lazyre import LazyPattern
from .liveness import (  # noqa: F401 (re-exported: the core, the guard and kill ask here)
    backend, hostname, is_alive, same_process, use_backend)

PID_ENV = "AGENT_REGISTRY_PID"
RUNTIMES_ENV = "AGENT_REGISTRY_RUNTIMES"

# Agent executables, as a process names itself (argv[0]), or as the script or package an
# interpreter runs (node .../bin/gemini, python -m aider,
# node_modules/@anthropic-ai/claude-code/cli.js).  AGENT_REGISTRY_RUNTIMES adds names.
AGENT_RUNTIMES = {
    "claude": "Claude Code", "claude-code": "Claude Code", "codex": "Codex CLI",
    "gemini": "Gemini CLI", "gemini-cli": "Gemini CLI", "kimi": "Kimi CLI",
    "kimi-cli": "Kimi CLI", "aider": "Aider", "aider-chat": "Aider",
    "cursor-agent": "Cursor Agent", "goose": "Goose", "opencode": "OpenCode",
    "opencode-ai": "OpenCode", "qwen": "Qwen Code", "qwen-code": "Qwen Code",
    "amp": "Amp", "crush": "Crush", "copilot": "GitHub Copilot CLI",
}
INTERPRETERS = LazyPattern(r"(node|nodejs|bun|deno|python[\d.]*|pypy[\d.]*|ruby)")
_SUFFIXES = (".js", ".mjs", ".cjs", ".ts", ".py", ".exe")

# Processes shared by many programs, that live longer than any one agent: never an owner,
# never signalled.  (A login shell may own a session it registered itself, but is never
# signalled either: killing it closes a person's terminal.)
SHARED = {
    "a terminal multiplexer": {"tmux", "screen", "zellij", "byobu", "tmate", "abduco",
                               "dtach", "dvtm"},
    "the SSH server": {"sshd", "sshd-session", "mosh-server", "dropbear"},
    "the init system": {"systemd", "init", "launchd", "tini", "dumb-init"},
    "a terminal emulator": {"xterm", "gnome-terminal-server", "gnome-terminal", "konsole",
                            "alacritty", "kitty", "wezterm", "wezterm-gui", "foot",
                            "terminator", "tilix", "urxvt", "rxvt", "xfce4-terminal",
                            "lxterminal", "mate-terminal", "qterminal", "terminology",
                            "ghostty", "iterm2", "st"},
}


def start_time(pid: int) -> int | None:
    """The token naming *pid*'s start (:class:`Proc`), or None."""
    proc = backend().read(pid)
    return proc.start if proc else None


def parent_of(pid: int) -> int | None:
    proc = backend().read(pid)
    return proc.parent if proc else None


def cmdline(pid: int) -> list[str]:
    return backend().cmdline(pid)


def _name(path: str) -> str:
    """A program's name as the tables spell it: base name, lower case, no suffix."""
    name = os.path.basename(path).lower().lstrip("-").replace("_", "-")
    for suffix in _SUFFIXES:
        if name.endswith(suffix):
            return name[:-len(suffix)]
    return name


def _names(pid: int) -> list[str]:
    """What the process calls itself: argv[0], and its kernel name (``tmux: server``)."""
    proc = backend().read(pid)
    comm = proc.name.split(":")[0].split() if proc else []
    return [_name(n) for n in cmdline(pid)[:1] + comm[:1] if n]


def _script_names(args: list[str]) -> list[str]:
    """What an interpreter runs: its script (or ``-m`` module), and the npm package that
    script belongs to."""
    rest = args[1:]
    while rest and rest[0].startswith("-") and rest[0] != "-m":
        rest = rest[1:]
    if not rest:
        return []
    if rest[0] == "-m":
        return [_name(rest[1])] if len(rest) > 1 else []
    script = rest[0].replace("\\", "/")
    out = [_name(script)]
    if "node_modules/" in script:
        package = script.rsplit("node_modules/", 1)[1].split("/")
        out.append(_name(package[1] if package[0].startswith("@") and len(package) > 1
                         else package[0]))
    return out


def runtimes() -> dict[str, str]:
    """The agent runtime table, with the names AGENT_REGISTRY_RUNTIMES adds."""
    extra = os.environ.get(RUNTIMES_ENV, "")
    return {**AGENT_RUNTIMES, **{_name(n): n.strip() for n in extra.split(",") if n.strip()}}


def runtime_of(pid: int, table: dict[str, str] | None = None) -> str | None:
    """The agent runtime *pid* runs (a key of the table), or None.  By argv[0], not by
    the executable or kernel name: Codex re-executes its own binary under another
    argv[0] as a per-command sandbox helper, which is not the agent."""
    table = table or runtimes()
    args = cmdline(pid)
    names = [_name(args[0])] if args else []
    if names and INTERPRETERS.fullmatch(names[0]):
        names += _script_names(args)
    return next((n for n in names if n in table), None)


def shared_kind(pid: int) -> str | None:
    """What *pid* is when many programs share it (init, a multiplexer, sshd, a terminal
    emulator), so it outlives any agent: ``"a terminal multiplexer (tmux)"``; else None."""
    if pid == 1:
        return "the init process (pid 1)"
    names = _names(pid)
    for kind, members in SHARED.items():
        hit = next((n for n in names if n in members), None)
        if hit:
            return f"{kind} ({hit})"
    return None


def protected_kind(pid: int) -> str | None:
    """Why *pid* must never be signalled by ``kill`` (a shared process, or a login
    shell: killing either closes terminals that are not the agent's), or None."""
    kind = shared_kind(pid)
    if kind:
        return kind
    args = cmdline(pid)
    if args and args[0].startswith("-"):
        return f"a login shell ({args[0]})"
    return None


class Owner:
    """The process a session is bound to, how it was chosen, and why, in words.

    ``how`` is ``given`` (register --pid, a harness hook), ``env`` (AGENT_REGISTRY_PID),
    ``runtime`` (an ancestor recognised as an agent runtime) or ``none`` (no process is
    known to live as long as the agent: heartbeats and the TTL decide)."""

    def __init__(self, pid: int | None, how: str, why: str) -> None:
        self.pid, self.how, self.why = pid, how, why
        self.start = start_time(pid) if pid else None
        self.cmdline = " ".join(cmdline(pid))[:300] if pid else ""

    def to_dict(self) -> dict:
        return {"pid": self.pid, "pid_start": self.start, "how": self.how,
                "cmdline": self.cmdline, "why": self.why}


def _explicit(pid: int, label: str, how: str) -> Owner:
    """*pid* given by *label*: it must run, and must not be a process many share."""
    if pid <= 0:
        raise ValueError(f"{label} {pid}: not a process id")
    if backend().available:  # else nothing can be checked: heartbeats and the TTL decide
        if backend().read(pid) is None:
            raise ValueError(f"{label} {pid}: no such process")
        kind = shared_kind(pid)
        if kind:
            raise ValueError(f"{label} {pid} is {kind}, which outlives the agent and is "
                             "shared by other programs: pass the agent's own pid")
    return Owner(pid, how, f"given by {label}")


def choose_owner(pid: int | None = None, given_by: str = "--pid",
                 environ: dict[str, str] | None = None, start: int | None = None) -> Owner:
    """The owner of a session registered now: *pid* (given by *given_by*), else
    ``$AGENT_REGISTRY_PID`` (``none`` binds to no process), else the nearest ancestor of
    *start* (default: our parent) that is a known agent runtime, else no process.
    Raises ValueError for a pid that does not run or is shared."""
    if pid is not None:
        return _explicit(pid, given_by, "given")
    env = (os.environ if environ is None else environ).get(PID_ENV, "").strip()
    if env.lower() == "none":
        return Owner(None, "none", f"{PID_ENV}=none: bound to no process; heartbeats and "
                                   "the TTL decide liveness")
    if env:
        if not env.isdigit():
            raise ValueError(f"{PID_ENV}={env!r}: not a process id (or `none`)")
        return _explicit(int(env), PID_ENV, "env")
    table = runtimes()
    for candidate in ancestors(start if start is not None else os.getppid()):
        name = runtime_of(candidate, table)
        if name:
            return Owner(candidate, "runtime",
                         f"{name} is a known agent runtime ({table[name]}), an ancestor "
                         "of this command")
    return Owner(None, "none", "no process is known to live as long as the agent (pass "
                               f"--pid or set {PID_ENV}): heartbeats and the TTL decide "
                               "liveness")


def ancestors(pid: int | None = None) -> list[int]:
    """*pid* (default: this process) and its parents, nearest first.  A parent that
    started after its child is a later process given an exited parent's pid (Windows
    keeps the dead parent's pid): the chain stops there."""
    out, pid = [], pid or os.getpid()
    info, after = backend(), None
    while pid and pid > 1 and len(out) < 64:
        proc = info.read(pid)
        if proc is not None and after is not None and proc.start is not None \
                and proc.start > after:
            break
        out.append(pid)
        if proc is None:
            break
        pid, after = proc.parent or 0, proc.start
    return out
