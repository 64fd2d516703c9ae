"""Durable messages and handoffs: the ``send`` and ``ack`` operations, and the library
calls behind ``send``, ``inbox``, ``ack``, ``thread`` and ``handoff`` (docs/messages.md).
The files and their format are :mod:`agent_registry.branch.mailbox`'s.

Messages are committed on a branch of their own, ``<registry branch>-messages``, by a
second registry on the same repository (``messages_branch.mailbox``): with a remote it syncs exactly
like the registry branch (fetch, replay, fast-forward push, its own confirmed tip), so
a send or an ack never queues in front of a claim.  What a send needs from the registry
(the sender is a live session, whom the audience reaches) is read from the registry
branch when the message is sent, and recorded in the operation (``recipients``,
``thread``), so a replay on the messages branch decides the same way; it re-checks only
what can change there (the message, or the acknowledgement, already written).  Readers
read both branches: messages written before the split stay on the registry branch.
"""
from __future__ import annotations

import heapq
import json
import time
from collections.abc import Callable

from ..branch import paths as P
from ..branch.mailbox import (CONTENT, DEFAULTS, MESSAGE_ID, ack_path, acked, acks,
                              addressed_to, describe, every_message, field, find, in_room,
                              load, message_id, message_path, order, pending_for, rooms_of,
                              validate, warnings)
from ..branch.records import iso
from ..branch.view import View
from ..errors import BadInput, Refused
from .messages_branch import carry as _carry, fresh_view, mailbox, views, writer
from .operations import Outcome, operation
from .registry import Registry
from .shapes import MAPPING, SOME_TEXTS, TEXT

# -- the operations --------------------------------------------------------------------

@operation("send", {"session": TEXT, "message": MAPPING})
def _op_send(registry: Registry, view: View, op: dict) -> Outcome:
    message = op.get("message")
    try:
        validate(message)
    except BadInput as exc:  # only a replayed operation gets here: refuse, never write
        raise Refused(f"malformed message: {exc.message}") from None
    resolved = "recipients" in op  # decided against the registry branch when sent
    if resolved:
        sender, sender_id = None, _sender_id(op)
        recipients, thread = op["recipients"], op.get("thread")
        if not isinstance(recipients, list) or not all(
                isinstance(r, str) and P.is_session_id(r) for r in recipients) or \
                not isinstance(thread, str) or not MESSAGE_ID.fullmatch(thread):
            raise Refused("malformed send: recipients and thread must be session and message ids")
    elif field(message, "sender") == "person":  # a person: no session to be live
        sender, sender_id = None, _sender_id(op)
    else:  # an operation of the single-branch layout, replayed on the registry branch
        sender = _session(registry, view, op)
        sender_id = sender.id
    path = message_path(sender_id, message["id"])
    existing = load(view.read(path))
    if existing is not None:
        return _again(existing, message, sender_id)
    if not resolved:
        thread = message["id"]
        if message.get("reply_to"):
            replied = find(view, message["reply_to"])
            if replied is None:
                raise Refused(f"unknown message id {message['reply_to']}")
            thread = replied["thread"]
        recipients = audience(registry, view, sender_id, message["to"], op["at"])
        if not recipients and message["kind"] != "handoff":
            raise Refused(f"no live session is reached by {describe(message['to'])}: not sent",
                          details={"to": message["to"]})
    record = {**{k: message.get(k) for k in ("id", "kind")}, "from": sender_id,
              "to": message["to"], "recipients": recipients,
              **{k: message.get(k) for k in ("subject", "body", "key", "reply_to", "document")},
              **{k: field(message, k) for k in ("importance", "ack_required", "sender")},
              "thread": thread, "at": iso(op["at"]), "ts": round(op["at"], 3)}
    view.write(path, (json.dumps(record, indent=1, ensure_ascii=False) + "\n").encode())
    if message.get("document") and sender is not None:  # kept on the session: same branch
        sender.handoff = message["document"]
        view.put_session(sender)
    what = "handoff" if message["kind"] == "handoff" else "message"
    return Outcome({"id": message["id"], "created": True, "recipients": recipients,
                    "message": record},
                   f"{what} {message['id']} from {sender_id} to {describe(message['to'])}")


def _again(existing: dict, message: dict, sender: str) -> Outcome:
    """A message with this id is already there: the same one (a retry: nothing sent
    again), or the key was used for another message (refused)."""
    if all(field(existing, k) == field(message, k) if k in DEFAULTS else
           existing.get(k) == message.get(k) for k in CONTENT):
        return Outcome({"id": existing["id"], "created": False,
                        "recipients": existing["recipients"], "message": existing}, None)
    raise Refused(f"key {message.get('key')!r} was already used by {sender} for "
                  f"another message ({message['id']})", details={"id": message["id"]})


