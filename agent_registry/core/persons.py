"""Who sends a message: a live session, or a person by name (docs/messages.md, "A person
in the loop").  A person has no session: the message records ``"sender": "person"``."""
from __future__ import annotations

from ..branch import paths as P
from ..errors import Refused
from .messages_branch import fresh_view
from .registry import Registry


def person_or_session(registry: Registry, name: str) -> bool:
    """Does *name* send as a person (True) or as its live session (False)?  A person's
    name is one no session has and not shaped like a session id (``alice``, not
    ``kimi-2``); an ended session's, an unknown id, or a name near a live session's id
    (a typo) is refused as an unknown session: a message is never put in a session's
    mouth, nor an agent's typo taken for a person."""
    P.validate_session_id(name)
    view = registry.view()
    if view.session(name, strict=False) is None and registry.remote:
        view = fresh_view(registry)  # a session another clone registered since we looked
    if view.session(name, strict=False) is not None:
        return False
    if view.done_session(name):
        raise Refused(f"session {name} has ended: it cannot send")
    from ..branch.sessionids import closest, looks_like_session_id
    if looks_like_session_id(name) or closest(name, [s.id for s in view.live_sessions()]):
        raise registry.unknown(view, name)
    return True
