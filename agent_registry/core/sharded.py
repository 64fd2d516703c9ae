"""The lock shards (docs/shards.md): the layout's marker, each shard's part and
registry, and the views and pages that read them.

Each shard ``<branch>-shards/NN`` is a registry of its own (the main registry's class and
committer with the part :class:`LockShard`, so with a remote it syncs exactly like the
main branch: fetch, replay, fast-forward push, helping), whose views read the sessions
from the main branch (branch/shardview.py).  Which shards an operation writes is the
router's (core/routing.py).
"""
from __future__ import annotations

from ..branch import shards as S
from ..branch.shards import count_of
from ..branch.shardview import ShardView, WholeView, open_whole, shard_tip
from ..branch.view import View
from .cloned import main_views

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .registry import Registry

def layout(registry: Registry) -> dict:
    """The layout of *registry*: its marker on the local tip, or on the remote's when
    that is newer (another clone converted it): branch/shards.py ``newest_layout``, the
    one detection the guard shares."""
    return S.newest_layout(registry.repo, (registry.repo.read_ref(registry.ref),
                                           registry.repo.read_ref(registry.tracking_ref)
                                           if registry.tracking_ref else None))


class LockShard:
    """The part of lock shard *index* of *count* of the registry *main* (core/refs.py):
    its views read the sessions from the main branch (branch/shardview.py), its fetch
    brings the main branch and every shard, and its pages list its own locks."""

    kind = "shard"
    routes = False
    keeps_messages = False

    def __init__(self, main: Registry, index: int, count: int) -> None:
        self.main, self.index, self.count = main, index, count

    def view_at(self, shard: Registry, tip: str | None) -> View:
        return ShardView(shard.repo, tip, main_views(self.main))

    def decides_alone(self, shard: Registry, tip: str, op: dict) -> bool:
        """As :func:`judges_no_holder` on the shard's lock records at *tip*: the main
        branch (whose heartbeats a fetch would refresh) plays no part."""
        return judges_no_holder(ShardView(shard.repo, tip, []), op)

    def fetch_also(self, shard: Registry) -> tuple[str, ...]:
        """What the main branch's fetch brings (one connection): the main branch, so the
        sessions a claim judges its holders by are no older than the shard it decides
        on, and every shard with its intents, so this clone's next claims on other
        shards need no fetch of their own within sync/remote.py's FRESH."""
        main = self.main
        return (f"+{main.ref}:{main.tracking_ref}", *main.fetch_also) if main.tracking_ref \
            else ()

    def pages(self, shard: Registry, view: View, at: float, subject: str) -> dict[str, bytes]:
        return shard_pages(self.main.branch, self.index, self.count, view, at, subject)


def count_at(registry: Registry, tip: str | None) -> int | None:
    """The shard count of the layout at *tip* of the registry branch; None for one
    branch (or no tip)."""
    if tip is None:
        return None
    marker = S.layout_of(registry.repo.read_blob(f"{tip}:{S.LAYOUT}"))
    return count_of(marker) if marker["format"] >= 2 else None


def recounted(registry: Registry, new: str | None, old: str | None) -> bool:
    """Whether the registry branch moving from *old* to *new* changes its shard count (a
    registry made apart in another count, adopted: sync/reshard.py moves the old shards'
    pending operations with it).  Two blob reads, where the branch moves at all."""
    if new is None or old is None or new == old:
        return False
    was, now = count_at(registry, old), count_at(registry, new)
    return None not in (was, now) and was != now


def shard_registry(registry: Registry, index: int, count: int) -> Registry:
    """The registry of shard *index*: made once per registry, closed with it."""
    made = registry.__dict__.setdefault("_shards", {})
    if (index, count) not in made:
        made[(index, count)] = registry.derived(S.shard_branch(registry.branch, index),
                                                LockShard(registry, index, count))
    return made[(index, count)]


