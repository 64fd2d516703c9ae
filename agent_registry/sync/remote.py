"""Many clones, one remote: fetch, replay, push.  The remote's ref is the arbiter.

Over 400 lines: one protocol whose steps (fetch, replay, push, a rewound remote, the
mass-deletion check, reading a remote) share the sync state and the flock; it splits
with the transaction it still shares with core/registry.py (docs/design.md, "Rooms").

A mutation:

1. fetches the remote registry branch into ``refs/remotes/<remote>/<branch>``;
2. under the clone's flock, replays this clone's unpushed operations (the commits
   between the *confirmed tip* — the last remote tip this clone saw or pushed, kept in
   the local sync state — and the local tip) on top of what was fetched, re-validating
   each: a claim on a path someone else now holds is *refused* and dropped, not merged;
3. still under the flock, applies the new operation on top and moves the local branch
   (compare-and-swap);
4. pushes the new tip as a plain fast-forward.  A rejected push means another clone (or
   another process of this one) won the race: fetch, replay again, retry with jittered
   backoff until a deadline; after ``LOSSES`` in a row, publish the pending operations
   for the winners to carry (sync/intents.py).  The replay itself is sync/replay.py,
   the local sync state sync/state.py.  Before a lock shard's push, the sessions its
   claims name go to the registry branch first when the remote lacks them (a registry
   made apart and adopted, a register whose push failed: _sessions_first), and a claim
   routed by a shard count the remote's layout does not have is routed again (a
   registry made apart in another count, whose adoption moves this clone's pending
   lock operations to the remote's shards: sync/reshard.py).

Fetch and push run outside the flock: the flock covers local work only, so a remote that
accepts the connection and never answers holds up each waiting command for one network
timeout, never every agent of the clone queued one behind the other.  The CAS on the local
ref and the remote's fast-forward rule re-validate whatever the network phase assumed.

Unreachable remote: the operation stays committed locally (nothing is lost) and is
pushed by the next successful sync; a claim made so is *not confirmed*: exit 3.  Why the
remote failed is read from git's own stderr: unreachable, credentials refused, the server
denied the branch, or no repository there.

The remote going back in time (a force-push to an older state) is noticed because the
confirmed tip is no longer in the remote's history: this clone re-applies its own live
sessions and their locks on the rewound remote, each refused only where another session
took the path meanwhile, and reports each.  A ``gc`` commit that rewrote a history holding
the confirmed tip explains the rewrite, and nothing is re-applied.

The registry branch deleted on the remote is made anew by the next push, unless the
layout it would push names lock shards that neither the remote nor this clone has (a
clone that never wrote them, after ``uninstall --branches --remote`` elsewhere): no clone
could read that registry, so the write is refused in one line (``Deleted``), nothing
pushed.

Because replays re-run each operation's own logic on the new base, two writers of the same
file resolve by the operation's meaning (a release of a lock that was force-released
elsewhere becomes a no-op), never by git's text merge; a replay that changed the outcome
says so in its commit message.
"""
from __future__ import annotations

import os
import time

from ..errors import BadInput, NotFound, Refused, RegistryError, Unconfirmed
from ..store import freshness
from ..store.git import CasFailed, run_git
from ..store.spawn import Completed, TimedOut
from ..branch.records import Holder, Lock, Session, iso, parse_iso
from ..branch.trailers import parse_op
from ..core.conflicts import describe_conflicts
from ..core.operations import Outcome, operation
from ..core.registry import Registry
from ..core.sharded import count_at, recounted
from ..store.flock import file_lock
from ..branch.view import View
from .intents import any_fetched, carried, fetch_owed, fetch_paid, fetch_refspec, help_others, \
    intent_ref, new_clone_id, note_advertised, owe_fetch, own_ops, \
    push_trace, settle_own, settled, unsettled, wrap
from .replay import (APPLIED, Replay, commit_exists, is_ancestor, landed_since, own_commits,
                     pending_commits, replay)
from .lost import record_lost
from . import trace
from .state import (confirm, confirmed_tip, found_atomic, load_state, redact, save_state,
                    state_key, takes_atomic)
from .state import record_refused as _record_refused

NETWORK_TIMEOUT = 30.0  # seconds for one fetch or push (git config agent-registry.networkTimeout)
DEFAULT_DEADLINE = 120.0  # seconds of retrying rejected pushes
# lost pushes in a row before a clone asks the others to help (sync/intents.py).  Not 3:
# losing one push at 16 clones predicts losing more (a rival deciding on its own tip lands
# a claim in less time than a loser's fetch, replay and push), and the third loss cost the
# slowest claims 1-2 s more before anyone could carry them (docs/benchmarks.md)
LOSSES = 2
# polls that found the remote moved, while our intent is out, before a clone pushes again
# itself anyway (the clones moving it may not carry: an older agent-registry).  Apart from
# LOSSES: at 2, a loser whose carry was on its way pushed again and lost to its helper
MOVED = 3
# polls in a row that find the remote unmoved before a clone waiting for help pushes again
# itself: no one is left to carry it.  Fewer is no sign of that: a carry (a rival's push
# told of the intent, then its fetch, replay and push: carry_now) takes 2-3 polls of the
# shard alone at 16 clones (traced: docs/benchmarks.md), and a push of ours then only
# loses to the one carrying it
STILL = 3
BACKOFF_BASE, BACKOFF_CAP = 0.05, 2.0  # full-jitter exponential backoff, in seconds
MASS_DELETION = 0.5  # a remote keeping less than this share of our sessions is suspect
MIN_GUARDED = 4  # below this many sessions the mass-deletion check stays quiet
# how long a refusal the remote gave this clone is shown (status, the dashboard's Sync
# card): the refused session was told then; an hour later it is history, not news
REFUSED_SHOWN_FOR = 3600
RESTORE_OP = "restore"


# -- what went wrong with the remote ---------------------------------------------------

# git's stderr, lower-cased, says which failure it was; the first kind that matches wins
_FAILURES = (
    # before "unreachable": git hangs up after saying it
    ("no-atomic", ("does not support --atomic push",)),
    ("credentials", ("permission denied", "authentication failed", "could not read username",
                     "could not read password", "invalid username or password",
                     "host key verification failed", "returned error: 401",
                     "returned error: 403", "invalid credentials", "permission to ")),
    ("not-found", ("does not appear to be a git repository", "repository not found",
                   "not exported", "returned error: 404", "not found", "no such repository")),
    ("denied", ("pre-receive hook declined", "update hook declined", "remote rejected",
                "protected branch", "denied", "refusing to update")),
    ("unreachable", ("could not resolve", "connection refused", "timed out",
                     "network is unreachable", "no route to host", "unable to connect",
                     "failed to connect", "connection reset", "name or service not known",
                     "temporary failure in name resolution", "couldn't connect",
                     "no answer within", "the remote end hung up unexpectedly")),
)

class Offline(Exception):
    """The remote could not be used.  ``kind``: ``unreachable`` (network, timeout),
    ``credentials`` (refused), ``denied`` (the server refuses the branch), ``not-found``
    (no repository there) or ``error``; ``detail``: git's own line, credentials removed."""

    def __init__(self, remote: str, kind: str, detail: str, branch: str = "") -> None:
        self.remote, self.kind, self.detail = redact(remote), kind, redact(detail)
        self.branch = branch
        super().__init__(self.message)

    @classmethod
    def from_stderr(cls, remote: str, stderr: str, fallback: str, branch: str = "") -> "Offline":
        lowered = stderr.lower()
        kind = next((k for k, words in _FAILURES if any(w in lowered for w in words)), "error")
        return cls(remote, kind, _last_line(stderr) or fallback, branch)

    @property
    def message(self) -> str:
        what = {"unreachable": "is unreachable", "credentials": "refused our credentials",
                "denied": f"denied the push to {self.branch or 'the registry branch'}",
                "not-found": "has no repository there",
                "no-atomic": "does not accept atomic pushes"}.get(self.kind, "failed")
        return f"{self.remote} {what}: {self.detail}"

    @property
    def advice(self) -> str:
        """What to do, and when `agent-registry sync` will settle things."""
        return {"unreachable": f"run `agent-registry sync` once {self.remote} is reachable",
                "credentials": f"fix the credentials git uses for {self.remote} (ssh key, "
                               "credential helper), then run `agent-registry sync`",
                "denied": f"{self.remote} accepts the connection but refuses this branch: "
                          "ask its administrator to allow pushes to it (or set "
                          "agent-registry.remote/branch), then run `agent-registry sync`",
                "not-found": f"check `git remote get-url {self.remote}`, then run "
                             "`agent-registry sync`",
                "no-atomic": ATOMIC_ADVICE}.get(self.kind, "run `agent-registry sync`")

    def to_dict(self) -> dict:
        return {"kind": self.kind, "message": self.message}


# -- talking to the remote ------------------------------------------------------------

def _locked(registry: Registry):
    """The clone's flock (the critical section of its local work), its wait traced."""
    return trace.timed("flock", file_lock(registry.lock_file))


def network_timeout(registry: Registry) -> float:
    try:
        value = float(registry.config.get("agent-registry.networktimeout") or NETWORK_TIMEOUT)
    except ValueError:
        return NETWORK_TIMEOUT
    return value if value > 0 else NETWORK_TIMEOUT


