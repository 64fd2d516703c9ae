"""The layout's router: which refs an operation of the registry branch writes.

In the layout ``init`` makes (docs/shards.md), a lock operation is split by shard
(branch/shards.py ``lock_shards``) and applied to each shard's registry
(core/sharded.py) in ascending order: a file claim writes one ref.  A claim refused in
one shard releases what it took in the shards before it, so it still takes every target
or none; two claims meet first on the lowest shard they share, and that ref's
compare-and-swap decides, so there is no deadlock and exactly one of two conflicting
claims wins.  Heartbeats and diary lines go to this clone's own ref (core/cloned.py); a
session's end releases its locks in the shards before it is recorded on the main branch;
everything else is the main branch's.  After a write elsewhere, the main branch's page
is rendered again when it is a minute old (refresh_page).
"""
from __future__ import annotations

from ..branch import paths as P
from ..branch import shards as S
from ..branch.records import LIVE
from ..branch.shardview import WholeView
from ..branch.view import View
from ..errors import NotFound, Refused, RegistryError, Unconfirmed
from .cloned import clone_registry
from .sharded import count_of, layout, shard_registry, whole_view

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .registry import Registry

# what a shard records and decides; in format 3 heartbeats and diary lines go to the
# clone's own ref (core/cloned.py); a session's other operations stay on the main branch
LOCK_OPS = ("claim", "release", "force-release")
ROUTED = LOCK_OPS + ("heartbeat", "context-log", "finish", "end", "cleanup", "update")


class Resharded(Refused):
    """A lock operation met a main branch that was converted to shards (by another clone,
    after this one decided where to write): it is applied to the shards instead, or, when
    it was pending from before, refused so its agent claims again.  Its details say so,
    also when a replay reports it as a plain refusal (sync/replay.py)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, details={"resharded": True})



def route(registry: Registry, op: dict) -> dict:
    """Apply *op* where the layout puts it (the main registry calls this for ROUTED)."""
    registry.unpushed = {}  # what this operation's refs say, not an earlier operation's
    marker = layout(registry)
    if marker["format"] == 1 or (op["op"] == "context-log" and marker["format"] < 3):
        return registry.apply_main(op)
    count = count_of(marker)
    if op["op"] == "heartbeat":
        return refresh_page(registry, _heartbeat(registry, op, count, marker["format"] >= 3))
    if op["op"] == "context-log":
        return refresh_page(registry, _on_clone(registry, op))
    if op["op"] == "cleanup":
        whole = whole_view(registry, count)
        result = registry.apply_main(dict(op, shards=_renewals(whole)))
        for stopped in result["stopped"]:
            stopped["released"] = _free_stopped(registry, whole, stopped["session"], op, count)
        return result
    if op["op"] == "update" and op["fields"].get("status", LIVE) == LIVE:
        return registry.apply_main(op)
    if op["op"] in ("finish", "end", "update"):  # end: with a wiki entry (wiki/ops.py);
        # update: to an ending status, which ends the session as finish does
        released = _release_all(registry, op, count)
        counted = dict(op, released_in_shards=len(released)) if released and \
            op["op"] != "update" else op
        result = registry.apply_main(counted)
        result["released"] = released + [t for t in result.get("released", []) if t not in released]
        return result
    try:
        return refresh_page(registry, _apply_lock_op(registry, op, count))
    except Refused as exc:
        # routed by this clone's own layout, which a registry made apart gave up for the
        # remote's while it was applied (sync/remote.py _sessions_first): taken out of
        # the shard it was committed in; routed again, under a new id (as apply_main)
        if not exc.details.get("resharded") or count_of(layout(registry)) == count:
            raise
    import os
    return route(registry, dict(op, id=os.urandom(8).hex()))


def refresh_page(registry: Registry, result: dict) -> dict:
    """After a write on the shards or this clone's ref, which the main branch's
    registry.md does not show until it is rendered again: render it (the refresh-page
    operation, core/sessions.py) when it is PAGE_REFRESH old or older, so the page a
    forge shows is at most a minute behind the last write of any clone.  The write's
    own outcome is what the caller reads: a page that could not be pushed goes with
    this clone's next sync, and one that could not be committed is a warning."""
    tip = registry.tip()
    if tip is None or registry.page_is_recent(View(registry.repo, tip), registry.clock()):
        return result
    unpushed = registry.unpushed
    try:
        registry.apply_main(registry.new_op("refresh-page"))
    except Unconfirmed:
        pass  # committed here; pushed by the next sync like any pending operation
    except RegistryError as exc:
        registry.warnings.append(f"registry.md was not rendered again: {exc.message}")
    finally:
        registry.unpushed = unpushed
    return result


