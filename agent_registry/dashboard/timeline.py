"""One session's life, read back from the registry branch's history.

Every registry commit records its operation in ``Registry-*`` trailers, so the history
*is* the timeline.  One ``git log`` reads it: bounded by ``--max-count`` and narrowed by
``--grep`` on the session id (a fixed string), then filtered exactly here, because the id
may also occur inside another id or a path.  Commits that concern the session without
being its own operation are found by their subject: a force-release of its lock ("held by
SID") and a cleanup that stopped it ("cleanup: stop SID, …").

In the lock-shard layout (format 2, docs/shards.md) a session's claims and releases are
committed on the shard branches ``<branch>-shards/NN``, not on the main branch: the same
``git log`` then also walks those (local and remote-tracking, by ``--glob``: still one
process), and the events are put in order by their time.  A claim of targets recorded in
several shards is one commit per shard with the same operation id: they make one event.
With clone refs (format 3) a session's heartbeats and diary lines are committed on its
clone's ref ``<branch>-clones/<clone>``: those refs are walked by the same ``git log``.

The result is drawn by the page as a chart: one lane for the session (registered to
ended, heartbeat ticks, diary marks) and one lane per path it held (claimed to released).
"""
from __future__ import annotations

from ..branch.clones import FORMAT as CLONES_FORMAT
from ..branch.clones import clone_patterns
from ..branch.records import LIVE
from ..branch.shards import shard_patterns
from ..branch.trailers import parse_op
from ..core import sharded
from ..core.registry import Registry
from ..errors import RegistryError

DEFAULT_LIMIT = 2000
_RECORD, _FIELD = "\x1e", "\x1f"
_ENDINGS = {"Finished": "finished", "Stop": "stopped", "Killed": "killed"}


def shard_globs(registry: Registry) -> list[str]:
    """``git log`` arguments naming the lock shards' refs (``--glob``) and the clone refs
    (listed by ``for-each-ref`` and named exactly: a ``--glob`` would also take the intent
    refs below them), local and remote-tracking; none in the single-branch layout.  A
    layout marker that cannot be read names them too (refs that are not there add
    nothing)."""
    try:
        found = sharded.layout(registry)["format"]
    except RegistryError:
        found = CLONES_FORMAT
    if found == 1:
        return []
    out = [f"--glob={pattern}" for pattern in shard_patterns(registry.branch, registry.remote)]
    if found >= CLONES_FORMAT:
        out += registry.repo.git("for-each-ref", "--format=%(refname)",
                                 *clone_patterns(registry.branch, registry.remote)
                                 ).stdout.decode().split()
    return out


def read_history(registry: Registry, sid: str, limit: int,
                 globs: tuple[str, ...] | list[str] = ()) -> list[tuple[str, float, str]]:
    """(commit, time, message) of the newest *limit* commits mentioning *sid* on the
    registry branch and the refs *globs* names, oldest first."""
    tip = registry.tip()
    if tip is None:
        return []
    proc = registry.repo.git("log", f"--max-count={limit}", "--fixed-strings", f"--grep={sid}",
                             f"--format=%H{_FIELD}%at{_FIELD}%B{_RECORD}", tip, *globs,
                             "--")
    out = []
    for record in proc.stdout.decode("utf-8", errors="replace").split(_RECORD):
        parts = record.strip("\n").split(_FIELD, 2)
        if len(parts) == 3:
            out.append((parts[0], float(parts[1]), parts[2]))
    out.reverse()
    return out


def _mentions(subject: str, marker: str, sid: str) -> bool:
    """Whether the comma-separated list after *marker* in *subject* names *sid*."""
    if marker not in subject:
        return False
    names = subject.split(marker, 1)[1].split(")")[0]  # session ids never hold ")"
    return sid in (n.strip() for n in names.split(","))


