"""The registry as a Python API: sessions and locks on the registry branch.

Every mutation is an *operation*: a small JSON-able dict (``{"op": "claim", ...}``)
applied to the branch tip inside one critical section:

    flock  ->  read tip  ->  apply (validate, decide)  ->  write objects  ->
    update-ref NEW OLD (the compare-and-swap)  ->  unlock

The operation is recorded in the commit's ``Registry-*`` trailers, so the branch history
is an operation log that sync can replay on top of another tip.  A refused operation
raises before anything is written.  The clock is injectable so tests of staleness need no
sleeping.

Over 400 lines: the Registry class is the public Python API (one short method per
command, each building one operation) and the transaction; the operations' handlers live
in one module per family (core/sessions.py, locks.py, diary.py, messages.py).
"""
from __future__ import annotations

import os
import time
TYPE_CHECKING = False
if TYPE_CHECKING:  # for annotations only: collections costs a one-shot command 1 ms
    from collections.abc import Callable, Iterable, Iterator

from ..branch import paths as P
from ..branch.pathcase import rule_of
from ..errors import BadInput, NotFound, Refused, RegistryError
from ..store.git import CasFailed, Repo, branch_name, discover, read_config, remote_name
from ..store.procinfo import (backend as procinfo_backend, choose_owner, hostname,
                               is_alive, protected_kind, same_process)
from ..branch.records import (LIVE, Holder, Session, UnreadableRecord, generated_at, iso,
                              load_session, parse_iso, select_sessions, status_named)
from ..branch.clones import Clones, MainView
from ..branch.clones import fetch_refspec as clones_refspec
from ..branch.shards import LAYOUT, require_writable
from ..branch.staleness import DEFAULT_TTL, FirstSeen, ahead_by, session_stale_reason, stale_reason
from ..branch.trailers import trailers
from .operations import OPERATIONS, Outcome, known
from . import sharded
from .shapes import check as check_shape
from ..branch.view import View, context_path, done_path, live_path
from ..store.lazyre import ALNUM, spelled_with

CAS_ATTEMPTS = 20
PAGE_REFRESH = 60  # seconds a heartbeat may leave registry.md as an earlier commit rendered it

# How a clone with a remote commits: sync.remote hands its committer in when it is
# imported (apply: fetch, replay, push; state: the sync line; unconfirmed: claims the
# remote has not seen).  The core never imports sync: every face that opens a registry
# imports sync.remote first, and a registry with a remote and no committer refuses.
_remote_committer = None


def use_remote_committer(committer) -> None:
    """Commit through *committer* whenever a registry has a remote (sync.remote calls it)."""
    global _remote_committer
    _remote_committer = committer
_BRANCH_FIRST = ALNUM | {"_"}  # [A-Za-z0-9_][A-Za-z0-9._/-]{0,200}
_BRANCH_CHARS = ALNUM | frozenset("_./-")


FILE_LOCK_ENV = "AGENT_REGISTRY_FILE_LOCK"


