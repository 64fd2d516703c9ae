"""The commit-message format of the registry branch: a subject saying what happened, then
``Registry-*`` trailers, the last of which (``Registry-Data``) is the whole operation as
JSON.  So ``git log agent-registry`` is the audit log, and :func:`parse_op` gives back the
operation that sync replays, the watchdog follows and the dashboard draws.  Every commit
the tool makes writes its trailers here."""
from __future__ import annotations

from ..store import jsontext

TRAILER = "Registry-"


def trailers(op: dict, *, session: str | None = None, extra: tuple[str, ...] = ()) -> str:
    """The operation as trailers: readable, and parseable for replay.  *session* names
    the session when the operation does not (a resolution of another's operation);
    *extra* are what a handler decided (``Takeover: …``), before the recorded ones."""
    lines = [f"{TRAILER}{line}" for line in extra] + [f"{TRAILER}Op: {op['op']}"]
    if session or op.get("session"):
        lines.append(f"{TRAILER}Session: {session or op['session']}")
    for path in op.get("paths") or ([op["path"]] if op.get("path") else []):
        lines.append(f"{TRAILER}Path: {path}")
    for path, generation in (op.get("generations") or {}).items():
        lines.append(f"{TRAILER}Generation: {generation} {path}")
    if op.get("reason"):
        lines.append(f"{TRAILER}Reason: {' '.join(str(op['reason']).split())}")
    if op.get("by"):
        lines.append(f"{TRAILER}By: {op['by']}")
    lines.append(f"{TRAILER}Data: {jsontext.dumps(op, ensure_ascii=True, sort_keys=True)}")
    return "\n".join(lines) + "\n"


def parse_op(message: str) -> dict | None:
    """The operation recorded in a registry commit message, or None."""
    for line in reversed(message.splitlines()):
        if line.startswith(f"{TRAILER}Data: "):
            try:
                return jsontext.loads(line[len(TRAILER) + 6:])
            except ValueError:
                return None
    return None
