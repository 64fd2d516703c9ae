"""The words of the edit gate's refusals that name other sessions: who holds what, and a
command whose writes it cannot all read while files are held (harness/decision.py)."""
from __future__ import annotations


def unfollowed_text(sid: str, unfollowed: list[str], held: dict) -> str:
    """Why a command whose writes cannot all be read is refused while files are held."""
    conflicts = [c for cs in held.values() for c in cs]
    owners = ", ".join(dict.fromkeys(c.owner for c in conflicts))
    files = ", ".join(list(held)[:5]) + (f" (and {len(held) - 5} more)" if len(held) > 5 else "")
    ask = " or ".join(f"agent-registry send --to {h} --from {sid} 'TEXT'"
                      for h in dict.fromkeys(c.owner for c in conflicts))
    return (f"agent-registry: this command writes files the gate cannot name "
            f"({'; '.join(unfollowed[:3])}), and {owners} (another live session) holds "
            f"{files} here. Run the write with the files named plainly (no variables, "
            f"xargs or find -exec), so the gate can check them, or ask {owners} ({ask}).")


def held_text(sid: str, conflicts: list, describe) -> str:
    """Who holds what, what they work on, and how to reach them."""
    held = list(dict.fromkeys(c.path for c in conflicts))
    holders = list(dict.fromkeys(c.owner for c in conflicts))
    owners = ", ".join(holders)
    reasons = "; ".join(describe(c) for c in conflicts)
    ask = " or ".join(f"agent-registry send --to {h} --from {sid} 'TEXT'" for h in holders)
    return (f"agent-registry: {', '.join(held)} is locked by {owners}, another live session "
            f"({reasons}). Do not edit it: work on something else, ask {owners} "
            f"({ask}; the answer comes to your inbox), or ask the user to coordinate.")
