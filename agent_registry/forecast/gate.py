"""Which live sessions count, and the cheap question a claim asks before any forecast:
does another live session work elsewhere (another worktree, branch or host)?  Kept apart
and light (the registry's own modules only), so a claim with nobody elsewhere, the usual
case, costs one read of the live sessions and no import of the forecast."""
from __future__ import annotations

from ..branch.shards import internal
from ..branch.staleness import session_stale_reason
from ..branch.view import View


def live(registry, view) -> list:
    """The sessions that count: live, not stale, not the registry's own (the shard fence,
    sessions of provider agent-registry, as watch leaves them out)."""
    now = registry.clock()
    return [s for s in view.live_sessions() if not internal(s)
            and session_stale_reason(s, now, this_host=registry.host, seen=registry.seen) is None]


def elsewhere(registry, sid: str) -> bool:
    """Is another live session recorded on another worktree, branch or host than *sid*?
    If not, there is nothing to forecast."""
    # the session files of the registry branch alone, in one batched read: not the lock
    # shards nor the clone refs' heartbeats (a stale session only costs the forecast)
    return bool(sessions_elsewhere(View(registry.repo, registry.tip()), sid)[1])


def sessions_elsewhere(view, sid: str) -> tuple:
    """(*sid*'s session or None, the other live sessions on another worktree, branch or
    host) in *view*."""
    me = view.session(sid, strict=False)
    if me is None:
        return None, []
    return me, [s for s in view.live_sessions() if s.id != sid and not internal(s) and
                (s.project != me.project or s.git_branch != me.git_branch or s.host != me.host)]
