"""Whether a ref's ``.lock`` file may still be a live git's: store/git.py takes an old
one for abandoned only when no process could be moving a ref of this repository.

A git killed in the middle of a ref update leaves ``<ref>.lock``, and every later update
of that ref fails until someone removes the file; git never does.  The registry does
once the file is old (store/git.py STALE_REF_LOCK), but old is not dead: a git stopped
in a ``reference-transaction`` hook, suspended, or starved holds its lock as long, and
when it resumes it renames whatever file is there onto the ref.  Removing its lock lets
the registry's move land and then that git's, one over the other (DESIGN.md: the
predecessor's stale-lock takeovers elected two owners).

Registry processes move refs only under the clone's flock, which the caller holds, so
what is left is any other git working in this repository: a process named ``git…``
whose working directory is in one of its worktrees or its git folder, whose
environment names a repository there, or that was given ``--git-dir``; and any whose
directory or environment cannot be read (nothing vouches for it).  Not counted: this
process's children, the git children of other registry processes (under the same
flock), and ``git cat-file``, which takes no lock.  Where processes cannot be listed at
all, none can be vouched for.  Another host or container sharing the folder is out of
sight, as it is for git's own lock files.
"""
from __future__ import annotations

import os

from .layout import RepoInfo, worktrees
from .liveness import backend

READS_ONLY = frozenset({"cat-file"})  # subcommands that never take a ref's lock
REPO_ENV = ("GIT_DIR", "GIT_COMMON_DIR", "GIT_WORK_TREE")
_VALUED = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace",
                     "--exec-path", "--config-env"})  # git options taking the next word


def movers(repo: RepoInfo) -> list[str] | None:
    """The live processes that may be moving a ref of the repository *repo*, each as
    ``git ARGS (pid N)``: [] when there is none; None when processes cannot be listed."""
    info = backend()
    pids = info.pids() if info.available else None
    if pids is None:
        return None
    # where a git working on it runs: its git folder, and each of its worktrees
    places = [os.path.realpath(repo.common_dir), *worktrees(repo)]
    me = os.getpid()
    found = []
    for pid in pids:
        proc = info.read(pid) if pid != me else None
        if proc is None or proc.zombie or proc.parent == me or not _is_git(proc.name):
            continue
        args = info.cmdline(pid)
        if _subcommand(args) in READS_ONLY or \
                (proc.parent and _is_registry(info.cmdline(proc.parent))):
            continue
        if _elsewhere(info, pid, args, places):
            continue
        found.append(f"{' '.join(args[:3]) or proc.name} (pid {pid})")
    return found


def _is_git(name: str) -> bool:
    return name == "git" or name.startswith("git-")


def _subcommand(args: list[str]) -> str:
    """The git subcommand of the command line *args* (past git's own options)."""
    rest = iter(args[1:])
    for word in rest:
        if word in _VALUED:
            next(rest, None)
        elif not word.startswith("-"):
            return word
    return ""


def _is_registry(args: list[str]) -> bool:
    """Is the command line *args* an agent-registry process's (its console script, the
    package run as a module, a harness hook's launcher)?"""
    return any(os.path.basename(arg) == "agent-registry" or "agent_registry" in arg
               for arg in args)


def _inside(path: str, places: list[str]) -> bool:
    """Is *path* one of the real paths *places* or below one?"""
    path = os.path.realpath(path)
    return any(path == place or path.startswith(place.rstrip(os.sep) + os.sep)
               for place in places)


def _elsewhere(info, pid: int, args: list[str], places: list[str]) -> bool:
    """Can the git process *pid* (command line *args*) be vouched for as working on
    another repository: its directory, and any repository its environment or
    ``--git-dir`` names (relative to that directory), outside this one's *places*?"""
    cwd = info.cwd(pid)
    env = info.environ(pid) if cwd is not None else None
    if cwd is None or env is None or _inside(cwd, places):
        return False
    named = [env.get(name) for name in REPO_ENV] + _git_dirs(args)
    return not any(path and _inside(os.path.join(cwd, path), places) for path in named)


def _git_dirs(args: list[str]) -> list[str]:
    """The values of ``--git-dir`` on the command line *args*."""
    out = [arg.partition("=")[2] for arg in args if arg.startswith("--git-dir=")]
    out += [value for flag, value in zip(args, args[1:]) if flag == "--git-dir"]
    return out