def classify(sid: str, op: dict, subject: str) -> dict | None:
    """The timeline event a registry operation makes for session *sid*, or None."""
    kind, paths, ends = op.get("op"), list(op.get("paths") or []), False
    if op.get("session") == sid:
        if kind == "register":
            kind = "re-registered" if subject.startswith("re-register") else "registered"
        elif kind == "finish":
            kind, ends = _ENDINGS.get(op.get("status", ""), "finished"), True
        elif kind == "update" and (op.get("fields") or {}).get("status", LIVE) != LIVE:
            kind, ends = _ENDINGS.get(op["fields"]["status"], "ended"), True
        elif kind == "end":
            kind, ends = "finished", True
        else:
            kind = {"claim": "claimed", "release": "released", "heartbeat": "heartbeat",
                    "context-log": "diary", "handoff": "handoff", "update": "updated"}.get(kind, kind)
    elif kind == "force-release" and _mentions(subject, "(held by ", sid):
        kind, paths = "lock freed", [op["path"]]
    elif kind == "cleanup" and _mentions(subject, "cleanup: stop ", sid):
        kind, ends = "stopped", True
    else:
        return None
    return {"at": float(op.get("at") or 0), "kind": kind, "paths": paths, "ends": ends,
            "subject": subject, "by": op.get("by"), "reason": op.get("reason")}


def session_timeline(registry: Registry, sid: str, limit: int = DEFAULT_LIMIT) -> dict:
    """Events and chart lanes of session *sid* from the branch history."""
    globs = shard_globs(registry)
    history = read_history(registry, sid, limit, globs)
    events = []
    by_id: dict[str, dict] = {}
    for commit, committed_at, message in history:
        op = parse_op(message)
        if op is None:
            continue
        event = classify(sid, op, message.split("\n", 1)[0])
        if event is None:
            continue
        same = by_id.get(op.get("id")) if globs and op.get("id") else None
        if same is not None:  # the same operation in another shard: its targets there
            same["paths"] = list(dict.fromkeys(same["paths"] + event["paths"]))
            continue
        event["at"] = event["at"] or committed_at
        event["commit"] = commit
        events.append(event)
        if globs and op.get("id"):
            by_id[op["id"]] = event
    if globs:  # several branches: their commits interleave by time
        events.sort(key=lambda event: event["at"])
    now = registry.clock()
    return {"session": sid, "events": events, "lanes": lanes(events), "now": now,
            "truncated": len(history) >= limit}


def lanes(events: list[dict]) -> list[dict]:
    """Chart lanes: the session's own span, then each path's held intervals.  An interval
    still open has ``end`` None (the page draws it up to now)."""
    session = {"label": "session", "intervals": [], "marks": []}
    held: dict[str, dict] = {}
    open_since: dict[str, float] = {}

    def close(path: str, at: float) -> None:
        held[path]["intervals"].append({"start": open_since.pop(path), "end": at})

    for event in events:
        at, kind = event["at"], event["kind"]
        if kind in ("registered", "re-registered") and not session["intervals"]:
            session["intervals"].append({"start": at, "end": None})
        elif kind in ("heartbeat", "diary", "handoff", "updated"):
            session["marks"].append({"at": at, "kind": kind})
        elif kind == "claimed":
            for path in event["paths"]:
                held.setdefault(path, {"label": path, "intervals": [], "marks": []})
                open_since.setdefault(path, at)
        elif kind in ("released", "lock freed"):
            for path in event["paths"]:
                if path in open_since:
                    close(path, at)
                    if kind == "lock freed":
                        held[path]["marks"].append({"at": at, "kind": kind})
        if event["ends"]:
            for path in list(open_since):
                close(path, at)
            if session["intervals"] and session["intervals"][-1]["end"] is None:
                session["intervals"][-1]["end"] = at
            session["marks"].append({"at": at, "kind": kind})
    for path, start in open_since.items():
        held[path]["intervals"].append({"start": start, "end": None})
    return [session, *held.values()]
