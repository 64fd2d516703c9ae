"""The core's lock operations (claim, release, heartbeat, force-release): each with
its shape, checked before it is applied or replayed, and the handler that decides it
against a view of the branch and writes what changes."""
from __future__ import annotations

from ..branch import paths as P
from ..branch.records import SHORTEST_TTL, Holder, Lock, iso
from ..branch.view import View
from ..errors import NotFound, Refused
from .operations import Outcome, operation
from .shapes import AMOUNT, COUNT, FLAG, MAPPING, SOME_TEXTS, TEXT, TEXTS, one_of

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing on every claim
if TYPE_CHECKING:
    from .registry import Registry


def check_generations(view: View, sid: str, op: dict) -> None:
    """Refuse *op* (a renewal or a release) when it names, in ``expect``, the generation
    of a claim of *sid*'s that is no longer the one held: the lock was taken over (and
    perhaps claimed again by another process of the same session) since that claim."""
    for target, generation in (op.get("expect") or {}).items():
        lock = view.lock(target)
        mine = lock.holder(sid) if lock else None
        if mine is None or mine.generation != generation:
            now = f"generation {mine.generation} is held now" if mine else \
                f"{sid} does not hold it now" + (
                    f" ({', '.join(h.session for h in lock.holders)} does)"
                    if lock and lock.holders else "")
            raise Refused(f"{target}: the claim of generation {generation} is gone (taken over "
                          f"or released since); {now}. Claim it again before you rely on it",
                          details={"path": target, "generation": generation,
                                   "current": mine.generation if mine else None})


@operation("claim", shape={"session": TEXT, "paths": SOME_TEXTS,
                             "mode": one_of("exclusive", "shared"), "ttl": COUNT,
                             "generations": MAPPING, "?expect": MAPPING})
def apply_claim(registry: Registry, view: View, op: dict) -> Outcome:
    sid, at, mode = op["session"], op["at"], op["mode"]
    me = registry.live_session(view, sid)
    check_generations(view, sid, op)
    conflicts = [c for t in op["paths"] for c in registry.conflicts(view, sid, t, mode, at)]
    if conflicts:
        raise Refused(describe_conflicts(conflicts), details={"conflicts": conflicts})
    results, taken = [], []
    for target in op["paths"]:
        lock = view.lock(target) or Lock(target, mode)
        stale = {h.session: registry.judge(view, h, at) for h in lock.holders if h.session != sid}
        dropped = [h for h in lock.holders if stale.get(h.session)]
        for holder in dropped:
            registry.forget(view, holder.session, target)
            taken.append((target, holder.session, stale[holder.session]))
        lock.holders = [h for h in lock.holders if h not in dropped]
        mine = lock.holder(sid)
        if mine:
            mine.acquired_at, mine.ttl, state = iso(at), op["ttl"], "renewed"
        else:
            mine = Holder(sid, op["generations"][target], iso(at), op["ttl"])
            lock.holders.append(mine)
            state = "taken-over" if dropped else "acquired"
        lock.mode = mode
        view.put_lock(lock)
        if target not in me.locks:
            me.locks.append(target)
        results.append({"path": target, "status": state, "mode": mode,
                        "generation": mine.generation,
                        "previous": [h.session for h in dropped],
                        "taken_over": [{"session": h.session, "reason": stale[h.session]}
                                       for h in dropped]})
    me.heartbeat_at = iso(at)
    if op["ttl"] < me.shortest_lock_ttl:  # so registry.md knows to read its lock records
        me.extra[SHORTEST_TTL] = op["ttl"]
    view.put_session(me)
    names = op["paths"][0] + (f" and {len(op['paths']) - 1} more" if len(op["paths"]) > 1 else "")
    previous = ", ".join(dict.fromkeys(owner for _, owner, _ in taken))
    return Outcome({"session": sid, "locks": results},
                   f"claim {names} by {sid}" + (" (shared)" if mode == "shared" else "")
                   + (f", taking over from {previous}" if taken else ""),
                   [f"Takeover: {target} from {owner}: {' '.join(why.split())}"
                    for target, owner, why in taken])


