"""An Aider run with a session of its own and the backstop after each edit.

Aider runs nothing of ours when it starts or ends and has no tool events, so
``agent-registry harness run aider -- ARGS`` wraps it:

- **first**: its command is found, else bad input, and nothing is registered;
- **before**: a session ``aider-<pid>-<time>`` is registered, bound to this wrapper's
  process (which lives exactly as long as Aider: it waits for it), and the backstop notes
  the held files of this working tree (harness/backstop.py);
- **the run**: Aider is started with ``AGENT_REGISTRY_SESSION`` set to that session (its
  commits and its shell commands are the session's), the session line in a read-only file
  it loads (``--read``: the model knows who it is), and ``--lint-cmd`` set to
  ``agent-registry harness after-edit``, which Aider runs after each edit with the edited
  file's name (``--auto-lint`` is its default) and whose output, when it exits non-zero,
  goes back to the model;
- **after each edit** (:func:`after_edit`): the held files are compared with the last
  note; what changed is put back to the holder's content, the agent's version kept as a
  blob (``git show BLOB``), the model told who holds it, the holder sent a message; then
  the files are noted again for the next edit;
- **at the end**: the session is finished, and Aider's exit code is the wrapper's.

The note is taken before the run and after each edit, not before each edit (Aider has no
event there): a change the holder made between two edits of Aider's to a file Aider then
edits is in the agent's version kept as a blob, and the holder's message names both.
"""
from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import time

from ..errors import BadInput
from .backstop import note
from .ctx import Ctx
from .decision import end, start
from .held import Unreadable
from .putback import check

NAME = "aider"
SESSION_ENV = "AGENT_REGISTRY_SESSION"
CALL = "edits"  # the one note of an Aider session: its files as of its last edit


def _ctx(native: str, cwd: str, env: dict) -> Ctx:
    return Ctx(NAME, native, cwd, source="harness run", env=env)


def run(aider: list[str], cwd: str, env: dict, exe: list[str]) -> int:
    """Run the command *aider* (its executable and arguments) as a registered session;
    its exit code.  *exe*: this installation's command, for Aider's lint command."""
    program = found(aider[0], env)  # before anything is registered or written
    native = f"{os.getpid()}-{int(time.time())}"
    ctx = _ctx(native, cwd, env)
    sid, lines = start(ctx, os.getpid())
    from .where import repo_of
    info = repo_of(ctx)
    where = os.path.join(info.git_dir, "agent-registry", NAME)
    os.makedirs(where, exist_ok=True)
    told = os.path.join(where, f"{native}.md")
    with open(told, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    try:
        notice = note(ctx, CALL)
    except Unreadable as exc:  # said to the person starting it, who decides
        notice = f"agent-registry: backstop off until the next edit: {exc.message}"
    if notice:
        print(notice, flush=True)
    lint = shlex.join([*exe, "harness", "after-edit"])
    try:
        return subprocess.call([program, *aider[1:], "--read", told, "--lint-cmd", lint],
                               env={**env, SESSION_ENV: sid})
    except OSError as exc:
        raise FileNotFoundError(exc.errno, f"cannot run {aider[0]}: {exc.strerror}") from None
    finally:
        os.unlink(told)
        end(ctx)


def found(name: str, env: dict) -> str:
    """The executable file the command *name* runs (a path, else looked up on *env*'s
    PATH); one that is not there is bad input: a run that cannot start registers nothing."""
    program = shutil.which(name, path=env.get("PATH", os.defpath))
    if program is None:
        where = "no such executable file" if os.path.dirname(name) else "not found on PATH"
        raise BadInput(f"cannot run {name}: {where} (install Aider, or name its command "
                       "with --executable PATH)")
    return program


def after_edit(files: list[str], cwd: str, env: dict) -> str:
    """Aider's lint command after an edit of *files*: the backstop's check of this
    session's held files; what to tell the model ("" when nothing changed)."""
    sid = env.get(SESSION_ENV, "")
    if not sid.startswith(f"{NAME}-"):
        return ""  # not a run of `harness run aider`: no note was taken
    ctx = _ctx(sid[len(NAME) + 1:].split("+")[0], cwd, env)  # the run's native id
    told = check(ctx, CALL, "an Aider edit of " + ", ".join(files))
    try:
        note(ctx, CALL)
    except Unreadable as exc:  # the next edit goes unchecked: the model is told
        told = "\n".join(t for t in (told, f"agent-registry: backstop off until the next "
                                           f"edit: {exc.message}") if t)
    return told
