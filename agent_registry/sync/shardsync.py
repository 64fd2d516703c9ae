"""The lock shards and this clone's own ref as the commands that go over every branch
see them (`sync`, `gc`, `status`; layout formats 2 and 3, docs/shards.md): which shards
have operations the remote has not seen, found in at most two git processes whatever the
shard count, and whether this clone's ref (format 3: its sessions' heartbeats and diary
lines, branch/clones.py) holds commits the remote lacks."""
from __future__ import annotations

from ..branch.clones import FORMAT as CLONES_FORMAT
from ..core.cloned import clone_registry
from ..core.registry import Registry
from ..core.sharded import layout, moved, shards_of


def unpushed(registry: Registry, shards: list[Registry]) -> list[Registry]:
    """The *shards* of *registry* holding commits of this clone that their remote-tracking
    refs do not have (claimed offline, or a push that failed): one ``for-each-ref`` reads
    every tip; only when some differ, one ``git log`` over those finds which have commits
    of their own (a shard merely behind its remote has nothing to push)."""
    if not shards or not registry.remote:
        return []
    differ = moved(registry, shards)
    if not differ:
        return []
    never = [s for s in differ if not s.repo.read_ref(s.tracking_ref)]  # not on the remote
    both = [s for s in differ if s not in never]
    ahead: set[str] = set()
    if both:
        # each shard's history is its own (a parentless root at the conversion), so a
        # commit reachable from shard i's tip and not from its tracking ref is shard i's
        proc = registry.repo.git("log", "--source", "--format=%S",
                                 *[s.ref for s in both], "--not",
                                 *[s.tracking_ref for s in both], "--")
        ahead = set(proc.stdout.decode().split())
    return [s for s in shards if s in never or s.ref in ahead]


def shard_sync_state(registry: Registry) -> dict | None:
    """``{"count": N, "ahead": K}``: K of the N shards have operations not yet pushed;
    None in the single-branch layout."""
    shards = shards_of(registry)
    if not shards:
        return None
    return {"count": len(shards), "ahead": len(unpushed(registry, shards))}


def own_clone(registry: Registry) -> Registry | None:
    """The registry of this clone's own ref (``<branch>-clones/<clone>``) in layout
    format 3; None before it, and for a shard's or a clone ref's registry.  Only this
    clone writes that ref, so only this clone pushes and squashes it: the other clones'
    refs are theirs."""
    if not registry.part.routes or layout(registry)["format"] < CLONES_FORMAT:
        return None
    return clone_registry(registry, create=False)  # a clone that never wrote has no ref


def clone_sync_state(registry: Registry) -> dict | None:
    """``{"branch", "ahead", "behind"}`` of this clone's own ref against the remote
    (``ahead``: heartbeats and diary lines committed here and not pushed, counted as the
    registry branch's ``ahead``); None without a remote or before layout format 3."""
    clone = own_clone(registry) if registry.remote else None
    return None if clone is None else _clone_state(clone)


def _clone_state(clone: Registry) -> dict:
    state = clone.sync_state()
    return {"branch": clone.branch, "ahead": state["ahead"], "behind": state["behind"]}


def _part(registry: Registry, deadline: float, remote: str) -> dict:
    """``sync.remote.sync`` of a shard or of the clone ref, with its ``branch``; a remote
    that could not be used is the part's error (the registry branch's sync worked)."""
    from ..errors import Unconfirmed
    from .remote import sync
    try:
        part = sync(registry, deadline=deadline)
    except Unconfirmed as exc:
        part = {"remote": remote, "pushed": False, "error": exc.message,
                "remote_error": exc.details.get("remote_error"),
                "pending": exc.details.get("pending"), "refused": [], "confirmed": [], "sent": 0}
    return {"branch": registry.branch, **{k: part.get(k) for k in (
        "remote", "pushed", "sent", "made", "created", "landed", "error", "remote_error", "tip",
        "pending", "refused", "confirmed", "rewind")}}


def sync_clone(clone: Registry, deadline: float, remote: str) -> dict | None:
    """Sync this clone's own ref (*clone*, from :func:`own_clone`) when it holds commits
    the remote has not seen (a heartbeat or a diary line made offline, or whose push
    failed), after the registry branch (whose fetch brought the clone refs' remote tips):
    its outcome in the shape of a shard's; None when it had nothing to push."""
    if not _clone_state(clone)["ahead"]:
        return None
    return _part(clone, deadline, remote)


def sync_shards(registry: Registry, deadline: float, remote: str) -> list[dict] | None:
    """Sync each lock shard holding operations the remote has not seen (a claim made
    offline, a push that failed), in order, after the registry branch was synced (its
    fetch brought the shards' remote tips); each one's outcome, in the shape of
    ``sync.remote.sync``'s, with its ``branch``.  None in the single-branch layout."""
    every = shards_of(registry)
    if not every:
        return None
    return [_part(shard, deadline, remote) for shard in unpushed(registry, every)]


def sync_all(registry: Registry, deadline: float | None = None) -> dict:
    """``sync.remote.sync`` of the registry branch, then of its shards with something to
    push (under ``"shards"`` in the lock-shard layout), then of this clone's own ref when
    it has something to push (under ``"clone"`` in layout format 3, null when it had
    nothing): what the doctor's fix and the dashboard's sync button run, as `sync` does."""
    from .remote import DEFAULT_DEADLINE, sync
    deadline = DEFAULT_DEADLINE if deadline is None else deadline
    report = sync(registry, deadline=deadline)
    shards = sync_shards(registry, deadline, report["remote"])
    if shards is not None:
        report["shards"] = shards
    clone = own_clone(registry)
    if clone is not None:
        report["clone"] = sync_clone(clone, deadline, report["remote"])
    return report