def _targets(op: dict) -> list[str]:
    return [op["path"]] if op["op"] == "force-release" else list(op["paths"])


def _by_shard(registry: Registry, targets: list[str], count: int) -> dict[int, list[str]]:
    """*targets* grouped by the shards recording them (with their folded key's shard
    where names fold here: branch/shards.lock_shards)."""
    rule = registry.repo.path_rule
    fold = rule.key if rule is not None and rule.folds else None
    by_shard: dict[int, list[str]] = {}
    for target in targets:
        for index in S.lock_shards(target, count, fold):
            by_shard.setdefault(index, []).append(target)
    return by_shard


def split(registry: Registry, op: dict, count: int) -> dict[int, dict]:
    """The lock operation *op* as its part for each shard (of *count*) recording one of
    its targets: its paths, generations and expected generations there."""
    parts = {}
    for index, targets in sorted(_by_shard(registry, _targets(op), count).items()):
        part = dict(op)
        if op["op"] != "force-release":
            part["paths"] = targets
        for key in ("generations", "expect"):
            if isinstance(op.get(key), dict):
                part[key] = {t: g for t, g in op[key].items() if t in targets}
        parts[index] = part
    return parts


def _apply_lock_op(registry: Registry, op: dict, count: int) -> dict:
    done: list[tuple[int, dict]] = []
    missing = offline = None
    for index, part in split(registry, op, count).items():
        shard = shard_registry(registry, index, count)
        try:
            done.append((index, shard.apply(part)))
        except NotFound as exc:  # force-release: a broad lock some shard never got
            missing = exc
        except Unconfirmed as exc:  # committed here, not pushed: the other shards too
            offline = exc
            done.append((index, {k: exc.details[k] for k in ("session", "locks")}))
        except Refused:
            if op["op"] == "claim":
                _undo_claim(registry, op, done, count)
            raise
        finally:
            _carry(registry, shard)
    if not done and missing is not None:
        raise missing
    merged = _merge(op, [result for _, result in done])
    if offline is not None:  # a claim exits 3 naming every target it holds only here
        raise Unconfirmed(offline.message, details={**offline.details, **merged})
    return merged


def _undo_claim(registry: Registry, op: dict, done: list[tuple[int, dict]], count: int) -> None:
    """Release what a refused claim took in the shards before the one that refused it
    (what it only renewed was held before, and stays)."""
    release = registry.new_op("release", session=op["session"], paths=[])
    for index, result in done:
        taken = [r["path"] for r in result["locks"] if r["status"] != "renewed"]
        if not taken:
            continue
        shard = shard_registry(registry, index, count)
        try:
            shard.apply(dict(release, paths=taken))
        except Exception as exc:  # noqa: BLE001 — the refusal is what the caller must see
            registry.warnings.append(f"could not release {', '.join(taken)} after the claim "
                                     f"was refused: {exc}; run `agent-registry lock release`")
        _carry(registry, shard)


def _merge(op: dict, results: list[dict]) -> dict:
    """One result from the shards' (a broad target answers in every shard it is in)."""
    if op["op"] == "force-release":
        first = dict(results[0])
        first["previous"] = list(dict.fromkeys(p for r in results for p in r["previous"]))
        first["was_fresh"] = any(r["was_fresh"] for r in results)
        return first
    rank = {"taken-over": 0, "acquired": 1, "released": 1, "renewed": 2, "not-locked": 3}
    per_target: dict[str, dict] = {}
    for result in results:
        for entry in result["locks"]:
            known = per_target.get(entry["path"])
            if known is None or rank.get(entry["status"], 9) < rank.get(known["status"], 9):
                per_target[entry["path"]] = entry
    return {"session": op["session"], "locks": [per_target[t] for t in _targets(op)
                                                if t in per_target]}


