"""What the page shows, shaped from the registry: filtered sessions, locks with their
state, one session in full.  Plain functions over a Registry, so the API and the tests
share them."""
from __future__ import annotations

import re
from datetime import date, datetime, time, timedelta

from ..errors import BadInput
from ..cli.output import display_zone
from ..branch.records import LIVE, parse_iso, select_sessions, status_named
from ..core.registry import Registry
from ..branch.staleness import session_stale_reason
from ..branch.view import context_path

_UNSAFE_ID = re.compile(r"[\x00-\x1f\x7f/]")


def day_bounds(day: str, now: float) -> tuple[float, float]:
    """[start, end) of *day* ("today" or YYYY-MM-DD) in the display zone, as Unix times."""
    zone = display_zone()
    if day == "today":
        chosen = datetime.fromtimestamp(now, zone).date() if zone else date.fromtimestamp(now)
    else:
        try:
            chosen = date.fromisoformat(day)
        except ValueError:
            raise BadInput(f"invalid date {day!r}: use YYYY-MM-DD or today") from None
    start = datetime.combine(chosen, time(), zone)
    if zone is None:
        start = start.astimezone()
    return start.timestamp(), (start + timedelta(days=1)).timestamp()


def check_session_id(sid: str) -> str:
    """Ids from the branch are shown even when they break the registry's own rules (a
    hand-made or hostile file); only what could address another file is refused."""
    if not sid or _UNSAFE_ID.search(sid) or sid in (".", ".."):
        raise BadInput(f"invalid session id {sid!r}")
    return sid


def session_row(session, now: float, host: str) -> dict:
    row = session.to_dict()
    heartbeat = session.heartbeat_ts()
    row["heartbeat_age_seconds"] = max(0, int(now - heartbeat)) if heartbeat else None
    row["stale_reason"] = session_stale_reason(session, now, this_host=host) if session.live else None
    return row


def list_sessions(registry: Registry, *, status: str | None = None,
                  provider: str | None = None, project: str | None = None,
                  day: str | None = None, history: bool = False,
                  limit: int = 500) -> dict:
    """Sessions, newest first.  Default: the live ones.  *history* (or a status other
    than OnWorking) adds ended sessions; *day* keeps those active on that day."""
    status = status_named(status) if status else None
    now = registry.clock()
    sessions = registry.sessions(include_ended=history or status not in (None, LIVE))
    providers = sorted({s.provider for s in sessions if s.provider}, key=str.lower)
    projects = sorted({s.project for s in sessions if s.project})
    sessions = select_sessions(sessions, status=status, provider=provider, project=project)
    if day:
        start, end = day_bounds(day, now)
        sessions = [s for s in sessions if _active_between(s, start, end, now)]
    sessions.sort(key=lambda s: s.registered_at, reverse=True)
    return {"sessions": [session_row(s, now, registry.host) for s in sessions[:limit]],
            "total": len(sessions), "providers": providers, "projects": projects,
            "warnings": registry.warnings}


def _active_between(session, start: float, end: float, now: float) -> bool:
    began = parse_iso(session.registered_at) or 0.0
    ended = parse_iso(session.finished_at) if session.finished_at else None
    return began < end and (ended if ended is not None else now) >= start


def session_detail(registry: Registry, sid: str) -> dict:
    """One session in full, live or ended, with its diary."""
    check_session_id(sid)
    view = registry.view()
    session = view.session(sid, strict=False) or view.done_session(sid)
    if session is None:
        raise registry.unknown(view, sid)
    diary = view.read(context_path(sid))
    return {"session": session_row(session, registry.clock(), registry.host),
            "diary": diary.decode("utf-8", errors="replace") if diary is not None else None}


def list_locks(registry: Registry) -> dict:
    """Every lock held by a live session, fresh or stale, and whether the remote has
    confirmed the claim yet (always, when sync is off)."""
    locks = registry.locks()
    for lock in locks:
        lock["state"] = "stale" if lock["stale_reason"] else "fresh"
        lock["unconfirmed"] = not lock.get("confirmed", True)
    return {"locks": locks, "warnings": registry.warnings}


def across(parts: list[tuple[str, dict]], key: str, skipped: list[str],
           limit: int | None = None) -> dict:
    """``dashboard --repos``: the answers of several repositories (``(repository,
    answer)``, the served one first) as one: each row of *key* given its ``repository``;
    sessions newest first (at most *limit*) with totals, providers and projects of all;
    locks the served repository's first, each repository's by path.  Another repository's warnings say which it is, and
    each one *skipped* is a warning."""
    rows = [{**row, "repository": path} for path, part in parts for row in part[key]]
    warnings = [w if i == 0 else f"{path}: {w}"
                for i, (path, part) in enumerate(parts) for w in part.get("warnings", [])]
    merged = {key: rows, "warnings": warnings + skipped}
    if key == "sessions":
        rows.sort(key=lambda s: s.get("registered_at") or "", reverse=True)
        merged.update({key: rows[:limit], "total": sum(part["total"] for _, part in parts),
                       "providers": sorted({p for _, part in parts for p in part["providers"]},
                                           key=str.lower),
                       "projects": sorted({p for _, part in parts for p in part["projects"]})})
    return merged