class file_lock:
    """``with file_lock(path, on_wait):`` an exclusive OS lock on *path* (flock; filelock
    on Windows), released when the block ends or the process dies, so a kill -9 never
    leaves it held.  *on_wait* is called once before blocking, when another process holds
    it.  ``$AGENT_REGISTRY_FILE_LOCK=filelock`` takes the filelock branch where fcntl
    exists too (tests).  A class, not a contextlib generator: contextlib is an import
    every one-shot command would pay for."""

    def __init__(self, path: str, on_wait: Callable[[], None] | None = None) -> None:
        self.path, self.on_wait = path, on_wait
        self._fd: int | None = None
        self._portable = None  # filelock.FileLock, where fcntl is not used

    def __enter__(self) -> None:
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        try:
            if os.environ.get(FILE_LOCK_ENV) == "filelock":
                raise ImportError(FILE_LOCK_ENV)
            import fcntl
        except ImportError:  # Windows: the platform-conditional dependency
            from filelock import FileLock, Timeout
            self._portable = FileLock(self.path)
            try:
                self._portable.acquire(timeout=0 if self.on_wait else -1)
            except Timeout:
                self.on_wait()  # type: ignore[misc]
                self._portable.acquire()
            return
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | (fcntl.LOCK_NB if self.on_wait else 0))
            except BlockingIOError:
                self.on_wait()  # type: ignore[misc]
                fcntl.flock(self._fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(self._fd)
            raise

    def __exit__(self, *exc) -> None:
        if self._portable is not None:
            self._portable.release()
        else:
            os.close(self._fd)  # closing releases the lock, also when we are killed


class Registry:
    is_shard = False  # the registry of one lock shard (core/sharded.py)
    is_clone = False  # the registry of this clone's own ref (core/cloned.py)

    def __init__(self, repo: Repo, *, branch: str | None = None,
                 clock: Callable[[], float] = time.time, host: str | None = None,
                 config: dict[str, str] | None = None) -> None:
        self.repo = repo
        self.config = config if config is not None else read_config(repo.info.git_dir)
        if repo.path_rule is None:  # how names compare here: one rule per repository
            repo.path_rule = rule_of(self.config)
        self.branch = branch or branch_name(self.config)
        if not spelled_with(self.branch, _BRANCH_FIRST, _BRANCH_CHARS, 201) or ".." in self.branch \
                or self.branch.endswith((".lock", "/", ".")):
            raise BadInput(f"invalid registry branch name {self.branch!r}")
        self.ref = f"refs/heads/{self.branch}"
        self.clock = clock
        self.host = host or hostname()
        self.lock_file = repo.state_path("lock")
        self.seen = FirstSeen(repo.state_path("heartbeats-seen.json"))
        self.warnings: list[str] = []  # unreadable files met by the last read, by name
        self.bound: dict | None = None  # the owner process the last register chose, and why
        # {"confirmed": False, "remote_error": {...}} when the last change was committed
        # here but could not be pushed (agent_registry.sync.remote); {} otherwise
        self.unpushed: dict = {}

    @classmethod
    def open(cls, path: str = ".", **kwargs) -> "Registry":
        return cls(Repo(discover(path)), **kwargs)

    def close(self) -> None:
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
        """What a fetch of this branch brings along: its lock shards, so a read after a
        sync sees other clones' claims (a shard's fetch brings the main branch instead)."""
        shards = f"{self.branch}-shards/*"
        return (f"+refs/heads/{shards}:refs/remotes/{self.remote}/{shards}",
                clones_refspec(self.remote, self.branch))

    def tip(self) -> str | None:
        """The local branch tip; a clone that never had the branch starts from what it
        fetched (``git clone`` makes the remote-tracking ref, not the branch)."""
        tip = self.repo.read_ref(self.ref)
        if tip is None and self.tracking_ref:
            tip = self.repo.read_ref(self.tracking_ref)
        return tip

    def view(self) -> View:
        """A read-only snapshot of the branch tip (with the lock shards overlaid, in the
        sharded layout)."""
        if not (self.is_shard or self.is_clone):
            marker = sharded.layout(self)
            if marker["format"] >= 2:
                return sharded.whole_view(self, sharded.count_of(marker))
        return self.view_at(self.tip())

    def decides_alone(self, tip: str, op: dict) -> bool:
        """Whether *op*, decided on this clone's *tip*, depends on nothing another clone
        may have pushed since except this branch itself, so the remote committer may
        commit it before fetching: a release, or a claim that meets no other session's
        lock (core/sharded.py ``judges_no_holder``; a lock shard's are its own).  In
        the single-branch layout that branch holds the locks; a clone ref holds none."""
        return not self.is_clone and sharded.judges_no_holder(View(self.repo, tip), op)

    def view_at(self, tip: str | None) -> View:
        """The view an operation is decided on, at commit *tip* of this branch (with the
        clone refs' heartbeats and diaries overlaid, in layout format 3)."""
        return MainView(self.repo, tip, Clones(self.repo, self.branch, self.remote))

    def apply(self, op: dict) -> dict:
        """Apply one operation and commit it; returns its result.  With a remote, the
        operation is also confirmed by a push (the remote committer).  In the sharded
        layout a lock operation goes to the shards of its targets (core/sharded.py)."""
        self._handler(op)  # an unknown operation fails before anything happens
        if op["op"] in sharded.ROUTED and not (self.is_shard or self.is_clone):
            return sharded.route(self, op)
        return self.apply_main(op)

    def apply_main(self, op: dict) -> dict:
        """Apply *op* to this registry's own branch."""
        self.unpushed = {}
        try:
            if self.remote:  # takes the flock for the local commit only, never across the network
                return self._remote_committer().apply(self, op)
            with file_lock(self.lock_file):
                return self.apply_locally(op)
        except Refused as exc:  # converted by another clone since we decided: go there
            if not exc.details.get("resharded") or op["op"] not in sharded.LOCK_OPS \
                    or self.is_shard or self.is_clone:
                raise
            # a new id: the refusal of this one is on record (sync.json), and the
            # shards' sync would find it and report it as theirs
            return sharded.route(self, dict(op, id=os.urandom(8).hex()))

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
        view = self.view_at(base)
        # a layout this version does not write (a newer one): refuse in one line naming
        # the version to install, before deciding anything on it
        marker = view.read(LAYOUT)
        require_writable(marker)
        if marker is not None and op["op"] in sharded.LOCK_OPS \
                and not (self.is_shard or self.is_clone):
            raise sharded.Resharded(f"the registry was split into lock shards before this "
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

    def pages(self, view: View, at: float, subject: str,
              locks: View | None = None) -> dict[str, bytes]:
        """What every commit re-renders: registry.md and the branch README.md (the
        messages branch's registry renders its own: core/messages_branch.py).  In lock
        shards the page lists every shard's locks: *locks*, else the shards as this
        clone has them overlaid on *view* (core/sharded.py ``locks_view``)."""
        from ..branch.render import branch_readme, registry_md  # not for a recent heartbeat
        if locks is None:
            locks = sharded.locks_view(self, view)
        return {"registry.md": registry_md(view, at, subject, self.branch, locks),
                "README.md": branch_readme(self.branch)}

    def sync_state(self) -> dict:
        """Where this clone stands against its remote (see agent_registry.sync.remote)."""
        if not self.remote:
            return {"enabled": False, "detail": "no remote configured"}
        return self._remote_committer().state(self)

    def catch_up(self) -> None:
        """Before acting on a session another clone may have registered or changed
        (kill, finish, end, handoff): with a remote, fetch this branch (with the lock
        shards and clone refs its fetch brings) and put this clone's pending operations
        on top, pushing nothing.  Offline, this clone's copy decides and a warning says
        why."""
        if not self.remote:
            return
        failure = self._remote_committer().catch_up(self)
        if failure is not None:
            self.warnings.append(f"could not fetch before deciding: {failure.message} "
                                 "(deciding on this clone's copy)")

    def _remote_committer(self):
        """The committer of a registry with a remote; refuses (fails closed) when none was
        handed in, rather than committing locally what the remote never sees."""
        if _remote_committer is None:
            raise RegistryError(f"this clone syncs with {self.remote!r} but the sync module "
                                "is not loaded: import agent_registry.sync.remote first")
        return _remote_committer

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

    # -- sessions --------------------------------------------------------------------
    def register(self, sid: str, *, provider: str, ai_version: str = "", working_on: str = "",
                 space: Iterable[str] = (), todo_present: Iterable[str] = (),
                 pid: int | None = None, pid_from: str = "--pid",
                 notify_started: str = "", tags: Iterable[str] = (),
                 resume: bool = False) -> Session:
        """Register (or re-register) session *sid*.  Its owner process is *pid* (given
        by *pid_from*), else $AGENT_REGISTRY_PID, else an ancestor that is a known agent
        runtime, else none (procinfo.choose_owner); ``self.bound`` says which and why.
        A live *sid* is refused (Refused) unless this owner is its vouched-for owner
        already, that owner has exited on this host, or *resume* takes it over."""
        P.validate_session_id(sid)
        for label, value in (("provider", provider), ("ai-version", ai_version),
                             ("working-on", working_on), ("notify-started", notify_started)):
            P.validate_text(label, value)
        if not provider:
            raise BadInput("--provider is required")
        for tag in tags:
            P.validate_tag(tag)
        try:
            owner = choose_owner(pid, pid_from)
        except ValueError as exc:
            raise BadInput(str(exc)) from None
        info = self.repo.info
        fields = {
            "provider": provider, "ai_version": ai_version, "working_on": working_on,
            "space": self.targets(space), "todo_present": P.csv_items(todo_present),
            "project": info.toplevel or info.git_dir, "repo": repo_name(info.common_dir),
            "git_branch": _current_branch(info.git_dir), "host": self.host,
            "pid": owner.pid, "pid_start": owner.start, "owner": owner.how,
            "cmdline": owner.cmdline,
            # only when given: a re-register keeps the text the first one stored
            **({"notify_started": notify_started} if notify_started else {}),
            **({"tags": list(dict.fromkeys(tags))} if tags else {}),
        }
        self.bound = owner.to_dict()
        extra = {"resume": True} if resume else {}
        return Session.from_dict(self.apply(self.new_op("register", session=sid, fields=fields,
                                                        **extra))["session"])

    def update(self, sid: str, **changes) -> Session:
        P.validate_session_id(sid)
        fields = {}
        for key, value in changes.items():
            if value is None:
                continue
            if key in ("todo_past", "todo_present", "todo_future"):
                value = P.csv_items(value)
            elif key == "space":
                value = self.targets(value)
            elif key == "status":
                value = status_named(value)
            elif key in ("working_on", "issues"):
                P.validate_text(key.replace("_", "-"), value)
            else:
                raise BadInput(f"unknown session field {key!r}")
            fields[key] = value
        if not fields:
            raise BadInput("nothing to update: pass at least one field")
        return Session.from_dict(self.apply(self.new_op("update", session=sid, fields=fields))["session"])

    def finish(self, sid: str, status: str = "Finished", notify_executed: str = "") -> dict:
        P.validate_session_id(sid)
        P.validate_text("notify-executed", notify_executed)
        extra = {"notify_executed": notify_executed} if notify_executed else {}
        return self.apply(self.new_op("finish", session=sid, status=status, **extra))

    def close_session(self, view: View, session: Session, status: str, at: float) -> list[str]:
        """End *session* in *view* (for an operation's handler): release what it holds
        and move it among the ended."""
        released = []
        for target in session.locks:
            lock = view.lock(target)
            if lock and lock.holder(session.id):
                lock.holders = [h for h in lock.holders if h.session != session.id]
                view.put_lock(lock)
                released.append(target)
        session.locks, session.status, session.finished_at = [], status, iso(at)
        view.put_session(session)
        return released

    def handoff(self, sid: str, path: str) -> Session:
        P.validate_session_id(sid)
        P.validate_text("handoff path", path)
        if not path:
            raise BadInput("empty handoff path")
        return Session.from_dict(self.apply(self.new_op("handoff", session=sid, path=path))["session"])

    def context_log(self, sid: str, text: str) -> dict:
        P.validate_session_id(sid)
        P.validate_text("diary text", text, allow_newlines=True)
        if not text.strip():
            raise BadInput("empty diary text")
        return self.apply(self.new_op("context-log", session=sid, text=text))

    def diary(self, sid: str) -> dict:
        """``{"session", "path", "diary"}``: the diary ``context log`` wrote, as on the
        branch (the predecessor's verify step reads it back); NotFound for an unknown
        session or one that logged nothing yet."""
        P.validate_session_id(sid)
        view = self.view()
        path = context_path(sid)
        raw = view.read(path)
        if raw is None:
            if view.session(sid, strict=False) is None and view.done_session(sid) is None:
                raise self.unknown(view, sid)
            raise NotFound(f"session {sid} has no diary yet (`agent-registry context log`)")
        return {"session": sid, "path": path, "diary": raw.decode("utf-8", errors="replace")}

    def session_names(self, names: Iterable[str]) -> set[str]:
        """Which of *names* are registered sessions, live or ended (direct lookups)."""
        candidates = [n for n in names if P.is_session_id(n)]
        if not candidates:
            return set()
        view = self.view()
        return {n for n in candidates
                if view.read(live_path(n)) is not None or view.read(done_path(n)) is not None}

    def session(self, sid: str) -> Session:
        P.validate_session_id(sid)
        view = self.view()
        found = view.session(sid) or view.done_session(sid)
        if found is None:
            raise self.unknown(view, sid)
        return found

    def sessions(self, *, include_ended: bool = False) -> list[Session]:
        view = self.view()
        out = view.live_sessions()
        if include_ended and view.tree:
            files = {f"sessions/done/{shard}/{name}": oid
                     for shard in view.names("sessions/done")
                     for name, oid in view.entries(f"sessions/done/{shard}").items()}
            for path, raw in zip(files, self.repo.read_blobs(list(files.values()))):
                try:
                    out.append(load_session(raw or b""))
                except UnreadableRecord as exc:  # reported by name; the rest lists
                    view.warnings.append(f"{path} is unreadable: {exc}")
        self.warnings = view.warnings
        return sorted(out, key=lambda s: s.registered_at)

    def status(self, *, include_ended: bool = False, status: str | None = None,
               provider: str | None = None, project: str | None = None) -> dict:
        """What ``status --json`` prints, and the MCP status tool and resource: the
        sessions (live ones, or all), filtered as records.select_sessions says, the sync
        state, and the sessions whose heartbeat is dated in the future."""
        wanted = status_named(status) if status else None
        sessions = select_sessions(
            self.sessions(include_ended=include_ended or wanted not in (None, LIVE)),
            status=wanted, provider=provider, project=project)
        return {"sessions": [s.to_dict() for s in sessions], "sync": self.sync_state(),
                "clock": self.clocks_ahead(sessions)}

    def clocks_ahead(self, sessions: Iterable[Session]) -> list[dict]:
        """Live sessions whose heartbeat is dated beyond the clock-skew margin in the
        future (their host's clock runs ahead), and since when this clone ages it."""
        now = self.clock()
        return [{"session": s.id, "host": s.host, "heartbeat_at": s.heartbeat_at,
                 "ahead_seconds": int(ahead),
                 "first_seen": iso(self.seen.since(s.id, s.heartbeat_ts(), now))}
                for s in sessions if s.live and (ahead := ahead_by(s, now))]

    def cleanup(self, *, by: str | None = None, reason: str | None = None) -> dict:
        """Stop zombie sessions; *by* and *reason* (who asked, and why) go in the commit."""
        for label, value in (("author", by or ""), ("reason", reason or "")):
            P.validate_text(label, value)
        return self.apply(self.new_op("cleanup", by=by or self.host,
                                   **({"reason": reason} if reason else {})))

    def zombies(self, view: View | None = None, at: float | None = None,
                shards: dict | None = None) -> list[tuple[Session, str]]:
        """The live sessions ``cleanup`` stops, each with why (``doctor`` asks too).
        *shards* (sid -> {heartbeat_at, ttl}) is what the lock shards said of each session
        when the cleanup was asked for: its claims there renew it too."""
        view, at = view or self.view(), self.clock() if at is None else at
        out = []
        for session in view.live_sessions():
            ttls = [h.ttl for t in session.locks if (l := view.lock(t)) for h in l.holders
                    if h.session == session.id]
            seen = (shards or {}).get(session.id)
            if isinstance(seen, dict):
                ttls += [seen["ttl"]] if isinstance(seen.get("ttl"), int) else []
                beat = parse_iso(seen.get("heartbeat_at")) if isinstance(
                    seen.get("heartbeat_at"), str) else None
                if beat and beat > session.heartbeat_ts():
                    session = Session.from_dict({**session.to_dict(),
                                                 "heartbeat_at": seen["heartbeat_at"]})
            reason = session_stale_reason(session, at, max(ttls, default=DEFAULT_TTL),
                                          self.host, self.seen)
            if reason:
                out.append((session, reason))
        return out

    def kill(self, sid: str, *, force: bool = False, grace: float = 5.0,
             by: str | None = None, reason: str | None = None) -> dict:
        """Terminate a live local session's process (SIGTERM, then SIGKILL after *grace*
        seconds; at once with *force*), only if its start time still matches; a session
        of another host is stopped logically.  Either way it ends as Killed.  *by* and
        *reason* (who killed it, and why) go in the commit."""
        for label, value in (("author", by or ""), ("reason", reason or "")):
            P.validate_text(label, value)
        P.validate_session_id(sid)
        self.catch_up()  # the session may be another clone's, registered after our fetch
        session = self.session(sid)
        if not session.live:
            raise Refused(f"session {sid} is not live ({session.status})")
        signalled, spared = None, self._unsignalable(session)
        if spared is None:
            try:
                signalled = _terminate(session.pid, session.pid_start, grace, force)
            except PermissionError:
                spared = f"not allowed to signal its process {session.pid} (another user's)"
        why = f"killed ({signalled or 'logical stop'})" + (f": {reason}" if reason else "")
        result = self.apply(self.new_op("finish", session=sid, status="Killed",
                                     by=by or self.host, reason=why))
        result["signal"], result["not_signalled"] = signalled, spared
        return result

    def _unsignalable(self, session: Session) -> str | None:
        """Why ``kill`` must not signal *session*'s process (it stops the session
        logically instead), or None when it is a vouched-for owner still running here."""
        if session.host != self.host:
            return f"it runs on another host ({session.host})"
        if not session.vouched:
            return ("its owner process was never vouched for (owner: "
                    f"{session.owner or 'not recorded'}), so no process is known to be the agent")
        same = same_process(session.pid, session.pid_start)
        if same is False:
            return f"its process {session.pid} is gone (or the pid now belongs to another process)"
        if same is None or session.pid_start is None:
            why = ("no process information here (neither /proc nor psutil)"
                   if not procinfo_backend().available else "no start time was recorded"
                   if session.pid_start is None else "its start time cannot be read")
            return f"its process {session.pid} cannot be told from a later one with its pid: {why}"
        kind = protected_kind(session.pid)
        return f"its process {session.pid} is {kind}, never signalled" if kind else None

    # -- locks -----------------------------------------------------------------------
    def targets(self, raw: Iterable[str], *, new: bool = True) -> list[str]:
        """The stored targets *raw* names.  Globs are checked only for *new* targets: a
        bad glob already on the branch can still be checked, released and force-released."""
        info, rule = self.repo.info, self.repo.path_rule
        out = []
        for item in P.csv_items(raw) if isinstance(raw, str) else raw:
            target = P.target(item, toplevel=info.toplevel, prefix=info.prefix, new=new,
                              rule=rule)
            if target not in out:
                out.append(target)
        return self.spelled(out) if rule.ignorecase else out

    def spelled(self, targets: list[str]) -> list[str]:
        """*targets* spelled as the index spells them, else as a live claim does, else
        as the disk does (normalize's spelling): on a filesystem that ignores case, one
        file's claims land on one record (and shard) whatever spelling each agent typed."""
        rule = self.repo.path_rule
        names = [P.plain(t) for t in targets if not P.is_glob(t)]
        tracked = self.repo.index_names(names)
        held = [t for s in self.view().live_sessions() for t in s.locks]
        return list(dict.fromkeys(rule.respell(rule.respell(t, held), tracked)
                                  for t in targets))

    def claim(self, sid: str, paths: Iterable[str], *, ttl: int = DEFAULT_TTL,
              shared: bool = False, generations: Iterable[str] = ()) -> dict:
        """Claim every target or none.  Returns per target whether it was acquired,
        renewed (already ours) or taken over (from a stale holder).  *generations*: the
        tokens of the claims being renewed, one per path in order; refused when one is no
        longer the claim held (taken over since)."""
        P.validate_session_id(sid)
        targets = self.targets(paths)
        if not targets:
            raise BadInput("no path to lock")
        if not 1 <= ttl <= 7 * 86400:
            raise BadInput(f"--ttl {ttl}: between 1 and 604800 seconds")
        expect = _expected(targets, generations)
        fresh = {t: os.urandom(8).hex() for t in targets}
        return self.apply(self.new_op("claim", session=sid, paths=targets, ttl=ttl,
                                   mode="shared" if shared else "exclusive",
                                   generations=fresh, **({"expect": expect} if expect else {})))

    def judge(self, view: View, holder: Holder, at: float) -> str | None:
        """Why *holder* no longer counts, or None while it does."""
        session = view.session(holder.session, strict=False)
        if session is None and holder.session in view.unreadable:
            return None  # an unreadable session file keeps its locks held
        return stale_reason(holder, session, at, self.host, self.seen,
                            ended=None if session is not None else _ended(view, holder.session))

    def conflicts(self, view: View, sid: str, target: str, mode: str, at: float) -> list[dict]:
        out = []
        for lock in view.covering(target):
            for holder in lock.holders:
                if holder.session == sid or (lock.mode == "shared" and mode == "shared"):
                    continue
                if self.judge(view, holder, at) is None:
                    owner = view.session(holder.session, strict=False)
                    out.append({"path": target, "target": lock.path, "owner": holder.session,
                                "working_on": owner.working_on if owner else "",
                                "since": holder.acquired_at, "mode": lock.mode,
                                "reach": f"agent-registry send --to {holder.session} TEXT"})
        return out

    def forget(self, view: View, sid: str, target: str) -> None:
        """Drop *target* from the held list of session *sid* (its lock is gone)."""
        session = view.session(sid, strict=False)
        if session is not None and target in session.locks:
            session.locks.remove(target)
            view.put_session(session)

    def release(self, sid: str, paths: Iterable[str], generations: Iterable[str] = ()) -> dict:
        """Release every target; *generations* as for :meth:`claim`."""
        P.validate_session_id(sid)
        targets = self.targets(paths, new=False)
        if not targets:
            raise BadInput("no path to release")
        expect = _expected(targets, generations)
        return self.apply(self.new_op("release", session=sid, paths=targets,
                                      **({"expect": expect} if expect else {})))

    def check(self, paths: Iterable[str], sid: str | None = None) -> list[dict]:
        """Per target: free, locked (by a live session), locked-by-me, or stale."""
        if sid:
            P.validate_session_id(sid)
        targets = self.targets(paths, new=False)
        if not targets:
            raise BadInput("no path to check")
        view, at = self.view(), self.clock()
        unconfirmed = self.unconfirmed_claims()
        out = []
        for target in targets:
            states = []
            for lock in view.covering(target):
                for holder in lock.holders:
                    reason = self.judge(view, holder, at)
                    owner = view.session(holder.session, strict=False)
                    state = ("locked-by-me" if holder.session == sid and reason is None
                             else "stale" if reason else "locked")
                    states.append({"path": target, "state": state, "target": lock.path,
                                   "owner": holder.session, "mode": lock.mode,
                                   "working_on": owner.working_on if owner else "",
                                   "since": holder.acquired_at,
                                   "age_seconds": _age(holder.acquired_at, at),
                                   "stale_reason": reason,
                                   "confirmed": (holder.session, lock.path) not in unconfirmed})
            rank = {"locked": 0, "locked-by-me": 1, "stale": 2}
            states.sort(key=lambda s: rank[s["state"]])
            out.append(states[0] if states else {"path": target, "state": "free"})
        self.warnings = view.warnings
        return out

    def locks(self) -> list[dict]:
        """Every lock held by a live session, with its state."""
        view, at = self.view(), self.clock()
        unconfirmed = self.unconfirmed_claims()
        out = []
        for session in view.live_sessions():
            for target in session.locks:
                lock = view.lock(target)
                holder = lock.holder(session.id) if lock else None
                if holder is None:
                    continue
                out.append({"path": target, "owner": session.id, "mode": lock.mode,
                            "working_on": session.working_on, "since": holder.acquired_at,
                            "age_seconds": _age(holder.acquired_at, at), "ttl": holder.ttl,
                            "generation": holder.generation,
                            "stale_reason": stale_reason(holder, session, at, self.host,
                                                         self.seen),
                            "confirmed": (session.id, target) not in unconfirmed})
        self.warnings = view.warnings
        return sorted(out, key=lambda l: l["path"])

    def unconfirmed_claims(self) -> set[tuple[str, str]]:
        """(session, path) of claims this clone made that its remote has not seen yet."""
        if not self.remote:
            return set()
        shards = [] if self.is_shard else sharded.shards_of(self)
        if shards:
            return sharded.unconfirmed(self, shards)
        return self._remote_committer().unconfirmed(self)

    def heartbeat(self, sid: str, paths: Iterable[str] = ()) -> dict:
        """Renew the session and every lock it holds.  With *paths* (the predecessor's
        ``lock heartbeat PATH SID``) it is refused unless the session holds each one."""
        P.validate_session_id(sid)
        targets = {"paths": self.targets(paths, new=False)} if paths else {}
        return self.apply(self.new_op("heartbeat", session=sid, **targets))

    def heartbeat_loop(self, sid: str, interval: float, *, stop: Callable[[], bool] = lambda: False,
                       sleep: Callable[[float], None] = time.sleep,
                       paths: Iterable[str] = (),
                       started: Callable[[], None] = lambda: None) -> str:
        """Heartbeat every *interval* seconds until the session ends or, on this host,
        its process dies (so a dead agent's locks go stale instead of living forever);
        with *paths*, also once the session no longer holds one of them (released).
        *started* runs after the first heartbeat: the loop is then known to work."""
        beats = 0
        while not stop():
            session = self.session(sid)
            if not session.live:
                return f"session {sid} is {session.status}"
            if session.host == self.host and session.vouched and \
                    not is_alive(session.pid, session.pid_start):
                return f"the process {session.pid} of session {sid} is gone"
            try:
                self.heartbeat(sid, paths)
            except NotFound as exc:
                if not beats:  # never held: an error, as for `lock heartbeat PATH SID`
                    raise
                return exc.message
            beats += 1
            if beats == 1:
                started()
            sleep(interval)
        return "stopped"

    def force_release(self, path: str, *, reason: str, by: str, force: bool = False) -> dict:
        target = self.targets([path], new=False)[0]
        P.validate_text("reason", reason)
        if not reason.strip():
            raise BadInput("--reason is required: say why the lock is freed")
        P.validate_text("author", by)
        return self.apply(self.new_op("force-release", path=target, reason=reason, by=by,
                                   force=force))

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




def _terminate(pid: int, started: int, grace: float, force: bool) -> str:
    """Signal the vouched-for owner *pid* (started at *started*, checked by the caller):
    SIGTERM, then SIGKILL after *grace* seconds if the same process still runs.  Whether
    it runs is read (procinfo.same_process), never probed with a signal."""
    import signal  # here: its enums cost every other command's start
    if not force:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if same_process(pid, started) is False:
                return "SIGTERM"
            time.sleep(0.1)
    if same_process(pid, started):
        os.kill(pid, getattr(signal, "SIGKILL", signal.SIGTERM))  # Windows: TerminateProcess
        return "SIGKILL"
    return "SIGTERM"


def _ended(view: View, sid: str) -> Session | None:
    """*sid*'s ended record, for saying why its locks no longer count (None: none, or
    unreadable: then "not registered" is said, as before)."""
    try:
        return view.done_session(sid)
    except RegistryError:
        return None


def _age(since: str, at: float) -> int | None:
    ts = parse_iso(since)
    return None if ts is None else max(0, int(at - ts))


def repo_name(common_dir: str) -> str:
    common = common_dir.rstrip("/")
    base = os.path.basename(common)
    return os.path.basename(os.path.dirname(common)) if base == ".git" else base.removesuffix(".git")


def _current_branch(git_dir: str) -> str:
    try:
        with open(os.path.join(git_dir, "HEAD")) as f:
            head = f.read().strip()
    except OSError:
        return ""
    return head[len("ref: refs/heads/"):] if head.startswith("ref: refs/heads/") else ""


def _expected(targets: list[str], generations: Iterable[str]) -> dict[str, str]:
    """{target: generation} for the tokens given one per target, in order."""
    tokens = list(generations)
    if tokens and len(tokens) != len(targets):
        raise BadInput(f"--generation given {len(tokens)} time(s) for {len(targets)} path(s): "
                       "one per path, in order")
    for token in tokens:
        if not (isinstance(token, str) and 0 < len(token) <= 64 and token.isalnum()):
            raise BadInput(f"--generation {token!r}: a token as `lock acquire` printed it")
    return dict(zip(targets, tokens))
