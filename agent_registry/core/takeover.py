"""A lock taken from its holder tells the holder: after ``lock force-release`` (the
command or the dashboard), each previous holder still live gets a high-importance
message naming who took the lock and why, so an agent that still works on the file
hears it at its next tool call instead of finding out at its commit (issue 36)."""
from __future__ import annotations

from ..errors import RegistryError
from .messages import send
from .persons import person_or_session
from .registry import Registry

SYSTEM = "agent-registry"  # the sender when the taker has no usable name


def tell_holders(registry: Registry, result: dict) -> dict:
    """*result* (a force-release's) with ``told``: the message sent to each previous
    holder still live (``{"session", "id"}``); a message that could not be sent is a
    warning, never a failure of the release, which is already done."""
    view = registry.view()
    live = [sid for sid in result["previous"] if view.session(sid, strict=False) is not None]
    by, told = result["by"], []
    try:
        person = person_or_session(registry, by)
        sender = by
    except RegistryError:  # "a person", an id no session has: the tool speaks
        sender, person = SYSTEM, True
    forced = " while you were live" if result.get("was_fresh") else ""
    for sid in live:
        if sid == sender:
            continue
        body = (f"your lock on {result['path']} was taken by {by}{forced}: {result['reason']}. "
                f"Claim it again before you edit it (agent-registry lock acquire "
                f"{result['path']}), or ask {by}.")
        try:
            sent = send(registry, sender, {"session": sid}, body, importance="high",
                        person=person)
        except RegistryError as exc:
            registry.warnings.append(f"{sid} was not told its lock was taken: {exc.message}")
            continue
        told.append({"session": sid, "id": sent["id"]})
    return {**result, "told": told}
