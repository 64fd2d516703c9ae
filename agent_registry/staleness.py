"""When a lock stops counting.  Standard library only: the guard imports this.

A lock lives as long as its session: it is stale when the session is no longer
OnWorking, when the session's heartbeat is older than the lock's TTL, or, on the
session's own host, when its process is dead or its pid now belongs to another process.
A heartbeat read from another machine's clock gets a margin for clock skew, so a lock
only just past its TTL is never taken over.
"""
from __future__ import annotations

from .procinfo import hostname, is_alive
from .records import Holder, Session, parse_iso

CLOCK_SKEW = 30.0
DEFAULT_TTL = 600


def stale_reason(holder: Holder, session: Session | None, now: float,
                 this_host: str | None = None) -> str | None:
    """Why *holder*'s claim no longer counts, or None while it does."""
    if session is None:
        return "its session is not registered"
    if not session.live:
        return f"its session is {session.status}"
    here = this_host or hostname()
    if session.host == here and session.pid and not is_alive(session.pid, session.pid_start):
        return f"its process {session.pid} on {here} is gone"
    last = max(session.heartbeat_ts(), parse_iso(holder.acquired_at) or 0.0)
    margin = 0.0 if session.host == here else CLOCK_SKEW
    if now - last > holder.ttl + margin:
        return f"no heartbeat for {int(now - last)} s (TTL {holder.ttl} s)"
    return None


def session_stale_reason(session: Session, now: float, ttl: int = DEFAULT_TTL,
                         this_host: str | None = None) -> str | None:
    """Why a live session counts as a zombie (for cleanup), or None."""
    return stale_reason(Holder(session.id, "", "", ttl), session, now, this_host)
