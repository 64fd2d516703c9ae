"""The hook command written into each harness's configuration.

``<this installation's interpreter> -I -S <its harness/launch.py> harness hook <harness>
<event> [--pid $PPID] [--auto-claim] [--wake N]``: the interpreter started without
``site`` (harness/launch.py puts the package's own folder on sys.path: about 1 ms less
per hook than the console script, docs/benchmarks.md), both paths absolute, because a
harness may run hooks with a PATH that lacks the venv, and a hook that cannot start
(exit 127) does not block in Claude Code.  It is written in the dialect of the shell the
harness runs it in (:mod:`shells`: sh, and on Windows PowerShell or cmd for some).  The
edit gate (pre-tool-use) is wrapped so that it fails closed: when the interpreter or the
launcher is gone or the hook dies (cannot import agent_registry, a traceback), the edit
is blocked with exit 2, the blocking code of Claude Code, Codex, Gemini CLI and Cursor,
and one line saying how to repair it, unless ``AGENT_REGISTRY_ALLOW=1``.  The hook's own
exit 2 (it could not decide and said why) passes through as it is.
"""
from __future__ import annotations

import os
import sys

from . import shells

HOOK_MARK = "harness hook"  # how our entries are recognised in a harness's hook list


LAUNCHER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "launch.py")


def executable() -> list[str]:
    """How a hook command starts this installation: this interpreter as it was started
    (a venv's python, never resolved through symlinks: it links to the system one,
    whose sys.executable would find no venv) with ``-I -S``, running harness/launch.py."""
    return [os.path.abspath(sys.executable), "-I", "-S", LAUNCHER]


def needs(start: list[str]) -> list[str]:
    """The files a command that starts with *start* cannot run without: its program and
    the script it runs, if any (the launcher; an older install's console script is one
    file)."""
    return [start[0], *(w for w in start[1:] if w.endswith(".py"))]


def hook_command(harness: str, event: str, *, exe: list[str] | None = None,
                 pid: bool = False, auto_claim: bool = False, wake: int | None = None,
                 windows: bool | None = None, hold: int | None = None,
                 deny_overlap: bool = False, no_memory: bool = False) -> str:
    """The command a harness runs for *event*, in the dialect of its shell on Windows
    (*windows*) or on this platform; the gate (pre-tool-use) fails closed."""
    exe = exe or executable()
    dialect = shells.for_harness(harness, windows)
    # the launcher's path as the program's is written (MSYS: with /)
    exe = [exe[0], *(dialect.path(w) if w.endswith(".py") else w for w in exe[1:])]
    words = [*exe, "harness", "hook", harness, event]
    if auto_claim and event == "pre-tool-use":
        words.append("--auto-claim")
    if deny_overlap and event == "pre-tool-use":
        words.append("--deny-overlap")
    if no_memory and event == "session-start":
        words.append("--no-memory")
    if wake and event == "stop":
        words += ["--wake", str(wake)]
    if hold and event == "stop":
        words += ["--hold", str(hold)]
    run = dialect.command(words) + (f" --pid {dialect.ppid}" if pid and dialect.ppid else "")
    if event != "pre-tool-use":
        return run + dialect.end
    return dialect.gate(run, [dialect.path(p) for p in needs(exe)], harness)


def is_ours(command: object, harness: str) -> bool:
    return isinstance(command, str) and f"{HOOK_MARK} {harness} " in command
