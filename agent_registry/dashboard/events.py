"""Live updates: notice when the registry changes and tell the page what changed.

Cheap polling: every few hundred milliseconds each event stream reads the registry refs
and the messages branch's (a file read each, no git process) and the mtime of the
clone's local state folder (where sync records its status).  In the lock-shard layout
(format 2, docs/shards.md) claims and releases commit on the shard branches
``<branch>-shards/NN``, and with clone refs (format 3) heartbeats and diary lines on
``<branch>-clones/<clone>``, so the poll also lists those refs, local and remote-tracking,
with one ``git for-each-ref`` (whatever the count).  Only when something moved does it run
one ``git diff-tree`` per branch that moved (one for all the shard and clone refs that
moved, fed on stdin) to learn which areas changed (sessions, locks, wiki, contexts), so
the page re-fetches those and nothing else.  A fresh connection first gets a ``hello``
with the current tip, after which the page loads everything once.
"""
from __future__ import annotations

import asyncio
import json
import os
from typing import AsyncIterator, Callable, NamedTuple

from ..branch.clones import clone_patterns
from ..branch.shards import shard_patterns
from ..core import sharded
from ..core.messages_branch import mailbox
from ..core.registry import Registry
from ..errors import RegistryError

POLL_SECONDS = 0.3


class Probe(NamedTuple):
    """Something the page shows that no registry ref of this repository records, read
    every *every* polls (it costs git processes): when its answer changes, a change names
    *areas*.  ``dashboard --repos``'s other repositories, and the overlap forecast (a
    commit or an edit in a worktree moves no registry ref)."""
    read: Callable[[], object]
    areas: tuple[str, ...]
    every: int
AREAS = ("sessions", "locks", "wiki", "contexts", "messages", "acks")


def signature(registry: Registry) -> tuple:
    """What identifies the registry's current state: local tip, remote-tracking tip,
    the local state folder's mtime, the messages branch's local and remote-tracking
    tips (messages and acknowledgements are committed there: core/messages_branch.py),
    and the lock shards' refs ((refname, commit) pairs, sorted; none in format 1)."""
    box = mailbox(registry)
    try:
        state_mtime = os.stat(registry.repo.state_dir).st_mtime_ns
    except OSError:
        state_mtime = None
    mains = _refs(registry)
    return (*mains, state_mtime, *(_refs(box) if box is not registry else (None, None)),
            _shard_refs(registry, mains))


def _refs(registry: Registry) -> tuple:
    tracking = registry.tracking_ref
    return (registry.repo.read_ref(registry.ref),
            registry.repo.read_ref(tracking) if tracking else None)


def _is_sharded(registry: Registry, mains: tuple) -> bool:
    """Whether *registry* is in the lock-shard layout, read once per main-branch tip pair
    (the marker is on the main branch: a conversion moves it).  A marker that cannot be
    read counts as sharded: listing refs that are not there costs nothing."""
    known = registry.__dict__.get("_dashboard_layout")
    if known is not None and known[0] == mains:
        return known[1]
    try:
        found = sharded.layout(registry)["format"] != 1
    except RegistryError:
        found = True
    registry.__dict__["_dashboard_layout"] = (mains, found)
    return found


def _shard_refs(registry: Registry, mains: tuple) -> tuple:
    """The shard branches' and the clone refs' refs (format 3: heartbeats and diary
    lines), local and remote-tracking, as sorted (refname, commit) pairs: one ``git
    for-each-ref`` over those folders, whatever the count (not the intent refs)."""
    if not registry.part.routes or not _is_sharded(registry, mains):
        return ()
    proc = registry.repo.git("for-each-ref", "--format=%(refname) %(objectname)",
                             *shard_patterns(registry.branch, registry.remote),
                             *clone_patterns(registry.branch, registry.remote), check=False)
    return tuple(sorted(tuple(line.split(" ", 1)) for line in
                        proc.stdout.decode("utf-8", errors="replace").splitlines() if " " in line))


def _tip(state: tuple) -> str | None:
    """The tip the registry reads from: the local branch, else what was fetched."""
    return state[0] or state[1]


def _messages_tip(state: tuple) -> str | None:
    return state[3] or state[4]


def _synced(state: tuple) -> tuple:
    """The parts that move when sync runs: remote-tracking tips and the state folder."""
    tracking = tuple(pair for pair in state[5] if pair[0].startswith("refs/remotes/"))
    return state[1], state[2], state[4], tracking


