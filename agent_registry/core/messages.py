"""Durable messages and handoffs: the ``send`` and ``ack`` operations, and the library
calls behind ``send``, ``inbox``, ``ack``, ``thread`` and ``handoff`` (docs/messages.md).
The files and their format are :mod:`agent_registry.branch.mailbox`'s.
"""
from __future__ import annotations

import heapq
import json
import time
from collections.abc import Callable

from ..branch import paths as P
from ..branch.mailbox import (CONTENT, MESSAGE_ID, ack_path, acks, addressed_to,
                              every_message, find, in_room, load, message_id, message_path,
                              order, pending_for, validate)
from ..branch.records import iso
from ..branch.view import View
from ..errors import BadInput, NotFound, Refused
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
    sender = _session(registry, view, op)
    path = message_path(sender.id, message["id"])
    existing = load(view.read(path))
    if existing is not None:
        if all(existing.get(k) == message.get(k) for k in CONTENT):
            return Outcome({"id": existing["id"], "created": False,
                            "recipients": existing["recipients"], "message": existing}, None)
        raise Refused(f"key {message.get('key')!r} was already used by {sender.id} for "
                      f"another message ({message['id']})", details={"id": message["id"]})
    thread = message["id"]
    if message.get("reply_to"):
        replied = find(view, message["reply_to"])
        if replied is None:
            raise Refused(f"unknown message id {message['reply_to']}")
        thread = replied["thread"]
    recipients = audience(registry, view, sender.id, message["to"], op["at"])
    if not recipients and message["kind"] != "handoff":
        raise Refused(f"no live session is reached by {describe(message['to'])}: not sent",
                      details={"to": message["to"]})
    record = {**{k: message.get(k) for k in ("id", "kind")}, "from": sender.id,
              "to": message["to"], "recipients": recipients,
              **{k: message.get(k) for k in ("subject", "body", "key", "reply_to", "document")},
              "thread": thread, "at": iso(op["at"]), "ts": round(op["at"], 3)}
    view.write(path, (json.dumps(record, indent=1, ensure_ascii=False) + "\n").encode())
    if message.get("document"):  # the predecessor's handoff path, kept on the session
        sender.handoff = message["document"]
        view.put_session(sender)
    what = "handoff" if message["kind"] == "handoff" else "message"
    return Outcome({"id": message["id"], "created": True, "recipients": recipients,
                    "message": record},
                   f"{what} {message['id']} from {sender.id} to {describe(message['to'])}")


@operation("ack", {"session": TEXT, "ids": SOME_TEXTS})
def _op_ack(registry: Registry, view: View, op: dict) -> Outcome:
    ids = op.get("ids")
    if not isinstance(ids, list) or not ids or \
            not all(isinstance(i, str) and MESSAGE_ID.fullmatch(i) for i in ids):
        raise Refused("malformed ack: it needs message ids")
    me = _session(registry, view, op)
    acked, already = [], []
    for mid in ids:
        message = find(view, mid)
        if message is None:
            raise Refused(f"unknown message id {mid}")
        if not addressed_to(message, me):
            raise Refused(f"{me.id} is not a recipient of message {mid}",
                          details={"id": mid, "recipients": message["recipients"]})
        if view.read(ack_path(me.id, mid)) is not None:
            already.append(mid)
            continue
        view.write(ack_path(me.id, mid), (json.dumps(
            {"id": mid, "session": me.id, "at": iso(op["at"])}) + "\n").encode())
        acked.append(mid)
    result = {"session": me.id, "acked": acked, "already": already}
    if not acked:
        return Outcome(result, None)
    more = f" and {len(acked) - 1} more" if len(acked) > 1 else ""
    return Outcome(result, f"ack {acked[0]}{more} by {me.id}")


def _session(registry: Registry, view: View, op: dict):
    """The live session *op* acts for; a replayed operation without a valid one is
    refused, never a crash."""
    sid = op.get("session")
    if not isinstance(sid, str) or not P.SESSION_ID.fullmatch(sid):
        raise Refused(f"malformed {op.get('op')}: no valid session id")
    return registry.live_session(view, sid)