def shards_of(registry: Registry) -> list[Registry]:
    """The registries of *registry*'s lock shards, in order; none for a registry the
    layout does not route (a shard's own, a clone ref's) or one in the old single
    branch (what `sync`, `gc` and `status` go over besides the main branch)."""
    if not registry.part.routes:
        return []
    marker = layout(registry)
    if marker["format"] == 1:
        return []
    count = count_of(marker)
    return [shard_registry(registry, index, count) for index in range(count)]


def judges_no_holder(view: View, op: dict) -> bool:
    """Whether *op* is a release, or a claim whose targets no other session's lock
    covers in *view* (lock records only: no session is judged): decided on a clone's tip,
    a push of it lands only on that same remote tip, and a rejected push is fetched,
    replayed and decided again.  A claim meeting another session's lock, fresh or stale
    here, is decided after a fetch."""
    if op["op"] == "release":
        return True
    if op["op"] != "claim":
        return False
    return not any(holder.session != op["session"] for target in op["paths"]
                   for lock in view.covering(target) for holder in lock.holders)


def shard_pages(registry_branch: str, index: int, count: int, view: View, at: float,
                subject: str) -> dict[str, bytes]:
    """registry.md and README.md of shard *index* of *registry_branch*: the sessions
    holding locks in it and those locks, true at every commit."""
    from ..branch.render import fill, registry_md  # not for a recent heartbeat
    return {"registry.md": registry_md(view, at, subject),
            "README.md": fill("shard-README.md", branch=S.shard_branch(registry_branch, index),
                              index=f"{index:02d}", count=str(count),
                              registry=registry_branch).encode()}


def main_pages(branch: str, view: View, at: float, subject: str,
               locks: View | None) -> dict[str, bytes]:
    """registry.md and README.md of the registry *branch*, its sessions and locks read
    from *locks* (locks_view; a conversion passes the tree it converts)."""
    from ..branch.render import branch_readme, registry_md  # not for a recent heartbeat
    return {"registry.md": registry_md(view, at, subject, branch, locks),
            "README.md": branch_readme(branch)}


def locks_view(registry: Registry, view: View) -> View | None:
    """The view registry.md of the main branch lists sessions and locks from, for a
    commit about to be made on *view*: in lock shards, *view* with every shard overlaid
    as this clone has it (its own tip, or the remote's where that moved past it); None in
    one branch (*view* itself holds the locks), and None where a shard is missing here
    (the page then names the shard branches instead of listing their locks)."""
    raw = view.read(S.LAYOUT)
    if raw is None:
        return None
    count = count_of(S.layout_of(raw))
    tips = []
    for index in range(count):
        name = S.shard_branch(registry.branch, index)
        tips.append(shard_tip(registry.repo, f"refs/heads/{name}",
                              f"refs/remotes/{registry.remote}/{name}" if registry.remote
                              else None))
        if tips[-1] is None:
            return None
    return WholeView(registry.repo, view.tip, tips, mains=[view])


def whole_view(registry: Registry, count: int) -> WholeView:
    return open_whole(registry.repo, registry.branch, registry.remote, registry.tip(), count)


def moved(registry: Registry, shards: list[Registry]) -> list[Registry]:
    """The *shards* whose local tip differs from their remote-tracking one (commits of
    this clone not pushed, or a remote that moved on): one ``for-each-ref``, whatever
    the count."""
    lines = registry.repo.git("for-each-ref", "--format=%(refname) %(objectname)",
                              *S.shard_patterns(registry.branch, registry.remote)
                              ).stdout.decode()
    tips = dict(line.split() for line in lines.splitlines() if line)
    return [shard for shard in shards
            if tips.get(shard.ref) and tips.get(shard.ref) != tips.get(shard.tracking_ref)]


def unconfirmed(registry: Registry, shards: list[Registry]) -> set[tuple[str, str]]:
    """(session, path) of claims this clone made on *shards* the remote has not seen."""
    out: set[tuple[str, str]] = set()
    for shard in moved(registry, shards):
        out |= shard.unconfirmed_claims()
    return out