def git_net(registry: Registry, *args: str, env: dict[str, str] | None = None) -> Completed:
    """git talking to the remote (fetch, push): the repository's environment (or *env*),
    the network timeout; no answer in time is Offline.  Within one operation
    (``Registry.apply`` of the main registry: the registry made, its layout settled, the
    operation on each lock shard it routes to and on the clone's ref) a remote that gave
    no answer in time is not asked again: each later fetch or push is the same Offline
    at once (against a remote that accepts connections and never answers, a claim of
    paths in six shards waited out six timeouts, a fresh clone's first claim four)."""
    root = registry.part.main or registry  # a shard's, a clone ref's: its main's
    silent = getattr(root, "silent", None)
    if silent is not None:
        raise Offline(registry.remote or "the remote", "unreachable", silent)
    timeout = network_timeout(registry)
    try:
        return run_git(list(args), env=env or registry.repo.env, check=False, timeout=timeout)
    except TimedOut:
        detail = f"no answer within {timeout:g} s (git {args[0]})"
        if getattr(root, "applying", False):
            root.silent = detail
        raise Offline(registry.remote or "the remote", "unreachable", detail) from None


def fetch(registry: Registry, narrow: bool = False) -> str | None:
    """Fetch the remote registry branch into the tracking ref; its tip, or None when
    the remote has no such branch.  Raises Offline when the remote cannot be used.
    Runs without the flock: git locks the tracking ref itself.  *narrow*: only what a
    replay on the branch's new tip needs (_narrow_also)."""
    src, began = f"refs/heads/{registry.branch}", trace.start()
    # with the branch, the other clones' intents (sync/intents.py): one connection.  No
    # auto maintenance: a `git gc` detached from a claim would compete with the next one
    # for the CPU and repack the objects it is writing
    # --prune: a shard, clone ref or intent deleted on the remote (a forge's "delete
    # branch") loses its tracking ref here, so this clone sees its own ref as unpushed and
    # sync pushes it again, instead of taking the stale tracking ref for the remote's
    # --negotiation-tip: the registry's tracking refs are what the remote surely has, so
    # the first round of haves finds the common ground and the pack comes back in it;
    # the clone's own commits (unpushed, carried) as haves were each a round in vain
    also = _narrow_also(registry) if narrow else registry.fetch_also
    proc = git_net(registry, "fetch", "--quiet", "--no-tags", "--no-write-fetch-head",
                    "--no-auto-maintenance", "--prune",
                    f"--negotiation-tip=refs/remotes/{registry.remote}/{_root(registry)}*",
                    registry.remote, f"+{src}:{registry.tracking_ref}",
                    fetch_refspec(registry), *also)
    trace.note("fetch", began, f"{proc.returncode}{' narrow' if narrow else ''}")
    if proc.returncode == 0:
        # when: a shard's claims may skip a fetch within FRESH of it (_decided_here), and
        # a read answers without one within agent-registry.readFreshness (sync/fresh.py)
        _mark_fetched(registry, every=also == registry.fetch_also)
        return registry.repo.read_ref(registry.tracking_ref)
    err = proc.stderr.decode(errors="replace")
    if "couldn't find remote ref" in err:  # deleted or never pushed: we will recreate it
        if registry.repo.read_ref(registry.tracking_ref):
            registry.repo.git("update-ref", "-d", registry.tracking_ref, check=False)
        if registry.part.routes and also:
            _fetch_parts(registry, also)
        elif registry.part.kind in ("shard", "clone") and also:
            # git names the first ref missing there: this one, or the registry branch
            # this fetch brings along.  Its own fetch says which of them the remote has
            # (and prunes the shards and clone refs it lost): whether this ref may be
            # made there (sync/leases.py)
            fetch(registry.part.main)
        return None
    locked = [line for line in err.splitlines() if "cannot lock ref" in line]
    if locked and all(f"'refs/remotes/{registry.remote}/" in line for line in locked):
        # another process of this clone is writing the same fetch result right now: this
        # branch's tracking ref, or one its fetch brings along (a lock shard's fetch
        # writes the main branch's, every shard's and the clone refs')
        return registry.repo.read_ref(registry.tracking_ref)
    raise Offline.from_stderr(registry.remote, err, f"git fetch exited {proc.returncode}",
                              registry.branch)


def _fetch_parts(registry: Registry, also: tuple[str, ...]) -> None:
    """The registry branch is gone from the remote (deleted, or never pushed): git
    failed the fetch that named it as a whole, which left the tracking refs of its lock
    shards, clone refs and intents as the fetch before found them.  Fetch those alone,
    pruned, so that they say what the remote has now: whether the branch may be made
    anew there (:func:`nowhere`) and which shards of this clone sync pushes again
    (sync/shardsync.py ``unpushed``).  Raises Offline when the remote cannot be used:
    tracking refs left stale would vouch for shards the remote may have lost."""
    proc = git_net(registry, "fetch", "--quiet", "--no-tags", "--no-write-fetch-head",
                   "--no-auto-maintenance", "--prune", registry.remote,
                   fetch_refspec(registry), *also)
    if proc.returncode != 0:
        raise Offline.from_stderr(registry.remote, proc.stderr.decode(errors="replace"),
                                  f"git fetch exited {proc.returncode}", registry.branch)


def nowhere(registry: Registry, tip: str | None) -> list[str]:
    """The lock shards the layout at *tip* (of the registry branch) names that neither
    this clone nor the remote, as of the last fetch, has: pushed without them, the
    branch would be a registry no clone can read (branch/shardview.py ``open_whole``
    refuses it).  Empty for a shard's, a clone ref's or the messages branch's registry,
    and in the single-branch layout."""
    if not registry.part.routes or tip is None or not registry.remote:
        return []
    from ..branch import shards as S
    layout = S.layout_of(registry.repo.read_blob(f"{tip}:{S.LAYOUT}"))
    if layout["format"] < 2:
        return []
    return S.absent(registry.repo, registry.branch, registry.remote, S.count_of(layout))


class Deleted(Refused):
    """The registry branch is gone from the remote, and this clone lacks lock shards its
    layout names, which the remote lacks too: made anew from here, it would be a
    registry no clone can read (each reads a shard it names as missing), so nothing is
    pushed.  Says what went wrong as Offline does (``kind``, ``advice``, ``to_dict``)."""

    kind = "deleted"

    def __init__(self, registry: Registry, missing: list[str], part: str = "",
                 never: bool = False) -> None:
        from ..branch.shards import gone_advice
        remote = redact(registry.remote)
        more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
        if never:  # a registry this clone made and never pushed: sync pushes it first
            self.advice = f"`agent-registry sync` pushes {registry.branch} there first"
            super().__init__(f"{remote} has no {registry.branch}: {part} not made there "
                             f"before it; {self.advice}", details={"missing": missing})
            return
        self.advice = gone_advice(remote)
        why = (f", with lock shards this clone never had ({missing[0]}{more}): not made "
               f"anew there, where no clone could read it" if missing else
               f": {part or registry.branch} not made anew there, where no registry is")
        super().__init__(f"{registry.branch} was deleted on {remote}{why}; {self.advice}",
                         details={"missing": missing})

    def to_dict(self) -> dict:
        return {"kind": self.kind, "message": self.message}


class ShardGone(Deleted):
    """A lock shard deleted on the remote, the registry branch still there: not made anew
    by a claim, without the claims it held (sync, in a clone that wrote it, pushes it
    back with them)."""

    def __init__(self, registry: Registry) -> None:
        self.advice = "run `agent-registry sync` in a clone that wrote it"
        Refused.__init__(self, f"{registry.branch} is gone from {redact(registry.remote)}: "
                               f"not made anew by a claim, without the claims it held; "
                               f"`agent-registry sync` in a clone that wrote it pushes it back")


def shard_gone(registry: Registry) -> Deleted:
    """A claim's refusal of a lock shard deleted on the remote (:class:`ShardGone`); the
    registry branch gone there too: the refusal of a registry deleted there
    (:func:`gone`)."""
    main = registry.part.main
    return gone(registry) if main.repo.read_ref(main.tracking_ref) is None \
        else ShardGone(registry)


def gone(registry: Registry) -> Deleted:
    """The refusal of a lock shard's or the clone ref's push (or write) where the remote
    had no registry branch at the last fetch: the registry was deleted there (or never
    pushed), and what this clone would make there alone is no registry."""
    main = registry.part.main
    if confirmed_tip(main) is None:  # never seen there
        return Deleted(main, [], registry.branch, never=True)
    return Deleted(main, nowhere(main, main.repo.read_ref(main.ref)), registry.branch)


# what a user can do about a remote that does not accept atomic pushes (only `init` run
# through such a remote writes the one-branch layout, the only one that needs none: its
# atomic create fails and it falls back to one branch, converted by `agent-registry
# shard` once the remote takes them: docs/design.md)
ACCEPT_ATOMIC = ("let it accept them (`git config receive.advertiseAtomic true` in the "
                 "remote repository: git's default)")