@operation("ack", {"session": TEXT, "ids": SOME_TEXTS})
def _op_ack(registry: Registry, view: View, op: dict) -> Outcome:
    ids = op.get("ids")
    if not isinstance(ids, list) or not ids or \
            not all(isinstance(i, str) and MESSAGE_ID.fullmatch(i) for i in ids):
        raise Refused("malformed ack: it needs message ids")
    checked = op.get("checked") is True  # the recipient was checked when acknowledging
    session = None if checked else _session(registry, view, op)
    me = session.id if session else _sender_id(op)
    acked_now, already = [], []
    for mid in ids:
        if not checked:
            message = find(view, mid)
            if message is None:
                raise Refused(f"unknown message id {mid}")
            if not addressed_to(message, session, registry.repo.path_rule):
                raise Refused(f"{me} is not a recipient of message {mid}",
                              details={"id": mid, "recipients": message["recipients"]})
        if acked(view, me, mid):  # a malformed file there is written over
            already.append(mid)
            continue
        view.write(ack_path(me, mid), (json.dumps(
            {"id": mid, "session": me, "at": iso(op["at"])}) + "\n").encode())
        acked_now.append(mid)
    result = {"session": me, "acked": acked_now, "already": already}
    if not acked_now:
        return Outcome(result, None)
    more = f" and {len(acked_now) - 1} more" if len(acked_now) > 1 else ""
    return Outcome(result, f"ack {acked_now[0]}{more} by {me}")


def _sender_id(op: dict) -> str:
    sid = op.get("session")
    if not isinstance(sid, str) or not P.is_session_id(sid):
        raise Refused(f"malformed {op.get('op')}: no valid session id")
    return sid


def _session(registry: Registry, view: View, op: dict):
    """The live session *op* acts for; a replayed operation without a valid one is
    refused, never a crash."""
    return registry.live_session(view, _sender_id(op))


def audience(registry: Registry, view: View, sender: str, to: dict, at: float) -> list[str]:
    """The live sessions *to* reaches now (never the sender, unless named)."""
    kind, value = next(iter(to.items()))
    if kind == "session":
        if view.session(value) is None:
            if view.done_session(value):
                raise Refused(f"session {value} has ended: it would never read the message")
            raise registry.unknown(view, value)
        return [value]
    if kind == "paths":
        found = []
        for path in value:
            for lock in view.covering(path):
                found += [h.session for h in lock.holders
                          if registry.judge(view, h, at) is None]
        return sorted(set(found) - {sender})
    if kind == "tag":
        return [s.id for s in view.live_sessions() if value in s.tags and s.id != sender]
    if kind == "room":
        return [s.id for s in view.live_sessions() if in_room(s, value) and s.id != sender]
    return [s.id for s in view.live_sessions() if s.id != sender]


def selector(to: str | None, to_paths: list[str], to_tag: str | None, room: str | None,
             everyone: bool, *, required: bool = True,
             names: tuple = ("to", "to_path", "to_tag", "room", "all")) -> dict | None:
    """The one audience given: ``{"session": SID}``, ``{"paths": [...]}``, ``{"tag": T}``,
    ``{"room": R}`` or ``{"all": True}``; bad input unless exactly one (or, when not
    *required*, none) is given.  *names* are the caller's names for them."""
    given = [sel for sel in ({"session": to} if to is not None else None,
                             {"paths": list(to_paths)} if to_paths else None,
                             {"tag": to_tag} if to_tag is not None else None,
                             {"room": room} if room is not None else None,
                             {"all": True} if everyone else None) if sel]
    if len(given) > 1 or (required and not given):
        raise BadInput(f"give exactly one of {', '.join(names)}")
    return given[0] if given else None


# -- the library calls the commands make ----------------------------------------------

def send(registry: Registry, sender: str, to: dict, body: str, *, subject: str | None = None,
         key: str | None = None, reply_to: str | None = None, importance: str = "normal",
         ack_required: bool = False, person: bool = False) -> dict:
    """Send a message; returns ``{"id", "created", "recipients", "message"}``.  Bad input
    raises BadInput before anything is written; an empty audience is refused.  A
    *person* (a name, no session) sends as well as a live session does."""
    if "paths" in to:  # as the command line names them: relative to where it runs
        to = {"paths": registry.targets(to["paths"], new=False)}
    return _send(registry, sender, {"id": message_id(sender, key), "kind": "message",
                                    "to": to, "subject": subject or None, "body": body,
                                    "key": key, "reply_to": reply_to, "document": None,
                                    "importance": importance, "ack_required": ack_required,
                                    "sender": "person" if person else "session"})


