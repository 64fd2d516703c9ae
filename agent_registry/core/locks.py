"""The core's lock operations (claim, release, heartbeat, force-release): each with
its shape, checked before it is applied or replayed, and the handler that decides it
against a view of the branch and writes what changes."""
from __future__ import annotations

import os
import time

from ..branch import paths as P
from ..branch.lockcheck import CheckCalls, age_seconds, judge
from ..branch.records import SHORTEST_TTL, Holder, Lock, Session, iso
from ..branch.staleness import DEFAULT_TTL, behind_note, stale_reason
from ..branch.view import View
from ..errors import BadInput, NotFound, Refused
from ..store.procinfo import is_alive
from . import sharded
from .operations import Outcome, operation
from .shapes import AMOUNT, COUNT, FLAG, MAPPING, SOME_TEXTS, TEXT, TEXTS, one_of

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing on every claim
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from .registry import Registry


def check_generations(view: View, sid: str, op: dict) -> None:
    """Refuse *op* (a renewal or a release) when it names, in ``expect``, the generation
    of a claim of *sid*'s that is no longer the one held: the lock was taken over (and
    perhaps claimed again by another process of the same session) since that claim."""
    for target, generation in (op.get("expect") or {}).items():
        lock = view.lock(target)
        mine = lock.holder(sid) if lock else None
        if mine is None or mine.generation != generation:
            now = f"generation {mine.generation} is held now" if mine else \
                f"{sid} does not hold it now" + (
                    f" ({', '.join(h.session for h in lock.holders)} does)"
                    if lock and lock.holders else "")
            raise Refused(f"{target}: the claim of generation {generation} is gone (taken over "
                          f"or released since); {now}. Claim it again before you rely on it",
                          details={"path": target, "generation": generation,
                                   "current": mine.generation if mine else None})


@operation("claim", shape={"session": TEXT, "paths": SOME_TEXTS,
                             "mode": one_of("exclusive", "shared"), "ttl": COUNT,
                             "generations": MAPPING, "?expect": MAPPING})
def apply_claim(registry: Registry, view: View, op: dict) -> Outcome:
    sid, at, mode = op["session"], op["at"], op["mode"]
    me = registry.live_session(view, sid)
    check_generations(view, sid, op)
    conflicts = [c for t in op["paths"] for c in registry.conflicts(view, sid, t, mode, at)]
    if conflicts:
        from .conflicts import describe_conflicts  # a refusal only: not on every claim
        raise Refused(describe_conflicts(conflicts), details={"conflicts": conflicts})
    results, taken = [], []
    for target in op["paths"]:
        lock = view.lock(target) or Lock(target, mode)
        stale = {h.session: registry.judge(view, h, at) for h in lock.holders if h.session != sid}
        dropped = [h for h in lock.holders if stale.get(h.session)]
        for holder in dropped:
            registry.forget(view, holder.session, target)
            taken.append((target, holder.session, stale[holder.session]))
        lock.holders = [h for h in lock.holders if h not in dropped]
        mine = lock.holder(sid)
        if mine:
            mine.acquired_at, mine.ttl, state = iso(at), op["ttl"], "renewed"
            mine.reason = op.get("reason") or mine.reason  # a renewal keeps the claim's why
        else:
            mine = Holder(sid, op["generations"][target], iso(at), op["ttl"],
                          op.get("reason") or "")
            lock.holders.append(mine)
            state = "taken-over" if dropped else "acquired"
        lock.mode = mode
        view.put_lock(lock)
        if target not in me.locks:
            me.locks.append(target)
        results.append({"path": target, "status": state, "mode": mode,
                        "generation": mine.generation,
                        "previous": [h.session for h in dropped],
                        "taken_over": [{"session": h.session, "reason": stale[h.session]}
                                       for h in dropped]})
    me.heartbeat_at = iso(at)
    if op["ttl"] < me.shortest_lock_ttl:  # so registry.md knows to read its lock records
        me.extra[SHORTEST_TTL] = op["ttl"]
    view.put_session(me)
    names = op["paths"][0] + (f" and {len(op['paths']) - 1} more" if len(op["paths"]) > 1 else "")
    previous = ", ".join(dict.fromkeys(owner for _, owner, _ in taken))
    return Outcome({"session": sid, "locks": results},
                   f"claim {names} by {sid}" + (" (shared)" if mode == "shared" else "")
                   + (f", taking over from {previous}" if taken else ""),
                   [f"Takeover: {target} from {owner}: {' '.join(why.split())}"
                    for target, owner, why in taken])