ATOMIC_ADVICE = (f"{ACCEPT_ATOMIC}, or sync the registry through another remote (`git config "
                 "agent-registry.remote NAME`; `none`: this clone alone)")


class NoAtomic(Refused):
    """The remote does not accept atomic pushes, and this write's push would publish a
    registry made here whole, in one (sync/leases.py ``first_push``): refused in one
    line, nothing pushed.  Says what went wrong as Offline does (``kind``, ``advice``,
    ``to_dict``)."""

    kind = "no-atomic"
    advice = ATOMIC_ADVICE

    def __init__(self, registry: Registry) -> None:
        main = registry.part.main or registry
        super().__init__(f"{redact(registry.remote)} does not accept atomic pushes (`git push "
                         f"--atomic`), which publishing {main.branch} with its lock shards "
                         f"takes: nothing pushed; {self.advice}")

    def to_dict(self) -> dict:
        return {"kind": self.kind, "message": self.message}


def check_atomic(registry: Registry) -> None:
    """Raise NoAtomic when *registry*'s next push would publish a registry made here
    whole (sync/leases.py ``first_push``) and the remote does not take atomic pushes: a
    dry run (no pack sent, no ref moved) asks it, before the write is committed here.  A
    remote that took one is not asked again (the sync state); one that cannot be used
    is left to the push."""
    from .leases import first_push
    main = registry.part.main or registry
    tip = main.repo.read_ref(main.ref)
    if tip is None or takes_atomic(registry) or first_push(registry) is None:
        return
    proc = git_net(registry, "push", "--dry-run", "--atomic", "--porcelain", "--no-verify",
                   registry.remote, f"{tip}:refs/heads/{registry.branch}")
    said = proc.stderr.decode(errors="replace")
    if "does not support --atomic push" in said:
        raise NoAtomic(registry)
    if proc.returncode == 0:
        with _locked(registry):
            found_atomic(registry, True)


class PushResult:
    """What a push came to (a plain class: dataclasses imports inspect and ast, ~5 ms
    of every claim through a remote)."""
    __slots__ = ("ok", "retry", "reason", "told")

    def __init__(self, ok: bool, retry: bool, reason: str, told: bool = False) -> None:
        self.ok = ok
        self.retry = retry  # a lost race: fetch and replay, then try again
        self.reason = reason
        self.told = told  # the remote named an intent here no fetch of ours brought


def _mark_fetched(registry: Registry, every: bool = True) -> None:
    """Note when this branch was last fetched (the mtime of a file in the clone's state
    folder): how long a claim may be decided without a fetch (_decided_here).  The
    fetch of the main branch or of a lock shard brings every shard with its intents
    (``fetch_also``; *every*), which one more mark says for all of them."""
    common = registry.repo.info.common_dir
    freshness.mark(common, registry.branch)
    fetch_paid(registry)
    if every and registry.part.kind != "clone":
        freshness.mark(common, _all_shards(registry))


def _root(registry: Registry) -> str:
    """The main registry branch *registry*'s branch belongs to (itself, or the branch of
    which it is a shard, a clone ref or the messages): every tracking ref of the
    registry starts with it."""
    main = getattr(registry.part, "main", None)
    return main.branch if main is not None else registry.branch


def _narrow_also(registry: Registry) -> tuple[str, ...]:
    """What a narrow fetch (a claim's, only to carry an intent a push saw) brings besides
    the branch and its intents: for a lock shard, what its operations are judged by (the
    main branch's sessions, the clone refs' heartbeats) and not the other shards, whose
    new commits (most of what a fetch at 16 clones downloads) the replay never reads;
    for any other branch, all its fetch brings.  Also a waiting loser's polls (publish).
    Not the fetch after a lost push before the intent is out: made
    narrow, the contended rounds that followed 30-45 s of claims at 16 clones took
    4.2-6.0 s against 2.2-3.3 s (five pairs; each fetch after a loss also renews the
    mark that lets a claim on another shard skip its own fetch, _all_shards)"""
    if registry.part.kind != "shard":
        return registry.fetch_also
    shards = f"refs/heads/{_all_shards(registry)}/*:"
    return tuple(spec for spec in registry.fetch_also if shards not in spec)


def _all_shards(registry: Registry) -> str:
    """The name of the mark of a fetch that brought every lock shard of *registry*'s
    main branch (in the single-branch layout, no shard: the mark is never read)."""
    return (registry.part.main.branch if registry.part.kind == "shard" else registry.branch) \
        + "-shards"


def push(registry: Registry, commit: str) -> PushResult:
    """Push *commit* as the remote branch: a fast-forward only (no ``+``, no lease).
    Raises Deleted, pushing nothing, where it would make the registry branch anew on a
    remote that lacks lock shards its layout names and this clone lacks them too."""
    dst = f"refs/heads/{registry.branch}"
    # what this clone last saw there, as a lease (sync/leases.py): never made anew blind;
    # a registry made here and never pushed goes there whole, in one atomic push
    from .leases import NOT_ON_SEEN, NoRegistry, expectation, published_whole
    expect = whole = published_whole(registry, commit, dst)
    if expect is None:
        if registry.part.routes and registry.repo.read_ref(registry.tracking_ref) is None:
            missing = nowhere(registry, commit)  # the push would create it there
            if missing:
                raise Deleted(registry, missing)
        try:
            expect = expectation(registry, commit, dst)
        except NoRegistry:
            raise gone(registry) from None
    if expect is None:
        return PushResult(False, True, NOT_ON_SEEN)
    options, more = expect
    # --no-verify: a registry push is not the user's code; their pre-push hooks (a test
    # suite, the pre-commit framework) must not run, or fail, on every claim
    # traced: the refs the remote advertises say whether a clone asks for help here;
    # not when the next claim fetches anyway (that fetch brings every intent)
    packets = push_trace(registry) if _may_skip_fetch(registry) else None
    told = False
    try:
        proc = git_net(registry, "push", "--porcelain", "--quiet", "--no-verify", *options,
                       registry.remote, f"{commit}:{dst}", *more,
                       env={**registry.repo.env, "GIT_TRACE_PACKET": packets} if packets else None)
    finally:  # read and removed, whatever came of the push (a timeout leaves it behind)
        if packets:
            told = note_advertised(registry, packets)
    out = proc.stdout.decode(errors="replace")
    for line in out.splitlines():
        if line.endswith("\t") or "\t" not in line:
            continue
        flag, _, rest = line.partition("\t")
        if not rest.split("\t")[0].endswith(":" + dst):
            continue
        summary = rest.split("\t")[1] if "\t" in rest else ""
        if flag in (" ", "*", "=", "+"):
            return PushResult(True, False, summary, told)
        said = _remote_says(proc.stderr.decode(errors="replace"))
        # an atomic push's refs fail together: the reason is another ref's line (or the
        # server's words), e.g. a create another clone made first
        why = [summary] + ([out, said] if "atomic" in summary else [])
        racing = any(word in text for text in why for word in RACING)
        return PushResult(False, racing, (summary or "rejected") + (f" ({said})" if said else ""))
    err = proc.stderr.decode(errors="replace")
    if proc.returncode == 0:
        return PushResult(True, False, "pushed", told)
    if whole is not None and "does not support --atomic push" in err:
        with _locked(registry):  # it took them once (check_atomic): no more
            found_atomic(registry, None)
        raise NoAtomic(registry)
    raise Offline.from_stderr(registry.remote, err, f"git push exited {proc.returncode}",
                              registry.branch)


# what git says of a push that lost a race (the remote moved, or a ref it would create
# is there now), as opposed to one the remote refuses (a hook, a protected branch)
RACING = ("fetch first", "non-fast-forward", "stale info", "failed to update ref",
           "failed to lock", "cannot lock ref", "atomic push failed")


def _remote_says(stderr: str) -> str:
    """The first line the server's hooks printed (``remote: …``), if any."""
    for line in stderr.splitlines():
        if line.startswith("remote: ") and line[8:].strip():
            return redact(line[8:].strip())
    return ""


def _last_line(text: str) -> str:
    """The line of git's stderr (or ssh's) that says what went wrong."""
    lines = [l.strip() for l in text.strip().splitlines() if l.strip()]
    generic = "could not read from remote repository"
    for i, line in enumerate(lines):
        if line.startswith(("fatal: ", "error: ")) and generic not in line.lower():
            said = line.split(": ", 1)[1]
            # "unable to connect to host:" is followed by the reason on the next line
            return f"{said} {lines[i + 1]}" if said.endswith(":") and i + 1 < len(lines) else said
    specific = [l for l in lines if generic not in l.lower() and not l.startswith(
        ("Please make sure", "and the repository exists"))]
    return (specific or lines or [""])[0]
# -- the mass-deletion guard ----------------------------------------------------------

def _population(registry: Registry, commit: str) -> int:
    """Sessions and wiki entries at *commit*."""
    names = registry.repo.git("ls-tree", "-r", "--name-only", commit, "--",
                              "sessions", "wiki").stdout.decode().split("\n")
    return sum(1 for n in names if n.endswith((".yaml", ".md")))


