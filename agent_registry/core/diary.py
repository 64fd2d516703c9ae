"""The diary operation (``context log``): its shape and its handler."""
from __future__ import annotations

from ..branch.records import iso
from ..branch.view import View, context_path
from .operations import Outcome, operation
from .shapes import TEXT

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing on every claim
if TYPE_CHECKING:
    from .registry import Registry


@operation("context-log", shape={"session": TEXT, "text": TEXT})
def apply_context_log(registry: Registry, view: View, op: dict) -> Outcome:
    sid = op["session"]
    session = view.session(sid) or view.done_session(sid)
    if session is None:
        raise registry.unknown(view, sid)
    path = context_path(sid)
    diary = view.read(path)
    if diary is None:
        diary = (f"# Diary of {sid}\n\n- provider: {session.provider} {session.ai_version}\n"
                 f"- working on: {session.working_on}\n- project: {session.project}\n"
                 f"- registered: {session.registered_at}\n\n").encode()
    line = f"- {iso(op['at'])} " + op["text"].strip().replace("\n", "\n  ") + "\n"
    view.write(path, diary + line.encode())
    return Outcome({"session": sid, "path": path, "line": line.rstrip("\n")},
                   f"context log {sid}")
