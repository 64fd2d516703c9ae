"""A registry made apart in another shard count: the loser's pending lock operations go
to the shards of the layout it adopts (docs/design.md, registries made apart).

Two clones that each ran `init` before either pushed may have made their registries in
different shard counts (`init --shards 4` here, 16 there).  The loser of the race to
publish adopts the winner's registry branch, layout.json and all (sync/replay.py
``made_apart``); the claims it made before (offline, or before its first sync) sit on its
own shard refs, routed by its own count: on a ref the adopted layout does not name (index
at or past the new count), which no reader looks at, or on a ref of the same name where
the path no longer belongs.  So the move of the registry branch to a tip of another shard
count (:func:`move_main`, from sync/remote.py ``_rebase``, under the clone's flock) takes
each such operation (claim, release, force-release) off the old shard refs, in the order
they were made, and replays it, split by the new count as the router splits it
(core/routing.py), on the remote's tip of each shard it now belongs to: pending commits
there, pushed by the sync that adopted (or the next one, or the next claim on that
shard).  One refused there (another session holds the path by now) is refused as a lost
race is, and the sync's report says so.  Every new commit is written first; then the
registry branch and every shard ref move in ONE ``update-ref --stdin`` transaction (the
old refs past the new count deleted), so a kill at any instant leaves either the old
registry with its claims where they were (the next sync moves them) or the new one with
them moved, and never a ref git cannot read.

A claim another process of this clone routed by the old count, committed before or after
the move, is taken out of whichever shard ref holds it (:func:`withdraw`) and routed
again (core/routing.py ``Resharded``)."""
from __future__ import annotations

from ..branch import shards as S
from ..branch.trailers import parse_op
from ..core.registry import Registry
from ..core.routing import LOCK_OPS, split
from ..core.sharded import count_at, shard_registry
from ..errors import BadInput, NotFound, Refused
from .intents import own_ops
from .replay import is_ancestor, pending_commits, replay
from .state import load_state, record_refused, save_state, state_key


def move_main(main: Registry, new: str, old: str) -> list[dict]:
    """Move the registry branch of *main* from *old* to *new*, which name different shard
    counts (core/sharded.py ``recounted``; caller holds the flock; CasFailed when it
    moved meanwhile), and the pending lock operations of the old shard refs with it, in
    one ref transaction (module docstring); the ones refused on the way, as a replay
    reports them (already recorded in the sync state, before the refs moved)."""
    return _migrate(main, new, old, count_at(main, new))  # type: ignore[arg-type]


def _shard_refs(main: Registry) -> dict[int, tuple[str, str]]:
    """index -> (ref, tip) of this clone's lock shard refs, whatever count named them."""
    folder = f"refs/heads/{S.shard_branch(main.branch, 0).rsplit('/', 1)[0]}/"
    out = {}
    for ref, tip in main.repo.refs_in(folder).items():
        name = ref[len(folder):]
        if name.isdigit():
            out[int(name)] = (ref, tip)
    return out


def _tracking(main: Registry, index: int) -> str | None:
    if not main.remote:
        return None
    return main.repo.read_ref(f"refs/remotes/{main.remote}/{S.shard_branch(main.branch, index)}")


def _own_lock_ops(main: Registry, tip: str, fetched: str | None) -> list[dict]:
    """This clone's lock operations on a shard ref at *tip* that the remote's copy of it
    (*fetched*) lacks, oldest first."""
    return [op for op in own_ops(main, fetched, tip) if op.get("op") in LOCK_OPS]


def _merged(lists: list[list[dict]]) -> list[dict]:
    """The parts of each operation (one per old shard it was split into) as one
    operation again, in the order they were made: each old shard's order is kept."""
    import heapq  # not for the count check every shard push makes
    out: dict[str, dict] = {}
    for op in heapq.merge(*lists, key=lambda o: float(o.get("at") or 0)):
        known = out.get(op["id"])
        if known is None:
            out[op["id"]] = {**op, **({"paths": list(op["paths"])} if "paths" in op else {})}
            continue
        for target in op.get("paths", []):
            if target not in known["paths"]:
                known["paths"].append(target)
        for key in ("generations", "expect"):
            if isinstance(op.get(key), dict):
                known[key] = {**(known.get(key) or {}), **op[key]}
    return list(out.values())