def _gc_explains(registry: Registry, confirmed: str | None, remote: str) -> bool:
    """Whether a ``gc`` commit on *remote* (not in *confirmed*'s history; without it, in
    the last 50 commits) rewrote a history that held *confirmed*: then the state we
    confirmed is all there, squashed, and what is missing since was removed by later
    operations, not by a rewind or a wipe."""
    spec = ["--not", confirmed] if confirmed and commit_exists(registry, confirmed) else ["-n", "50"]
    found = registry.repo.git("log", "--format=%B%x00", "--grep=^Registry-Op: gc$", remote,
                              *spec).stdout.decode(errors="replace")
    for message in filter(str.strip, found.split("\0")):
        rewrote = (parse_op(message) or {}).get("rewrote")
        if not (confirmed and rewrote and commit_exists(registry, rewrote)) or \
                is_ancestor(registry, confirmed, rewrote):
            return True  # a rewritten tip we never fetched came after what we confirmed
    return False


def check_adoptable(registry: Registry, local: str | None, previous: str | None,
                    remote: str) -> None:
    """Refuse a remote tip that silently drops most sessions or wiki entries.  The
    common case costs one diff: the files we have that the remote lacks."""
    if local is None or remote in (local, previous):
        return
    missing = registry.repo.git("diff-tree", "-r", "--no-renames", "--name-only",
                                "--diff-filter=D", local, remote, "--", "sessions", "wiki"
                                ).stdout.decode().split()
    if len(missing) < MIN_GUARDED:
        return
    ours, theirs = _population(registry, local), _population(registry, remote)
    if theirs < ours * MASS_DELETION and not _gc_explains(registry, previous, remote):
        raise MassDeletion(
            f"{redact(registry.remote)}/{registry.branch} has {theirs} sessions and wiki entries where "
            f"this clone has {ours}, and no gc commit explains it: not adopted, local state "
            f"kept. Inspect it (git log {registry.tracking_ref}); if the deletion was a "
            f"mistake, restore the remote with `git push --force-with-lease="
            f"{registry.branch}:{remote} {redact(registry.remote)} {registry.branch}`.")


class MassDeletion(RegistryError):
    """The remote lost most of our sessions and no gc explains it: not adopted.  Says
    what went wrong as Offline does (``kind``, ``advice``, ``to_dict``)."""

    kind = "not-adopted"
    advice = "`agent-registry sync` pushes it once the remote state is sorted out"

    def to_dict(self) -> dict:
        return {"kind": self.kind, "message": self.message}


# -- the remote going back in time -------------------------------------------------------

def _rewound(registry: Registry, confirmed: str | None, remote: str) -> bool:
    """The confirmed tip vanished from the remote's history, and gc does not explain it."""
    return bool(confirmed and confirmed != remote and commit_exists(registry, confirmed)
                and not is_ancestor(registry, confirmed, remote)
                and not _gc_explains(registry, confirmed, remote))


def local_sessions(registry: Registry, view: View) -> list:
    """The live sessions of *view* that live in this clone (this host, one of its
    worktrees)."""
    ours = _our_worktrees(registry)
    return [s for s in view.live_sessions() if s.host == registry.host
            and os.path.realpath(s.project or "/") in ours]


def _our_worktrees(registry: Registry) -> set[str]:
    """Where sessions of this clone live (their ``project``): each worktree, or the
    git dir of a bare repository."""
    out = registry.repo.git("worktree", "list", "--porcelain", check=False).stdout.decode()
    places = {line[9:] for line in out.splitlines() if line.startswith("worktree ")}
    places |= {registry.repo.info.git_dir, registry.repo.info.common_dir}
    return {os.path.realpath(p) for p in places}


def restore_ops(registry: Registry, confirmed: str) -> list[dict]:
    """One ``restore`` operation per live session of this clone at *confirmed*, with the
    locks it held there (its generation tokens and claim times kept).  Read as the
    registry's operations read that tip: a lock shard's sessions are those its held
    lists name, with their records from the main branch (a plain view of a shard's tree
    has no session, and would re-apply none of its locks)."""
    view = registry.view_at(confirmed)
    ops = []
    for session in local_sessions(registry, view):
        locks = []
        for target in session.locks:
            lock = view.lock(target)
            holder = lock.holder(session.id) if lock else None
            if holder is not None:
                locks.append({"path": target, "mode": lock.mode, **holder.to_dict()})
        ops.append(registry.new_op(RESTORE_OP, session=session.id, record=session.to_dict(),
                                locks=locks, confirmed=confirmed))
    return ops


@operation(RESTORE_OP)
def _op_restore(registry: Registry, view: View, op: dict) -> Outcome:
    """Re-apply a session and its locks that the remote lost by going back in time.
    Each lock is refused only where another live session holds the path now; a session
    that ended on the remote is not brought back."""
    sid, at, record = op["session"], op["at"], op["record"]
    ended = view.done_session(sid)
    if ended is not None:
        return Outcome({"session": sid, "reapplied": [], "refused": [
            {"session": sid, "path": None, "owner": None,
             "reason": f"session {sid} is {ended.status} on the remote"}]}, None)
    session, reapplied, refused = view.session(sid, strict=False), [], []
    saved = Session.from_dict({**record, "locks": []})
    if session is None or session.heartbeat_ts() < saved.heartbeat_ts():
        saved.locks = session.locks if session else []
        session = saved
        reapplied.append({"session": sid, "path": None})
    for held in op["locks"]:
        path, mode = held["path"], held["mode"]
        lock = view.lock(path) or Lock(path, mode)
        if lock.holder(sid) is None:
            conflicts = registry.conflicts(view, sid, path, mode, at)
            if conflicts:
                refused.append({"session": sid, "path": path, "owner": conflicts[0]["owner"],
                                "reason": describe_conflicts(conflicts)})
                continue
            stale = [h for h in lock.holders if registry.judge(view, h, at) is not None]
            for holder in stale:
                registry.forget(view, holder.session, path)
            lock.holders = [h for h in lock.holders if h not in stale]
            lock.holders.append(Holder(sid, held["generation"], held["acquired_at"], held["ttl"]))
            lock.mode = mode
            view.put_lock(lock)
            reapplied.append({"session": sid, "path": path})
        if path not in session.locks:
            session.locks.append(path)
    if reapplied:
        view.put_session(session)
    paths = [r["path"] for r in reapplied if r["path"]]
    subject = (f"re-apply {sid}" + (f" and {', '.join(paths)}" if paths else "")
               + " lost when the remote went back in time")
    return Outcome({"session": sid, "reapplied": reapplied, "refused": refused},
                   subject if reapplied else None)


def _reapply(registry: Registry, confirmed: str, onto: str) -> tuple[str, dict]:
    """Re-apply this clone's live sessions and locks of *confirmed* on *onto*."""
    tip, reapplied, refused = onto, [], []
    for op in restore_ops(registry, confirmed):
        commit, result = registry.build(tip, op)
        tip = commit or tip
        reapplied += result["reapplied"]
        refused += result["refused"]
    return tip, {"from": confirmed, "to": onto, "at": iso(registry.clock()),
                 "reapplied": reapplied, "refused": refused}


def rewind_lines(rewind: dict) -> list[str]:
    """What `sync`, a claim's stderr and `status` say about a rewind."""
    lines = [f"the remote went back in time ({rewind['from'][:12]} is no longer in its "
             f"history; now {rewind['to'][:12]}): re-applied this clone's sessions and locks"]
    for r in rewind["reapplied"]:
        lines.append(f"re-applied: {r['path']} by {r['session']}" if r["path"]
                     else f"re-applied: session {r['session']}")
    lines += [f"not re-applied: {r['path'] or 'session ' + r['session']}: {r['reason']}"
              for r in rewind["refused"]]
    return lines


# -- the synced transaction -----------------------------------------------------------

def _failed(registry: Registry, exc: Offline | MassDeletion | Deleted | NoAtomic) -> None:
    """Record a failed attempt (caller holds the flock)."""
    save_state(registry, last_error=exc.message, last_attempt=iso(registry.clock()),
                last_error_kind=exc.kind)


def _move_local(registry: Registry, new: str | None, old: str | None) -> None:
    if new is not None and new != old:
        registry.repo.update_ref(registry.ref, new, old, "agent-registry: sync")


