"""Where a message is, for an ``ack``, a ``thread`` and a reply that names no audience:
this repository's branches (fetched once more when another clone may have sent it since
the last fetch), else the hub of a room this session joined."""
from __future__ import annotations

from ..branch.mailbox import MESSAGE_ID, find
from ..core.messages_branch import mailbox, views
from ..core.registry import Registry
from ..errors import BadInput, Unconfirmed
from .remote import sync
from .rooms import hub_url, in_shared_room, member_id, open_hub


def where_is(registry: Registry, mid: str, sid: str | None = None) -> Registry | None:
    """The registry holding message *mid*: this one, else the hub (opened; the caller
    closes it), else None.  For session *sid* (an ack) the hub is asked only when it
    joined a room there."""
    if find(views(registry), mid) is not None:
        return registry
    box = mailbox(registry)
    if box is not registry and box.remote:  # sent from another clone since we looked
        # the messages branch, then the registry branch, whose fetch brings the clone
        # refs (layout format 3: where another clone's sends are), as core.messages.ack
        for branch in (box, registry):
            try:
                sync(branch)
            except Unconfirmed:
                pass  # offline: this clone's copy answers
            if find(views(registry), mid) is not None:
                return registry
    if not hub_url(registry) or (sid is not None and not in_shared_room(registry, sid)):
        return None
    hub = open_hub(registry)
    if find(hub.view(), mid) is not None:
        return hub
    hub.close()
    return None


def reply_audience(registry: Registry, mid: str, sid: str) -> tuple[Registry, dict]:
    """Where a reply of *sid* to message *mid* goes when it names no audience, and to
    whom: the original's sender, through the registry that holds the original (this one,
    or the hub of the room it came through; the caller closes a hub).  A reply to one's
    own message names its audience: it is bad input here."""
    target = where_is(registry, mid, sid) if MESSAGE_ID.fullmatch(mid) else None
    if target is None:
        raise BadInput(f"unknown message id {mid}")
    original = find(views(target) if target is registry else target.view(), mid)
    if original is None or original["from"] == member_id(target, sid):
        if target is not registry:
            target.close()
        raise BadInput(f"{mid} is {sid}'s own message: name whom the reply is for (--to SID)")
    return target, {"session": original["from"]}