def handoff(registry: Registry, sid: str, *, text: str | None, document: str | None = None,
            to: dict | None = None) -> dict:
    """A handoff message for whoever takes *sid*'s work next: *to*, else the paths the
    session holds and its space.  *document* (the predecessor's handoff path) is also
    kept on the session."""
    P.validate_session_id(sid)
    if document is not None and not document.strip():
        raise BadInput("empty handoff path")
    if document is not None:  # checked as a lock's path is, before anything is written
        document = registry.repo_path(document)
    if to is not None and "paths" in to:
        to = {"paths": registry.targets(to["paths"], new=False)}
    elif to is None:
        registry.catch_up()  # the session may be another clone's, registered after our fetch
        session = registry.session(sid)
        held = list(dict.fromkeys(session.locks + session.space))
        if not held:
            raise BadInput(f"{sid} holds no path and has no space: say who takes the work "
                           "next with --to SID or --to-path PATH")
        to = {"paths": held}
    body = text if text is not None else f"handoff document: {document}"
    result = _send(registry, sid, {"id": message_id(sid, None), "kind": "handoff", "to": to,
                                   "subject": None, "body": body, "key": None,
                                   "reply_to": None, "document": document})
    if document is not None and mailbox(registry) is not registry:
        # the session file is on the registry branch: one more operation there (rare)
        unpushed = registry.unpushed
        registry.handoff(sid, document)
        registry.unpushed = unpushed or registry.unpushed
    return result


def _send(registry: Registry, sender: str, message: dict) -> dict:
    """Send *message*: decided against the registry branch (the sender is live, whom
    the audience reaches, the thread it answers), committed on the messages branch."""
    P.validate_session_id(sender)
    validate(message)
    registry.settle_layout()  # an older layout is converted first: sends go by the new one
    box = mailbox(registry)
    if box is registry:  # a registry that keeps its messages itself (a hub)
        if message["reply_to"] and find(registry.view(), message["reply_to"]) is None:
            raise BadInput(f"unknown message id {message['reply_to']}")
        return registry.apply(registry.new_op("send", session=sender, message=message))
    main = registry.view()
    kind, named = next(iter(message["to"].items()))
    if not (kind == "session" and main.session(sender, strict=False) is not None
            and main.session(named, strict=False) is not None):
        # who a path, tag, room or everyone reaches, or a session this clone does not see
        # live, is decided on the registry branch as the remote has it (one fetch); a
        # send between two sessions this clone sees live decides on its copy
        main = fresh_view(registry)
    read = views(registry, main)
    thread = message["id"]
    if message["reply_to"]:
        replied = find(read, message["reply_to"])
        if replied is None:
            raise BadInput(f"unknown message id {message['reply_to']}")
        thread = replied.get("thread") or replied["id"]
    if field(message, "sender") == "session":
        registry.live_session(main, sender)
    for view in read:  # a retry of a message already sent (on either branch)
        existing = load(view.read(message_path(sender, message["id"])))
        if existing is not None:
            return _again(existing, message, sender).result
    # a keyed send is decided on the shared messages branch, even in layout format 3
    # (where a clone's own ref would take any content): its fast-forward push decides the
    # key once across clones, so the second content is refused, never kept beside the first
    box = writer(registry, main) if message["key"] is None else mailbox(registry)
    op = box.new_op("send", session=sender, message=message, thread=thread)
    recipients = audience(registry, main, sender, message["to"], op["at"])
    registry.warnings.extend(main.warnings)
    if not recipients and message["kind"] != "handoff":
        raise Refused(f"no live session is reached by {describe(message['to'])}: not sent",
                      details={"to": message["to"]})
    op["recipients"] = recipients
    try:
        result = box.apply(op)
    finally:
        _carry(registry, box)
    if field(message, "importance") == "high" and result["created"]:
        from ..store.urgent import mark  # told at each recipient's next tool call, here
        mark(registry.repo.info.common_dir, recipients, message["id"])
    return result