def audience(registry: Registry, view: View, sender: str, to: dict, at: float) -> list[str]:
    """The live sessions *to* reaches now (never the sender, unless named)."""
    kind, value = next(iter(to.items()))
    if kind == "session":
        if view.session(value) is None:
            if view.done_session(value):
                raise Refused(f"session {value} has ended: it would never read the message")
            raise NotFound(f"unknown session {value}")
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


def describe(to: dict) -> str:
    kind, value = next(iter(to.items()))
    return {"session": str(value), "paths": f"holders of {', '.join(value) if isinstance(value, list) else value}",
            "tag": f"tag {value}", "room": f"room {value}", "all": "everyone"}[kind]


# -- the library calls the commands make ----------------------------------------------

def send(registry: Registry, sender: str, to: dict, body: str, *, subject: str | None = None,
         key: str | None = None, reply_to: str | None = None) -> dict:
    """Send a message; returns ``{"id", "created", "recipients", "message"}``.  Bad input
    raises BadInput before anything is written; an empty audience is refused."""
    if "paths" in to:  # as the command line names them: relative to where it runs
        to = {"paths": registry.targets(to["paths"], new=False)}
    return _send(registry, sender, {"id": message_id(sender, key), "kind": "message",
                                    "to": to, "subject": subject or None, "body": body,
                                    "key": key, "reply_to": reply_to, "document": None})


def handoff(registry: Registry, sid: str, *, text: str | None, document: str | None = None,
            to: dict | None = None) -> dict:
    """A handoff message for whoever takes *sid*'s work next: *to*, else the paths the
    session holds and its space.  *document* (the predecessor's handoff path) is also
    kept on the session."""
    P.validate_session_id(sid)
    if to is not None and "paths" in to:
        to = {"paths": registry.targets(to["paths"], new=False)}
    elif to is None:
        session = registry.session(sid)
        held = list(dict.fromkeys(session.locks + session.space))
        if not held:
            raise BadInput(f"{sid} holds no path and has no space: say who takes the work "
                           "next with --to SID or --to-path PATH")
        to = {"paths": held}
    if document is not None and not document.strip():
        raise BadInput("empty handoff path")
    body = text if text is not None else f"handoff document: {document}"
    return _send(registry, sid, {"id": message_id(sid, None), "kind": "handoff", "to": to,
                                 "subject": None, "body": body, "key": None,
                                 "reply_to": None, "document": document})


def _send(registry: Registry, sender: str, message: dict) -> dict:
    P.validate_session_id(sender)
    validate(message)
    if message["reply_to"] and find(registry.view(), message["reply_to"]) is None:
        raise BadInput(f"unknown message id {message['reply_to']}")
    return registry.apply(registry.new_op("send", session=sender, message=message))


def ack(registry: Registry, sid: str, ids: list[str]) -> dict:
    P.validate_session_id(sid)
    if not ids:
        raise BadInput("no message id to acknowledge")
    view = registry.view()
    for mid in ids:
        if not MESSAGE_ID.fullmatch(mid) or find(view, mid) is None:
            raise BadInput(f"unknown message id {mid}")
    return registry.apply(registry.new_op("ack", session=sid, ids=list(dict.fromkeys(ids))))


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
            raise NotFound(f"unknown session {sid}")
        messages = sorted(pending_for(view, session, include_acked=include_acked) + more(),
                          key=order)
        registry.warnings = view.warnings
        if messages or time.monotonic() >= deadline:
            return {"session": sid, "messages": messages}
        sleep(min(2.0 if registry.remote else 0.25, max(0.0, deadline - time.monotonic())))


def thread(registry: Registry, mid: str) -> dict:
    """The conversation *mid* belongs to, oldest first, with who acknowledged each."""
    if not MESSAGE_ID.fullmatch(mid or ""):
        raise BadInput(f"unknown message id {mid}")
    view = registry.view()
    message = find(view, mid)
    if message is None:
        raise BadInput(f"unknown message id {mid}")
    root = message.get("thread") or mid
    taken = acks(view)
    members = [m for m in every_message(view) if (m.get("thread") or m["id"]) == root]
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
