"""The core's session operations (register, update, finish, handoff, cleanup, and
the branch's init and page refresh): each with its shape, checked before it is applied or replayed, and
the handler that decides it against a view of the branch and writes what changes."""
from __future__ import annotations

from ..branch.records import LIVE, Session, iso
from ..branch.view import View
from ..errors import Refused
from .operations import Outcome, operation
from .shapes import AMOUNT, FLAG, MAPPING, TEXT, one_of

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing on every claim
if TYPE_CHECKING:
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
    session = view.session(sid)
    if session is None:
        session = Session(id=sid, registered_at=at)
        subject = f"register {sid} ({op['fields']['provider']}): {op['fields']['working_on']}"
    elif op.get("resume"):
        subject = f"resume {sid}"
    else:
        held = held_by_another(session, op["fields"], registry.host)
        if held:
            raise Refused(f"session {sid} is live ({held}): register without an id for a "
                          "new session, or resume this one with --resume (MCP: resume) if "
                          "it is yours", details={"session": sid})
        subject = f"re-register {sid}"
    for key, value in op["fields"].items():
        setattr(session, key, value)
    session.status, session.heartbeat_at = LIVE, at
    view.put_session(session)
    return Outcome({"session": session.to_dict()}, subject)


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
