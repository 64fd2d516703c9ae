"""What a push of a registry ref expects to find on the remote (sync/remote.py ``push``).

A plain ``git push COMMIT:REF`` is a fast-forward when the remote has REF and a create
when it has not: a clone that decided without a fetch (within ``FRESH`` of its last one)
made anew a lock shard or its clone ref that another clone had deleted there meanwhile
(``uninstall --branches --remote``), on a remote with no registry left.  So a push of a
ref this clone has seen on the remote (its remote-tracking ref) carries that tip as a
lease, ``--force-with-lease=REF:SEEN``: gone or moved there, git rejects it (``stale
info``), and the fetch that follows says which (a lost race is replayed; a ref deleted
there is decided on what the fetch found, never pushed blind).  A lease also lifts
git's fast-forward rule, so it is given only for a commit built on SEEN (a walk of the
commits this clone just wrote, in its cat-file reader, no git process in the common
case); anything else is a lost race before any push (a fetch and a replay follow), as
the remote's own rule would have answered it.

A create (no tracking ref: never on the remote as far as this clone knows, or pruned by
the fetch that found it deleted) of a lock shard or of the clone ref is made only where
the remote had the registry branch at the last fetch, and the push carries that as a
lease too, on the registry branch, in one ``--atomic`` push: a registry deleted there
since is met by the push itself, not by a create.  The registry branch's own create is
sync/remote.py's ``nowhere`` check (made anew only with every lock shard it names).

A registry made here before the remote was (``init``, then ``git remote add``), never
seen on it: whichever write first pushes it (a claim on a shard, a register on the
registry branch, a heartbeat on the clone ref) publishes it whole (:func:`first_push`):
the registry branch and every lock shard, each a create the remote must not have
(``--force-with-lease=REF:``), in one ``--atomic`` push.  Pushed one ref at a time, other
clones would meanwhile read a registry branch naming shards the remote lacks (a registry
no clone can read), or a shard with no registry; a clone that made one there first wins
and the loser fetches and replays on it, as any lost race.

A remote that does not accept atomic pushes (its git server does not advertise them:
``receive.advertiseAtomic false``) cannot take either, and nothing replaces them safely:
shards pushed one by one before the registry branch, two clones publishing at once split
the shards between two registries with no registry branch, which neither could finish
nor clear, and a kill half way leaves shards that stop every later publish; the create
of a clone ref without the lease on the registry branch makes one on a remote whose
registry was deleted meanwhile.  So a write that would publish a registry whole first
asks the remote in a dry run (sync/remote.py ``check_atomic``) and is refused before
anything is committed, in one line that names the cause and the way out; the create of a
clone ref or a lock shard beside a registry the remote has stays committed here, not
pushed, as with a remote that cannot be reached (its message says why, and what to do).
"""
from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..core.registry import Registry

WALK = 16  # commits of this clone's own walked back to the tip it last saw there

NOT_ON_SEEN = "non-fast-forward (not built on the remote tip last fetched)"


class NoRegistry(Exception):
    """A lock shard or the clone ref would be made on a remote that had no registry
    branch at the last fetch (sync/remote.py turns it into ``Deleted``)."""


def _main(registry: Registry) -> Registry | None:
    """The registry branch's registry of a lock shard's or clone ref's *registry*; None
    for the registry branch itself and the messages branch."""
    return registry.part.main if registry.part.kind in ("shard", "clone") else None


def descends(registry: Registry, commit: str, seen: str) -> bool:
    """Whether *commit* has *seen* in its history: its first parents walked in the
    cat-file reader (the commits a write just made, known there), then ``merge-base``."""
    oid = commit
    for _ in range(WALK):
        if oid == seen:
            return True
        parents = registry.repo.commit_info(oid)[1]
        if not parents:
            return False
        if len(parents) > 1:
            break
        oid = parents[0]
    from .replay import is_ancestor
    return is_ancestor(registry, seen, commit)


def first_push(registry: Registry) -> list[tuple[str, str]] | None:
    """(ref, tip) of the registry branch and every lock shard of *registry*'s registry,
    when it was made here and never seen on the remote (no tracking ref of the registry
    branch, no confirmed tip there) and this clone has all of them; else None (a registry
    deleted there, or one this clone lacks parts of, is sync/remote.py's to refuse)."""
    from ..branch import shards as S
    from .state import confirmed_tip
    main = _main(registry) or registry
    if not main.part.routes or main.repo.read_ref(main.tracking_ref) \
            is not None or confirmed_tip(main) is not None:
        return None
    tip = main.repo.read_ref(main.ref)
    layout = S.layout_of(main.repo.read_blob(f"{tip}:{S.LAYOUT}")) if tip else {"format": 1}
    if layout["format"] < 2:
        return None
    refs = [(main.ref, tip)] + [(ref, main.repo.read_ref(ref))
                                for ref in S.shard_refs(main.branch, S.count_of(layout))]
    return refs if all(oid for _, oid in refs) else None  # type: ignore[misc]


def published_whole(registry: Registry, commit: str, dst: str
                    ) -> tuple[list[str], list[str]] | None:
    """(options, more refspecs) of the first push of a registry made here
    (:func:`first_push`), carrying *commit* to *dst*; None when this is not one."""
    refs = first_push(registry)
    if refs is None:
        return None
    if dst not in (ref for ref, _ in refs):
        refs.append((dst, commit))  # the clone ref: made with them
    options = ["--atomic"] + [f"--force-with-lease={ref}:" for ref, _ in refs]
    return options, [f"{oid}:{ref}" for ref, oid in refs if ref != dst]


def expectation(registry: Registry, commit: str, dst: str) -> tuple[list[str], list[str]] | None:
    """(options, more refspecs) of the push of *commit* to *dst*; None when *commit* is
    not built on the tip this clone last saw there (a lost race, pushed after a fetch).
    Raises NoRegistry for the create of a lock shard or clone ref where the remote had
    no registry branch at the last fetch."""
    seen = registry.repo.read_ref(registry.tracking_ref)
    if seen is not None:
        if seen != commit and not descends(registry, commit, seen):
            return None
        return [f"--force-with-lease={dst}:{seen}"], []
    main = _main(registry)
    if main is None or not main.tracking_ref:
        return [], []
    there = main.repo.read_ref(main.tracking_ref)
    if there is None:
        raise NoRegistry(main.branch)
    # unchanged there: "up to date", nothing sent for it; gone or moved: all rejected
    return ["--atomic", f"--force-with-lease={main.ref}:{there}"], [f"{there}:{main.ref}"]
