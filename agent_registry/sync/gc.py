"""``gc --keep-days N``: squash registry history older than N days into one commit.

The state at the tip is unchanged; only history is shorter, so years of heartbeats do
not weigh on every clone.  Later commits are rewritten byte for byte except for their
parent line.  With a remote, the rewrite is pushed with ``--force-with-lease`` naming the
exact remote tip we rewrote (and a refspec without ``+``, which would override the
lease); other clones see a rewritten remote and replay their own pending operations on
it (agent_registry.sync.remote).
"""
from __future__ import annotations


from ..errors import BadInput, RegistryError, Unconfirmed
from ..branch.records import iso
from ..branch.shards import LAYOUT, require_writable
from ..branch.trailers import trailers
from ..core.registry import Registry
from ..store.flock import file_lock
from ..wiki.progress import Progress

GC_OP = "gc"


def gc(registry: Registry, keep_days: int, progress: Progress | None = None,
       dry_run: bool = False) -> dict:
    """Squash the history older than *keep_days*; *progress* (a terminal) counts the
    later commits as they are rewritten.  *dry_run*: say what would be squashed and
    kept, from this clone's branch as it is, and change nothing (no sync either)."""
    if keep_days < 0:
        raise BadInput("--keep-days must be 0 or more")
    if registry.remote and not dry_run:
        from .remote import Offline, sync
        from .state import redact
        try:
            if not sync(registry)["pushed"]:
                raise RegistryError(f"gc needs this clone in sync with {redact(registry.remote)}; "
                                    "run `agent-registry sync` first")
        except (Offline, Unconfirmed) as exc:
            raise RegistryError(f"gc needs {redact(registry.remote)} to be reachable: "
                                f"{exc}") from None
    # the rewrite and its push hold the flock throughout: no commit of this clone may
    # land on the history being replaced (gc is rare; claims wait for it)
    with file_lock(registry.lock_file):
        # a dry run reads the branch as this clone has it: its own tip, else (a fresh
        # clone never wrote a shard) the remote's copy, which the real run syncs to
        tip = registry.tip() if dry_run else registry.repo.read_ref(registry.ref)
        if registry.remote and not dry_run:
            from .remote import drop_carried
            tip = drop_carried(registry)
        if tip is None:
            return {"squashed": 0, "kept": 0, "tip": None, "pruned_intents": 0,
                    "dry_run": dry_run}
        require_writable(registry.repo.read_blob(f"{tip}:{LAYOUT}"))
        cutoff = registry.clock() - keep_days * 86400
        git = registry.repo.git
        old = git("rev-list", "-1", "--first-parent", f"--before={int(cutoff)}", tip).stdout.decode().strip()
        squashed = int(git("rev-list", "--count", "--first-parent", old).stdout) if old else 0
        if squashed <= 1:
            return {"squashed": 0, "kept": _count(registry, tip), "tip": tip, "pruned_intents": 0,
                    "dry_run": dry_run}
        later = git("rev-list", "--reverse", "--first-parent", f"{old}..{tip}").stdout.decode().split()
        if dry_run:
            return {"squashed": squashed, "kept": len(later), "tip": tip, "pruned_intents": 0,
                    "dry_run": True}
        # "rewrote": other clones check that the history they confirmed is in it
        # (agent_registry.sync.remote: a rewrite gc explains is not a rewind)
        op = {"op": GC_OP, "at": registry.clock(), "keep_days": keep_days, "squashed": squashed,
              "before": iso(cutoff), "rewrote": tip}
        message = f"gc: squash {squashed} commits before {iso(cutoff)}\n\n" + trailers(op)
        tree = registry.repo.commit_info(old)[0]
        parent = registry.repo.commit_tree(tree, [], message,
                                           "agent-registry <agent-registry@localhost>",
                                           int(op["at"]))
        progress = progress or Progress(None)
        progress.start(f"gc: rewriting the commits since {iso(cutoff)}", len(later), "commits")
        for done, commit in enumerate(later, 1):
            parent = _reparent(registry, commit, parent)
            progress.step(done)
        progress.finish(f"gc: squashed {squashed:,} commits, rewrote {len(later):,}")
        registry.repo.update_ref(registry.ref, parent, tip, f"agent-registry: gc {squashed}")
        pruned = 0
        if registry.remote:
            _push_rewrite(registry, parent, tip)
            pruned = _prune_intents(registry)
        return {"squashed": squashed, "kept": len(later), "tip": parent, "pruned_intents": pruned,
                "dry_run": False}


def _count(registry: Registry, tip: str) -> int:
    return int(registry.repo.git("rev-list", "--count", tip).stdout)


def _reparent(registry: Registry, commit: str, parent: str) -> str:
    kind, raw = registry.repo.reader.read(commit)  # type: ignore[misc]
    head, sep, body = raw.partition(b"\n\n")
    lines = [l for l in head.split(b"\n") if not l.startswith(b"parent ")]
    lines.insert(1, b"parent " + parent.encode())  # right after the tree line
    return registry.repo.write_object(kind, b"\n".join(lines) + sep + body)


def _push_rewrite(registry: Registry, new: str, old: str) -> None:
    dst = f"refs/heads/{registry.branch}"
    from .remote import Offline, git_net
    from .state import confirm, redact
    try:
        proc = git_net(registry, "push", "--porcelain", "--quiet", "--no-verify",
                        f"--force-with-lease={dst}:{old}", registry.remote, f"{new}:{dst}")
    except Offline as exc:
        proc, why = None, exc.message
    else:
        why = f"{redact(registry.remote)} moved during gc"
    if proc is None or proc.returncode != 0:
        registry.repo.update_ref(registry.ref, old, new, "agent-registry: gc undone")
        raise RegistryError(f"{why}; nothing was rewritten, run gc again")
    registry.repo.git("update-ref", registry.tracking_ref, new)
    confirm(registry, new)


def _prune_intents(registry: Registry) -> int:
    """Delete the intent refs on the remote (sync/intents.py): each was based on a history
    gc just replaced, so no helper applies it any more, and its clone replays its own
    operations.  Each deletion leases the tip we fetched: one published since is kept.
    Best effort: how many went."""
    from .intents import intent_ref, tracking_prefix
    from .remote import Offline, git_net
    prefix = tracking_prefix(registry)
    found = registry.repo.git("for-each-ref", "--format=%(refname) %(objectname)",
                              prefix).stdout.decode().split("\n")
    refs = {ref[len(prefix):]: oid for ref, oid in (l.split() for l in found if l)}
    if not refs:
        return 0
    leases = [f"--force-with-lease={intent_ref(registry.branch, c)}:{oid}"
              for c, oid in refs.items()]
    try:
        # no --quiet: with it, --porcelain leaves out the refs that were updated
        proc = git_net(registry, "push", "--porcelain", "--no-verify", *leases, registry.remote,
                       *[":" + intent_ref(registry.branch, c) for c in refs])
    except Offline:
        return 0
    deleted = {line.split("\t")[1] for line in proc.stdout.decode().splitlines()
               if line.startswith("-\t")}
    gone = [c for c in refs if ":" + intent_ref(registry.branch, c) in deleted]
    for clone in gone:
        registry.repo.git("update-ref", "-d", prefix + clone, check=False)
    return len(gone)
