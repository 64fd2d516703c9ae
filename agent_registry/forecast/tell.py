"""Telling the agents: each session of an overlap's two sides gets one message naming the
other side's newest session, what it works on, the paths and the kind of overlap.

The message is sent *from* that session (so ``send --reply-to`` reaches it), with the
subject "overlap forecast", keyed by the recipient and the overlap's key (the pair of
sides, the paths and their kinds: ``overlap.overlap_key``): one collision is one message
per session, however many sessions work on the other side, and a session joining that
side later tells nobody anything new.  A keyed message has a
stable id, so a second run, here or on another clone, finds it on the messages branch and
sends nothing; this clone also remembers what it sent (``sent`` in the state file), so a
repeat run does not even ask, and what it told each recipient of each other side
(``told``), so a new commit touching the same paths, or a path dropping out, sends
nothing new; a new path, or a path whose kind gets worse, is a new message.  The
harness hooks bring it into the agent's context at its next prompt.
"""
from __future__ import annotations

from ..core.messages import send
from ..errors import Refused
from .overlap import KINDS, load, overlaps, save, side_name

SUBJECT = "overlap forecast"
SHOWN = 6  # paths named in one message; the rest are counted
ABOUT = 60  # characters of the other's "working on": the prompt hook shows 200 in all


def _names(paths: list[str]) -> str:
    more = f" and {len(paths) - SHOWN} more" if len(paths) > SHOWN else ""
    return ", ".join(paths[:SHOWN]) + more


def _other(overlap: dict, recipient: str) -> dict:
    return next(s for s in overlap["sides"] if recipient not in s["sessions"])


def text(overlap: dict, recipient: str) -> str:
    """The message *recipient* gets about *overlap*: the other side's session first, so
    the prompt hook's one line (200 characters) names who and where."""
    other = _other(overlap, recipient)
    where = f"branch {other['branch']}" if other["branch"] else "a detached HEAD"
    more = len(other["sessions"]) - 1
    also = f" (and {more} more session{'s' if more > 1 else ''} there)" if more else ""
    work = other["working_on"]
    work = work if len(work) <= ABOUT else work[:ABOUT - 1] + "…"
    about = f" (working on: {work})" if work else ""
    parts = []
    for kind, label in (("conflict", "will conflict at merge"),
                        ("both-changed", "both changed (merges cleanly)")):
        paths = [p["path"] for p in overlap["paths"] if p["kind"] == kind]
        if paths:
            parts.append(f"{label}: {_names(paths)}")
    held = [p for p in overlap["paths"] if p["kind"] == "held-changed"]
    mine = [p["path"] for p in held if recipient in p["held_by"]]
    theirs = [p["path"] for p in held if recipient not in p["held_by"]
              and set(p["held_by"]) & set(other["sessions"])]
    if mine:
        parts.append(f"you hold, it changed: {_names(mine)}")
    if theirs:
        parts.append(f"it holds, you changed: {_names(theirs)}")
    return (f"{other['session']}{also} on {where}{about} overlaps your work. "
            + "; ".join(parts) + ". Agree who changes what: agent-registry send --to "
            f"{other['session']} TEXT (sent by agent-registry overlap)")


def _news(overlap: dict, told: dict) -> dict[str, str]:
    """The paths of *overlap* the recipient was not told of, or whose kind is worse than
    it was told (*told*: path -> kind), with their kinds: a path dropping out is not news.
    A kind the state file should not hold counts as never told."""
    rank = {kind: n for n, kind in enumerate(KINDS)}
    return {p["path"]: p["kind"] for p in overlap["paths"]
            if rank[p["kind"]] < rank.get(told.get(p["path"]), len(KINDS))}


def notify(registry, report: dict | None = None) -> list[dict]:
    """Send what *report* (``overlaps``; computed when None) found and was not sent yet:
    [{"to", "from", "id", "key", "created"}], ``created`` False when it was on the branch.
    What each recipient was told of each other side (``told`` in the state file: path
    -> worst kind) is kept while the pair overlaps, so only a new path or a worse kind
    sends again."""
    report = report if report is not None else overlaps(registry)
    state = load(registry)
    sent = dict(state["sent"]) if isinstance(state.get("sent"), dict) else {}
    told = dict(state["told"]) if isinstance(state.get("told"), dict) else {}
    out, live, pairs = [], set(), set()
    for overlap in report["overlaps"]:
        for recipient in overlap["sessions"]:
            side = _other(overlap, recipient)
            other = side["session"]
            key = f"overlap/{recipient}/{overlap['key']}"
            pair = f"{recipient} {side_name(side)}"
            before = told.get(pair) if isinstance(told.get(pair), dict) else {}
            news = _news(overlap, before)
            pairs.add(pair)
            if key in sent:
                live.add(key)
            if key in sent or not news:
                continue
            try:
                result = send(registry, other, {"session": recipient},
                              text(overlap, recipient), subject=SUBJECT, key=key)
                created = result["created"]
                mid = result["id"]
            except Refused as exc:
                if "id" not in exc.details:  # the recipient ended meanwhile: not sent
                    continue
                mid, created = exc.details["id"], False  # sent before, in other words
            sent[key] = mid
            live.add(key)
            told[pair] = {**before, **news}
            out.append({"to": recipient, "from": other, "id": mid, "key": key,
                        "created": created})
    kept = {"sent": {k: v for k, v in sent.items() if k in live},
            "told": {k: v for k, v in told.items() if k in pairs}}
    if any(kept[name] != state.get(name) for name in kept):  # unchanged: no write (the
        state.update(kept)  # dashboard's stream reads the state folder's mtime)
        save(registry, state)
    return out
