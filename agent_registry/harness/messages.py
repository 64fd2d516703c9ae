"""What a Claude Code session hears of its messages: the lines its hooks add to the
agent's context, each message once (docs/messages.md, "Claude Code")."""
from __future__ import annotations

import json
from pathlib import Path

from ..branch.mailbox import waiting_text
from ..sync.rooms import waiting


def unseen(registry, sid: str, shown_file: Path, keep=None) -> list[str]:
    """Lines for the agent's context: what waits for *sid* and is not listed in
    *shown_file* (the ids told before, kept locally), which then lists them too; so a
    message is told once, not on every prompt, and ``inbox`` keeps it until ``ack``.
    *keep(message)*, when given, picks the ones to tell now (the rest wait)."""
    view = registry.view()
    session = view.session(sid, strict=False)
    if session is None:
        return []
    try:
        shown = set(json.loads(shown_file.read_text()))
    except (OSError, ValueError, TypeError):
        shown = set()
    fresh = [m for m in waiting(registry, session)  # its rooms' too
             if m["id"] not in shown and (keep is None or keep(m))]
    if fresh:
        shown_file.parent.mkdir(parents=True, exist_ok=True)
        shown_file.write_text(json.dumps(sorted(shown | {m["id"] for m in fresh})))
    return [line.removeprefix("agent-registry: ") for line in waiting_text(fresh)]
