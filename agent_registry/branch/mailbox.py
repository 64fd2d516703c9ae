"""Messages: where they live, their format, and reading them (docs/messages.md).
Standard library and the branch format only: the operations that write them are in
:mod:`agent_registry.core.messages`.

    messages/<sender>/<id>.json      one message, written once, by its sender
    acks/<recipient>/<id>.json       one acknowledgement, written by that recipient

They are written on a branch of their own, ``<registry branch>-messages``, so sends
never queue in front of claims; a registry written before kept them on the registry
branch itself, and readers read both.  Every reading function here takes one View or
a list of Views (that branch's and the registry branch's) and reads their union.

One writer per file, so two clones never write the same file and sync's replay never
loses one.
"""
from __future__ import annotations

import hashlib
import json
import os
import re

from . import paths as P
from ..errors import BadInput
from .records import Session, iso
from .render import cell, clip, fill
from .view import View

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .pathcase import Rule

MESSAGES = "messages"
ACKS = "acks"
MAX_KEY = 200
KINDS = ("message", "handoff")
SELECTORS = ("session", "paths", "tag", "room", "all")
MESSAGE_ID = re.compile(r"[0-9a-f]{16}")
BRANCH_SUFFIX = "-messages"  # agent-registry -> agent-registry-messages: a sibling ref
# the fields that make a message what it is: a retry with the same key must match them
CONTENT = ("kind", "to", "subject", "body", "reply_to", "document", "importance",
           "ack_required", "sender")
IMPORTANCE = ("high", "normal", "low")
SENDERS = ("session", "person")  # who wrote it: an agent's session, or a person by name
# what a record written before these fields existed reads as
DEFAULTS = {"importance": "normal", "ack_required": False, "sender": "session"}


def field(message: dict, name: str):
    """*name* of *message*, or what a record written without it means."""
    value = message.get(name)
    return DEFAULTS[name] if value is None else value


def message_path(sender: str, mid: str) -> str:
    return f"{MESSAGES}/{sender}/{mid}.json"


def ack_path(recipient: str, mid: str) -> str:
    return f"{ACKS}/{recipient}/{mid}.json"


def message_id(sender: str, key: str | None) -> str:
    """Stable for a key (a retry gets the same id), unique without one."""
    if key is None:
        return os.urandom(8).hex()
    return hashlib.sha256(f"{sender}\0{key}".encode()).hexdigest()[:16]


# -- validation: on the way in, and again when sync replays the operation --------------

def validate(message: dict) -> None:
    """Raise BadInput unless *message* (what a ``send`` operation carries) is well formed."""
    if not isinstance(message, dict):
        raise BadInput("a message must be an object")
    mid = message.get("id")
    if not isinstance(mid, str) or not MESSAGE_ID.fullmatch(mid):
        raise BadInput(f"invalid message id {mid!r}")
    if message.get("kind") not in KINDS:
        raise BadInput(f"invalid message kind {message.get('kind')!r}")
    _validate_selector(message.get("to"))
    body = message.get("body")
    if not isinstance(body, str):
        raise BadInput("the message body must be text")
    if not body.strip():
        raise BadInput("empty message body")
    P.validate_text("message body", body, allow_newlines=True)  # at most P.MAX_TEXT
    for label in ("subject", "key", "document"):
        value = message.get(label)
        if value is None:
            continue
        if not isinstance(value, str):
            raise BadInput(f"the {label} must be text")
        P.validate_text(label, value)
    key = message.get("key")
    if key is not None and not 1 <= len(key) <= MAX_KEY:
        raise BadInput(f"a key is 1 to {MAX_KEY} characters")
    reply = message.get("reply_to")
    if reply is not None and (not isinstance(reply, str) or not MESSAGE_ID.fullmatch(reply)):
        raise BadInput(f"invalid message id {reply!r}")
    if field(message, "importance") not in IMPORTANCE:
        raise BadInput(f"importance is one of {', '.join(IMPORTANCE)}, "
                       f"not {message.get('importance')!r}")
    if not isinstance(field(message, "ack_required"), bool):
        raise BadInput("ack_required must be true or false")
    if field(message, "sender") not in SENDERS:
        raise BadInput(f"sender is one of {', '.join(SENDERS)}")


