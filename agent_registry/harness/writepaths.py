"""The repository paths a tool call writes, from the names the harness adapters read
(absolute, relative to the agent's directory, or TOP, ``:/``, for the whole tree): what
the edit gate (harness/decision.py) asks the guard about."""
from __future__ import annotations

import os

from ..branch.paths import normalize
from ..errors import BadInput
from ..store.layout import RepoInfo, worktrees
from .shelltokens import TOP


def repository_paths(info: RepoInfo, targets: list[str]) -> tuple[list[str], list[str]]:
    """(the repository paths *targets* name, the folders among them: "" for the whole
    working tree).  An outside path is not ours to guard, unless it is in another
    worktree of this repository (the locks are the repository's)."""
    out: list[str] = []
    folders: list[str] = []
    for target in targets:
        if target.startswith(TOP) or _is_root(info, target):
            rel = target[len(TOP):] if target.startswith(TOP) else ""
            if not rel:
                folders.append("")
                continue
            target, prefix = rel, ""
        else:
            prefix = info.prefix if not os.path.isabs(target) else ""
        try:
            path = normalize(target, toplevel=info.toplevel, prefix=prefix)
        except BadInput:
            path = _in_other_worktree(info, target)
            if path is None:
                continue  # outside this repository (or no name at all): not ours to guard
        out.append(path)
        if path.endswith("/"):
            folders.append(path)
    return list(dict.fromkeys(out)), folders


def _is_root(info: RepoInfo, target: str) -> bool:
    """Does *target* name the top of the working tree (``git restore .`` there)?"""
    if not info.toplevel:
        return False
    where = target if os.path.isabs(target) else os.path.join(info.toplevel, info.prefix,
                                                              target)
    return os.path.realpath(where) == os.path.realpath(info.toplevel)


def _in_other_worktree(info: RepoInfo, target: str) -> str | None:
    """The repository path of an absolute *target* inside another worktree of this
    repository (each linked worktree's ``gitdir`` file names it; the main one holds the
    common dir), normalized there; None when it is in none."""
    if not os.path.isabs(target):
        return None
    real = os.path.realpath(target)
    for top in worktrees(info):  # real paths
        if top != os.path.realpath(info.toplevel or "") and real.startswith(top + os.sep):
            try:
                return normalize(real, toplevel=top)
            except BadInput:
                return None
    return None
