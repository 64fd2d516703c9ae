"""What a rewound remote cost this clone, kept until `sync` names it (issue 34, item 4).

A rewind (the remote force-pushed to an older state) is met by whichever command of this
clone rebases first: a claim, a heartbeat, a fresh read, or `sync` itself.  Its re-apply
(sync/remote.py) refuses each lock another session claimed meanwhile; those refusals are
kept in the sync state (``lost``) until `sync` takes them, names each, exits 1 and sends
the session that lost the lock a message.  So a lock lost to a rewind is never silent,
whichever command met the rewind.
"""
from __future__ import annotations

from ..branch.records import iso
from ..core.registry import Registry
from ..errors import RegistryError
from ..store.flock import file_lock
from .state import load_state, save_state

KEEP = 200  # lost entries kept for the next sync; older ones go first


def record_lost(registry: Registry, refused: list[dict]) -> None:
    """Keep what a rewind of *registry*'s ref could not re-apply (caller holds the flock)."""
    old = [r for r in load_state(registry).get("lost", []) if isinstance(r, dict)]
    kept = {(r.get("branch"), r.get("session"), r.get("path")) for r in old}
    new = [{**r, "branch": registry.branch, "at": iso(registry.clock())} for r in refused
           if (registry.branch, r["session"], r["path"]) not in kept]  # met again: once
    if new:
        save_state(registry, lost=(old + new)[-KEEP:])


def take_lost(registry: Registry) -> list[dict]:
    """What rewinds of this clone's registry refs could not re-apply since the last
    `sync` (a lock another session claimed meanwhile, a session that ended there), each
    with ``told``: whether the session that lost it was sent a message.  Taken once."""
    with file_lock(registry.lock_file):
        lost = [r for r in load_state(registry).get("lost", []) if isinstance(r, dict)]
        if lost:
            save_state(registry, lost=[])
    return [{**r, "told": _tell(registry, r)} for r in lost]


def lost_line(lost: dict) -> str:
    what = lost.get("path") or f"session {lost.get('session')}"
    told = f"; told {lost['session']}" if lost.get("told") else ""
    return (f"lost when the remote went back in time: {what} of {lost.get('session')} "
            f"({lost.get('branch')}): {lost.get('reason')}{told}")


def _tell(registry: Registry, lost: dict) -> bool:
    """Send the session that lost a lock one message saying so (keyed: sent once);
    False when there is nobody to tell or it could not be sent."""
    from ..core.messages import send
    sid, path = lost.get("session"), lost.get("path")
    if not isinstance(sid, str) or not isinstance(path, str):
        return False  # a session that ended on the remote: nobody to tell
    body = (f"your lock on {path} was lost: the remote went back in time (a force-push to "
            f"an older state) and {lost.get('owner') or 'another session'} claimed it "
            f"meanwhile. {lost.get('reason', '')}")
    try:
        send(registry, sid, {"session": sid}, body, subject="lock lost to a rewind",
             key=f"rewind/{lost.get('at')}/{path}/{sid}"[:200])
    except RegistryError:
        return False
    return True