def _migrate(main: Registry, new: str, old: str, count: int) -> list[dict]:
    refs = _shard_refs(main)
    fetched = {index: _tracking(main, index) for index in set(refs) | set(range(count))}
    ops = _merged([_own_lock_ops(main, tip, fetched[index])
                   for index, (_, tip) in sorted(refs.items())])
    by_shard: dict[int, list[dict]] = {}
    for op in ops:
        for index, part in split(main, op, count).items():
            by_shard.setdefault(index, []).append(part)
    refused: list[dict] = []
    tips: dict[int, str | None] = {}
    for index, parts in sorted(by_shard.items()):
        tip = fetched[index]
        shard = shard_registry(main, index, count)
        for part in parts:
            if tip is None:  # the remote's layout names it, the remote lacks it
                refused.append(_refusal(part, f"{shard.branch} is missing on "
                                              f"{main.remote}, whose layout names it"))
                continue
            note = (f"Moved to {shard.branch} ({count} lock shards) when this clone "
                    f"adopted the registry made apart from its own, first made there.")
            try:
                commit, _ = shard.build(tip, part, note)
            except (Refused, NotFound, BadInput) as exc:
                refused.append(_refusal(part, exc.message, exc.details))
                continue
            tip = commit or tip
        tips[index] = tip
    moves: list[tuple[str, str | None, str | None]] = [(main.ref, new, old)]
    for index in sorted(set(refs) | set(tips)):
        was = refs[index][1] if index in refs else None
        to = tips.get(index, fetched.get(index)) if index < count else None
        if to != was:
            moves.append((S.shard_ref(main.branch, index), to, was))
    # the refusals first: a kill right after the move leaves them said (status, the
    # sync state), never a claim gone without a word
    record_refused(main, refused)
    main.repo.update_refs(moves, "agent-registry: adopt the layout of a registry made apart")
    # each moved shard's pending commits follow the remote's tip of it: confirmed there
    confirmed = dict(load_state(main).get("confirmed", {}))
    for index in set(refs) | set(tips):
        key = state_key(shard_registry(main, index, max(count, index + 1)))
        if index < count and fetched.get(index):
            confirmed[key] = fetched[index]
        else:
            confirmed.pop(key, None)
    save_state(main, confirmed=confirmed)
    return refused


def _refusal(part: dict, reason: str, details: dict | None = None) -> dict:
    return {**(details or {}), "op": part.get("op"), "id": part.get("id"),
            "session": part.get("session"), "paths": part.get("paths") or [part.get("path")],
            "reason": reason}


def withdraw(main: Registry, op: dict) -> None:
    """Take *op* (a claim refused as Resharded: routed by a shard count the registry gave
    up) out of every shard ref of *main* holding it unpushed, moved there by
    :func:`move_main` or committed there by its own process (caller holds the flock).
    A ref the layout does not name that holds nothing else of ours is deleted."""
    count = count_at(main, main.repo.read_ref(main.ref) or main.repo.read_ref(main.tracking_ref))
    for index, (ref, tip) in sorted(_shard_refs(main).items()):
        fetched = _tracking(main, index)
        commits = pending_commits(main, None, tip, landed=fetched)
        ops = [parse_op(main.repo.commit_info(c)[2]) or {} for c in commits]
        if not any(o.get("id") == op.get("id") for o in ops):
            continue
        if fetched is None or count is None or index >= count \
                or not is_ancestor(main, fetched, tip):
            if all(o.get("id") == op.get("id") or o.get("op") not in LOCK_OPS for o in ops):
                main.repo.update_refs([(ref, None, tip)], "agent-registry: withdraw")
            continue
        state = replay(shard_registry(main, index, count), commits, fetched,
                       handled={op["id"]: "withdrawn"})
        main.repo.update_ref(ref, state.tip or fetched, tip, "agent-registry: withdraw")
