"""The conflict forecast's library call ``overlaps`` (``agent-registry overlap``, the
dashboard's pane, ``watch``); a claim's and an edit's warning is edits.py's.

For every pair of sides (two worktrees here, or another clone's pushed branch) with live
sessions, one overlap however many sessions work on each, the paths both changed since
their merge base, each of one kind:

- ``conflict``: ``git merge-tree`` finds a textual conflict there;
- ``both-changed``: both sides changed the file and it merges cleanly;
- ``held-changed``: one session holds a lock covering the path, the other changed it.

What the merges found is cached by the pair of tips (merges.py), and when each pair was
first seen overlapping ("since") in the same local state file, so a repeat run with
nothing new costs a ``git status`` per worktree with a live session and no merge.
"""
from __future__ import annotations

import json
import os

from ..branch import paths as P
from ..branch.records import iso
from ..store.atomic import replace_file
from ..store.git import GitError
from . import merges
from .gate import live
from ..store.layout import worktrees
from .sides import Side, committed, remotes, with_changes

STATE_FILE = "overlap.json"
KINDS = ("conflict", "both-changed", "held-changed")  # worst first
KEEP = 512  # cached pairs kept (each lists the paths both tips changed)


def state_path(registry) -> str:
    return registry.repo.state_path(STATE_FILE)


def read_state(path: str) -> dict:
    """A local state file's JSON object; {} when missing or broken (a cache: it is
    rebuilt; never half-written, since it is replaced atomically)."""
    try:
        with open(path, encoding="utf-8") as f:
            state = json.load(f)
        return state if isinstance(state, dict) else {}
    except (OSError, ValueError):
        return {}


def write_state(path: str, state: dict) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    replace_file(path, json.dumps(state, sort_keys=True), prefix=os.path.basename(path) + ".")


def load(registry) -> dict:
    return read_state(state_path(registry))


def save(registry, state: dict) -> None:
    write_state(state_path(registry), state)


def _sides(registry, sessions: list, *, memo: dict | None = None) -> tuple[dict, list]:
    """{sid: Side} and [{"session", "reason"}] of the sessions with none; with *memo*
    (the state file's ``worktrees``), worktrees' uncommitted changes count too."""
    repo, trees = registry.repo, worktrees(registry.repo.info)
    found, skipped, names = {}, [], remotes(registry.repo, registry.remote)
    for session in sessions:
        side = committed(repo, session, trees, names, registry.host)
        if isinstance(side, str):
            skipped.append({"session": session.id, "reason": side})
        else:
            found[session.id] = side
    if memo is not None and len({s.key for s in found.values()}) > 1:
        scratch = repo.state_path()
        os.makedirs(scratch, exist_ok=True)
        done: dict = {}
        for sid, side in list(found.items()):
            if side.key not in done:
                try:
                    done[side.key] = with_changes(repo, side, trees.get(side.worktree, ""),
                                                  scratch, memo)
                except (GitError, OSError) as exc:  # this side only: the others still count
                    done[side.key] = f"its worktree's changes could not be read: {exc}"
            if isinstance(done[side.key], str):
                del found[sid]
                skipped.append({"session": sid, "reason": done[side.key]})
            else:
                found[sid] = done[side.key]
    return found, skipped


def _groups(found: dict) -> list[list[str]]:
    """The sessions of each side (one worktree, or one pushed ref), each list sorted, the
    sides in the order of their first session: a side is one party to a collision, however
    many sessions work there (issue 37: nine sessions of one worktree were nine pairs)."""
    by_side: dict = {}
    for sid in sorted(found):
        by_side.setdefault(found[sid].key, []).append(sid)
    return list(by_side.values())


def _pairs(groups: list[list[str]]) -> list[tuple[list[str], list[str]]]:
    return [(a, b) for i, a in enumerate(groups) for b in groups[i + 1:]]


def _held(registry) -> dict[str, list[str]]:
    """{sid: targets it holds, stale locks left out}."""
    held: dict[str, list[str]] = {}
    for lock in registry.locks():
        if lock["stale_reason"] is None:
            held.setdefault(lock["owner"], []).append(lock["path"])
    return held


def _paths(sides: tuple[list[str], list[str]], tips: tuple[str, str], entry: dict,
           held: dict) -> list[dict]:
    """The overlapping paths of two sides (their sessions, at *tips*) from a pair's entry."""
    changed = (set(entry.get(tips[0], ())), set(entry.get(tips[1], ())))

    def holds(sid: str, path: str) -> bool:
        return any(P.covers(t, path) for t in held.get(sid, ()))
    out = {}
    for path in entry["conflicts"]:
        out[path] = "conflict"
    for path in entry["both"]:
        out.setdefault(path, "both-changed")
    for n in (0, 1):  # one side holds it, the other changed it
        for path in changed[1 - n]:
            if any(holds(sid, path) for sid in sides[n]):
                out.setdefault(path, "held-changed")
    return [{"path": path, "kind": kind,
             "held_by": [sid for side in sides for sid in side if holds(sid, path)],
             "changed_by": [sid for n, side in enumerate(sides) for sid in side
                            if path in changed[n] or kind != "held-changed"]}
            for path, kind in sorted(out.items())]


