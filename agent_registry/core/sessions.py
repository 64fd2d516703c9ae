"""The core's session operations (register, update, finish, handoff, cleanup, and
the branch's init and page refresh): each with its shape, checked before it is applied or replayed, and
the handler that decides it against a view of the branch and writes what changes."""
from __future__ import annotations

import os

from ..branch import paths as P
from ..branch.records import (LIVE, Holder, Session, UnreadableRecord, iso, load_session,
                              parse_iso, select_sessions, status_named)
from ..branch.staleness import DEFAULT_TTL, ahead_by, session_stale_reason
from ..branch.view import View
from ..errors import BadInput, Refused
from ..store.procinfo import choose_owner
from .operations import Outcome, operation
from .shapes import AMOUNT, FLAG, MAPPING, TEXT, one_of

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing on every claim
if TYPE_CHECKING:
    from collections.abc import Iterable

    from .registry import Registry


@operation("init", shape={})
def apply_init(registry: Registry, view: View, op: dict) -> Outcome:
    if view.tip:
        return Outcome({"created": False}, None)
    view.write("sessions/recent.json", b"[]\n")
    return Outcome({"created": True}, "init registry")


@operation("refresh-page", shape={})
def apply_refresh_page(registry: Registry, view: View, op: dict) -> Outcome:
    """registry.md rendered again, nothing else changed: what a write on a lock shard or
    a clone ref does to the main branch when its page is a minute old (core/sharded.py
    ``refresh_page``), so a person browsing the main branch on a forge sees the locks
    and heartbeats of every shard and clone at most a minute behind the last write.  A
    page another clone rendered meanwhile is left as it is."""
    if registry.page_is_recent(view, op["at"]):
        return Outcome({"refreshed": False}, None)
    subject = "registry.md rendered again"
    for path, data in registry.pages(view, op["at"], subject).items():
        view.write(path, data)
    return Outcome({"refreshed": True}, subject, page_lasts=True)


@operation("register", shape={"session": TEXT, "fields": MAPPING, "?resume": FLAG})
def apply_register(registry: Registry, view: View, op: dict) -> Outcome:
    sid, at = op["session"], iso(op["at"])
    if view.done_session(sid):
        raise Refused(f"session {sid} has already ended; register a new id")
    session, fields = view.session(sid), op["fields"]
    if session is None:
        if "provider" not in fields:  # a resume without --provider of no session here
            raise registry.unknown(view, sid)
        session = Session(id=sid, registered_at=at)
        subject = f"register {sid} ({fields['provider']}): {fields.get('working_on', '')}"
    elif op.get("resume"):
        subject = f"resume {sid}"
    else:
        held = held_by_another(session, fields, registry.host)
        if held:
            raise Refused(f"session {sid} is live ({held}): register without an id for a "
                          "new session, or resume this one with --resume (MCP: resume) if "
                          "it is yours", details={"session": sid})
        subject = f"re-register {sid}"
    for key, value in fields.items():  # a field not given keeps what the session has
        setattr(session, key, given_tags(session.tags, value) if key == "tags" else value)
    session.status, session.heartbeat_at = LIVE, at
    view.put_session(session)
    return Outcome({"session": session.to_dict()}, subject)


def given_tags(old: list[str], given: list[str]) -> list[str]:
    """*given* replaces a session's plain tags, its rooms (``room:…``) or both, whichever
    it has: ``register SID --resume --room room:NAME`` joins a room, keeping the tags."""
    def kind(rooms: bool) -> list[str]:  # the given tags of a kind, else the old ones
        return ([t for t in given if t.startswith("room:") == rooms]
                or [t for t in old if t.startswith("room:") == rooms])
    return list(dict.fromkeys(kind(False) + kind(True)))


def holds(view: View, session: Session, targets: list[str] | None = None,
          known: dict[tuple[str, str], Holder | None] | None = None) -> list[tuple[str, Holder]]:
    """(target, its holder record) of each lock *session* lists (or of *targets* among
    them) whose record names it a holder: what ``status`` shows of its locks (reasons,
    TTLs).  The records not yet read are read in one batch; *known* keeps what was
    parsed, by (session, target), so a second caller of one command parses none again."""
    known = {} if known is None else known
    targets = session.locks if targets is None else targets
    unread = [t for t in targets if (session.id, t) not in known]
    view.prefetch_locks(unread)
    for target in unread:
        lock = view.lock(target)
        known[session.id, target] = lock.holder(session.id) if lock else None
    return [(t, holder) for t in targets if (holder := known[session.id, t])]


