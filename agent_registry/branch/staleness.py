"""When a lock stops counting.  Standard library only: the guard imports this.

A lock lives as long as its session: it is stale when the session is no longer
OnWorking, when the session's heartbeat is older than the lock's TTL, or, on the
session's own host, when its vouched-for owner process is dead or its pid now belongs
to another process (an owner nobody vouched for proves nothing by exiting).
A heartbeat read from another machine's clock gets a margin for clock skew, so a lock
only just past its TTL is never taken over.  A heartbeat dated further than that margin
in the future (a clock running ahead) is aged from when this clone first saw it, so it
cannot keep a lock alive for as long as the clock is ahead.  One from another machine
dated past the TTL (a clock running behind reads so at once: issue 34) counts until
this clone has itself watched it go unrenewed for the TTL: another machine's stamp alone
never hands a lock over.  Without a first-seen file (the page, the dashboard) stamps
are taken as they read.
"""
import os

from ..store import jsontext
from ..store.liveness import hostname, is_alive
from .records import DEFAULT_TTL, Holder, Session, parse_iso

CLOCK_SKEW = 30.0
SEEN_KEEP = 7 * 86400  # forget first sightings older than this


class FirstSeen:
    """When this clone first saw a session's latest future-dated heartbeat: a small
    JSON file in the clone's local state (``<common dir>/agent-registry/``), read only
    when such a heartbeat turns up.  Without a file (or when it cannot be written) a
    sighting counts from now, which keeps the lock held: the safe side."""

    def __init__(self, path: str | None) -> None:
        self.path = path

    def since(self, sid: str, stamp: float, now: float) -> float:
        """When *sid*'s heartbeat dated *stamp* was first seen here (recorded as *now*
        the first time)."""
        if not self.path:
            return now
        try:
            return self._update(sid, stamp, now)
        except (OSError, ValueError):
            return now

    def _update(self, sid: str, stamp: float, now: float) -> float:
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        with os.fdopen(fd, "r+", encoding="utf-8") as f:
            try:
                import fcntl
                fcntl.flock(f.fileno(), fcntl.LOCK_EX)  # concurrent judges agree on one sighting
            except ImportError:
                pass
            seen = _sightings(f.read())
            entry = seen.get(sid)
            if entry is not None and entry["at"] == stamp:
                return float(entry["seen"])
            seen = {k: v for k, v in seen.items() if now - v["seen"] < SEEN_KEEP}
            seen[sid] = {"at": stamp, "seen": now}
            f.seek(0)
            f.truncate()
            f.write(jsontext.dumps(seen, sort_keys=True))
            return now


def _sightings(text: str) -> dict[str, dict]:
    """The well-formed entries of the first-seen file; a damaged file or entry (a crash
    mid-write, a hand edit) is dropped, so its sightings count from now (locks held)."""
    try:
        data = jsontext.loads(text) if text.strip() else {}
    except ValueError:
        return {}
    if not isinstance(data, dict):
        return {}
    return {sid: v for sid, v in data.items() if isinstance(v, dict) and all(
        isinstance(v.get(k), (int, float)) and not isinstance(v.get(k), bool)
        for k in ("at", "seen"))}


def ahead_by(session: Session, now: float) -> float | None:
    """How far in the future *session*'s heartbeat is dated, when that is beyond the
    clock-skew margin (the writer's clock runs ahead); else None."""
    ahead = session.heartbeat_ts() - now
    return ahead if ahead > CLOCK_SKEW else None


def stale_reason(holder: Holder, session: Session | None, now: float,
                 this_host: str | None = None, seen: FirstSeen | None = None,
                 ended: Session | None = None) -> str | None:
    """Why *holder*'s claim no longer counts, or None while it does.  *seen* ages a
    heartbeat dated beyond the clock-skew margin in the future.  *ended*: the holder's
    ended record, when it has no live one (its session ended, rather than was never
    registered here)."""
    if session is None:
        return f"its session ended ({ended.status})" if ended is not None \
            else "its session is not registered"
    if not session.live:
        return f"its session is {session.status}"
    here = this_host or hostname()
    if session.host == here and session.vouched and not is_alive(session.pid, session.pid_start):
        return f"its process {session.pid} on {here} is gone"
    margin = 0.0 if session.host == here else CLOCK_SKEW
    beat = session.heartbeat_ts()
    if ahead_by(session, now):
        since = (seen or FirstSeen(None)).since(session.id, beat, now)
        if now - since > holder.ttl + margin:
            return (f"no new heartbeat for {int(now - since)} s since this clone first saw "
                    f"it (TTL {holder.ttl} s); it is dated {int(beat - now)} s in the "
                    f"future: the clock of {session.host or 'its host'} runs ahead")
        return None
    last = last_sign(holder, session, now)
    if now - last <= holder.ttl + margin:
        return None
    if margin and seen is not None and now - seen.since(session.id, last, now) <= \
            holder.ttl + margin:
        return None  # another machine's stamp, not yet watched for a TTL here (behind_note)
    return f"no heartbeat for {int(now - last)} s (TTL {holder.ttl} s)"


def last_sign(holder: Holder, session: Session, now: float) -> float:
    """The holder's last sign of life as its machine dated it: its heartbeat, or its claim
    (a claim renews the heartbeat too; one dated in the future without it proves nothing)."""
    acquired = parse_iso(holder.acquired_at) or 0.0
    return max(session.heartbeat_ts(), acquired if acquired - now <= CLOCK_SKEW else 0.0)


def behind_note(path: str, holder: Holder, session: Session | None, now: float,
                this_host: str | None, seen: FirstSeen) -> str | None:
    """Why a holder whose stamp reads past its TTL by this clock still counts, for the
    refusal to say in its line (None when the stamp does not read so): its machine's
    clock may be behind ours, so this clone counts from when it first saw the stamp."""
    if session is None or not session.live or session.host == (this_host or hostname()):
        return None
    last = last_sign(holder, session, now)
    if now - last <= holder.ttl + CLOCK_SKEW or ahead_by(session, now):
        return None
    watched = int(now - seen.since(session.id, last, now))
    return (f"its heartbeat reads {int(now - last)} s old by this clock, but this clone "
            f"first saw it {watched} s ago: the clock of {session.host or 'its host'} may "
            f"be behind, so it counts until it goes {holder.ttl + int(CLOCK_SKEW)} s "
            f"unrenewed here (agent-registry lock force-release {path} --force --reason WHY "
            f"frees it now)")


def session_stale_reason(session: Session, now: float, ttl: int = DEFAULT_TTL,
                         this_host: str | None = None,
                         seen: FirstSeen | None = None) -> str | None:
    """Why a live session counts as a zombie (for cleanup), or None."""
    return stale_reason(Holder(session.id, "", "", ttl), session, now, this_host, seen)


def age(seconds: float | None) -> str:
    """A duration as people read it in a table: 45s, 12m, 3h, 2d."""
    if seconds is None:
        return "?"
    seconds = int(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