def _rebase(registry: Registry, remote: str | None, before: str | None = None,
            help: bool = True) -> Replay:
    """Put this clone's unpushed operations on top of *remote* (caller holds the flock);
    moves the local ref and the confirmed tip.  *before*: the tracking ref before the
    fetch, the confirmed tip of a clone that has none recorded yet.  *help*: apply the
    other clones' intents first (sync/intents.py); a clone waiting to be carried does not,
    since it will not push while others do: its next claim fetches and carries them."""
    local = registry.repo.read_ref(registry.ref)
    confirmed = confirmed_tip(registry, before)
    if remote is None:
        return Replay(local)  # the remote branch is gone: the push recreates it
    intents = unsettled(registry, remote)
    if intents and not help:
        # carried by no one here: the next claim, which might decide on our tip within
        # FRESH, fetches first instead, and carries them
        owe_fetch(registry)
        intents = []
    if local is None and not intents:
        registry.repo.update_ref(registry.ref, remote, None, "agent-registry: sync")
        confirm(registry, remote)
        return Replay(remote)
    holds = local is not None and (remote == local or is_ancestor(registry, remote, local))
    if holds and intents and not unsettled(registry, local):
        # our tip helped them all already (another process of this clone, whose push has
        # not landed yet): rebuilding it on the remote tip would only make a second copy
        # of its commits, which that push, if it lands, turns into a fork (a rebuild
        # still helps them all anew when one is left to help)
        intents = []
    if not intents and holds:
        # nothing new there (or an older view of it): our tip already holds it
        if confirmed is None or (remote != confirmed and is_ancestor(registry, confirmed, remote)):
            confirm(registry, remote)
        return Replay(local)
    check_adoptable(registry, local, confirmed, remote)
    onto, rewind = remote, None
    if _rewound(registry, confirmed, remote):
        onto, rewind = _reapply(registry, confirmed, remote)  # type: ignore[arg-type]
        record_lost(registry, rewind["refused"])
    # other clones' published operations first (they waited longest), then ours, skipping
    # those a helper already applied for us
    own = settled(View(registry.repo, onto), load_state(registry).get("clone_id") or "") \
        if onto else {"handled": {}}
    # applied once: an operation the fetched history holds and ours does not is skipped,
    # however it got there: a push of another process of this clone (which may record
    # its tip as confirmed while a third process rewrote our branch, so the confirmed
    # tip bounds nothing here), a push that landed after its client gave up, a helper
    landed = dict.fromkeys(landed_since(registry, remote, local), APPLIED)
    state = replay(registry, pending_commits(registry, confirmed, local, landed=remote),
                   help_others(registry, onto, intents), handled={**landed, **own["handled"]})
    settle_own(registry, onto, state)
    state.rewind = rewind
    if registry.part.routes and recounted(registry, state.tip, local):
        # onto a registry made apart in another shard count: the pending lock operations
        # of the old shards move with it (sync/reshard.py)
        from .reshard import move_main
        moved = move_main(registry, state.tip, local)  # its refusals recorded already
    else:
        _move_local(registry, state.tip, local)
        moved = []
    confirm(registry, remote, **({"last_rewind": rewind} if rewind else {}))
    _record_refused(registry, state.refused)
    state.refused += moved
    return state


def _advance(registry: Registry, tip: str, seen: str | None, **changes) -> None:
    """After a push of *tip*: the tracking ref and the confirmed tip move forward to it
    (never back: another process of this clone may have pushed a later tip already),
    recorded in the sync state with its other *changes* in one write.  *seen*: the
    tracking ref when the push started (caller holds the flock)."""
    current = registry.repo.read_ref(registry.tracking_ref)
    if current != tip and (current in (None, seen) or is_ancestor(registry, current, tip)):
        registry.repo.git("update-ref", registry.tracking_ref, tip)
    confirmed = confirmed_tip(registry)
    if confirmed in (None, seen) or is_ancestor(registry, confirmed, tip):
        confirmed = tip
    confirm(registry, confirmed, last_success=iso(registry.clock()), last_error=None,
            last_error_kind=None, **changes)


def apply_synced(registry: Registry, op: dict, deadline: float = DEFAULT_DEADLINE) -> dict:
    """Apply *op* and get it confirmed by the remote.  Takes the clone's flock only for
    the local work (replay and commit), never across a fetch or a push."""
    from .leases import first_push
    trace.note("begin", 0.0, op["op"])
    before = registry.repo.read_ref(registry.tracking_ref)
    # a claim on a shard fetched within FRESH that fetches only to carry an intent a
    # push saw there needs that shard alone: the sooner it lands, the less its loser waits
    narrow = fetch_owed(registry) and _fetched_within(registry, registry.branch)
    result, rewind = _decided_here(registry, op), None
    trace.note("decided", 0.0, "here" if result is not None else "fetch first")
    if result is None:
        try:
            remote, failure = fetch(registry, narrow), None
        except Offline as exc:
            remote, failure = None, exc
        if failure is None and remote is None and registry.part.kind == "shard" \
                and (registry.repo.read_ref(registry.ref) is None or before is not None
                     or confirmed_tip(registry) is not None):
            # gone from the remote (deleted), and never written here, or there when this
            # clone last looked or last synced it (a claim before this one found it gone
            # and dropped the tracking ref; so did a `git fetch --prune`): made anew, it
            # would lack every claim it held, which the clones that saw them still count;
            # unless it was routed by a shard count this clone gave up meanwhile for the
            # remote's (a registry made apart: sync/reshard.py), whose layout has no such
            # shard: then routed again (core/routing.py)
            moved = _sessions_first(registry, "", None, time.monotonic() + deadline) \
                if _resharded(registry) else None
            raise moved if isinstance(moved, Refused) else shard_gone(registry)
        if failure is None and remote is None and registry.part.kind in ("shard", "clone") \
                and registry.repo.read_ref(registry.part.main.tracking_ref) is None \
                and first_push(registry) is None:
            # no registry there: not made from here (nothing applied), unless this clone
            # made it and never pushed it: then the push takes it there whole (leases.py)
            raise gone(registry)
        if failure is None and remote is None:
            # the registry branch gone from the remote: made anew only where this clone
            # or the remote has every lock shard its layout names (nothing applied here)
            missing = nowhere(registry, registry.repo.read_ref(registry.ref))
            if missing:
                refused = Deleted(registry, missing)
                with _locked(registry):
                    _failed(registry, refused)
                raise refused
        if failure is None and remote is None:
            try:  # its push would be an atomic one: refused before it is committed here
                check_atomic(registry)
            except NoAtomic as exc:
                with _locked(registry):
                    _failed(registry, exc)
                raise
            except Offline as exc:
                failure = exc
        with _locked(registry):
            if failure is None:
                try:
                    rewind = _rebase(registry, remote, before).rewind
                except MassDeletion as exc:
                    failure = exc
            if failure is not None:
                _failed(registry, failure)
            result = registry.apply_locally(op)
        if failure is not None:
            return _unconfirmed(registry, op, result, failure)
    outcome = publish(registry, deadline, watch=op.get("id"))
    trace.note("end", 0.0, f"attempts {outcome.get('attempts', 1)}")
    for state in filter(None, (rewind, outcome.get("rewind"))):
        registry.warnings.extend(rewind_lines(state))
    if outcome.get("dropped"):
        dropped = outcome["dropped"]
        raise Refused(dropped["reason"], details={k: v for k, v in dropped.items()
                                                  if k not in ("reason",)})
    result = outcome.get("result") or result
    if not outcome["pushed"]:
        return _unconfirmed(registry, op, result, outcome["failure"])
    return result


# A claim is decided without a fetch only within FRESH seconds of the last one: each
# fetch brings the intents of clones that keep losing on this shard, and the rebase after
# it carries them (sync/intents.py).  Without that bound, a clone claiming back to back
# never fetched, never helped, and starved a slower clone on its shard (measured: a
# worst streak of 11 lost pushes and a 57 s wait with 16 clones; docs/benchmarks.md).
FRESH = 5.0


def _decided_here(registry: Registry, op: dict) -> dict | None:
    """*op*'s result, committed on this clone's tip without a fetch first, when what it
    decides cannot depend on what other clones pushed since (``Registry.decides_alone``:
    a claim no other session's lock covers, or a release).  The push
    that follows lands only on that same remote tip; a rejected one fetches and replays
    it there, re-decided (publish).  None: fetch first, as for every other operation
    (also when it would be refused here: the remote may know better)."""
    if not _may_skip_fetch(registry):
        return None
    with _locked(registry):
        seen = registry.repo.read_ref(registry.tracking_ref)
        if seen is None:
            return None
        if registry.repo.read_ref(registry.ref) is None or confirmed_tip(registry) is None:
            # a shard this clone never synced, fetched with the others: take it up as
            # after a fetch of its own, so its pending commits are known from now on
            try:
                _rebase(registry, seen)
            except (MassDeletion, CasFailed):
                return None
        local = registry.repo.read_ref(registry.ref)
        # only on the remote tip this clone last put its pending commits on (a fetch of
        # the main branch brings the shards' tips without that)
        if local is None or confirmed_tip(registry) != seen \
                or not registry.decides_alone(local, op):
            return None
        try:
            commit, result = registry.build(local, op)
        except (Refused, NotFound):  # the remote may know better: fetch, then decide
            return None
        if commit is None:
            return None
        try:
            registry.repo.update_ref(registry.ref, commit, local, f"agent-registry: {op['op']}")
        except CasFailed:
            return None
        return result


def _may_skip_fetch(registry: Registry) -> bool:
    """Whether a claim may now be decided without a fetch first: this clone fetched the
    branch within FRESH, and no push since saw an intent here that no fetch brought.  A
    shard fetched with the others (the main branch's fetch, another shard's) may skip
    its own fetch too, unless an intent to carry was published on it.  Once False it
    stays so until a fetch (which brings every intent): a push's trace of what the
    remote advertised (note_advertised) matters only while it is True."""
    return not fetch_owed(registry) and (
        _fetched_within(registry, registry.branch) or registry.part.kind == "shard"
        and _fetched_within(registry, _all_shards(registry)) and not any_fetched(registry))