def problem(record: object) -> str | None:
    """Why a message record read from a branch is not one a send would have written
    (None when it is): the fields ``validate`` checks on the way in, then what the send
    added (``from``, ``recipients``, ``thread``, ``at``, ``ts``).  Readers skip such a
    record with a warning, so one damaged file never hides the others."""
    try:
        validate(record)  # type: ignore[arg-type]
        assert isinstance(record, dict)
        P.validate_session_id(record.get("from") if isinstance(record.get("from"), str) else None)
    except BadInput as exc:
        return exc.message
    recipients = record.get("recipients")
    if not isinstance(recipients, list) or not all(
            isinstance(r, str) and P.is_session_id(r) for r in recipients):
        return "recipients must be a list of session ids"
    thread = record.get("thread")
    if thread is not None and not (isinstance(thread, str) and MESSAGE_ID.fullmatch(thread)):
        return f"invalid thread id {thread!r}"
    if not isinstance(record.get("at"), str):
        return "at must be a time (text)"
    ts = record.get("ts")
    if ts is not None and (isinstance(ts, bool) or not isinstance(ts, (int, float))):
        return "ts must be a number"
    return None


def _validate_selector(to) -> None:
    if not isinstance(to, dict) or len(to) != 1 or next(iter(to)) not in SELECTORS:
        raise BadInput(f"a message goes to exactly one of: {', '.join(SELECTORS)}")
    kind, value = next(iter(to.items()))
    if kind == "session":
        P.validate_session_id(value if isinstance(value, str) else None)
    elif kind == "paths":
        if not isinstance(value, list) or not value or \
                not all(isinstance(p, str) and p for p in value):
            raise BadInput("--to-path needs a path")
        for path in value:
            P.validate_text("path", path)
    elif kind in ("tag", "room"):
        P.validate_tag(value if isinstance(value, str) else "")
    elif value is not True:
        raise BadInput("--all takes no value")


def in_room(session: Session, room: str) -> bool:
    """``repo:<name>``: the sessions working in that repository; ``room:<name>``: those
    that joined it (the room is among their tags)."""
    if room.startswith("repo:"):
        return session.repo == room[len("repo:"):]
    return room in session.tags


def rooms_of(session: Session) -> list[str]:
    """The rooms *session* is in: its repository's own, and the shared ones it joined."""
    own = [f"repo:{session.repo}"] if session.repo else []
    return own + [tag for tag in session.tags if tag.startswith("room:")]


def describe(to: dict) -> str:
    """The audience *to* in a few words: ``kimi-1``, ``room room:contract`` …"""
    kind, value = next(iter(to.items()))
    return {"session": str(value), "paths": f"holders of {', '.join(value) if isinstance(value, list) else value}",
            "tag": f"tag {value}", "room": f"room {value}", "all": "everyone"}[kind]


# -- reading -----------------------------------------------------------------------------

def load(raw: bytes | None) -> dict | None:
    if raw is None:
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    return data if isinstance(data, dict) and isinstance(data.get("id"), str) else None


def where(view: View) -> str:
    """How a warning names *view*: the ref it was read from (set by the caller that
    made it, core/messages_branch.views), else its commit."""
    return getattr(view, "where", None) or (view.tip or "")[:12] or "the registry"


def read_message(view: View, path: str, raw: bytes | None) -> dict | None:
    """The message record at *path* of *view* (read as *raw*), or None with a warning
    on *view* naming the file and the ref when it is not one a send would write."""
    if raw is None:
        return None
    message = load(raw)
    why = "not a JSON message object" if message is None else problem(message)
    if why is not None:
        view.warn(f"{where(view)}:{path} is skipped: {why}")
        return None
    return message


