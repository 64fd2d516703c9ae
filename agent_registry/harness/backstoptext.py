"""What the backstop (harness/backstop.py) says: to the agent whose command changed a
held file, and to each holder, in the words the edit gate uses (who holds it, what they
work on, how to reach them), with the blobs that keep both versions."""
from __future__ import annotations

MAX_WHAT = 300  # characters of the command quoted to a holder


def shown(path: str) -> str:
    """*path* as a message can carry it: the bytes of a name that is not UTF-8 (kept as
    surrogates, as Python reads such a name) escaped (``caf\\xe9.txt``)."""
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _what_happened(change: dict) -> str:
    if change["before"] is None:
        return "created"
    return "deleted" if change["after"] is None else "changed"


def _kept(change: dict) -> str:
    if change["after"] is None or change["after"] == change["before"]:
        return ""  # gone, or the same bytes (its mode alone changed)
    return f"; your version is kept: git show {change['after']}"


def _modes(change: dict) -> str:
    """`` (its mode, 0600 to 0644)`` when the call changed the file's permission bits."""
    perms = change.get("perms")
    return f" (its mode, {perms[0]:04o} to {perms[1]:04o})" if perms else ""


def agent_text(sid: str, changes: list[dict], told: list[str]) -> str:
    """The agent's answer: each changed held path, whose it is, what was done with it."""
    lines = []
    for change in changes:
        holders = ", ".join(f"{h['id']} (working on {h['working_on']!r})" if h.get("working_on")
                            else h["id"] for h in change["holders"])
        did = _what_happened(change)
        if change["restored"]:
            done = ("it was moved aside, as nothing was there" if did == "created"
                    else "it was put back as its holder had it")
        elif change["problem"]:
            done = f"it could not be put back ({change['problem']})"
        else:
            where = next((h["where"] for h in change["holders"] if h.get("where")), "")
            done = ("the holder works in another working tree" +
                    (f" ({where})" if where else "") + ", so it was left as you made it, "
                    "but a commit of it will be refused: undo it" +
                    (f" (git show {change['before']} > {change['path']})"
                     if change["before"] else f" (rm {change['path']})"))
        lines.append(f"agent-registry: your last command {did} {change['path']}"
                     f"{_modes(change)}, which "
                     f"{holders} holds (another live session): {done}{_kept(change)}.")
    holders = list(dict.fromkeys(h["id"] for c in changes for h in c["holders"]))
    ask = " or ".join(f"agent-registry send --to {h} --from {sid} 'TEXT'" for h in holders)
    told_text = f" {', '.join(told)} {'was' if len(told) == 1 else 'were'} told." if told else ""
    lines.append(f"Do not write it again: work on something else, or ask {', '.join(holders)} "
                 f"({ask}; the answer comes to your inbox).{told_text}")
    return "\n".join(lines)


def holder_text(sid: str, changes: list[dict], what: str, worktree: str) -> str:
    """The holder's message: which of its paths another session's command touched."""
    quoted = what if len(what) <= MAX_WHAT else what[:MAX_WHAT] + "…"
    lines = [f"agent-registry backstop: a command of session {sid} ({quoted}) touched what "
             f"you hold in {worktree}:"]
    for change in changes:
        did = _what_happened(change)
        if change["restored"]:
            done = "removed again" if did == "created" else \
                f"put back to your version (git show {change['before']})"
        else:
            done = "left as they made it (" + (change["problem"] or "not your working tree") + ")"
        theirs = f"; theirs is git show {change['after']}" if change["after"] else ""
        lines.append(f"- {change['path']}{_modes(change)}: {did}, {done}{theirs}")
    lines.append(f"Reply with agent-registry send --to {sid} --from HOLDER 'TEXT'.")
    return "\n".join(lines)