@operation("release", shape={"session": TEXT, "paths": TEXTS, "?expect": MAPPING})
def apply_release(registry: Registry, view: View, op: dict) -> Outcome:
    sid = op["session"]
    me = registry.live_session(view, sid)
    check_generations(view, sid, op)
    results, changes = [], []
    for target in op["paths"]:
        lock = view.lock(target)
        if lock is None or not lock.holders:
            results.append({"path": target, "status": "not-locked"})
        elif lock.holder(sid) is None:
            owners = ", ".join(h.session for h in lock.holders)
            raise Refused(f"{target} is held by {owners}, not by {sid}",
                          details={"path": target, "owners": owners.split(", ")})
        else:
            changes.append(lock)
            results.append({"path": target, "status": "released"})
    for lock in changes:
        lock.holders = [h for h in lock.holders if h.session != sid]
        view.put_lock(lock)
    held = [t for t in me.locks if t not in op["paths"]]
    if held == me.locks and not changes:
        return Outcome({"session": sid, "locks": results}, None)
    me.locks = held
    view.put_session(me)
    released = [lock.path for lock in changes] or ["stale entries"]
    more = f" and {len(released) - 1} more" if len(released) > 1 else ""
    return Outcome({"session": sid, "locks": results},
                   f"release {released[0]}{more} by {sid}")


@operation("heartbeat", shape={"session": TEXT, "?paths": TEXTS, "?held": AMOUNT})
def apply_heartbeat(registry: Registry, view: View, op: dict) -> Outcome:
    """*held*: the locks the session holds where this branch does not record them (the
    lock shards, core/sharded.py), for the result and the commit's subject."""
    session = registry.live_session(view, op["session"])
    missing = [t for t in op.get("paths", ()) if not any(
        held == t or P.covers(held, t.rstrip("/")) for held in session.locks)]
    if missing:
        raise NotFound(f"{session.id} holds no lock on {', '.join(missing)}",
                       details={"paths": missing})
    session.heartbeat_at = iso(op["at"])
    view.put_session(session)
    held = op.get("held", len(session.locks))
    return Outcome({"session": session.id, "heartbeat_at": session.heartbeat_at,
                    "locks": held}, f"heartbeat {session.id} ({held} lock(s))",
                   page_lasts=True)  # registry.md shows no heartbeat time but as an age


@operation("force-release", shape={"path": TEXT, "force": FLAG, "by": TEXT, "reason": TEXT})
def apply_force_release(registry: Registry, view: View, op: dict) -> Outcome:
    target = op["path"]
    lock = view.lock(target)
    if lock is None or not lock.holders:
        raise NotFound(f"{target} is not locked")
    fresh = [h.session for h in lock.holders if registry.judge(view, h, op["at"]) is None]
    if fresh and not op["force"]:
        raise Refused(f"{target} is held by live session {', '.join(fresh)}: "
                      "pass --force to free it anyway")
    for holder in lock.holders:
        registry.forget(view, holder.session, target)
    previous = [h.session for h in lock.holders]
    lock.holders = []
    view.put_lock(lock)
    return Outcome({"path": target, "previous": previous, "was_fresh": bool(fresh),
                    "by": op["by"], "reason": op["reason"]},
                   f"force-release {target} (held by {', '.join(previous)}) "
                   f"by {op['by']}: {op['reason']}")


def describe_conflicts(conflicts: list[dict]) -> str:
    parts = []
    for c in conflicts:
        via = f" (via {c['target']})" if c["target"] != c["path"] else ""
        what = f", working on: {c['working_on']}" if c["working_on"] else ""
        parts.append(f"{c['path']} is locked by {c['owner']}{via} since {c['since']}{what}")
    asked = dict.fromkeys(c["reach"] for c in conflicts if c.get("reach"))
    return "; ".join(parts) + "".join(f"; ask: {reach}" for reach in asked)
