"""The lock shards as the commands that go over every branch see them (`sync`, `gc`,
`status`; layout format 2, docs/shards.md): which shards have operations the remote has
not seen, found in at most two git processes whatever the shard count."""
from __future__ import annotations

from ..core.registry import Registry
from ..core.sharded import moved, shards_of


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


def sync_shards(registry: Registry, deadline: float, remote: str) -> list[dict] | None:
    """Sync each lock shard holding operations the remote has not seen (a claim made
    offline, a push that failed), in order, after the registry branch was synced (its
    fetch brought the shards' remote tips); each one's outcome, in the shape of
    ``sync.remote.sync``'s, with its ``branch``.  None in the single-branch layout."""
    from ..errors import Unconfirmed
    from .remote import sync
    every = shards_of(registry)
    if not every:
        return None
    out = []
    for shard in unpushed(registry, every):
        try:
            part = sync(shard, deadline=deadline)
        except Unconfirmed as exc:
            part = {"remote": remote, "pushed": False, "error": exc.message,
                    "remote_error": exc.details.get("remote_error"),
                    "pending": exc.details.get("pending"), "refused": [], "confirmed": []}
        out.append({"branch": shard.branch, **{k: part.get(k) for k in (
            "remote", "pushed", "error", "remote_error", "tip", "pending", "refused",
            "confirmed", "rewind")}})
    return out


def sync_all(registry: Registry, deadline: float | None = None) -> dict:
    """``sync.remote.sync`` of the registry branch, then of its shards with something to
    push (under ``"shards"`` in the lock-shard layout): what the doctor's fix and the
    dashboard's sync button run, as `sync` does."""
    from .remote import DEFAULT_DEADLINE, sync
    deadline = DEFAULT_DEADLINE if deadline is None else deadline
    report = sync(registry, deadline=deadline)
    shards = sync_shards(registry, deadline, report["remote"])
    if shards is not None:
        report["shards"] = shards
    return report
