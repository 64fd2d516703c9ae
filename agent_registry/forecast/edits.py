"""The edit gate's question (issue 36): has another live session already changed a file
this session is about to write?  Asked before every edit, so it is answered from what is
cheap to read, and git runs only when something moved:

- the sessions: the registry branch's session files, one batched read (as ``lock
  acquire``'s first question, gate.elsewhere); nobody on another worktree, branch or host,
  the usual case, ends it there;
- what another session committed (on its branch here, or pushed from another clone: its
  remote-tracking branch) since the merge base with ours: the forecast's cache of pairs
  of tips (merges.py, ``pairs`` in overlap.json), one ``git merge-tree`` for a pair not
  seen before, that is, once each time a tip moves;
- what another worktree of this repository holds uncommitted: the paths its ``git
  status`` lists, kept in ``<git common dir>/agent-registry/edits.json`` with that
  worktree's HEAD and index file, and read again when either changed or the reading is
  older than FRESH seconds (``git config agent-registry.editFreshness``; a claim reads
  it again every time); a session's own gate adds the files it lets it write to its
  worktree's reading, so the others see an agent's edit at once.

Each finding names the session, its branch, where the change is (``uncommitted`` in its
worktree, ``committed`` on its branch, ``pushed`` from another clone) and, for committed
work, the kind the merge found (``conflict``, ``both-changed``, else ``changed``).
"""
from __future__ import annotations

import json
import os

from ..branch import paths as P
from ..branch.view import View
from ..errors import BadInput
from ..store.git import Repo
from . import merges
from .gate import sessions_elsewhere
from .overlap import STATE_FILE, kept_pairs, read_state, write_state
from ..store.layout import worktrees
from .sides import Side, committed, remotes, status_paths, worktree_status

INDEX = "edits.json"
FRESH = 5.0  # seconds the edit gate trusts a reading of another worktree's uncommitted paths
FRESH_KEY = "agent-registry.editfreshness"  # git config: that many seconds instead
WHERE = {"worktree": "committed", "branch": "committed", "remote-tracking": "pushed"}


def trusted_for(config: dict[str, str]) -> float:
    """``agent-registry.editFreshness`` in seconds (FRESH when unset); BadInput naming the
    key when it is set to anything but a number >= 0 (it is bad input, not 5 s)."""
    raw = config.get(FRESH_KEY)
    if raw is None or raw == "":
        return FRESH
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value >= 0:  # negative, or nan
        raise BadInput(f"agent-registry.editFreshness is {raw!r}, not a number of seconds "
                       f">= 0 (git config agent-registry.editFreshness {FRESH:g})")
    return value


def _stat(path: str) -> str:
    try:
        info = os.stat(path)
    except OSError:
        return "-"
    return f"{info.st_size} {info.st_mtime_ns}"


def _uncommitted(side: Side, git_dir: str, index: dict, now: float,
                 trusted: float) -> list[str]:
    """The paths *side*'s worktree holds uncommitted, from *index* while its HEAD and
    index file are unchanged and the reading is younger than *trusted* seconds; read
    again (and kept) else."""
    stamp = f"{side.head} {_stat(os.path.join(git_dir, 'index'))}"
    known = index.get(side.worktree)
    if isinstance(known, dict) and known.get("stamp") == stamp and \
            0 <= now - float(known.get("at", 0)) < trusted and \
            isinstance(known.get("paths"), list):
        return known["paths"]
    found = status_paths(worktree_status(side))
    index[side.worktree] = {"stamp": stamp, "at": now, "paths": found}
    return found


def changed_elsewhere(repo: Repo, tip: str, sid: str, targets: list[str], *, host: str,
                      remote: str | None, now: float, writing: bool = False,
                      trusted: float = 0) -> list[dict]:
    """[{"session", "branch", "host", "path", "where", "kind"}] for each path covered by
    *targets* (claim targets: a file taken literally is ``paths.literal``'s) that a live
    session other than *sid*, on another worktree, branch or host, has changed; *tip*:
    the registry branch's commit.  Raises GitError or OSError when git cannot read
    another side (the caller decides what that means).
    *writing*: *sid* is about to write the files *targets* name (the edit gate), so they
    join its own worktree's reading, and another session's gate sees them at once;
    *trusted*: seconds a reading of another worktree is used again (a claim: 0)."""
    me, others = sessions_elsewhere(View(repo, tip), sid)
    if not others:
        return []
    trees = worktrees(repo.info)
    # `git remote` only for a session no worktree here stands for (another clone's)
    local = [s.host == host and os.path.realpath(s.project or "/") in trees for s in others]
    names = [] if all(local) else remotes(repo, remote)
    mine = committed(repo, me, trees, names, host)
    if isinstance(mine, str):
        return []
    sides = {s.id: side for s in others
             if not isinstance(side := committed(repo, s, trees, names, host), str)
             and side.key != mine.key}
    entries = _pairs(repo, mine.head, [side.head for side in sides.values()])
    index_path = repo.state_path(INDEX)
    index = read_state(index_path)
    before = json.dumps(index, sort_keys=True)
    out: list[dict] = []
    for sid_other, side in sides.items():
        found: dict[str, tuple[str, str]] = {}
        entry = entries.get(merges.pair_key(mine.head, side.head)) or {}
        for path in entry.get(side.head, ()):
            kind = ("conflict" if path in entry["conflicts"] else
                    "both-changed" if path in entry["both"] else "changed")
            found[path] = (WHERE[side.source], kind)
        if side.source == "worktree":
            for path in _uncommitted(side, trees[side.worktree], index, now, trusted):
                found.setdefault(path, ("uncommitted", "changed"))
        out += [{"session": sid_other, "branch": side.branch, "host": side.host, "path": path,
                 "where": where, "kind": kind} for path, (where, kind) in sorted(found.items())
                if any(P.covers(t, path) for t in targets)]
    mine_read = index.get(mine.worktree) if mine.source == "worktree" else None
    if writing and isinstance(mine_read, dict) and isinstance(mine_read.get("paths"), list):
        mine_read["paths"] = sorted(set(mine_read["paths"]) | {P.plain(t) for t in targets})
    if json.dumps(index, sort_keys=True) != before:
        write_state(index_path, index)
    return out


def _pairs(repo: Repo, mine: str, theirs: list[str]) -> dict:
    """What each pair (*mine*, one of *theirs*) changed, from the forecast's pair cache
    (one ``git merge-tree`` for the pairs not in it, which then join it)."""
    path = repo.state_path(STATE_FILE)
    state = read_state(path)
    cache = state.get("pairs") if isinstance(state.get("pairs"), dict) else {}
    known = len(cache)
    entries, _ = merges.changes(repo, [(mine, tip) for tip in theirs], cache)
    if len(cache) != known:
        state["pairs"] = kept_pairs(cache, entries)
        write_state(path, state)
    return entries


def described(found: dict) -> str:
    """One finding in words: "P was already changed by S on branch B (where, kind)"."""
    where = {"uncommitted": "uncommitted in its worktree", "committed": "committed there",
             "pushed": f"pushed from {found['host']}"}[found["where"]]
    kind = {"conflict": ", will conflict at merge",
            "both-changed": ", both changed: merges cleanly"}.get(found["kind"], "")
    return (f"{found['path']} was already changed by {found['session']} on branch "
            f"{found['branch'] or '(detached)'} ({where}{kind})")
