"""Installing the git hooks shipped in the top-level ``hooks/`` folder.

The hooks directory is git's own answer (``git rev-parse --git-path hooks``), so
``core.hooksPath`` and linked worktrees (which share the common hooks directory) are
honoured.  An existing hook is never overwritten: it is renamed to
``<name>.agent-registry-chained`` (a rename keeps its bytes, mode and symlink-ness), our
hook runs it first, and ``uninstall`` renames it back.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from ..store.shipped import folder
from ..errors import Refused
from ..store.git import RepoInfo, branch_name, clean_env, read_config, run_git
from .guard import Guard, push_guard_enabled

HOOK_NAMES = ("pre-commit", "pre-merge-commit", "pre-push", "post-merge", "post-checkout")
MARKER = "# agent-registry hook: "
CHAINED_SUFFIX = ".agent-registry-chained"
PYTHON_PLACEHOLDER = "@PYTHON@"


def hooks_dir(info: RepoInfo) -> Path:
    """Where git looks for this worktree's hooks."""
    proc = run_git(["rev-parse", "--path-format=absolute", "--git-path", "hooks"],
                   cwd=info.toplevel or info.git_dir,
                   env={**clean_env(), "GIT_DIR": info.git_dir})
    return Path(proc.stdout.decode().strip())


def hook_text(name: str, python: str | None = None, windows: bool | None = None) -> str:
    """The shipped hook *name*, pointed at *python* (the interpreter running now).

    The hooks are POSIX sh, run by dash, busybox and Git for Windows' MSYS bash alike.
    On Windows the interpreter's path is written with forward slashes (``C:/Users/x/
    venv/Scripts/python.exe``): MSYS reads those as it reads its own, and a backslash
    is one character fewer to get wrong in a shell word."""
    python = sys.executable if python is None else python
    if windows is None:
        windows = sys.platform == "win32"
    if windows:
        python = python.replace("\\", "/")
    text = folder("hooks").joinpath(name).read_text(encoding="utf-8")
    return text.replace(PYTHON_PLACEHOLDER, python.replace("'", "'\\''"))


def is_ours(path: Path) -> bool:
    if path.is_symlink():
        return False  # we install plain files; a link is someone else's, even to ours
    try:
        with open(path, "rb") as f:
            return MARKER.encode() in f.read(400)
    except OSError:
        return False


def _exists(path: Path) -> bool:
    return path.exists() or path.is_symlink()


def place(directory: Path, name: str, data: bytes) -> dict:
    """Write our hook *name* (*data*) into *directory*, an existing hook of someone
    else's renamed to ``<name>.agent-registry-chained`` first (our hook runs it)."""
    target, chained = directory / name, directory / (name + CHAINED_SUFFIX)
    state = "installed"
    if _exists(target) and not is_ours(target):
        if _exists(chained):
            raise Refused(f"{target} is not ours and {chained.name} already exists: "
                          "move one of them away, then install again")
        os.rename(target, chained)
        state = "installed, chaining the existing hook"
    elif _exists(target):
        state = "updated"
    tmp = directory / f".{name}.agent-registry-tmp"
    tmp.write_bytes(data)
    tmp.chmod(0o755)
    os.replace(tmp, target)
    return {"hook": name, "path": str(target), "state": state,
            "chained": str(chained) if _exists(chained) else None}


def remove(directory: Path, name: str) -> dict:
    """Take our hook *name* out of *directory*, putting back the hook it chained."""
    target, chained = directory / name, directory / (name + CHAINED_SUFFIX)
    if not is_ours(target):
        state = "not installed" if not _exists(target) else "left alone (not ours)"
    elif _exists(chained):
        os.replace(chained, target)
        state = "removed, chained hook restored"
    else:
        target.unlink()
        state = "removed"
    return {"hook": name, "path": str(target), "state": state}


def install(info: RepoInfo) -> dict:
    directory = hooks_dir(info)
    directory.mkdir(parents=True, exist_ok=True)
    # LF whatever the platform: sh reads a CR as part of the word before it
    results = [place(directory, name, hook_text(name).encode()) for name in HOOK_NAMES]
    return {"hooks_dir": str(directory), "hooks": results}


def uninstall(info: RepoInfo) -> dict:
    directory = hooks_dir(info)
    return {"hooks_dir": str(directory), "hooks": [remove(directory, name)
                                                   for name in HOOK_NAMES]}


def status(info: RepoInfo) -> dict:
    """What is installed, and the mode the guard is in."""
    directory = hooks_dir(info)
    config = read_config(info.git_dir)
    branch = branch_name(config)
    hooks = []
    gone: dict[str, str] = {}  # hook -> the Python written in it, which no longer exists
    for name in HOOK_NAMES:
        target, chained = directory / name, directory / (name + CHAINED_SUFFIX)
        state = ("installed" if is_ours(target) else
                 "other hook (not ours)" if _exists(target) else "not installed")
        python = installed_python(target) if state == "installed" else None
        if python is not None and not os.access(python, os.X_OK):
            gone[name] = python
            state = f"broken (installed, but its Python {python} is gone: run hooks install)"
        hooks.append({"hook": name, "path": str(target), "state": state,
                      "chained": str(chained) if _exists(chained) else None})
    guard = Guard(info)
    try:  # the tip the guard judges by, the remote-tracking branch of a fresh clone too
        has_branch = guard.tip is not None
        readable = guard.check([])
    finally:
        guard.close()
    installed = {hook["hook"] for hook in hooks if hook["state"] == "installed"} | set(gone)
    # with its Python gone the pre-commit hook runs the agent-registry-guard on PATH (git's
    # PATH is the one seen here, give or take git's own folder), else refuses every commit
    fallback = None
    if "pre-commit" in gone:
        import shutil
        fallback = shutil.which("agent-registry-guard")
    if "pre-commit" in gone and fallback is None:
        mode = (f"refusing: the pre-commit hook is installed but its Python "
                f"{gone['pre-commit']} is gone, so every commit is refused (agent-registry "
                "hooks install from a working install, or hooks uninstall; or "
                "AGENT_REGISTRY_ALLOW=1)")
    elif "pre-commit" not in installed:
        mode = "off: the pre-commit hook is not installed"
    elif readable.unreadable:
        mode = readable.mode
    elif not has_branch:
        mode = f"off: no registry branch {branch!r} yet (commits pass, with a notice)"
    else:
        mode = "enforcing"
    if fallback is not None:
        mode += (f" (through {fallback}: the pre-commit hook's Python {gone['pre-commit']} "
                 "is gone; agent-registry hooks install)")
    return {"hooks_dir": str(directory), "hooks": hooks, "branch": branch,
            "branch_present": has_branch, "mode": mode,
            "push_guard": "pre-push" in installed and push_guard_enabled(config, ""),
            "override_env": "AGENT_REGISTRY_ALLOW"}


def installed_python(path: Path) -> str | None:
    """The interpreter an installed hook runs, as its sh assignment spells it."""
    import shlex
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith("AGENT_REGISTRY_PYTHON='"):
            try:
                return shlex.split(line.partition("=")[2])[0]
            except (ValueError, IndexError):
                return None
    return None