def held_by_another(session: Session, fields: dict, here: str) -> str | None:
    """Why re-registering the live *session* with these *fields* would take it from
    another agent, or None when the caller is its own vouched-for owner (the same
    process, by pid and start time, on the same host) or that owner has exited on this
    host (nobody is left to take it from)."""
    from ..branch.records import VOUCHED
    from ..store.procinfo import is_alive
    same_host = session.host == fields.get("host")
    if session.vouched and same_host and fields.get("owner") in VOUCHED and \
            (session.pid, session.pid_start) == (fields.get("pid"), fields.get("pid_start")):
        return None
    if session.vouched and same_host and session.host == here and \
            not is_alive(session.pid, session.pid_start):
        return None
    bound = (f"bound to pid {session.pid} on {session.host}" if session.vouched
             else f"on {session.host}, bound to no process")
    return f"{session.provider}, working on {session.working_on or '(not said)'}, {bound}"


@operation("update", shape={"session": TEXT, "fields": MAPPING})
def apply_update(registry: Registry, view: View, op: dict) -> Outcome:
    session = registry.live_session(view, op["session"])
    fields = dict(op["fields"])
    status = fields.pop("status", LIVE)
    for key, value in fields.items():
        setattr(session, key, value)
    session.heartbeat_at = iso(op["at"])
    if status != LIVE:
        released = registry.close_session(view, session, status, op["at"])
        return Outcome({"session": session.to_dict(), "released": released},
                       f"{status.lower()} {session.id} (update)")
    view.put_session(session)
    return Outcome({"session": session.to_dict()},
                   f"update {session.id}: {', '.join(sorted(fields))}")


def releasing(op: dict, released: list[str]) -> str:
    """How many locks ending a session released, for its commit's subject: those this
    branch recorded, and those released in the lock shards just before (core/sharded.py
    gives their number as *released_in_shards*)."""
    return f"releasing {len(released) + op.get('released_in_shards', 0)} lock(s)"


@operation("finish", shape={"session": TEXT, "status": one_of("Finished", "Stop", "Killed"),
                              "?notify_executed": TEXT, "?released_in_shards": AMOUNT})
def apply_finish(registry: Registry, view: View, op: dict) -> Outcome:
    sid = op["session"]
    session = view.session(sid)
    if session is None:
        done = view.done_session(sid)
        if done is None:
            raise registry.unknown(view, sid)
        return Outcome({"session": done.to_dict(), "released": [], "already": True}, None)
    session.notify_executed = op.get("notify_executed") or session.notify_executed
    released = registry.close_session(view, session, op["status"], op["at"])
    verb = {"Finished": "finish", "Stop": "stop", "Killed": "kill"}[op["status"]]
    extra = f" by {op['by']}: {op['reason']}" if op.get("reason") else ""
    return Outcome({"session": session.to_dict(), "released": released},
                   f"{verb} {sid}, {releasing(op, released)}{extra}")


@operation("handoff", shape={"session": TEXT, "path": TEXT})
def apply_handoff(registry: Registry, view: View, op: dict) -> Outcome:
    session = registry.live_session(view, op["session"])
    session.handoff = op["path"]
    view.put_session(session)
    return Outcome({"session": session.to_dict()}, f"handoff {session.id}: {op['path']}")


@operation("cleanup", shape={"?shards": MAPPING})
def apply_cleanup(registry: Registry, view: View, op: dict) -> Outcome:
    stopped = []
    for session, reason in registry.zombies(view, op["at"], op.get("shards")):
        released = registry.close_session(view, session, "Stop", op["at"])
        stopped.append({"session": session.id, "reason": reason, "released": released})
    subject = f"cleanup: stop {', '.join(s['session'] for s in stopped)}" if stopped else None
    return Outcome({"stopped": stopped}, subject)