def _fetched_within(registry: Registry, mark: str) -> bool:
    """Whether this clone made the fetch *mark* names (a branch, with the intents
    published on it; or every shard, _all_shards) in the last FRESH seconds."""
    last = freshness.last_fetch(registry.repo.info.common_dir, mark)
    # a mark from the future (a clock stepped back) vouches for nothing: fetch
    return last is not None and 0 <= time.time() - last < FRESH


def _unconfirmed(registry: Registry, op: dict, result: dict,
                 failure: Offline | MassDeletion | Deleted | NoAtomic) -> dict:
    """A change committed here but not pushed: a claim exits 3 (another machine may
    hold the same path); any other change is kept, and ``registry.unpushed`` says why."""
    if isinstance(failure, Refused):  # Deleted, NoAtomic: a refusal, not "not confirmed"
        if failure.details.get("resharded") and registry.part.kind == "shard":
            # routed by a shard count given up: out of whichever shard ref holds it now
            from .reshard import withdraw
            with _locked(registry):
                withdraw(registry.part.main, op)
        else:
            _withdraw(registry, op)  # so no later push (sync, the next claim) lands it
        raise failure
    error, advice = failure.to_dict(), failure.advice
    remote = redact(registry.remote)
    if op["op"] != "claim":
        registry.unpushed = {"confirmed": False, "remote_error": error}
        registry.warnings.append(
            f"{op['session']} is registered in this clone only, not yet shared with other "
            f"clones: {error['message']}; {advice}" if op["op"] == "register" else
            f"not pushed to {remote} ({error['message']}): kept in this clone; {advice}")
        return result
    raise Unconfirmed(
        f"claimed locally, not confirmed by {remote} ({error['message']}); "
        f"{advice}: it confirms or refuses the claim. Until then another machine may hold "
        f"the same path.", details={"confirmed": False, "remote_error": error, **result})


def _withdraw(registry: Registry, op: dict) -> None:
    """Take *op*, refused after it was committed here (decided within FRESH, or its push
    met a ref deleted on the remote), out of this clone's pending commits: kept, the
    next push of the branch (``sync`` pushing a deleted shard back, the next claim) put
    on the remote a claim its caller was told was refused (exit 1)."""
    with _locked(registry):
        local, base = registry.repo.read_ref(registry.ref), confirmed_tip(registry)
        if not op.get("id") or local is None or base is None or local == base \
                or not commit_exists(registry, base) or not is_ancestor(registry, base, local):
            return
        commits = pending_commits(registry, base, local)
        ops = [parse_op(registry.repo.commit_info(c)[2]) for c in commits]
        if not any(isinstance(o, dict) and o.get("id") == op["id"] for o in ops):
            return
        state = replay(registry, commits, base, handled={op["id"]: "refused"})
        _move_local(registry, state.tip, local)
        # another pending operation that stood only on the refused one: refused as a
        # replay refuses it, for its caller to learn (its own fate, sync's report)
        _record_refused(registry, [r for r in state.refused if r.get("id") != op["id"]])


def publish(registry: Registry, deadline: float = DEFAULT_DEADLINE,
            watch: str | None = None) -> dict:
    """Push the local tip; on a lost race fetch, replay and retry until *deadline*.
    *watch* is the id of an operation whose fate the caller wants to know: its
    replayed result, or the refusal that dropped it (by this process's replay or by
    another process of the clone, which records refusals in the sync state).
    Network I/O runs without the flock; each replay takes it."""
    start, attempt, pushes = time.monotonic(), 0, 0
    outcome: dict = {}
    # waiting: our intent is out and the remote moves; moves: polls while waiting that
    # found it moved; still: polls in a row that found it where the one before it had
    waiting, moves, still, previous, last = False, 0, 0, None, ""
    while True:
        tip = registry.repo.read_ref(registry.ref)
        seen = registry.repo.read_ref(registry.tracking_ref)
        if tip is None or tip == seen:
            # after lost pushes, a helper's push carried ours (or a replay dropped them):
            # counted with that push, as below, so the attempts a clone's sync state
            # says (bench/scale_bench.py's) are not those of its previous claim
            done = {"attempts": pushes + 1} if pushes else {}
            if tip is not None:
                with _locked(registry):
                    _advance(registry, tip, seen, **{f"last_push_{k}": v for k, v in done.items()})
            return _fate(registry, {**outcome, "pushed": True, "tip": tip, **done}, watch)
        if not own_commits(registry, seen, tip):
            # all that is left is what we carried for other clones (sync/intents.py): our
            # own operations are on the remote, so we are done; the next rebase drops them
            with _locked(registry):  # the push that landed them was another's
                save_state(registry, last_push_attempts=pushes + 1,
                           last_success=iso(registry.clock()), last_error=None,
                           last_error_kind=None)
            return _fate(registry, {**outcome, "pushed": True, "tip": seen,
                                    "attempts": pushes + 1}, watch)
        if not waiting:
            # no lock of ours lands naming a session the remote's registry branch lacks
            first = _sessions_first(registry, tip, seen, start + deadline)
            if isinstance(first, Refused) and first.details.get("resharded"):
                # not a failure of the remote: withdrawn and routed again by the caller
                return {**outcome, "pushed": False, "error": first.message, "failure": first,
                        "remote_error": None}
            if first is not None:
                return _stop(registry, outcome, first)
            began = trace.start()
            try:
                pushed = push(registry, tip)
            except (Offline, Deleted, NoAtomic) as exc:
                return _stop(registry, outcome, exc)
            trace.note("push", began, "ok" if pushed.ok else "lost")
            pushes += 1
            if pushed.ok:
                with _locked(registry):
                    _advance(registry, tip, seen, last_push_attempts=pushes)
                landed = _fate(registry, {**outcome, "pushed": True, "tip": tip,
                                          "attempts": pushes, "landed": True,
                                          "created": seen is None}, watch)
                if pushed.told:
                    carry_now(registry)
                return landed
            if not pushed.retry:
                return _stop(registry, outcome, Offline(registry.remote, "denied",
                                                        pushed.reason, registry.branch))
            last = pushed.reason
        if time.monotonic() - start > deadline:
            return _stop(registry, outcome, Offline(
                registry.remote, "error", f"push still rejected after {deadline:g} s of "
                f"retries: {last}", registry.branch))
        attempt += 1
        # keeps losing: publish our operations for the winners to carry, then wait for
        # them while the remote moves (each landed push carries every intent it fetched);
        # push again when it stops moving (no one else is left to carry us) or after
        # MOVED polls that found it moved (the ones moving it may not carry: an older
        # agent-registry)
        began = trace.start()
        out = attempt >= LOSSES and publish_intent(registry)
        if attempt >= LOSSES:
            trace.note("intent", began, "out" if out else "not out")
        # full jitter: losers spread out instead of stampeding the remote together
        import random  # only when a push lost a race
        # once our intent is out, the next fetch may show it carried: poll at the backoff
        # of the loss that published it, not one that keeps growing
        grown = min(attempt, LOSSES) if out else attempt
        began = trace.start()
        time.sleep(random.uniform(0, min(BACKOFF_CAP, BACKOFF_BASE * 2 ** grown)))
        trace.note("sleep", began, f"after loss {attempt}")
        try:
            # a poll while our intent is out only asks whether our shard's tip settled it
            # (and, if we push again, replays on that shard): the other shards' commits,
            # most of what a full fetch brings at 16 clones, wait for our next claim
            remote = fetch(registry, narrow=bool(out))
        except Offline as exc:
            return _stop(registry, outcome, exc)
        if remote is None and seen is not None and registry.part.kind == "shard":
            return _stop(registry, outcome, shard_gone(registry))  # deleted since seen
        # no one is left to carry us once the remote stood still for STILL polls; only
        # polls that found it moved count towards MOVED: a narrow poll takes a
        # fraction of a carry
        moved = remote != previous
        still = 0 if moved else still + 1
        waiting = bool(out) and previous is not None and still < STILL and moves < MOVED
        moves, previous = (moves + moved if waiting else 0), remote
        trace.note("poll", 0.0, f"waiting {moves}" if waiting else "pushing")
        if waiting and not carried(registry, remote):
            # not carried yet, and no push before the next poll: no replay either (one
            # at each poll was a third of a waiting loser's time, and CPU the claims
            # that carry it need); what it fetched and does not carry, its next claim
            # owes, as a replay that does not help says
            if unsettled(registry, remote):
                owe_fetch(registry)
            continue
        try:
            with _locked(registry):
                state = _rebase(registry, remote, help=not waiting)
        except CasFailed:
            continue
        except MassDeletion as exc:  # wiped while we raced: kept here, as before the race
            return _stop(registry, outcome, exc)
        if state.rewind:
            outcome["rewind"] = state.rewind
        if watch:
            dropped = next((r for r in state.refused if r.get("id") == watch), None)
            if dropped:
                outcome["dropped"] = dropped
            elif watch in state.results:
                outcome["result"] = state.results[watch]


