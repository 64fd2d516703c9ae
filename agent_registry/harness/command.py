"""The hook command written into each harness's configuration.

``<this installation's executable, absolute> harness hook <harness> <event> [--pid $PPID]
[--auto-claim] [--wake N]``: absolute, because a harness may run hooks with a PATH that
lacks the venv, and a hook that cannot start (exit 127) does not block in Claude Code.
It is written in the dialect of the shell the harness runs it in (:mod:`shells`: sh,
and on Windows PowerShell or cmd for some).  The edit gate (pre-tool-use) is wrapped so
that it fails closed: when the executable is gone or dies (cannot import agent_registry,
a traceback), the edit is blocked with exit 2, the blocking code of Claude Code, Codex,
Gemini CLI and Cursor, and one line saying how to repair it, unless
``AGENT_REGISTRY_ALLOW=1``.  The hook's own exit 2 (it could not decide and said why)
passes through as it is.
"""
from __future__ import annotations

import os
import shutil
import sys

from . import shells

HOOK_MARK = "harness hook"  # how our entries are recognised in a harness's hook list


def executable() -> list[str]:
    """This installation's ``agent-registry``: the script next to this interpreter (a
    venv's bin/), else the one on PATH, else ``python -m agent_registry`` of this
    interpreter; never resolved through symlinks (a venv's python links to the system
    one, which lacks our packages)."""
    script = shutil.which("agent-registry", path=os.path.dirname(sys.executable)) or \
        shutil.which("agent-registry")
    if script:
        return [os.path.abspath(script)]
    return [os.path.abspath(sys.executable), "-m", "agent_registry"]


def hook_command(harness: str, event: str, *, exe: list[str] | None = None,
                 pid: bool = False, auto_claim: bool = False, wake: int | None = None,
                 windows: bool | None = None, hold: int | None = None,
                 deny_overlap: bool = False, no_memory: bool = False) -> str:
    """The command a harness runs for *event*, in the dialect of its shell on Windows
    (*windows*) or on this platform; the gate (pre-tool-use) fails closed."""
    exe = exe or executable()
    dialect = shells.for_harness(harness, windows)
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
    return dialect.gate(run, dialect.path(exe[0]), harness)


def is_ours(command: object, harness: str) -> bool:
    return isinstance(command, str) and f"{HOOK_MARK} {harness} " in command
