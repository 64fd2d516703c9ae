"""The user's list of repositories (issue 27, "one view over every repository"): every
repository where ``init`` or ``register`` ran, one absolute path a line, in
``$AGENT_REGISTRY_HOME/repos`` (the predecessor's home variable), else
``$XDG_CONFIG_HOME/agent-registry/repos``, else ``~/.config/agent-registry/repos``.

``register`` is a hot path, so remembering costs one read of that small file when the
repository is listed already, and no git process ever.  Several agents register at once:
a new line is appended under a lock on ``repos.lock`` after reading the file again
inside it, so each repository is listed once; ``repos forget`` replaces the file whole
(store/atomic.py) under the same lock, so a reader sees the old list or the new one.
"""
from __future__ import annotations

import os

from ..store.flock import file_lock
from ..errors import NotFound
from ..store.atomic import replace_file

HOME_ENV = "AGENT_REGISTRY_HOME"
FILE_NAME = "repos"


def config_home() -> str:
    """Where agent-registry keeps the user's own files (the list of repositories)."""
    home = os.environ.get(HOME_ENV)
    if home:
        return os.path.abspath(os.path.expanduser(home))
    base = os.environ.get("XDG_CONFIG_HOME", "")
    if not os.path.isabs(base):  # the XDG spec: a relative value is to be ignored
        base = os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "agent-registry")


def list_path() -> str:
    return os.path.join(config_home(), FILE_NAME)


def repository_path(info) -> str:
    """The one path naming the repository of *info* (a RepoInfo), from any of its
    worktrees: the main worktree (the folder holding the common ``.git``), else the
    common dir itself (a bare repository), else the worktree (a submodule's)."""
    common = os.path.realpath(info.common_dir)
    if os.path.basename(common) == ".git":
        return os.path.dirname(common)
    return os.path.realpath(info.toplevel) if info.toplevel else common


def listed() -> list[str]:
    """The remembered repositories, in the order they were first seen, each once."""
    try:
        with open(list_path(), encoding="utf-8", errors="replace") as f:
            text = f.read()
    except FileNotFoundError:
        return []
    return list(dict.fromkeys(line for line in text.split("\n") if os.path.isabs(line)))


def remember(info) -> bool:
    """Add the repository of *info* to the list unless it is there; True when added.
    Raises OSError when the file cannot be written (the caller says so and goes on)."""
    path = repository_path(info)
    if "\n" in path or "\r" in path or path in listed():
        return False
    target = list_path()
    with file_lock(target + ".lock"):
        if path in listed():  # another process added it while this one waited
            return False
        fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (path + "\n").encode("utf-8"))  # one write: one whole line
        finally:
            os.close(fd)
    return True


def forget(paths: list[str]) -> list[str]:
    """Take *paths* off the list (each as given, or as it resolves); NotFound, and the
    list unchanged, when one of them is not on it.  Returns the entries removed."""
    target = list_path()
    with file_lock(target + ".lock"):
        entries = listed()
        chosen = []
        for raw in paths:
            candidates = {os.path.abspath(os.path.expanduser(raw)),
                          os.path.realpath(os.path.expanduser(raw))}
            found = [entry for entry in entries if entry in candidates]
            if not found:
                raise NotFound(f"{raw} is not in the list of repositories ({target}); "
                               "`agent-registry repos list` shows it")
            chosen += found
        kept = [entry for entry in entries if entry not in chosen]
        replace_file(target, "".join(f"{entry}\n" for entry in kept), prefix=".repos.")
    return list(dict.fromkeys(chosen))