def _sessions_first(registry: Registry, tip: str, seen: str | None,
                    until: float) -> Offline | MassDeletion | Deleted | Refused | None:
    """Before a lock shard's push: the sessions its pending claims name are put on the
    remote's registry branch first (a ``sync`` of it), so no lock there ever names a
    session the remote does not list.  They are there already but for a registry made
    apart (two clones ran `init` before either pushed: the loser adopts the winner's
    registry, and its own sessions are still only on its own branch) or a register whose
    push failed.  Why they could not be put there, else None: the claim stays
    unconfirmed.  Two reads of refs and one of a blob (_resharded) when the registry
    branch has nothing of ours to push (a claim's common case); the registry branch
    never on the remote is none of this: the shard's first push takes it there whole
    (sync/leases.py).  A claim routed by a shard count the remote's registry does not
    have is refused as ``Resharded`` (after this clone adopts that registry, if it has
    not yet): withdrawn and routed again (core/routing.py)."""
    main = registry.part.main if registry.part.kind == "shard" else None
    if main is None:
        return None
    local, there = main.repo.read_ref(main.ref), main.repo.read_ref(main.tracking_ref)
    resharded = _resharded(registry)
    if not resharded and (local is None or there is None or local == there
                          or not own_commits(main, confirmed_tip(main, there), local)):
        return None
    missing: set[str] = set()
    if not resharded:
        named = {op["session"] for op in own_ops(registry, seen, tip)  # type: ignore[arg-type]
                 if op.get("op") == "claim" and isinstance(op.get("session"), str)}
        missing = _not_listed(main, there, named)
        if not missing:
            return None
    if not resharded or count_at(main, local) != count_at(main, there):
        # the sessions first; or the remote's layout not adopted here yet: adopted now,
        # this clone's pending claims moved to its shards (sync/reshard.py)
        try:
            report = sync(main, deadline=max(1.0, until - time.monotonic()))
        except (MassDeletion, Deleted) as exc:
            return exc
        except Unconfirmed as exc:
            return _said_again(main, exc.details.get("remote_error") or {}, exc.message)
        if not report["pushed"]:
            return _said_again(main, report.get("remote_error") or {},
                               report.get("error") or "not pushed")
    missing = _not_listed(main, main.repo.read_ref(main.tracking_ref), missing)
    if missing:  # its register was refused there (`sync` says why)
        return Offline(main.remote, "error", f"{', '.join(sorted(missing))} not registered on "
                       f"{main.branch} there; `agent-registry sync` says why", main.branch)
    # a registry made apart in another shard count: this claim was routed by the one given
    # up now for the remote's, where its paths are in other shards (a shard the remote's
    # layout does not name is read by no one): taken out here, routed again (routing.py)
    from ..core.sharded import count_of, layout
    count = count_of(layout(main))
    if count != registry.part.count:
        from ..core.routing import Resharded
        return Resharded(f"{main.branch} on {redact(main.remote)} was made apart from this "
                         f"clone's, in {count} lock shards, not {registry.part.count}: this "
                         f"operation goes where its layout puts it")
    return None


def _resharded(registry: Registry) -> bool:
    """Whether the lock shard *registry* was routed by a shard count the remote's registry
    does not have (a registry made apart in another count, adopted by another process of
    this clone after this one routed its claim): never pushed then to a shard that layout
    does not name, or that no longer records its paths.  One blob read: the remote's
    layout.json as last fetched."""
    main = registry.part.main
    there = main.repo.read_ref(main.tracking_ref)
    return there is not None and count_at(main, there) not in (None, registry.part.count)


def _said_again(main: Registry, said: dict, fallback: str) -> Offline:
    """The Offline a sync of *main* failed with, from its ``remote_error`` (*said*):
    its message names the remote and what went wrong already, so only git's own words
    (the detail) are taken, not wrapped in that prefix twice."""
    kind = said.get("kind") or "error"
    message = said.get("message") or fallback
    head = Offline(main.remote, kind, "", main.branch).message
    return Offline(main.remote, kind, message[len(head):] if message.startswith(head)
                   else message, main.branch)


def _not_listed(main: Registry, tip: str | None, sessions: set[str]) -> set[str]:
    """The *sessions* that the registry branch at *tip* lists neither live nor ended."""
    view = View(main.repo, tip) if tip else None
    return {s for s in sessions if view is None or (
        view.session(s, strict=False) is None and view.done_session(s) is None)}


def carry_now(registry: Registry) -> None:
    """After a push of ours landed and the remote named, in the refs it advertised to it,
    another clone's intent on this branch that no fetch of ours brought: fetch the branch
    (narrow), carry it, and push once, before this process ends.  Left to the next claim
    here (which owes a fetch: note_advertised), a carry took two of this clone's claims,
    the one told and the one after it, while the loser waited (docs/benchmarks.md).  Best
    effort: our own operations are on the remote already, so what fails leaves the
    carry to the next claim, as before (a lost push: the next claim's push takes the
    carried commits along, or helps again on the new tip; anything else: it owes the
    fetch), and says nothing."""
    began = trace.start()
    try:
        seen = registry.repo.read_ref(registry.tracking_ref)
        remote = fetch(registry, narrow=True)
        with _locked(registry):
            _rebase(registry, remote, seen)
        tip = registry.repo.read_ref(registry.ref)
        pushed = push(registry, tip) if tip and tip != remote else None
        if pushed is not None and pushed.ok:
            with _locked(registry):
                _advance(registry, tip, remote)
    except (Offline, CasFailed, RegistryError, OSError):
        owe_fetch(registry)  # the next claim fetches first, and carries it
        pushed = None
    trace.note("carry", began, "landed" if pushed is not None and pushed.ok else "left")


def drop_carried(registry: Registry) -> str | None:
    """The local tip, after dropping what it carries for other clones when nothing of
    ours is pending (caller holds the flock): after a sync, local and remote are then
    one tip again, which gc rewrites."""
    tip, seen = registry.repo.read_ref(registry.ref), registry.repo.read_ref(registry.tracking_ref)
    if tip and seen and tip != seen and not own_commits(registry, seen, tip):
        _move_local(registry, seen, tip)
        return seen
    return tip


def publish_intent(registry: Registry) -> bool:
    """After LOSSES lost pushes: publish this clone's pending operations as its intent
    (sync/intents.py; once per set of them); whether one is out.  Best effort: a failed
    push leaves the clone retrying alone, as before, and publishing again after its next
    lost push."""
    with _locked(registry):
        state = load_state(registry)
        clone = state.get("clone_id") or new_clone_id()
        local = registry.repo.read_ref(registry.ref)
        base = confirmed_tip(registry)
        key = state_key(registry)
        out = state.get("intents", {}).get(key) or {}
        if local is None or base is None:
            return False
        ids = [op["id"] for op in own_ops(registry, base, local)]
        # once per set of pending operations: a replay rewrites their commits, not them
        if not ids or (out.get("ids") == ids and out.get("published")):
            return bool(ids)
        seq = state.get("intent_seq", 0) + 1
        wrapper = wrap(registry, local, clone, seq, base, len(ids))
        save_state(registry, clone_id=clone, intent_seq=seq, intents={
            **state.get("intents", {}), key: {"seq": seq, "ids": ids, "published": True}})
    try:  # a ref only this clone writes: forced, no race to lose
        landed = git_net(registry, "push", "--quiet", "--no-verify", registry.remote,
                         f"+{wrapper}:{intent_ref(registry.branch, clone)}").returncode == 0
    except Offline:
        landed = False
    if not landed:
        with _locked(registry):
            state = load_state(registry)
            out = state.get("intents", {}).get(key)
            if out and out["seq"] == seq:
                save_state(registry, intents={**state["intents"], key: {**out, "published": False}})
    return landed


def _stop(registry: Registry, outcome: dict,
          exc: Offline | MassDeletion | Deleted | NoAtomic) -> dict:
    with _locked(registry):
        _failed(registry, exc)
    return {**outcome, "pushed": False, "error": exc.message, "failure": exc,
            "remote_error": exc.to_dict()}


def _fate(registry: Registry, outcome: dict, watch: str | None) -> dict:
    """*outcome*, with the refusal of *watch* when another process's replay dropped it."""
    if watch and "dropped" not in outcome:
        dropped = next((r for r in load_state(registry).get("refused", [])
                        if r.get("id") == watch), None)
        if dropped:
            outcome["dropped"] = dropped
    return outcome


