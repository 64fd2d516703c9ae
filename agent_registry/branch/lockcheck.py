"""`lock check`: per target, free, locked (by a live session), locked-by-me or stale,
and why a holder no longer counts; and how a lock command's arguments name targets and
sessions.  Read-only, over what a registry reads (:class:`CheckCalls`): the core's
Registry mixes it in (core/locks.py), and `lock check` without a remote answers through
cli/quickcheck.py, which reads the same view without importing the core."""
from ..errors import BadInput, RegistryError
from . import paths as P
from .records import Holder, Session, parse_iso
from .staleness import FirstSeen, ahead_by, stale_reason
from .view import View, done_path, live_path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

RANK = {"locked": 0, "locked-by-me": 1, "stale": 2}  # the state a target reports first


class CheckCalls:
    """`lock check` over what its host provides: ``repo`` (with its ``path_rule``),
    ``view()``, ``clock()``, ``host``, ``seen``, ``unconfirmed_claims()`` and, where
    names compare ignoring case, ``spelled()``."""

    def targets(self, raw: "Iterable[str]", *, new: bool = True) -> list[str]:
        """The stored targets *raw* names.  Globs are checked only for *new* targets: a
        bad glob already on the branch can still be checked, released and force-released."""
        info, rule = self.repo.info, self.repo.path_rule
        out = []
        for item in P.csv_items(raw) if isinstance(raw, str) else raw:
            target = P.target(item, toplevel=info.toplevel, prefix=info.prefix, new=new,
                              rule=rule)
            if target not in out:
                out.append(target)
        return self.spelled(out) if rule.ignorecase else out

    def repo_path(self, raw: str) -> str:
        """The repository-relative form of one file's path *raw* (a handoff document's),
        validated as a lock's path is (:func:`~agent_registry.branch.paths.normalize`):
        outside the repository, inside .git, blank or with a control character is
        BadInput.  A name with glob characters is only a name here."""
        info = self.repo.info
        return P.normalize(raw, toplevel=info.toplevel, prefix=info.prefix,
                           rule=self.repo.path_rule)

    def session_names(self, names: "Iterable[str]") -> set[str]:
        """Which of *names* are registered sessions, live or ended (direct lookups)."""
        candidates = [n for n in names if P.is_session_id(n)]
        if not candidates:
            return set()
        view = self.view()
        return {n for n in candidates
                if view.read(live_path(n)) is not None or view.read(done_path(n)) is not None}

    def check(self, paths: "Iterable[str]", sid: str | None = None) -> list[dict]:
        """Per target: free, locked (by a live session), locked-by-me, or stale.  *sid*
        (whose locks are "locked-by-me") must be a registered session, live or ended:
        an unknown one is NotFound (exit 1), as for a claim, never silently nobody."""
        if sid:
            P.validate_session_id(sid)
        targets = self.targets(paths, new=False)
        if not targets:
            raise BadInput("no path to check")
        view = self.view()
        if sid and view.read(live_path(sid)) is None and view.read(done_path(sid)) is None:
            raise self.unknown(view, sid)
        out = check_targets(view, targets, sid, self.clock(), self.host, self.seen,
                            self.unconfirmed_claims())
        self.warnings = view.warnings
        return out


def judge(view: View, holder: Holder, at: float, host: str, seen: FirstSeen) -> str | None:
    """Why *holder* no longer counts, or None while it does.  Its own record is judged
    first: when that alone keeps it (live, its process not gone, its heartbeat within the
    TTL and not dated ahead), newer stamps elsewhere cannot make it stale, so the lock
    shards' held lists (sixteen trees and lists at 10,000 locks) go unread.  The one
    case they could, a newer stamp dated ahead and first seen over a TTL ago, keeps the
    lock held until the record itself ages: the safe side."""
    record = view.recorded(holder.session)
    if record is not None and not ahead_by(record, at) and \
            stale_reason(holder, record, at, host) is None:
        return None
    session = view.session(holder.session, strict=False)
    if session is None and holder.session in view.unreadable:
        return None  # an unreadable session file keeps its locks held
    return stale_reason(holder, session, at, host, seen,
                        ended=None if session is not None else _ended(view, holder.session))


def check_targets(view: View, targets: list[str], sid: str | None, at: float, host: str,
                  seen: FirstSeen, unconfirmed: set[tuple[str, str]]) -> list[dict]:
    """The state of each of *targets* for session *sid*; *unconfirmed*: (session, path)
    of claims the remote has not seen yet."""
    out = []
    for target in targets:
        states = []
        for lock in view.covering(target):
            for holder in lock.holders:
                reason = judge(view, holder, at, host, seen)
                owner = view.recorded(holder.session) or \
                    view.session(holder.session, strict=False)
                state = ("locked-by-me" if holder.session == sid and reason is None
                         else "stale" if reason else "locked")
                states.append({"path": target, "state": state, "target": lock.path,
                               "owner": holder.session, "mode": lock.mode,
                               "working_on": owner.working_on if owner else "",
                               "since": holder.acquired_at,
                               "age_seconds": age_seconds(holder.acquired_at, at),
                               "reason": holder.reason, "stale_reason": reason,
                               "confirmed": (holder.session, lock.path) not in unconfirmed})
        states.sort(key=lambda s: RANK[s["state"]])
        out.append(states[0] if states else {"path": target, "state": "free"})
    return out


def age_seconds(since: str, at: float) -> int | None:
    ts = parse_iso(since)
    return None if ts is None else max(0, int(at - ts))


def _ended(view: View, sid: str) -> Session | None:
    """*sid*'s ended record, for saying why its locks no longer count (None: none, or
    unreadable: then "not registered" is said, as before)."""
    try:
        return view.done_session(sid)
    except RegistryError:
        return None