def changed_paths(registry: Registry, old: str | None, new: str | None) -> list[str]:
    """Files that differ between two registry commits (one git process)."""
    if new is None or old == new:
        return []
    if old is None:
        args = ["ls-tree", "-r", "--name-only", "-z", new]
    else:
        args = ["diff-tree", "-r", "--name-only", "--no-renames", "-z", old, new]
    proc = registry.repo.git(*args, check=False)
    return [p for p in proc.stdout.decode("utf-8", errors="replace").split("\0") if p]


def shard_changed_paths(registry: Registry, old: tuple, new: tuple) -> list[str]:
    """Files that differ on the shard refs that moved between the (refname, commit)
    pairs *old* and *new*: one ``git diff-tree --stdin`` for all of them (a broad claim
    moves every shard at once); a shard ref that appeared is listed whole."""
    before = dict(old)
    pairs = [(before.get(ref), tip) for ref, tip in new if before.get(ref) != tip]
    lines = "".join(f"{was} {tip}\n" for was, tip in pairs if was)
    paths = []
    if lines:
        proc = registry.repo.git("diff-tree", "--stdin", "-r", "--name-only", "--no-renames",
                                 "--no-commit-id", "-z", input=lines.encode(), check=False)
        paths = [p for p in proc.stdout.decode("utf-8", errors="replace").split("\0") if p]
    for was, tip in pairs:
        if not was:
            paths += changed_paths(registry, None, tip)
    return paths


def describe_change(paths: list[str]) -> dict:
    """The areas and session ids touched by *paths*."""
    areas, sessions = set(), set()
    for path in paths:
        top, _, rest = path.partition("/")
        if top in AREAS:
            areas.add(top)
        name = rest.rsplit("/", 1)[-1]
        if top == "sessions" and name.endswith(".yaml"):
            sessions.add(name[:-5])
        elif top == "held" and name.endswith(".json"):  # a shard's: what the session holds there
            areas.update(("locks", "sessions"))
            sessions.add(name[:-5])
        elif top == "beats" and name.endswith(".json"):  # a clone ref's: a session's heartbeat
            areas.add("sessions")
            sessions.add(name[:-5])
        elif top in ("contexts", "wiki") and name.endswith(".md"):
            sessions.add(name[:-3])
        elif top in ("messages", "acks") and "/" in rest:
            sessions.add(rest.split("/", 1)[0])  # the sender, or the one who acknowledged
    return {"areas": sorted(areas), "sessions": sorted(sessions)}


async def change_stream(borrow: Callable, interval: float = POLL_SECONDS,
                       probes: tuple[Probe, ...] = ()) -> AsyncIterator[dict]:
    """Server-sent events: ``hello`` at once, then ``change`` whenever the registry moves,
    or one of *probes* does.  *borrow* lends a Registry (a context manager).  The
    response cancels this generator when the client goes away."""
    # the probes first: a first read may write (the forecast's state file), which the
    # signature below must already see
    seen = [await asyncio.to_thread(probe.read) for probe in probes]
    with borrow() as registry:
        last = signature(registry)
    yield {"event": "hello", "data": json.dumps({"tip": _tip(last)})}
    polls = 0
    while True:
        await asyncio.sleep(interval)
        polls += 1
        moved: set[str] = set()
        for index, probe in enumerate(probes):
            if polls % probe.every == 0:
                answer = await asyncio.to_thread(probe.read)
                if answer != seen[index]:
                    moved.update(probe.areas)
                    seen[index] = answer
        with borrow() as registry:
            current = signature(registry)
            if current == last and not moved:
                continue
            paths = await asyncio.to_thread(changed_paths, registry, _tip(last), _tip(current))
            paths += await asyncio.to_thread(changed_paths, registry, _messages_tip(last),
                                             _messages_tip(current))
            if current[5] != last[5]:
                paths += await asyncio.to_thread(shard_changed_paths, registry, last[5],
                                                 current[5])
        change = describe_change(paths)
        change["areas"] = sorted({*change["areas"], *moved})
        if _synced(current) != _synced(last):
            change["areas"].append("sync")
        change.update(tip=_tip(current), previous=_tip(last))
        last = current
        yield {"event": "change", "data": json.dumps(change)}
