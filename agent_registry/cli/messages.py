"""Commands of the messages area: ``send``, ``inbox``, ``ack``, ``thread``, ``handoff``
(docs/messages.md)."""
from __future__ import annotations

import click

from ..branch.mailbox import MESSAGE_ID
from ..errors import BadInput
from .console import BY_SESSION, resolve_session
from .context import Output, pass_out
from .output import local_time

AUDIENCE = ("--to", "--to-path", "--to-tag", "--room", "--all")


def audience(to: str | None, to_path: tuple, to_tag: str | None, room: str | None,
             everyone: bool, *, required: bool = True) -> dict | None:
    """The one selector the options name (see core.messages.selector)."""
    from ..core.messages import selector
    return selector(to, list(to_path), to_tag, room, everyone, required=required,
                    names=AUDIENCE)


def message_text(m: dict) -> str:
    from ..branch.mailbox import field, marks, sender
    head = f"{m['id']}  {local_time(m['at'])}  {marks(m)}{m['kind']} from {sender(m)}"
    if m.get("reply_to"):
        head += f", reply to {m['reply_to']}"
    if field(m, "ack_required"):
        head += ", ack required"
    if m.get("acked") or m.get("acked_by"):
        head += " (acked" + (f" by {', '.join(m['acked_by'])})" if m.get("acked_by") else ")")
    lines = [head] + ([f"  subject: {m['subject']}"] if m.get("subject") else [])
    if m.get("document"):
        lines.append(f"  document: {m['document']}")
    return "\n".join(lines + ["  " + line for line in m["body"].splitlines()])


def selector_options(command):
    """The audience options ``send`` and ``handoff`` share."""
    for option in reversed([
        click.option("--to", "to", metavar="SID", help="One session."),
        click.option("--to-path", "to_path", metavar="PATH", multiple=True,
                     help="Every live session holding a lock that covers PATH (repeatable)."),
    ]):
        command = option(command)
    return command


@click.command()
@click.argument("body")
@click.option("--from", "sender", metavar="SID|NAME",
              help="The sending session (default: $AGENT_REGISTRY_SESSION), or a person's "
                   "NAME (a name no session has): recorded as a person.")
@selector_options
@click.option("--to-tag", metavar="TAG", help="Every live session registered with --tag TAG.")
@click.option("--room", metavar="ROOM", help="Everyone in ROOM (room:<name> or repo:<name>).")
@click.option("--all", "everyone", is_flag=True, help="Every other live session.")
@click.option("--key", metavar="KEY",
              help="Idempotency key: a retry with the same key and content returns the same "
                   "id and sends nothing; the same key with other content is refused.")
@click.option("--reply-to", metavar="MSGID",
              help="The message this one answers (a thread); without --to, --room or the "
                   "like, the reply goes to its sender, through the room it came through.")
@click.option("--subject", metavar="TEXT", help="A one-line subject.")
@click.option("--importance", type=click.Choice(["high", "normal", "low"]), default="normal",
              show_default=True,
              help="high: told at the agent's next tool call, not only its next prompt.")
@click.option("--ack-required", is_flag=True,
              help="Ask the recipients to acknowledge it (agent-registry ack ID).")
@pass_out
def send(out: Output, body, sender, to, to_path, to_tag, room, everyone, key, reply_to,
         subject, importance, ack_required) -> None:
    """Send BODY (at most 64 KiB) to sessions; prints the message id. A person sends
    with --from NAME, a name unlike every session's id.

    Exit 1 when the session is unknown or nobody is reached (a message is never sent
    into the void), 2 for bad input.
    """
    from ..core.messages import send as send_message
    from ..core.persons import person_or_session
    sender = resolve_session(sender, given_by="--from SID|NAME")
    person = person_or_session(out.registry, sender)
    selector = audience(to, to_path, to_tag, room, everyone, required=reply_to is None)
    target = out.registry
    if selector is None:  # a reply naming no audience: to the original's sender
        from ..sync.whereis import reply_audience
        target, selector = reply_audience(out.registry, reply_to, sender)
    elif room is not None:
        from ..sync.rooms import registry_for
        target = registry_for(out.registry, room)
    try:
        from ..sync.rooms import member_id  # on the hub: this repository's member
        result = send_message(target, member_id(target, sender), selector, body,
                              subject=subject, key=key, reply_to=reply_to,
                              importance=importance, ack_required=ack_required, person=person)
    finally:
        release(out, target)
    out.emit({**result, **target.unpushed}, result["id"])


def release(out: Output, target) -> None:
    """Close *target* when it is not the command's own registry (the hub's), keeping
    its warnings for the command's stderr."""
    if target is not out.registry:
        out.registry.warnings.extend(target.warnings)
        target.close()