@operation("release", shape={"session": TEXT, "paths": TEXTS, "?expect": MAPPING})
def apply_release(registry: Registry, view: View, op: dict) -> Outcome:
    sid = op["session"]
    me = registry.live_session(view, sid)
    check_generations(view, sid, op)
    results, changes = [], []
    for target in op["paths"]:
        lock = view.lock(target)
        if lock is None or not lock.holders:
            results.append({"path": target, "status": "not-locked"})
        elif lock.holder(sid) is None:
            owners = ", ".join(h.session for h in lock.holders)
            raise Refused(f"{target} is held by {owners}, not by {sid}",
                          details={"path": target, "owners": owners.split(", ")})
        else:
            changes.append(lock)
            results.append({"path": target, "status": "released"})
    for lock in changes:
        lock.holders = [h for h in lock.holders if h.session != sid]
        view.put_lock(lock)
    held = [t for t in me.locks if t not in op["paths"]]
    if held == me.locks and not changes:
        return Outcome({"session": sid, "locks": results}, None)
    me.locks = held
    view.put_session(me)
    released = [lock.path for lock in changes] or ["stale entries"]
    more = f" and {len(released) - 1} more" if len(released) > 1 else ""
    return Outcome({"session": sid, "locks": results},
                   f"release {released[0]}{more} by {sid}")


@operation("heartbeat", shape={"session": TEXT, "?paths": TEXTS, "?held": AMOUNT})
def apply_heartbeat(registry: Registry, view: View, op: dict) -> Outcome:
    """*held*: the locks the session holds where this branch does not record them (the
    lock shards, core/sharded.py), for the result and the commit's subject."""
    session = registry.live_session(view, op["session"])
    missing = [t for t in op.get("paths", ()) if not any(
        held == t or P.covers(held, t.rstrip("/")) for held in session.locks)]
    if missing:
        raise NotFound(f"{session.id} holds no lock on {', '.join(missing)}",
                       details={"paths": missing})
    session.heartbeat_at = iso(op["at"])
    view.put_session(session)
    held = op.get("held", len(session.locks))
    return Outcome({"session": session.id, "heartbeat_at": session.heartbeat_at,
                    "locks": held}, f"heartbeat {session.id} ({held} lock(s))",
                   page_lasts=True)  # registry.md shows no heartbeat time but as an age


@operation("force-release", shape={"path": TEXT, "force": FLAG, "by": TEXT, "reason": TEXT})
def apply_force_release(registry: Registry, view: View, op: dict) -> Outcome:
    target = op["path"]
    lock = view.lock(target)
    if lock is None or not lock.holders:
        raise NotFound(f"{target} is not locked")
    fresh = [h.session for h in lock.holders if registry.judge(view, h, op["at"]) is None]
    if fresh and not op["force"]:
        raise Refused(f"{target} is held by live session {', '.join(fresh)}: "
                      "pass --force to free it anyway")
    for holder in lock.holders:
        registry.forget(view, holder.session, target)
    previous = [h.session for h in lock.holders]
    lock.holders = []
    view.put_lock(lock)
    return Outcome({"path": target, "previous": previous, "was_fresh": bool(fresh),
                    "by": op["by"], "reason": op["reason"]},
                   f"force-release {target} (held by {', '.join(previous)}) "
                   f"by {op['by']}: {op['reason']}")


