"""The registry as a Python API: one transaction over one ref, built from its parts.

Every mutation is an *operation*: a small JSON-able dict (``{"op": "claim", ...}``)
applied to the ref's tip inside one critical section:

    flock  ->  read tip  ->  apply (validate, decide)  ->  write objects  ->
    update-ref NEW OLD (the compare-and-swap)  ->  unlock

The operation is recorded in the commit's ``Registry-*`` trailers, so the branch history
is an operation log that sync can replay on top of another tip.  A refused operation
raises before anything is written.  The clock is injectable so tests of staleness need no
sleeping.

A Registry is made of passed-in parts (docs/design.md, "The parts of a registry"): the
ref it writes (core/refs.py, and the shards', clone refs' and messages branch's parts in
core/sharded.py, core/cloned.py, core/messages_branch.py), the committer
(core/committer.py) and, on the registry branch, the router (core/routing.py).  The
public API's calls are mixed in from the operation families that make them
(core/sessions.py, core/locks.py, core/diary.py): each builds one operation.
"""
from __future__ import annotations

import os
import time
TYPE_CHECKING = False
if TYPE_CHECKING:  # for annotations only: collections costs a one-shot command 1 ms
    from collections.abc import Callable, Iterable

from ..branch.pathcase import rule_of
from ..branch.records import Session, generated_at
from ..branch.shards import LAYOUT, require_writable
from ..branch.staleness import FirstSeen
from ..branch.view import View
from ..errors import BadInput, NotFound, Refused, RegistryError
from ..store.git import CasFailed, Repo, branch_name, discover, read_config, remote_name
from ..store.lazyre import ALNUM, spelled_with
from ..store.procinfo import hostname
from . import sharded
# write-path modules (routing, committer, flock, trailers) are imported where a write
# needs them: `lock check` and `status` read only, and each module is a one-shot
# command's stat, read and unmarshal (tests/test_import_budget.py: READ_PATH)
from .diary import DiaryCalls
from .kill import KillCalls
from .locks import LockCalls
from .operations import OPERATIONS, Outcome, known
from .refs import RegistryBranch
from .sessions import SessionCalls
from .shapes import check as check_shape

CAS_ATTEMPTS = 20
PAGE_REFRESH = 60  # seconds a heartbeat may leave registry.md as an earlier commit rendered it
_BRANCH_FIRST = ALNUM | {"_"}  # [A-Za-z0-9_][A-Za-z0-9._/-]{0,200}
_BRANCH_CHARS = ALNUM | frozenset("_./-")