def ack(registry: Registry, sid: str, ids: list[str]) -> dict:
    """Acknowledge *ids* for *sid*, a recipient of each (checked against the registry
    branch), on the messages branch."""
    P.validate_session_id(sid)
    if not ids:
        raise BadInput("no message id to acknowledge")
    ids = list(dict.fromkeys(ids))
    registry.settle_layout()  # as a send: an ack goes where the one layout puts it
    box = mailbox(registry)
    main = registry.view()
    read = views(registry, main)
    found = {mid: find(read, mid) if MESSAGE_ID.fullmatch(mid) else None for mid in ids}
    if None in found.values() and box is not registry and box.remote:
        fresh_view(box)  # sent from another clone since this one last looked
        main = fresh_view(registry)  # whose fetch brings the clone refs (format 3)
        read = views(registry, main)
        found = {mid: find(read, mid) if MESSAGE_ID.fullmatch(mid) else None for mid in ids}
    if box is not registry and (main.session(sid, strict=False) is None or any(
            m is not None and sid not in (m.get("recipients") or []) for m in found.values())):
        # addressed by a path, tag or room (whether it reaches this session now), or a
        # session this clone does not see live: decided as the remote has it (one fetch)
        main = fresh_view(registry)
        read = views(registry, main)
    for mid, message in found.items():
        if message is None:
            raise BadInput(f"unknown message id {mid}")
    if box is registry:
        return registry.apply(registry.new_op("ack", session=sid, ids=ids))
    me = registry.live_session(main, sid)
    for mid, message in found.items():
        if not addressed_to(message, me, registry.repo.path_rule):
            raise Refused(f"{sid} is not a recipient of message {mid}",
                          details={"id": mid, "recipients": message["recipients"]})
    already = [mid for mid in ids if acked(read, sid, mid)]
    todo = [mid for mid in ids if mid not in already]
    result = {"session": sid, "acked": [], "already": already}
    if todo:
        box = writer(registry, main)
        try:
            done = box.apply(box.new_op("ack", session=sid, ids=todo, checked=True))
        finally:
            _carry(registry, box)
        result["acked"] = done["acked"]
        result["already"] = already + done["already"]
    return result


def inbox(registry: Registry, sid: str, *, include_acked: bool = False, wait: float = 0,
          refresh: Callable[[], None] = lambda: None,
          more: Callable[[], list[dict]] = lambda: [],
          sleep: Callable[[float], None] = time.sleep) -> dict:
    """The messages waiting for *sid*; with *wait*, block until one arrives (at most
    *wait* seconds).  *refresh* runs before each look (the command line's: a sync with
    the remote, when there is one); *more* adds messages from elsewhere (a hub's)."""
    P.validate_session_id(sid)
    deadline = time.monotonic() + wait
    while True:
        refresh()
        view = registry.view()
        session = view.session(sid) or view.done_session(sid)
        if session is None:
            raise registry.unknown(view, sid)
        read = views(registry, view)
        every = pending_for(read, session, include_acked=True) + more()
        messages = sorted((m for m in every if include_acked or not m["acked"]), key=order)
        registry.warnings = warnings(read)
        if messages or time.monotonic() >= deadline:  # an empty one says why (the CLI)
            return {"session": sid, "messages": messages, "rooms": rooms_of(session),
                    "acknowledged": sum(1 for m in every if m["acked"])}
        sleep(min(2.0 if registry.remote else 0.25, max(0.0, deadline - time.monotonic())))


def thread(registry: Registry, mid: str) -> dict:
    """The conversation *mid* belongs to, oldest first, with who acknowledged each."""
    if not MESSAGE_ID.fullmatch(mid or ""):
        raise BadInput(f"unknown message id {mid}")
    read = views(registry)
    message = find(read, mid)
    if message is None:
        raise BadInput(f"unknown message id {mid}")
    root = message.get("thread") or mid
    taken = acks(read)
    members = [m for m in every_message(read) if (m.get("thread") or m["id"]) == root]
    registry.warnings.extend(w for w in warnings(read) if w not in registry.warnings)
    return {"thread": root, "messages": [{**m, "acked_by": sorted(taken.get(m["id"], ()))}
                                         for m in _replies_after(members)]}


def _replies_after(members: list[dict]) -> list[dict]:
    """*members* (oldest first) with each reply after the message it answers: times are
    to the second, so a quick answer may carry its question's time."""
    ids = {m["id"] for m in members}
    children: dict[str | None, list[dict]] = {}
    for m in members:
        children.setdefault(m.get("reply_to") if m.get("reply_to") in ids else None, []).append(m)
    ready = [(order(m), m) for m in children.get(None, [])]
    heapq.heapify(ready)
    out = []
    while ready:  # the oldest message whose question is already out
        _, m = heapq.heappop(ready)
        out.append(m)
        for child in children.get(m["id"], []):
            heapq.heappush(ready, (order(child), child))
    return out
