"""The one line a refused claim says: each conflicting lock, its holder, since when,
what it works on and why, and how to reach the holder (the core's Refused and sync's
re-apply after a rewind both say it)."""
from __future__ import annotations


def describe_conflicts(conflicts: list[dict]) -> str:
    parts = []
    for c in conflicts:
        via = f" (via {c['target']})" if c["target"] != c["path"] else ""
        what = f", working on: {c['working_on']}" if c["working_on"] else ""
        clock = f" ({c['clock']})" if c.get("clock") else ""
        why = f", because: {c['reason']}" if c.get("reason") else ""
        parts.append(f"{c['path']} is locked by {c['owner']}{via} since {c['since']}{what}{why}"
                     f"{clock}")
    asked = dict.fromkeys(c["reach"] for c in conflicts if c.get("reach"))
    return "; ".join(parts) + "".join(f"; ask: {reach}" for reach in asked)