def branch_of(registry_branch: str) -> str:
    """The messages branch beside *registry_branch* (``refs/heads/agent-registry/x``
    cannot exist beside ``refs/heads/agent-registry``, so a sibling name)."""
    return registry_branch + BRANCH_SUFFIX


def _each(views) -> list[View]:
    return list(views) if isinstance(views, (list, tuple)) else [views]


def find(views, mid: str) -> dict | None:
    """The message *mid*, looked up in each sender's folder (a listing, no blob read)."""
    for view in _each(views):
        if not view.tree and not view.writes:
            continue
        for sender in view.names(MESSAGES):
            if f"{mid}.json" in view.entries(f"{MESSAGES}/{sender}"):
                path = message_path(sender, mid)
                found = read_message(view, path, view.read(path))
                if found is not None:
                    return found
    return None


def every_message(views) -> list[dict]:
    """Every message of *views*, oldest first, each view's read in one pipelined batch;
    a message found on two branches counts once."""
    out: dict[tuple, dict] = {}
    for view in _each(views):
        for message in _messages_of(view):
            key = (message.get("from"), message["id"])
            # two versions of one id (one key sent with two contents from two clones,
            # before sends with a key were decided on one branch): every clone keeps the
            # same one, the oldest, whatever order it reads its refs in
            if key not in out or _earlier(message, out[key]):
                out[key] = message
    return sorted(out.values(), key=order)


def _earlier(a: dict, b: dict) -> bool:
    return (order(a), json.dumps(a, sort_keys=True)) < (order(b), json.dumps(b, sort_keys=True))


def _files_of(view: View, folder: str) -> dict[str, bytes | None]:
    """Path -> content of every ``<folder>/<name>/<file>.json`` of *view*, read in one
    pipelined batch (a file written in this operation and not yet stored: from *view*)."""
    files = {f"{folder}/{s}/{n}": oid for s in view.names(folder)
             for n, oid in view.entries(f"{folder}/{s}").items() if n.endswith(".json")}
    pending = [p for p, oid in files.items() if oid is None]
    raws = dict(zip([p for p in files if files[p]],
                    view.repo.read_blobs([oid for oid in files.values() if oid])))
    raws.update({p: view.read(p) for p in pending})
    return raws


def _messages_of(view: View) -> list[dict]:
    if not view.tree:
        return []
    out = []
    for path, raw in _files_of(view, MESSAGES).items():
        message = read_message(view, path, raw)
        if message is not None:
            out.append(message)
    return out


def order(message: dict) -> tuple:
    """Oldest first: by the sender's clock to the millisecond (``ts``; ``at`` is to the
    second), then by id."""
    ts = message.get("ts")
    return (ts if isinstance(ts, (int, float)) else 0, message.get("at") or "", message["id"])


def acks(views) -> dict[str, set[str]]:
    """Message id -> the sessions that acknowledged it: each view's ack files read in one
    batch, a malformed one reported and not counted (:func:`read_ack`)."""
    out: dict[str, set[str]] = {}
    for view in _each(views):
        if not view.tree:
            continue
        for path, raw in _files_of(view, ACKS).items():
            _, sid, name = path.split("/")
            if read_ack(view, sid, name.removesuffix(".json"), raw):
                out.setdefault(name.removesuffix(".json"), set()).add(sid)
    return out


def acked(views, sid: str, mid: str) -> bool:
    """Has *sid* acknowledged *mid* (on any of *views*)."""
    return any(read_ack(v, sid, mid, v.read(ack_path(sid, mid)))
               for v in _each(views) if v.tree or v.writes)


def read_ack(view: View, sid: str, mid: str, raw: bytes | None) -> bool:
    """Does the ack file of *sid* for *mid* (read as *raw*) acknowledge it?  Only an
    ack's own record does (a JSON object naming *mid*, and *sid* when it names a
    session); anything else at that path is reported on *view* and acknowledges
    nothing: a stray file must not make a message vanish from an inbox in silence."""
    if raw is None:
        return False
    record = load(raw)
    if record is not None and record["id"] == mid and record.get("session", sid) == sid:
        return True
    view.warn(f"{where(view)}:{ack_path(sid, mid)} is not counted as an acknowledgement: "
              "not an ack record (a JSON object with this message's id)")
    return False


