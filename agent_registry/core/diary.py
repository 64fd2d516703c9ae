"""The diary operation (``context log``): its shape and its handler."""
from __future__ import annotations

from ..branch import paths as P
from ..branch.records import iso
from ..branch.view import View, context_path
from ..errors import BadInput, NotFound
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


class DiaryCalls:
    """The diary part of the Registry API (core/registry.py mixes it in)."""

    def context_log(self, sid: str, text: str) -> dict:
        P.validate_session_id(sid)
        P.validate_text("diary text", text, allow_newlines=True)
        if not text.strip():
            raise BadInput("empty diary text")
        return self.apply(self.new_op("context-log", session=sid, text=text))


    def diary(self, sid: str) -> dict:
        """``{"session", "path", "diary"}``: the diary ``context log`` wrote, as on the
        branch (the predecessor's verify step reads it back); NotFound for an unknown
        session or one that logged nothing yet."""
        P.validate_session_id(sid)
        view = self.view()
        path = context_path(sid)
        raw = view.read(path)
        if raw is None:
            if view.session(sid, strict=False) is None and view.done_session(sid) is None:
                raise self.unknown(view, sid)
            raise NotFound(f"session {sid} has no diary yet (`agent-registry context log`)")
        return {"session": sid, "path": path, "diary": raw.decode("utf-8", errors="replace")}
