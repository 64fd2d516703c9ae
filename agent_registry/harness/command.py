"""The hook command written into each harness's configuration.

``<this installation's executable, absolute> harness hook <harness> <event> [--pid $PPID]
[--auto-claim] [--wake N]``: absolute, because a harness may run hooks with a PATH that
lacks the venv, and a hook that cannot start (exit 127) does not block in Claude Code.
The edit gate (pre-tool-use) is wrapped in sh so that it fails closed: when the
executable is gone or dies (cannot import agent_registry, a traceback), the edit is
blocked with exit 2, the blocking code of Claude Code, Codex, Gemini CLI and Cursor, and
one line saying how to repair it, unless ``AGENT_REGISTRY_ALLOW=1``.  The hook's own exit
2 (it could not decide and said why) passes through as it is.
"""
from __future__ import annotations

import os
import shlex
import shutil
import sys

HOOK_MARK = "harness hook"  # how our entries are recognised in a harness's hook list
PID_ARG = "--pid $PPID"


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
                 pid: bool = False, auto_claim: bool = False, wake: int | None = None) -> str:
    """The shell command a harness runs for *event*; the gate (pre-tool-use) fails
    closed."""
    exe = exe or executable()
    words = [*exe, "harness", "hook", harness, event]
    if auto_claim and event == "pre-tool-use":
        words.append("--auto-claim")
    if wake and event == "stop":
        words += ["--wake", str(wake)]
    run = " ".join(shlex.quote(w) for w in words) + (f" {PID_ARG}" if pid else "")
    if event != "pre-tool-use":
        return run
    head = shlex.quote(exe[0])
    repair = (f"agent-registry: the edit gate could not run ({exe[0]}, exit $rc); "
              f"repair: agent-registry harness install {harness}, or AGENT_REGISTRY_ALLOW=1")
    return (f"{{ [ -x {head} ] && {run}; }} || {{ rc=$?; "
            f"[ \"$AGENT_REGISTRY_ALLOW\" = 1 ] && exit 0; "
            f"[ $rc -eq 2 ] || echo \"{repair}\" >&2; exit 2; }}")


def executable_of(command: str) -> str | None:
    """The executable an installed hook command runs (its first word, or the one the
    gate wrapper tests), for doctor and status."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if words[:2] == ["{", "["] and len(words) > 3:
        return words[3]
    return words[0] if words else None


def is_ours(command: object, harness: str) -> bool:
    return isinstance(command, str) and f"{HOOK_MARK} {harness} " in command
