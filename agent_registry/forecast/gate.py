"""Which live sessions count, and the cheap question a claim asks before any forecast:
does another live session work elsewhere (another worktree, branch or host)?  Kept apart
and light (the registry's own modules only), so a claim with nobody elsewhere, the usual
case, costs one read of the live sessions and no import of the forecast."""
from __future__ import annotations

from ..branch.shards import FENCE_SESSION
from ..branch.staleness import session_stale_reason


def live(registry, view) -> list:
    """The sessions that count: live, not stale, not the registry's own."""
    now = registry.clock()
    return [s for s in view.live_sessions() if s.id != FENCE_SESSION
            and session_stale_reason(s, now, this_host=registry.host, seen=registry.seen) is None]


def elsewhere(registry, sid: str) -> tuple[object, list] | None:
    """(*sid*'s session, the other live sessions) when one of them is recorded on another
    worktree, branch or host; else None (nothing to forecast)."""
    view = registry.view()
    me = view.session(sid, strict=False)
    if me is None:
        return None
    others = [s for s in live(registry, view) if s.id != sid]
    if any(s.project != me.project or s.git_branch != me.git_branch or s.host != me.host
           for s in others):
        return me, others
    return None