def warnings(views) -> list[str]:
    return [w for view in _each(views) for w in view.warnings]


def addressed_to(message: dict, session: Session, rule: Rule | None = None) -> bool:
    """Is *message* for *session*: named among its recipients when sent, or, for a
    path or tag, reaching the session now (a later holder, a handoff's next taker).
    Paths compare as the repository's *rule* says (branch/pathcase.py): where case is
    ignored, a message to ``src/Auth.py`` reaches the holder of ``src/auth.py``."""
    if session.id in (message.get("recipients") or []):
        return True
    if message.get("from") == session.id:
        return False
    kind, value = next(iter((message.get("to") or {"all": True}).items()))
    if kind == "paths":
        mine = list(session.locks) + list(session.space)
        overlaps = rule.overlaps if rule is not None else P.overlaps
        return any(overlaps(held, path) for path in value for held in mine)
    if kind == "tag":
        return value in session.tags
    if kind == "room":  # a shared room also reaches who joins it later, as a tag does;
        # a repository's own room only the sessions present when it was sent (recipients)
        return not value.startswith("repo:") and in_room(session, value)
    return False


def pending_for(views, session: Session, *, include_acked: bool = False) -> list[dict]:
    """The messages waiting for *session*, each with ``acked`` (did it acknowledge it).
    A handoff another session took (acknowledged) no longer waits for the rest."""
    taken = acks(views)
    out, rule = [], next((view.repo.path_rule for view in _each(views)), None)
    for message in every_message(views):
        if not addressed_to(message, session, rule):
            continue
        by = taken.get(message["id"], set())
        named = session.id in message.get("recipients", [])
        if message.get("kind") == "handoff" and by - {session.id} and not named:
            continue
        acked = session.id in by
        if acked and not include_acked:
            continue
        out.append({**message, "acked": acked})
    return out


def waiting_text(messages: list[dict]) -> list[str]:
    """Lines for stderr: what waits for a session that just registered."""
    if not messages:
        return []
    lines = [f"agent-registry: {len(messages)} message(s) waiting (read: agent-registry "
             "inbox; done: agent-registry ack ID):"]
    for m in messages:
        to = m.get("to") or {}
        via = f" to {describe(to)}" if to and "session" not in to else ""  # its room, tag…
        lines.append(f"  {m['id']} {marks(m)}{m['kind']} from {sender(m)}{via}: "
                     + (f"[{m['subject']}] " if m.get("subject") else "")
                     + " ".join(m["body"].split())[:200]
                     + (f" (acknowledge it: agent-registry ack {m['id']})"
                        if field(m, "ack_required") else ""))
    return lines


def sender(message: dict) -> str:
    """Who sent *message*, as a reader is told: a person is said to be one."""
    person = field(message, "sender") == "person"
    return f"{message['from']} (a person)" if person else str(message["from"])


def marks(message: dict) -> str:
    """``HIGH `` / ``low `` before a message's kind (nothing for a normal one)."""
    importance = field(message, "importance")
    return {"high": "HIGH ", "low": "low "}.get(importance, "")


# -- the messages branch's own pages -------------------------------------------------------

def pages(branch: str, registry_branch: str, at: float, operation: str) -> dict[str, bytes]:
    """registry.md and README.md of the messages branch: it holds no sessions or locks,
    so its page says where the registry is and what the commit did, true at every
    commit and O(1) to render."""
    return {"registry.md": fill("messages.md", branch=cell(branch),
                                registry=cell(registry_branch), generated_at=iso(at),
                                operation=cell(clip(operation, 120))).encode(),
            "README.md": fill("messages-README.md", branch=branch,
                              registry=registry_branch).encode()}
