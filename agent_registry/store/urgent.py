"""A high-importance message is told at the agent's next tool call, not only at its next
prompt (docs/messages.md, "Importance").

The check runs before every tool call, so it must cost nothing when nothing is urgent:
a send of a high message leaves a mark per recipient in this clone's local state folder
(``<common dir>/agent-registry/urgent/<session>``: the message ids, one a line), and the
pre- and after-tool hooks list that folder (one ``scandir`` of a folder that is usually
missing: harness/ids.urgent_waits, which finds it by store/layout.py alone, not importing
this module) before they do anything else.  (Here, below the core, so that the hooks
look without importing the core.)  Only a mark for its own session makes a hook open the
registry and tell what waits.  A mark is taken by renaming it away first, so a send
that marks meanwhile leaves a new one, never lost.

A high message sent from another clone is marked here by the fetch that brings it
(sync/rooms.py ``mark_arrived``).  Each (session, message) marked is recorded (``.marked``: one
``session id`` a line), so a message is marked once, whether the send or a later fetch
saw it first, and never again once told.  A fetch's pass reads it once and keeps in it
only what that pass could mark (``mark_all``), so it holds what waits, not all history.
"""
import os

from .layout import URGENT, state_path

RECORD = ".marked"  # hidden: the hooks' look (harness/ids.py) lists sessions, not this


def folder(common_dir: str) -> str:
    return state_path(common_dir, URGENT)


def mark(common_dir: str, sessions: list[str], mid: str) -> None:
    """Note that *mid* is urgent for each of *sessions* not marked for it before (best
    effort: the message is on the branch whatever happens here, told at the next prompt
    at the latest)."""
    mark_all(common_dir, [(sid, mid) for sid in sessions])


def mark_all(common_dir: str, pairs: list[tuple[str, str]], complete: bool = False) -> None:
    """Mark each (session, message) of *pairs* not marked before, the record read once.
    *complete*: *pairs* are all that a fetch may mark here now (every waiting high message
    of this clone's live sessions), so the record keeps only those: a message acknowledged,
    a session ended or one of another clone is never marked by a fetch again.  (A send's
    line written between this read and the rewrite may go: its message is marked once more
    at most, and the hooks' record of what they told, harness/messages.py, tells it once.)"""
    where = folder(common_dir)
    try:
        before = _recorded(where)
        new = list(dict.fromkeys(f"{sid} {mid}" for sid, mid in pairs
                                 if f"{sid} {mid}" not in before))
        if new:
            os.makedirs(where, exist_ok=True)
        for line in new:
            sid, mid = line.split(" ", 1)
            with open(os.path.join(where, sid), "a", encoding="utf-8") as f:
                f.write(mid + "\n")
        wanted = {f"{sid} {mid}" for sid, mid in pairs}
        if complete and not before <= wanted:
            _rewrite(where, sorted(wanted))
        elif new:
            with open(os.path.join(where, RECORD), "a", encoding="utf-8") as f:
                f.write("".join(line + "\n" for line in new))
    except OSError:
        pass


def _recorded(where: str) -> set[str]:
    try:
        with open(os.path.join(where, RECORD), encoding="utf-8") as f:
            return set(f.read().splitlines())
    except OSError:
        return set()


def _rewrite(where: str, lines: list[str]) -> None:
    """The record replaced whole (renamed over it: a reader sees the old or the new)."""
    temporary = os.path.join(where, f"{RECORD}.{os.getpid()}")
    with open(temporary, "w", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in lines))
    os.replace(temporary, os.path.join(where, RECORD))


def take(common_dir: str, sid: str) -> bool:
    """Take *sid*'s mark (it is being told now); whether there was one."""
    path = os.path.join(folder(common_dir), sid)
    taken = os.path.join(folder(common_dir), f".{sid}.{os.getpid()}")
    try:
        os.replace(path, taken)
        os.unlink(taken)
    except OSError:
        return False
    return True