def sync(registry: Registry, deadline: float = DEFAULT_DEADLINE) -> dict:
    """Fetch, replay and push by hand.  Reports each pending claim as confirmed or
    refused, as the remote decided, and what a rewound remote made us re-apply."""
    if not registry.remote:
        raise RegistryError("sync is off: no remote (set `git config agent-registry.remote NAME`)")
    before = registry.repo.read_ref(registry.tracking_ref)
    # whether this clone has seen the branch on the remote: pushed there now, it is made
    # anew (it was gone there), else created there (the remote never had it)
    known = before is not None or confirmed_tip(registry) is not None
    try:
        remote = fetch(registry)
        if remote is None:
            check_atomic(registry)  # NoAtomic: refused in one line, nothing pushed
    except NoAtomic as exc:
        with _locked(registry):
            _failed(registry, exc)
        raise
    except Offline as exc:
        with _locked(registry):
            _failed(registry, exc)
            pending = len(_pending(registry, before))
        raise Unconfirmed(f"{exc.message}; {pending} operation(s) wait to be pushed; "
                          f"{exc.advice}", details={"pending": pending,
                                                   "remote_error": exc.to_dict()}) from None
    missing = nowhere(registry, registry.repo.read_ref(registry.ref)) if remote is None else []
    if missing:  # the registry branch deleted there: not made anew without its shards
        refused = Deleted(registry, missing)
        with _locked(registry):
            _failed(registry, refused)
        raise refused
    with _locked(registry):
        pending = [parse_op(registry.repo.commit_info(c)[2]) or {}
                   for c in _pending(registry, before)]
        if remote is not None:  # a registry made apart: its own init and layout, not
            # carried over (replay.made_apart), are no operation this sync sends
            from .replay import made_apart
            pending = [op for op in pending if not made_apart(registry, op, remote)]
        try:
            state = _rebase(registry, remote, before)
        except MassDeletion as exc:
            _failed(registry, exc)
            raise
    claims = {op["id"]: op for op in pending if op.get("op") == "claim" and op.get("id")}
    outcome = publish(registry, deadline)
    refused_ids = {r.get("id") for r in state.refused}
    rewind = state.rewind or outcome.get("rewind")
    # how many of this clone's pending operations reached the remote now
    sent = len([op for op in pending if op.get("id") not in refused_ids]) \
        if outcome["pushed"] else 0
    # the branch made there by a push of this sync (not after a lost race: another
    # clone's), whether or not it carried pending operations: never "nothing to push";
    # made anew where this clone had seen it, else created (the remote never had it)
    made = bool(outcome.get("landed") and outcome.get("created"))
    return {"remote": redact(registry.remote), "pushed": outcome["pushed"], "sent": sent,
            "made": made and known, "created": made and not known,
            "landed": bool(outcome.get("landed")),
            "error": outcome.get("error"), "remote_error": outcome.get("remote_error"),
            "tip": registry.repo.read_ref(registry.ref),
            "pending": len(pending), "refused": state.refused,
            "confirmed": [{"session": op.get("session"), "paths": op.get("paths")}
                          for i, op in claims.items()
                          if i not in refused_ids and outcome["pushed"]],
            "rewind": rewind}


def catch_up(registry: Registry) -> Offline | MassDeletion | None:
    """Fetch *registry*'s branch (with what its fetch brings: the lock shards and clone
    refs of a main branch, the main branch of a shard) and put this clone's pending
    operations on top, pushing nothing: what a read (sync/fresh.py) and a command that
    acts on another clone's session (kill, finish, end, handoff) do before deciding.
    Returns why it could not (the clone's copy then decides), or None."""
    before = registry.repo.read_ref(registry.tracking_ref)
    try:
        remote = fetch(registry)
        if registry.repo.read_ref(registry.ref) is None:
            return None  # nothing of ours to replay, and a read makes no local branch: the
            # tip is the tracking ref then (Registry.tip), which the fetch moved
        with _locked(registry):
            # no helping here: what it would carry for other clones waits for a push
            _rebase(registry, remote, before, help=False)
    except (Offline, MassDeletion) as exc:
        with _locked(registry):
            _failed(registry, exc)
        return exc
    except CasFailed:
        pass  # another process of this clone moved the branch meanwhile: it holds the fetch
    return None


def _pending(registry: Registry, fallback: str | None = None) -> list[str]:
    return own_commits(registry, confirmed_tip(registry, fallback),
                       registry.repo.read_ref(registry.ref))


def sync_state(registry: Registry) -> dict:
    """The sync line: remote, ahead/behind, last success, last error, last rewind."""
    state = load_state(registry)
    local = registry.repo.read_ref(registry.ref)
    remote = registry.repo.read_ref(registry.tracking_ref)
    ahead = behind = 0
    if local and remote and local != remote:
        counts = registry.repo.git("rev-list", "--left-right", "--count",
                                   f"{local}...{remote}", check=False).stdout.split()
        if len(counts) == 2:
            behind = int(counts[1])
            # not counting what this clone carried for others (sync/intents.py)
            ahead = len(own_commits(registry, remote, local)) if int(counts[0]) else 0
    elif local and not remote:
        ahead = len(pending_commits(registry, None, local))
    fetched = freshness.last_fetch(registry.repo.info.common_dir, registry.branch)
    return {"enabled": True, "remote": redact(registry.remote), "ahead": ahead,
            "behind": behind, "last_fetch": iso(fetched) if fetched else None,
            "last_success": state.get("last_success"),
            "last_error": state.get("last_error"), "last_error_kind": state.get("last_error_kind"),
            "refused": _recent(state.get("refused", []), registry.clock())[-5:],
            "rewind": state.get("last_rewind")}


def _recent(refused: list, now: float) -> list[dict]:
    """The refusals of the last REFUSED_SHOWN_FOR seconds (one with no readable time is
    as old as it can be)."""
    return [r for r in refused if isinstance(r, dict) and isinstance(r.get("at"), str)
            and now - (parse_iso(r["at"]) or 0.0) <= REFUSED_SHOWN_FOR]


def unconfirmed_claims(registry: Registry) -> set[tuple[str, str]]:
    """(session, path) of claims committed here but not yet on the remote."""
    if not registry.remote:
        return set()
    out = set()
    for commit in _pending(registry, registry.repo.read_ref(registry.tracking_ref)):
        op = parse_op(registry.repo.commit_info(commit)[2]) or {}
        if op.get("op") == "claim":
            out.update((op["session"], p) for p in op.get("paths", []))
    return out


# -- reading a remote without a clone -------------------------------------------------

def remote_snapshot(url: str, branch: str = "agent-registry", where: str | None = None) -> dict:
    """Sessions and locks straight from *url*, fetched into a temporary object store
    made with the remote's object format (SHA-1 or SHA-256), within the network timeout
    git config gives in *where* (a repository's, else the user's)."""
    if url.startswith("-"):  # would be read as an option by git
        raise BadInput(f"invalid remote URL {redact(url)!r}")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") or
           k.startswith(("GIT_CONFIG", "GIT_SSH", "GIT_ASKPASS", "GIT_TERMINAL"))}
    said = run_git(["config", "--get", "agent-registry.networktimeout"], cwd=where, env=env,
                   check=False).stdout.decode().strip()
    try:
        timeout = float(said) if said and float(said) > 0 else NETWORK_TIMEOUT
    except ValueError:
        timeout = NETWORK_TIMEOUT
    import re  # here, not at the top: a claim through a remote needs neither
    import tempfile
    with tempfile.TemporaryDirectory(prefix="agent-registry-remote-") as tmp:
        proc = _snapshot_fetch(tmp, url, branch, env, "sha1", timeout)
        server = re.search(r"mismatched algorithms: client \w+; server (\w+)",
                           proc.stderr.decode(errors="replace"))
        if proc.returncode != 0 and server:
            proc = _snapshot_fetch(os.path.join(tmp, "again"), url, branch, env, server[1],
                                   timeout)
            tmp = os.path.join(tmp, "again")
        if proc.returncode != 0:
            failure = Offline.from_stderr(url, proc.stderr.decode(errors="replace"),
                                          f"git fetch exited {proc.returncode}", branch)
            raise NotFound(f"cannot read {branch} from {failure.remote}: {failure.detail}",
                           details={"remote_error": failure.to_dict()})
        with Registry.open(tmp, branch=branch, config={}) as registry:
            sessions = registry.sessions()
            return {"remote": redact(url), "tip": registry.repo.read_ref(registry.ref),
                    "sessions": [s.to_dict() for s in sessions], "locks": registry.locks()}


def _snapshot_fetch(where: str, url: str, branch: str, env: dict[str, str],
                    object_format: str, timeout: float) -> Completed:
    run_git(["init", "--bare", "-q", f"--object-format={object_format}", where], env=env)
    try:
        # with the lock shards and the clone refs (layouts 2 and 3): the whole view reads
        # them; a pattern that matches nothing fetches nothing and is no error
        return run_git(["--git-dir", where, "fetch", "--quiet", "--depth", "1", "--no-tags", url,
                        f"+refs/heads/{branch}:refs/heads/{branch}",
                        f"+refs/heads/{branch}-shards/*:refs/heads/{branch}-shards/*",
                        f"+refs/heads/{branch}-clones/*:refs/heads/{branch}-clones/*"],
                       env=env, check=False, timeout=timeout)
    except TimedOut:
        raise NotFound(f"cannot read {branch} from {redact(url)}: no answer within "
                       f"{timeout:g} s", details={"remote_error": {
                           "kind": "unreachable", "message": "no answer"}}) from None


class RemoteCommitter:
    """What a registry with a remote commits and reports through (core/registry.py)."""
    apply = staticmethod(apply_synced)
    state = staticmethod(sync_state)
    unconfirmed = staticmethod(unconfirmed_claims)
    refresh = staticmethod(sync)  # bring a branch up to date before deciding against it
    catch_up = staticmethod(catch_up)  # fetch and replay, no push: before acting or reading


COMMITTER = RemoteCommitter()  # what sync.Registry hands every registry with a remote
