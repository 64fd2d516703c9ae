"""registry.md and the branch README, re-rendered into every registry commit.

Rendering reads only live sessions (each lists the paths it holds) and the short list of
recently ended ones, so it costs O(live sessions), never O(history) or O(locks).
"""
from __future__ import annotations

import json
import re

from .data import read_text
from .records import iso
from .view import View

MAX_LOCK_ROWS = 200
MAX_LOCKS_PER_SESSION = 20


_PLACEHOLDER = re.compile(r"\$(\$|[a-z_]+)")


def fill(name: str, **values: str) -> str:
    """The template *name* with ``$key`` replaced (``$$`` is a literal ``$``); a
    missing key is an error.  (string.Template compiles its pattern at import: a cost
    every command would pay.)"""
    return _PLACEHOLDER.sub(lambda m: "$" if m.group(1) == "$" else values[m.group(1)],
                            read_text("templates", name))


def cell(value) -> str:
    """A value made safe for one GFM table cell: no pipes, newlines or HTML."""
    text = "" if value is None else str(value)
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace("|", "\\|").replace("\r", "").replace("\n", "<br>")


def table(headers: list[str], rows: list[list]) -> str:
    if not rows:
        return "_none_"
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def registry_md(view: View, at: float, operation: str) -> bytes:
    sessions = sorted(view.live_summaries(MAX_LOCKS_PER_SESSION), key=lambda s: s[0].registered_at)
    session_rows, lock_rows, held = [], [], 0
    for s, count in sessions:
        session_rows.append([s.id, s.provider, s.ai_version, s.working_on, s.project,
                             s.git_branch, s.host, s.heartbeat_at, count])
        held += count
        for path in s.locks[:MAX_LOCKS_PER_SESSION]:
            if len(lock_rows) < MAX_LOCK_ROWS:
                lock_rows.append([path, s.id, s.working_on])
    locks = table(["Path", "Session", "Working on"], lock_rows)
    if held > len(lock_rows):
        locks += f"\n\n… and {held - len(lock_rows)} more (see `agent-registry lock list`)"
    ended = [[r.get("id"), r.get("provider"), r.get("working_on"), r.get("status"),
              r.get("finished_at")] for r in view.recent()]
    front = {"generated_at": iso(at), "live_sessions": len(sessions), "held_locks": held,
             "last_operation": operation}
    text = fill("registry.md",
        frontmatter="\n".join(f"{k}: {json.dumps(v, ensure_ascii=False)}" for k, v in front.items()),
        sessions=table(["Session", "Provider", "Version", "Working on", "Project", "Branch",
                        "Host", "Heartbeat", "Locks"], session_rows),
        locks=locks,
        ended=table(["Session", "Provider", "Working on", "Status", "Ended"], ended))
    return text.encode()


def branch_readme(branch: str) -> bytes:
    return fill("README.md", branch=branch).encode()