class Registry(SessionCalls, LockCalls, DiaryCalls, KillCalls):
    """One transaction over one ref, built from passed-in parts (core/refs.py): *part*,
    the ref it writes (default: the registry branch), and *committer* (core/committer.py:
    the local flock and compare-and-swap, or sync's through a remote)."""

    def __init__(self, repo: Repo, *, branch: str | None = None,
                 clock: Callable[[], float] = time.time, host: str | None = None,
                 config: dict[str, str] | None = None, part=None, committer=None) -> None:
        self.repo = repo
        self.config = config if config is not None else read_config(repo.info.git_dir)
        if repo.path_rule is None:  # how names compare here: one rule per repository
            repo.path_rule = rule_of(self.config)
        self.branch = branch or branch_name(self.config)
        if not spelled_with(self.branch, _BRANCH_FIRST, _BRANCH_CHARS, 201) or ".." in self.branch \
                or self.branch.endswith((".lock", "/", ".")):
            raise BadInput(f"invalid registry branch name {self.branch!r}")
        self.ref = f"refs/heads/{self.branch}"
        self.part = part if part is not None else RegistryBranch()
        # what commits through the remote, handed in (sync.Registry: sync's); without a
        # remote (also one turned off meanwhile: a hub that does not answer) LOCAL commits
        self.committer = committer
        self.clock = clock
        self.host = host or hostname()
        self.lock_file = repo.state_path("lock")
        self.seen = FirstSeen(repo.state_path("heartbeats-seen.json"))
        self.warnings: list[str] = []  # unreadable files met by the last read, by name
        self.bound: dict | None = None  # the owner process the last register chose, and why
        # {"confirmed": False, "remote_error": {...}} when the last change was committed
        # here but could not be pushed (agent_registry.sync.remote); {} otherwise
        self.unpushed: dict = {}

    def derived(self, branch: str, part) -> "Registry":
        """The registry of another ref of this one (a lock shard, the clone ref, the
        messages branch): this registry's class, repository, clock, host, config and
        committer, on *branch*, with *part*."""
        return type(self)(self.repo, branch=branch, clock=self.clock, host=self.host,
                          config=self.config, part=part, committer=self.committer)

    @classmethod
    def open(cls, path: str = ".", **kwargs) -> "Registry":
        return cls(Repo(discover(path)), **kwargs)

    def close(self) -> None:
        if self.part.main is None:  # a shard's or a clone ref's repository is its main's
            self.repo.close()

    def __enter__(self) -> "Registry":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- the transaction -------------------------------------------------------------
    @property
    def remote(self) -> str | None:
        """The remote this clone syncs with: ``agent-registry.remote``, else ``origin``
        when it exists; ``none`` turns sync off."""
        return remote_name(self.config)

    @property
    def tracking_ref(self) -> str | None:
        return f"refs/remotes/{self.remote}/{self.branch}" if self.remote else None

    @property
    def fetch_also(self) -> tuple[str, ...]:
        """What a fetch of this ref brings along in the same connection (its part)."""
        return self.part.fetch_also(self)

    def tip(self) -> str | None:
        """The local branch tip; a clone that never had the branch starts from what it
        fetched (``git clone`` makes the remote-tracking ref, not the branch)."""
        tip = self.repo.read_ref(self.ref)
        if tip is None and self.tracking_ref:
            tip = self.repo.read_ref(self.tracking_ref)
        return tip

    def view(self) -> View:
        """A read-only snapshot of the branch tip (with the lock shards overlaid, in the
        layout ``init`` makes)."""
        if self.part.routes:
            marker = sharded.layout(self)
            if marker["format"] >= 2:
                return sharded.whole_view(self, sharded.count_of(marker))
        return self.view_at(self.tip())

    def decides_alone(self, tip: str, op: dict) -> bool:
        """Whether *op*, decided on this clone's *tip*, depends on nothing another clone
        may have pushed since except this ref itself, so the remote committer may commit
        it before fetching (the part says: core/refs.py)."""
        return self.part.decides_alone(self, tip, op)

    def view_at(self, tip: str | None) -> View:
        """The view an operation is decided on, at commit *tip* of this ref."""
        return self.part.view_at(self, tip)

    def apply(self, op: dict) -> dict:
        """Apply one operation and commit it; returns its result.  With a remote, the
        operation is also confirmed by a push (the remote committer).  In the sharded
        layout a lock operation goes to the shards of its targets (core/sharded.py)."""
        from . import routing
        self._handler(op)  # an unknown operation fails before anything happens
        if op["op"] in routing.ROUTED and self.part.routes:
            return routing.route(self, op)
        return self.apply_main(op)

    def apply_main(self, op: dict) -> dict:
        """Apply *op* to this registry's own ref, through its committer (with a remote,
        the flock is taken for the local commit only, never across the network)."""
        from . import routing
        from .committer import LOCAL
        self.unpushed = {}
        try:
            return (self.synced() if self.remote else LOCAL).apply(self, op)
        except Refused as exc:  # converted by another clone since we decided: go there
            if not exc.details.get("resharded") or op["op"] not in routing.LOCK_OPS \
                    or not self.part.routes:
                raise
            # a new id: the refusal of this one is on record (sync.json), and the
            # shards' sync would find it and report it as theirs
            return routing.route(self, dict(op, id=os.urandom(8).hex()))

    def apply_locally(self, op: dict) -> dict:
        """Commit *op* on the local tip (caller holds the flock); a lost CAS is retried."""
        error = ""
        for _ in range(CAS_ATTEMPTS):
            old = self.repo.read_ref(self.ref)
            base = self.tip()
            commit, result = self.build(base, op)
            if commit is None:
                return result
            try:
                self.repo.update_ref(self.ref, commit, old, f"agent-registry: {op['op']}")
            except CasFailed as exc:
                error = str(exc)
                continue  # the ref moved under us (a fetch, a user): decide again
            return result
        raise RegistryError(f"could not move {self.ref} after {CAS_ATTEMPTS} attempts: {error}")

    def knows(self, op: dict) -> bool:
        return self._handler(op, strict=False) is not None

    def _handler(self, op: dict, strict: bool = True) -> Callable[[View, dict], "Outcome"] | None:
        """The function applying *op*, from the operation table (importing the module
        of one defined outside the core on first need); unknown ones raise (or give
        None when not *strict*)."""
        if known(op["op"]):
            return lambda view, op: OPERATIONS[op["op"]](self, view, op)
        if strict:
            raise BadInput(f"unknown operation {op['op']!r}")
        return None

    def build(self, base: str | None, op: dict, note: str = "",
              extra: tuple[str, ...] = ()) -> tuple[str | None, dict]:
        """Apply *op* on commit *base* and write the resulting commit (not moving any
        ref).  Returns (commit or None when nothing changes, result); raises when the
        operation is refused.  *note* is appended to the message, and *extra* to its
        trailers (sync's replays, and its help for another clone)."""
        from . import routing
        view = self.view_at(base)
        # a layout this version does not write (a newer one): refuse in one line naming
        # the version to install, before deciding anything on it
        marker = view.read(LAYOUT)
        require_writable(marker)
        if marker is not None and op["op"] in routing.LOCK_OPS and self.part.routes:
            raise routing.Resharded(f"the registry was split into lock shards before this "
                                    f"{op['op']} reached the remote: run it again")
        check_shape(op)  # also a replayed operation, read back from a commit
        try:
            outcome = self._handler(op)(view, op)
        finally:  # an unreadable record is reported, whether the operation went through or not
            self.warnings = view.warnings
        if outcome.subject is None or not view.writes:
            return None, outcome.result
        return (self.write_commit(view, op, outcome.subject, note,
                                  tuple(extra) + tuple(outcome.trailers),
                                  page_lasts=outcome.page_lasts), outcome.result)

    def write_commit(self, view: View, op: dict, subject: str, note: str = "",
                     extra: Iterable[str] = (), page_lasts: bool = False) -> str:
        """The commit of *op* on *view*, registry.md rendered again unless the operation
        leaves a recent page true (*page_lasts*, Outcome)."""
        from ..branch.trailers import trailers
        at = op["at"]
        if not (page_lasts and self.page_is_recent(view, at)):
            for path, data in self.pages(view, at, subject).items():
                view.write(path, data)
        tree = self.repo.edit_tree(view.tree, view.writes)
        author = op.get("session") or op.get("by") or "agent-registry"
        message = subject + "\n\n" + (note + "\n\n" if note else "") + \
            trailers(op, extra=tuple(extra))
        return self.repo.commit_tree(tree, [view.tip] if view.tip else [], message,
                                     f"{author} <{author}@{self.host}>", int(at))

    @staticmethod
    def page_is_recent(view: View, at: float) -> bool:
        """Whether the registry.md on *view* was rendered less than PAGE_REFRESH seconds
        before *at*: an operation whose Outcome says the page lasts (a heartbeat) then
        leaves the page as it is.  A heartbeat changes only heartbeat times, the page
        counts its ages back from when it was rendered, and agents beat many times a
        minute: rendering it reads every live session file, and for each beat it would be
        written again for no reader (issue 26).  A session back from a long pause is
        shown live again within PAGE_REFRESH."""
        rendered = generated_at(view.read("registry.md"))
        return rendered is not None and 0 <= at - rendered < PAGE_REFRESH

    def pages(self, view: View, at: float, subject: str) -> dict[str, bytes]:
        """What every commit on this ref renders: registry.md and README.md (its part)."""
        return self.part.pages(self, view, at, subject)

    def sync_state(self) -> dict:
        """Where this clone stands against its remote (see agent_registry.sync.remote)."""
        if not self.remote:
            return {"enabled": False, "detail": "no remote configured"}
        return self.synced().state(self)

    def catch_up(self) -> None:
        """Before acting on a session another clone may have registered or changed
        (kill, finish, end, handoff): with a remote, fetch this branch (with the lock
        shards and clone refs its fetch brings) and put this clone's pending operations
        on top, pushing nothing.  Offline, this clone's copy decides and a warning says
        why."""
        if not self.remote:
            return
        failure = self.synced().catch_up(self)
        if failure is not None:
            self.warnings.append(f"could not fetch before deciding: {failure.message} "
                                 "(deciding on this clone's copy)")

    def synced(self):
        """The committer through this registry's remote; refuses (fails closed) when none
        was handed in, rather than commit locally what the remote would never see."""
        if self.committer is None:
            from .committer import missing
            raise missing(self)
        return self.committer

    def settle_layout(self) -> list[str]:
        """Bring the registry to the layout this version writes before an operation
        decides where it goes (the messages' calls, which commit on another ref than
        this one); the core writes whatever it meets, ``sync.Registry`` converts an
        older layout.  Returns what to tell the caller."""
        return []

    def new_op(self, kind: str, **fields) -> dict:
        """A new operation *kind* with *fields*, stamped with the time and a unique id
        (what apply() takes; core/operations.py finds the handler that applies it)."""
        return {"op": kind, "at": self.clock(), "id": os.urandom(8).hex(), **fields}

    # -- setup -----------------------------------------------------------------------
    def init(self, shards: int | None = None) -> dict:
        """Create the orphan registry branch if it does not exist (idempotent); with a
        remote that already has it, adopt the remote's.  *shards*: the layout of a new
        registry (sync.Registry makes 16 lock shards unless told 0, one branch)."""
        if self.repo.read_ref(self.ref) and not self.remote:
            return {"branch": self.branch, "created": False}
        return {"branch": self.branch, **self.create(shards)}

    def create(self, shards: int | None = None) -> dict:
        """The init operation: a new branch (the core makes one branch, whatever
        *shards* says), or the remote's adopted."""
        return self.apply(self.new_op("init"))

    # -- helpers ---------------------------------------------------------------------
    def live_session(self, view: View, sid: str) -> Session:
        session = view.session(sid)
        if session is not None:
            return session
        if view.done_session(sid):
            raise Refused(f"session {sid} has ended")
        raise self.unknown(view, sid)

    def unknown(self, view: View | None, sid: str) -> NotFound:
        """The error for an unknown session id, naming the live ids likeliest meant
        (``unknown session kimi-typo; did you mean kimi-1796160374-de95?``); ``details``
        carry them as ``closest``.  Read only on this error path: O(live sessions)."""
        from ..branch.sessionids import closest, unknown_text
        from ..branch.shards import internal
        view = view if view is not None else self.view()
        try:
            # a clone ref's view lists only the sessions beating on it: ask the main
            # branch it reads sessions from (its mains) for every live one
            live = list(dict.fromkeys(s.id for v in getattr(view, "mains", None) or [view]
                                      for s in v.live_sessions() if not internal(s)))
        except (RegistryError, OSError):
            live = []
        return NotFound(unknown_text(sid, live),
                        details={"session": sid, "closest": closest(sid, live)})