@click.command()
@click.argument("sid", required=False)
@click.option("--all", "include_acked", is_flag=True, help="Also the messages already acknowledged.")
@click.option("--wait", type=click.FloatRange(min=0), default=0, metavar="SECONDS",
              help="Block until a message arrives, at most SECONDS.")
@pass_out
def inbox(out: Output, sid, include_acked, wait) -> None:
    """Messages waiting for a session: sent to it, to a path it holds or will work on
    (its --space), to its tag, and handoffs nobody took yet."""
    from ..core.messages import inbox as read_inbox
    from ..sync.rooms import HubInbox, refresh
    sid = resolve_session(sid)
    hub = HubInbox(out.registry, sid, True)  # a session in a room: acked ones counted
    try:
        result = read_inbox(out.registry, sid, include_acked=include_acked, wait=wait,
                            refresh=lambda: refresh(out.registry), more=hub)
    finally:
        hub.close()
    text = "\n".join(message_text(m) for m in result["messages"]) or empty_text(result)
    from ..sync.fresh import said
    out.emit({**result, **said(out.registry)}, text)


def empty_text(result: dict) -> str:
    """Why nothing waits: all read and acknowledged, or nothing sent to it yet, and the
    rooms it hears (a message to another room never reaches it)."""
    done = result["acknowledged"]
    why = f"caught up ({done} acknowledged)" if done else "nothing sent to it yet"
    rooms = ", ".join(result["rooms"]) or "no room"
    return (f"no messages for {result['session']}: {why}; it is in {rooms} "
            "(join a shared room: register \"$AGENT_REGISTRY_SESSION\" --resume "
            "--room room:NAME)")


@click.command()
@click.argument("ids", nargs=-1, required=True, metavar="MSGID...")
@click.option("--session", "sid", metavar="SID", help="The recipient (default: $AGENT_REGISTRY_SESSION).")
@pass_out
def ack(out: Output, ids, sid) -> None:
    """Acknowledge messages (recipient only: exit 1 for anyone else; repeatable)."""
    from ..core.messages import ack as ack_messages
    from ..sync.whereis import where_is
    sid = resolve_session(sid, given_by=BY_SESSION)
    places: dict[int, tuple] = {}
    for mid in dict.fromkeys(ids):  # each id acknowledged where it lives: here or the hub
        target = where_is(out.registry, mid, sid) if MESSAGE_ID.fullmatch(mid) else None
        if target is None:
            raise BadInput(f"unknown message id {mid}")
        places.setdefault(id(target), (target, []))[1].append(mid)
    result, unpushed = {"session": sid, "acked": [], "already": []}, {}
    try:
        for target, mids in places.values():
            from ..sync.rooms import member_id  # on the hub: this repository's member
            done = ack_messages(target, member_id(target, sid), mids)
            result["acked"] += done["acked"]
            result["already"] += done["already"]
            unpushed.update(target.unpushed)
    finally:
        for target, _ in places.values():
            release(out, target)
    out.emit({**result, **unpushed},
             "\n".join([f"acked {i}" for i in result["acked"]]
                       + [f"already acked {i}" for i in result["already"]]))


@click.command()
@click.argument("mid", metavar="MSGID")
@pass_out
def thread(out: Output, mid) -> None:
    """A conversation: the message MSGID, what it answers and every reply, oldest first."""
    from ..core.messages import thread as read_thread
    from ..sync.rooms import refresh
    from ..sync.whereis import where_is
    refresh(out.registry)
    target = where_is(out.registry, mid) if MESSAGE_ID.fullmatch(mid) else None
    if target is None:
        raise BadInput(f"unknown message id {mid}")
    try:
        result = read_thread(target, mid)
    finally:
        release(out, target)
    out.emit(result, "\n".join(message_text(m) for m in result["messages"]))


@click.command()
@click.argument("sid")
@click.argument("path", required=False)
@click.option("--text", metavar="TEXT", help="The handoff itself, for whoever takes the work next.")
@selector_options
@pass_out
def handoff(out: Output, sid, path, text, to, to_path) -> None:
    """Hand the session's work on: `handoff SID PATH` records the path of its handoff
    document; with --text (or --to/--to-path) it is also a message that waits for
    whoever takes the work next: the session --to names, or the next session holding or
    registering a --space that covers --to-path (default: the paths the session holds
    and its space)."""
    if text is None and path is None:
        raise BadInput("give the handoff: PATH (a document) or --text TEXT")
    selector = audience(to, to_path, None, None, False, required=False)
    if text is None and selector is None:
        session = out.registry.handoff(sid, path)
        return out.emit({"session": session.to_dict()}, f"{session.id} handoff: {session.handoff}")
    from ..core.messages import handoff as send_handoff
    result = send_handoff(out.registry, sid, text=text, document=path, to=selector)
    waiting = "" if result["recipients"] else " (waits for whoever takes the work next)"
    out.emit({**result, **out.registry.unpushed}, result["id"] + waiting)