def _heartbeat(registry: Registry, op: dict, count: int, cloned: bool) -> dict:
    """A heartbeat writes the session's beat on this clone's ref (*cloned*, format 3) or
    its record on the main branch (format 2); the paths it names are checked against
    what the session holds in the shards."""
    session = whole_view(registry, count).session(op["session"], strict=False)
    held = session.locks if session else []
    if op.get("paths"):
        missing = [t for t in op["paths"]
                   if not any(h == t or P.covers(h, t.rstrip("/")) for h in held)]
        if missing:
            raise NotFound(f"{op['session']} holds no lock on {', '.join(missing)}",
                           details={"paths": missing})
    op = {**{k: v for k, v in op.items() if k != "paths"}, "held": len(held)}
    return _on_clone(registry, op) if cloned else registry.apply_main(op)


def _on_clone(registry: Registry, op: dict) -> dict:
    clone = clone_registry(registry)
    try:
        return clone.apply(op)
    finally:
        _carry(registry, clone)


def _renewals(view: WholeView) -> dict[str, dict]:
    """sid -> {heartbeat_at, ttl} of every live session holding locks in the shards: its
    newest heartbeat (a claim renews it on the shard alone) and its longest lock TTL, so
    cleanup on the main branch stops no session its claims keep alive."""
    out = {}
    for session in view.live_sessions():
        ttls = [h.ttl for t in session.locks if (lock := view.lock(t)) for h in lock.holders
                if h.session == session.id]
        if ttls:
            out[session.id] = {"heartbeat_at": session.heartbeat_at, "ttl": max(ttls)}
    return out


def _release_all(registry: Registry, op: dict, count: int) -> list[str]:
    """Before a session ends on the main branch (finish, end, an ending update), release
    what it holds in the shards (cleanup frees a stopped session's: _free_stopped).  What
    it holds is read after a fetch of the main branch, which brings every shard: from a
    clone that never saw its claims, they would read as none and stay behind."""
    registry.catch_up()
    session = whole_view(registry, count).session(op["session"], strict=False)
    if session is None or not session.locks:
        return []
    released: list[str] = []
    by_shard = _by_shard(registry, session.locks, count)
    release = registry.new_op("release", session=op["session"], paths=[])
    for index in sorted(by_shard):  # one operation id over the shards, as lock operations
        shard = shard_registry(registry, index, count)
        try:
            result = shard.apply(dict(release, paths=by_shard[index]))
            released += [r["path"] for r in result["locks"]
                         if r["status"] == "released" and r["path"] not in released]
        except Refused as exc:  # taken over meanwhile: not ours to release
            registry.warnings.append(exc.message)
        _carry(registry, shard)
    return released


def _free_stopped(registry: Registry, whole: WholeView, sid: str, op: dict,
                  count: int) -> list[str]:
    """Free in the shards what *sid*, just stopped by cleanup on the main branch, held
    there (*whole*: read before the cleanup), as the single branch's cleanup did in the
    same commit: each target by a force-release without force, which the shard refuses
    when a holder there is still fresh (a shared lock's other holder), and a refusal is a
    warning.  Their commits name the cleanup."""
    session = whole.session(sid, strict=False)
    freed: list[str] = []
    for target in session.locks if session else []:
        release = registry.new_op("force-release", path=target, force=False,
                                  by=op.get("by") or registry.host,
                                  reason=f"cleanup stopped {sid}")
        try:
            _apply_lock_op(registry, release, count)
        except (Refused, NotFound) as exc:
            registry.warnings.append(f"{target} was not freed: {exc.message}")
        else:
            freed.append(target)
    return freed


def _carry(registry: Registry, shard: Registry) -> None:
    """A shard's sync outcome and warnings, as the registry's (the faces print those)."""
    if shard.unpushed:
        registry.unpushed = dict(shard.unpushed)
    registry.warnings.extend(w for w in shard.warnings if w not in registry.warnings)
    shard.warnings = []