def kept_pairs(cache: dict, used: dict) -> dict:
    """The cache entries to keep: those used now, then older ones up to KEEP (a claim's
    pairs of committed tips beside the forecast's, which has uncommitted ones)."""
    kept = {k: cache[k] for k in used}
    for key in reversed(list(cache)):
        if len(kept) >= KEEP:
            break
        kept.setdefault(key, cache[key])
    return kept


def side_name(side: dict) -> str:
    """A side as every clone names it: its branch (else its worktree) and host, never its
    sessions, so a session joining a side changes no overlap's key."""
    return f"{side['branch'] or side['worktree'] or 'detached'}@{side['host']}"


def overlap_key(pair: list[str], paths: list[dict]) -> str:
    """What a notification is deduplicated by: the pair of sides (:func:`side_name`) and
    its paths with their kinds (a new commit on the same paths tells nothing new; a new
    path or a worse kind does)."""
    import hashlib  # here: a claim's forecast never needs it
    text = json.dumps([pair, [[p["path"], p["kind"]] for p in paths]])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _side_dict(sid: str, side: Side, session) -> dict:
    return {"session": sid, "branch": side.branch, "worktree": side.worktree,
            "host": side.host, "tip": side.tip, "dirty": side.dirty, "source": side.source,
            "working_on": session.working_on}


def _party(sids: list[str], side: Side, sessions: dict) -> dict:
    """One side of an overlap: its sessions, and the newest of them (registered last, the
    likeliest at work there) as ``session``: whom the other side's message comes from."""
    newest = max(sids, key=lambda sid: (sessions[sid].registered_at, sid))
    return {**_side_dict(newest, side, sessions[newest]), "sessions": sids}


def overlaps(registry) -> dict:
    """The forecast: every pair of live sessions on two sides and the paths they both
    changed (docs/overlap.md has the JSON shape).  Reads the registry and the worktrees;
    writes only its local state file (and, for worktrees with uncommitted changes,
    objects)."""
    view = registry.view()
    sessions = {s.id: s for s in live(registry, view)}
    state = load(registry)
    loaded = json.dumps(state, sort_keys=True)
    memo = state.get("worktrees") if isinstance(state.get("worktrees"), dict) else {}
    found, skipped = _sides(registry, list(sessions.values()), memo=memo)
    state["worktrees"] = {k: v for k, v in memo.items()
                          if any(side.worktree == k for side in found.values())}
    pairs = _pairs(_groups(found))
    cache = state.get("pairs") if isinstance(state.get("pairs"), dict) else {}
    entries, method = merges.changes(registry.repo, [(found[a[0]].tip, found[b[0]].tip)
                                                      for a, b in pairs], cache)
    held = _held(registry) if pairs else {}
    since = state.get("since") if isinstance(state.get("since"), dict) else {}
    now, out = iso(registry.clock()), []
    for a, b in pairs:
        tips = (found[a[0]].tip, found[b[0]].tip)
        paths = _paths((a, b), tips, entries.get(merges.pair_key(*tips), {"conflicts": [],
                                                                          "both": []}), held)
        if not paths:
            continue
        sides = [_party(a, found[a[0]], sessions), _party(b, found[b[0]], sessions)]
        name = " ".join(side_name(side) for side in sides)
        since[name] = since.get(name, now)
        out.append({"sessions": a + b, "sides": sides, "paths": paths,
                    "kinds": [k for k in KINDS if any(p["kind"] == k for p in paths)],
                    "since": since[name],
                    "key": overlap_key([side_name(side) for side in sides], paths)})
    names = {" ".join(side_name(side) for side in o["sides"]) for o in out}
    state["since"] = {k: v for k, v in since.items() if k in names}
    state["pairs"] = kept_pairs(cache, entries)
    state.setdefault("sent", {})
    if json.dumps(state, sort_keys=True) != loaded:  # unchanged: no write (the dashboard's
        save(registry, state)                         # stream reads the state folder's mtime)
    return {"method": method,
            "note": None if method == "merge-tree" else
            "git older than 2.38: conflicts cannot be told apart from changes to one file",
            "sessions": [{"session": sid, **{k: v for k, v in _side_dict(
                sid, side, sessions[sid]).items() if k not in ("session", "working_on")}}
                for sid, side in sorted(found.items())],
            "skipped": skipped, "overlaps": out}