class SessionCalls:
    """The session half of the Registry API (core/registry.py mixes it in): each call
    validates its arguments and applies one operation of this module."""

    def register(self, sid: str, *, provider: str | None = None, ai_version: str | None = None,
                 working_on: str | None = None, space: Iterable[str] | str | None = None,
                 todo_present: Iterable[str] | str | None = None,
                 pid: int | None = None, pid_from: str = "--pid",
                 notify_started: str = "", tags: Iterable[str] = (),
                 resume: bool = False) -> Session:
        """Register (or re-register) session *sid*.  Its owner process is *pid* (given
        by *pid_from*), else $AGENT_REGISTRY_PID, else an ancestor that is a known agent
        runtime, else none (procinfo.choose_owner); ``self.bound`` says which and why.
        A live *sid* is refused (Refused) unless this owner is its vouched-for owner
        already, that owner has exited on this host, or *resume* takes it over.  A field
        left None (or empty: *notify_started*, *tags*) is not given: empty in a new
        session, kept by one registered again (by a resume, its provider too)."""
        P.validate_session_id(sid)
        for label, value in (("provider", provider), ("ai-version", ai_version),
                             ("working-on", working_on), ("notify-started", notify_started)):
            P.validate_text(label, value or "")
        if not (provider or (provider is None and resume)):
            raise BadInput("--provider is required")
        for tag in tags:
            P.validate_tag(tag)
        try:
            owner = choose_owner(pid, pid_from)
        except ValueError as exc:
            raise BadInput(str(exc)) from None
        info = self.repo.info
        given = {"provider": provider, "ai_version": ai_version, "working_on": working_on,
                 "space": None if space is None else self.targets(space),
                 "todo_present": None if todo_present is None else P.csv_items(todo_present),
                 "notify_started": notify_started or None,
                 "tags": list(dict.fromkeys(tags)) or None}
        fields = {
            **{key: value for key, value in given.items() if value is not None},
            # where and by which process it runs now: always this call's
            "project": info.toplevel or info.git_dir, "repo": repo_name(self),
            "git_branch": _current_branch(info.git_dir), "host": self.host,
            "pid": owner.pid, "pid_start": owner.start, "owner": owner.how,
            "cmdline": owner.cmdline,
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
        if not path:
            raise BadInput("empty handoff path")
        path = self.repo_path(path)  # a lock's checks: inside the repository, no .git
        return Session.from_dict(self.apply(self.new_op("handoff", session=sid, path=path))["session"])

    def session(self, sid: str) -> Session:
        P.validate_session_id(sid)
        view = self.view()
        found = view.session(sid) or view.done_session(sid)
        if found is None:
            raise self.unknown(view, sid)
        return found

    def sessions(self, *, include_ended: bool = False, view: View | None = None) -> list[Session]:
        view = view or self.view()
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
        sessions (live ones, or all), filtered as records.select_sessions says, why each
        of their locks was claimed (when a reason was given), the sync state, and the
        sessions whose heartbeat is dated in the future."""
        wanted = status_named(status) if status else None
        view = self.view()  # one snapshot for all of it: at 10,000 locks each reads them all
        sessions = select_sessions(
            self.sessions(include_ended=include_ended or wanted not in (None, LIVE), view=view),
            status=wanted, provider=provider, project=project)
        live = [s for s in sessions if s.live]
        known: dict[tuple[str, str], Holder | None] = {}  # lock records parsed, by both
        return {"sessions": [dict(s.to_dict(), zombie=why) if s.live else s.to_dict()
                             for s, why in zip(sessions, self.zombie_reasons(sessions, view, known))],
                "reasons": self.claim_reasons(live, view, known),
                "sync": self.sync_state(), "clock": self.clocks_ahead(sessions)}

    def zombie_reasons(self, sessions: list[Session], view: View | None = None,
                       known: dict[tuple[str, str], Holder | None] | None = None
                       ) -> list[str | None]:
        """Why each of *sessions* is a zombie ``cleanup`` would stop (its process gone,
        no heartbeat past its TTL), or None: a live session is never shown as working
        when it no longer counts (issue 37).  Judged by the default TTL first; only a
        session past it that holds locks (whose own TTL may be longer) is judged as
        cleanup judges it, from the lock records (*known*: as for :func:`holds`)."""
        now = self.clock()
        out = [session_stale_reason(s, now, DEFAULT_TTL, self.host, self.seen) if s.live
               else None for s in sessions]
        if any(why and s.locks for s, why in zip(sessions, out)):
            judged = {s.id: why for s, why in self.zombies(view, at=now, known=known)}
            out = [judged.get(s.id) if why and s.locks else why
                   for s, why in zip(sessions, out)]
        return out

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
                shards: dict | None = None,
                known: dict[tuple[str, str], Holder | None] | None = None
                ) -> list[tuple[Session, str]]:
        """The live sessions ``cleanup`` stops, each with why (``doctor`` asks too).
        *shards* (sid -> {heartbeat_at, ttl}) is what the lock shards said of each session
        when the cleanup was asked for: its claims there renew it too.  *known*: what
        :func:`holds` already parsed of some sessions' locks from *view*."""
        view, at = view or self.view(), self.clock() if at is None else at
        out = []
        for session in view.live_sessions():
            ttls = [holder.ttl for _, holder in holds(view, session, known=known)]
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


_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def repo_name(registry: Registry) -> str:
    """The repository's name, the same in every clone of it (its ``repo:`` room and the
    ``repo`` of its sessions, issue 37): the last part of its registry remote's URL
    without ``.git``, else the name of its folder."""
    if registry.remote:
        url = registry.repo.git("config", "--get", f"remote.{registry.remote}.url",
                                check=False).stdout.decode(errors="replace").strip()
        name = url.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1].removesuffix(".git")
        if name and all(c in _NAME_CHARS for c in name):
            return name
    common = registry.repo.info.common_dir.rstrip("/")
    base = os.path.basename(common)
    return os.path.basename(os.path.dirname(common)) if base == ".git" else base.removesuffix(".git")


def _current_branch(git_dir: str) -> str:
    try:
        with open(os.path.join(git_dir, "HEAD")) as f:
            head = f.read().strip()
    except OSError:
        return ""
    return head[len("ref: refs/heads/"):] if head.startswith("ref: refs/heads/") else ""