class LockCalls(CheckCalls):
    """The lock half of the Registry API (core/registry.py mixes it in): each call
    validates its arguments and applies one operation of this module (`lock check`'s
    reading, which writes nothing, is CheckCalls', branch/lockcheck.py)."""

    def spelled(self, targets: list[str]) -> list[str]:
        """*targets* spelled as the index spells them, else as a live claim does, else
        as the disk does (normalize's spelling): on a filesystem that ignores case, one
        file's claims land on one record (and shard) whatever spelling each agent typed."""
        rule = self.repo.path_rule
        names = [P.plain(t) for t in targets if not P.is_glob(t)]
        tracked = self.repo.index_names(names)
        held = [t for s in self.view().live_sessions() for t in s.locks]
        return list(dict.fromkeys(rule.respell(rule.respell(t, held), tracked)
                                  for t in targets))

    def claim(self, sid: str, paths: Iterable[str], *, ttl: int = DEFAULT_TTL,
              shared: bool = False, generations: Iterable[str] = (),
              reason: str | None = None) -> dict:
        """Claim every target or none.  Returns per target whether it was acquired,
        renewed (already ours) or taken over (from a stale holder).  *generations*: the
        tokens of the claims being renewed, one per path in order; refused when one is no
        longer the claim held (taken over since).  *reason*: why, stored with the claim
        and shown to whoever meets it."""
        P.validate_session_id(sid)
        if reason:
            P.validate_text("reason", reason)
        targets = self.targets(paths)
        if not targets:
            raise BadInput("no path to lock")
        if not 1 <= ttl <= 7 * 86400:
            raise BadInput(f"--ttl {ttl}: between 1 and 604800 seconds")
        expect = _expected(targets, generations)
        fresh = {t: os.urandom(8).hex() for t in targets}
        return self.apply(self.new_op("claim", session=sid, paths=targets, ttl=ttl,
                                   mode="shared" if shared else "exclusive",
                                   generations=fresh, **({"expect": expect} if expect else {}),
                                   **({"reason": reason} if reason else {})))

    def judge(self, view: View, holder: Holder, at: float) -> str | None:
        """Why *holder* no longer counts, or None while it does."""
        return judge(view, holder, at, self.host, self.seen)

    def conflicts(self, view: View, sid: str, target: str, mode: str, at: float) -> list[dict]:
        out = []
        for lock in view.covering(target):
            for holder in lock.holders:
                if holder.session == sid or (lock.mode == "shared" and mode == "shared"):
                    continue
                if self.judge(view, holder, at) is None:
                    owner = view.session(holder.session, strict=False)
                    clock = behind_note(lock.path, holder, owner, at, self.host, self.seen)
                    out.append({"path": target, "target": lock.path, "owner": holder.session,
                                "working_on": owner.working_on if owner else "",
                                "since": holder.acquired_at, "mode": lock.mode,
                                "reason": holder.reason,
                                "reach": f"agent-registry send --to {holder.session} TEXT",
                                **({"clock": clock} if clock else {})})
        return out

    def forget(self, view: View, sid: str, target: str) -> None:
        """Drop *target* from the held list of session *sid* (its lock is gone)."""
        session = view.session(sid, strict=False)
        if session is not None and target in session.locks:
            session.locks.remove(target)
            view.put_session(session)

    def release(self, sid: str, paths: Iterable[str], generations: Iterable[str] = ()) -> dict:
        """Release every target; *generations* as for :meth:`claim`."""
        P.validate_session_id(sid)
        targets = self.targets(paths, new=False)
        if not targets:
            raise BadInput("no path to release")
        expect = _expected(targets, generations)
        return self.apply(self.new_op("release", session=sid, paths=targets,
                                      **({"expect": expect} if expect else {})))

    def claim_reasons(self, sessions: Iterable[Session], view: View | None = None,
                      known: dict[tuple[str, str], Holder | None] | None = None) -> list[dict]:
        """Why each lock of *sessions* was claimed, where the claim gave a reason, from
        the view alone (*view* if given); only records whose bytes may hold a reason are
        parsed (at 10,000 locks nearly none).  *known*: as for sessions.holds."""
        from .sessions import holds
        view, out = view or self.view(), []
        for session in sessions:
            out += [{"path": target, "owner": session.id, "reason": holder.reason}
                    for target, holder in holds(view, session,
                                                view.may_give_reasons(session.locks), known)
                    if holder.reason]
        return sorted(out, key=lambda r: (r["path"], r["owner"]))

    def locks(self) -> list[dict]:
        """Every lock held by a live session, with its state."""
        view, at = self.view(), self.clock()
        unconfirmed = self.unconfirmed_claims()
        out = []
        for session in view.live_sessions():
            for target in session.locks:
                lock = view.lock(target)
                holder = lock.holder(session.id) if lock else None
                if holder is None:
                    continue
                out.append({"path": target, "owner": session.id, "mode": lock.mode,
                            "working_on": session.working_on, "since": holder.acquired_at,
                            "age_seconds": age_seconds(holder.acquired_at, at), "ttl": holder.ttl,
                            "generation": holder.generation, "reason": holder.reason,
                            "stale_reason": stale_reason(holder, session, at, self.host,
                                                         self.seen),
                            "confirmed": (session.id, target) not in unconfirmed})
        self.warnings = view.warnings
        return sorted(out, key=lambda l: l["path"])

    def unconfirmed_claims(self) -> set[tuple[str, str]]:
        """(session, path) of claims this clone made that its remote has not seen yet."""
        if not self.remote:
            return set()
        shards = sharded.shards_of(self)
        if shards:
            return sharded.unconfirmed(self, shards)
        return self.synced().unconfirmed(self)

    def heartbeat(self, sid: str, paths: Iterable[str] = ()) -> dict:
        """Renew the session and every lock it holds.  With *paths* (the predecessor's
        ``lock heartbeat PATH SID``) it is refused unless the session holds each one."""
        P.validate_session_id(sid)
        targets = {"paths": self.targets(paths, new=False)} if paths else {}
        return self.apply(self.new_op("heartbeat", session=sid, **targets))

    def heartbeat_loop(self, sid: str, interval: float, *, stop: Callable[[], bool] = lambda: False,
                       sleep: Callable[[float], None] = time.sleep,
                       paths: Iterable[str] = (),
                       started: Callable[[], None] = lambda: None) -> str:
        """Heartbeat every *interval* seconds until the session ends or, on this host,
        its process dies (so a dead agent's locks go stale instead of living forever);
        with *paths*, also once the session no longer holds one of them (released).
        *started* runs after the first heartbeat: the loop is then known to work."""
        beats = 0
        while not stop():
            session = self.session(sid)
            if not session.live:
                return f"session {sid} is {session.status}"
            if session.host == self.host and session.vouched and \
                    not is_alive(session.pid, session.pid_start):
                return f"the process {session.pid} of session {sid} is gone"
            try:
                self.heartbeat(sid, paths)
            except NotFound as exc:
                if not beats:  # never held: an error, as for `lock heartbeat PATH SID`
                    raise
                return exc.message
            except Refused:
                # it ended between the check above and the heartbeat: the normal stop
                session = self.session(sid)
                if session.live:
                    raise
                return f"session {sid} is {session.status}"
            beats += 1
            if beats == 1:
                started()
            sleep(interval)
        return "stopped"

    def force_release(self, path: str, *, reason: str, by: str, force: bool = False) -> dict:
        target = self.targets([path], new=False)[0]
        P.validate_text("reason", reason)
        if not reason.strip():
            raise BadInput("--reason is required: say why the lock is freed")
        P.validate_text("author", by)
        return self.apply(self.new_op("force-release", path=target, reason=reason, by=by,
                                   force=force))


def _expected(targets: list[str], generations: Iterable[str]) -> dict[str, str]:
    """{target: generation} for the tokens given one per target, in order."""
    tokens = list(generations)
    if tokens and len(tokens) != len(targets):
        raise BadInput(f"--generation given {len(tokens)} time(s) for {len(targets)} path(s): "
                       "one per path, in order")
    for token in tokens:
        if not (isinstance(token, str) and 0 < len(token) <= 64 and token.isalnum()):
            raise BadInput(f"--generation {token!r}: a token as `lock acquire` printed it")
    return dict(zip(targets, tokens))
