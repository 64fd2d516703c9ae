"""Views of a registry in the lock-shard layout (format 2, docs/shards.md).

- :class:`ShardView` is one shard's tree, which a lock operation reads and writes: its
  lock records and held lists, with each session's record read from the main branch
  (liveness, owner, heartbeat), never written.  Everything that could conflict with a
  lock recorded in a shard is recorded in that shard (branch/shards.py), so a claim
  decides from the one ref it writes plus the sessions' own records.
- :class:`WholeView` is the main branch with every shard overlaid, read-only: what
  ``status``, ``lock check``, the guard, the dashboard and registry.md read.  A
  session's ``locks`` is the union of its held lists in every shard.
"""
from ..errors import RegistryError, Unreadable
from ..store.git import OBJECT_REPAIR, Repo
from . import shards as S
from .clones import CONTEXTS, Clones, MainView
from .paths import record_name
from .records import LIVE, Lock, Session, UnreadableRecord, parse_iso
from .view import LIVE_DIR, PATTERNS_DIR, View, parse_lock

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing on every command
if TYPE_CHECKING:
    from collections.abc import Iterable

LOCKS_DIR = "locks"


class ShardView(View):
    """Shard *tip*'s tree, with sessions read from *mains* (views of the main branch:
    the freshest copy first; a session found in several counts with its newest
    heartbeat).  Writes go to the shard only: a session's held list, its lock records."""

    def __init__(self, repo: Repo, tip: str | None, mains: list[View],
                 warnings: list[str] | None = None) -> None:
        super().__init__(repo, tip)
        self.mains = mains
        if warnings is not None:
            self.warnings = warnings  # the whole view's: reported once, wherever met
        for main in mains:  # what the sessions' records and beats said, reported with ours
            main.warnings = self.warnings

    # -- sessions: read from the main branch, held lists from this shard --------------
    def held(self, sid: str) -> tuple[list[str], str] | None:
        """(targets, heartbeat_at) of *sid*'s held list here, or None when it holds
        nothing here.  One that cannot be read is rebuilt from the lock records naming
        *sid* (they are what decides; the held list only finds them), and reported."""
        name = f"{sid}.json"
        if name not in self.entries(S.HELD_DIR):
            return None
        path = S.held_path(sid)
        try:
            return S.parse_held(self.read(path) or b"")
        except UnreadableRecord as exc:
            self.warn(f"{path} is unreadable ({exc}): read from the lock records instead")
            return [lock.path for lock in self.records() if lock.holder(sid)], ""

    def session(self, sid: str, *, strict: bool = True) -> Session | None:
        if sid not in self._sessions:
            self._sessions[sid] = self._merged(sid)
        if strict and sid in self.unreadable:
            raise RegistryError(f"sessions/live/{sid}.yaml is unreadable; fix or remove it by hand")
        return self._sessions[sid]

    def _merged(self, sid: str) -> Session | None:
        held = self.held(sid)
        return merged_session(sid, self.mains, [held] if held else [], self.unreadable)

    def done_session(self, sid: str) -> Session | None:
        return next((found for main in self.mains if (found := main.done_session(sid))), None)

    def live_sessions(self) -> list[Session]:
        """The sessions holding something in this shard."""
        out = []
        for name in sorted(self.entries(S.HELD_DIR)):
            if name.endswith(".json") and (session := self.session(name[:-5], strict=False)):
                out.append(session)
        return out

    def live_summaries(self, keep: int) -> list[tuple[Session, int]]:
        return [(session, len(session.locks)) for session in self.live_sessions()]

    def put_session(self, session: Session) -> None:
        """Write *session*'s held list here (a claim's heartbeat with it); the session's
        own record is the main branch's, written by its own operations."""
        if not session.live:
            raise RegistryError(f"a shard does not end sessions ({session.id})")
        self.write(S.held_path(session.id), S.held_bytes(session.id, session.locks,
                                                         session.heartbeat_at)
                   if session.locks else None)
        self._sessions[session.id] = session

    def recent(self) -> list[dict]:
        return []

    # -- locks: every one that could cover a path of this shard is recorded here ------
    def records(self) -> list[Lock]:
        """Every lock record of this shard (directory and glob claims scan them: a
        record here, not a held list on another ref, is what decides)."""
        out = []
        for fan in self.names(LOCKS_DIR):
            folder = f"{LOCKS_DIR}/{fan}"
            if folder == PATTERNS_DIR:
                continue
            for name in self.names(folder):
                path = f"{folder}/{name}"
                raw = self.read(path)
                if raw is None:
                    continue
                try:
                    out.append(parse_lock(raw, path))
                except UnreadableRecord as exc:
                    if (lock := self._recover(path, str(exc), None)) is not None:
                        out.append(lock)
        return out

    def below(self, target: str, found: dict[str, Lock]) -> list[Lock]:
        return [lock for lock in self.records()
                if lock.path not in found and self.overlap(lock.path, target)]

    def _recover(self, name: str, why: str, target: str | None) -> Lock | None:
        if target is None:  # a file record's name is a hash: its target is in a held list
            target = next((t for s in self.live_sessions() for t in s.locks
                           if record_name(t) == name), None)
        return super()._recover(name, why, target)




class WholeView(View):
    """The main branch at *tip* with the shards at *shard_tips* overlaid (read-only).
    Sessions are read from *tip* and from *tracking* (the remote's copy of the main
    branch, when this clone fetched it without replaying onto it yet: a plain
    ``git fetch`` brings another clone's sessions and shards together)."""

    def __init__(self, repo: Repo, tip: str | None, shard_tips: list[str | None],
                 tracking: str | None = None, clones: Clones | None = None,
                 mains: list[View] | None = None) -> None:
        super().__init__(repo, tip)
        # *mains*: views of the main branch made already (a commit's pending one, which
        # its registry.md is rendered from: core/sharded.py locks_view)
        self.mains: list[View] = mains if mains is not None else [
            MainView(repo, t, clones) if clones else View(repo, t)
            for t in dict.fromkeys((tracking, tip)) if t]
        if mains:  # what the render meets is reported with the commit's own warnings
            self.warnings = mains[0].warnings
        for main in self.mains:
            main.warnings = self.warnings
        self._records: dict[str, Session | None] = {}  # sessions by their record alone
        self.shards = [ShardView(repo, t, self.mains, self.warnings) if not isinstance(t, tuple)
                       else EitherShard([ShardView(repo, one, self.mains, self.warnings)
                                         for one in t]) for t in shard_tips]

    def trees(self) -> list[str | None]:
        """Every shard's root tree, each commit read now: one git cannot read raises
        here, whatever paths the reader asks about (the guard: branch/view.py reads a
        shard's commit only when a path is looked up there)."""
        return [view.tree for shard in self.shards
                for view in (shard.views if isinstance(shard, EitherShard) else (shard,))]

    def session(self, sid: str, *, strict: bool = True) -> Session | None:
        if sid not in self._sessions:
            helds = [held for shard in self.shards if (held := shard.held(sid))]
            self._sessions[sid] = None if sid == S.FENCE_SESSION else \
                merged_session(sid, self.mains, helds, self.unreadable)
        if strict and sid in self.unreadable:
            raise RegistryError(f"sessions/live/{sid}.yaml is unreadable; fix or remove it by hand")
        return self._sessions[sid]

    def recorded(self, sid: str) -> Session | None:
        """*sid* by its record on the main branch alone, without the 16 shards' held
        lists (whose stamps can only make its heartbeat newer): what a check reads first."""
        if sid in self._sessions:
            return self._sessions[sid]
        if sid not in self._records:  # read once: a check judges the holder, then names it
            self._records[sid] = None if sid == S.FENCE_SESSION else \
                merged_session(sid, self.mains, [], self.unreadable)
        return self._records[sid]

    def live_sessions(self) -> list[Session]:
        sids = {name[:-5] for main in self.mains for name in main.entries(LIVE_DIR)
                if name.endswith(".yaml")}
        return [session for sid in sorted(sids) if (session := self.session(sid, strict=False))]

    def live_summaries(self, keep: int) -> list[tuple[Session, int]]:
        return [(session, len(session.locks)) for session in self.live_sessions()]

    def done_session(self, sid: str) -> Session | None:
        return next((found for main in self.mains if (found := main.done_session(sid))), None)

    def read(self, path: str) -> bytes | None:
        if path.startswith(CONTEXTS) and self.mains:  # a diary: with what clone refs added
            return self.mains[-1].read(path)
        return super().read(path)

    def shard_of(self, target: str) -> ShardView:
        return self.shards[self._index_of(target)]

    def _index_of(self, target: str) -> int:
        return S.lock_shards(target, len(self.shards))[0]

    def lock(self, target: str) -> Lock | None:
        return self.shard_of(target).lock(target)

    def by_shard(self, targets: list[str]) -> "list[tuple[ShardView | EitherShard, list[str]]]":
        """*targets* grouped by the shard that records them, for a batch of reads each."""
        groups: dict[int, list[str]] = {}
        for target in targets:
            groups.setdefault(self._index_of(target), []).append(target)
        return [(self.shards[index], mine) for index, mine in groups.items()]

    def prefetch_locks(self, targets: "Iterable[str]") -> None:
        for shard, mine in self.by_shard(list(targets)):
            shard.prefetch_locks(mine)

    def may_give_reasons(self, targets: list[str]) -> list[str]:
        maybe = {t for shard, mine in self.by_shard(targets) for t in shard.may_give_reasons(mine)}
        return [t for t in targets if t in maybe]

    def covering(self, target: str) -> list[Lock]:
        found: dict[str, Lock] = {}
        # another spelling of the target may have another key, hence another shard
        for index in range(len(self.shards)) if self.folds else \
                S.lock_shards(target, len(self.shards)):
            for lock in self.shards[index].covering(target):
                found.setdefault(lock.path, lock)
        return list(found.values())

    def pattern_locks(self) -> list[Lock]:
        found: dict[str, Lock] = {}
        for shard in self.shards:
            for lock in shard.pattern_locks():
                found.setdefault(lock.path, lock)
        return list(found.values())

    def write(self, path: str, data: bytes | None) -> None:
        raise RegistryError("the whole view of a sharded registry is read-only")


def merged_session(sid: str, mains: list[View], helds: list[tuple[list[str], str]],
                   unreadable: set[str]) -> Session | None:
    """Session *sid* as a lock decision sees it: its record on the main branch (the copy
    with the newest heartbeat, when this clone has two), holding the targets of its held
    lists *helds*, aged by the newest of its heartbeats.  A record that cannot be read
    adds *sid* to *unreadable* (its locks stay held).  A session holding locks but on no
    copy of the main branch, and not ended, registered where this clone has not looked
    yet: fail closed, it is live and its last claim's heartbeat ages it."""
    best = None
    for main in mains:
        found = main.session(sid, strict=False)
        if sid in main.unreadable:
            unreadable.add(sid)
            return None
        if found is not None and (best is None or found.heartbeat_ts() > best.heartbeat_ts()):
            best = found
    beats = [beat for _, beat in helds if parse_iso(beat)]
    newest = max(beats, key=lambda beat: parse_iso(beat) or 0.0, default="")
    if best is None:
        if not helds or _ended(sid, mains):
            return None
        best = Session(sid, status=LIVE, owner="none", heartbeat_at=newest,
                       working_on="(its session is not on the main branch yet)")
    session = Session.from_dict(best.to_dict())
    session.locks = union(targets for targets, _ in helds)
    if newest and (parse_iso(newest) or 0.0) > session.heartbeat_ts():
        session.heartbeat_at = newest
    return session


def union(lists: "Iterable[list[str]]") -> list[str]:
    """The items of *lists* in order, each once: a dict's update per list, not a
    generator per item (a holder's held lists name thousands of paths at 10,000 locks)."""
    found: dict[str, None] = {}
    for items in lists:
        found.update(dict.fromkeys(items))
    return list(found)


def _ended(sid: str, mains: list[View]) -> bool:
    for main in mains:
        try:
            if main.done_session(sid) is not None:
                return True
        except RegistryError:
            return False  # an unreadable ended record: count the session as live
    return False


class EitherShard:
    """A lock shard whose local tip and the remote's have diverged, read as both: what
    either records is held (a lock's holders on both are its holders).  Diverged is this
    clone's commits the remote has not taken yet beside other clones' claims it fetched,
    or a fetched history another clone's ``gc`` squashed: either tip alone would read a
    lock the other holds as free (fail closed, issue 37); the next sync makes them one
    again.  The reads a whole view asks of a shard, nothing else."""

    def __init__(self, views: list[ShardView]) -> None:
        self.views = views

    def held(self, sid: str) -> tuple[list[str], str] | None:
        helds = [held for view in self.views if (held := view.held(sid))]
        if not helds:
            return None
        beats = [beat for _, beat in helds if parse_iso(beat)]
        return (union(targets for targets, _ in helds),
                max(beats, key=lambda beat: parse_iso(beat) or 0.0, default=""))

    def lock(self, target: str) -> Lock | None:
        return _joined([lock for view in self.views if (lock := view.lock(target))])

    def prefetch_locks(self, targets: "Iterable[str]") -> None:
        targets = list(targets)
        for view in self.views:
            view.prefetch_locks(targets)

    def may_give_reasons(self, targets: list[str]) -> list[str]:
        maybe = {t for view in self.views for t in view.may_give_reasons(targets)}
        return [t for t in targets if t in maybe]

    def covering(self, target: str) -> list[Lock]:
        return _joined_all([view.covering(target) for view in self.views])

    def pattern_locks(self) -> list[Lock]:
        return _joined_all([view.pattern_locks() for view in self.views])


def _joined(locks: list[Lock]) -> Lock | None:
    """One lock of the records of one target on both tips: every holder of either (the
    local record's where a session holds it on both)."""
    if not locks:
        return None
    holders: dict[str, object] = {}
    for lock in locks:
        for holder in lock.holders:
            holders.setdefault(holder.session, holder)
    return Lock(locks[0].path, locks[0].mode, list(holders.values()))  # type: ignore[arg-type]


def _joined_all(lists: list[list[Lock]]) -> list[Lock]:
    by_path: dict[str, list[Lock]] = {}
    for locks in lists:
        for lock in locks:
            by_path.setdefault(lock.path, []).append(lock)
    return [_joined(locks) for locks in by_path.values()]  # type: ignore[misc]


def shard_tip(repo: Repo, ref: str, tracking: str | None) -> str | tuple[str, str] | None:
    """What this clone reads of one shard: its own tip, or the remote's when that has
    moved past it (other clones' claims, brought by a sync) and it has nothing pending
    there; both (EitherShard) when they have diverged."""
    local = repo.read_ref(ref)
    remote = repo.read_ref(tracking) if tracking else None
    if local is None or remote is None or local == remote:
        return local or remote
    for newer, older, answer in ((remote, local, remote), (local, remote, local)):
        is_ancestor = repo.git("merge-base", "--is-ancestor", older, newer, check=False)
        if is_ancestor.returncode not in (0, 1):  # git could not walk them: damage, not "behind"
            said = is_ancestor.stderr.decode(errors="replace").strip().splitlines() or ["?"]
            raise Unreadable(f"{ref} or {tracking} cannot be read (git merge-base: {said[-1]}); "
                             f"{OBJECT_REPAIR}", details={"ref": ref})
        if is_ancestor.returncode == 0:
            return answer  # the remote moved past this clone, or this clone's on top of it
    return local, remote


def open_whole(repo: Repo, branch: str, remote: str | None, tip: str | None,
               count: int) -> WholeView:
    """The whole view of the registry *branch* whose local tip is *tip*, in *count*
    shards, with the remote's copy of the main branch when this clone fetched one."""
    tips = []
    for index in range(count):
        name = S.shard_branch(branch, index)
        tips.append(shard_tip(repo, f"refs/heads/{name}",
                              f"refs/remotes/{remote}/{name}" if remote else None))
        if tips[-1] is None:  # its locks would read as none: refuse instead (fail closed)
            raise RegistryError(S.missing_text(repo, branch, remote, name, count))
    main = repo.read_ref(f"refs/remotes/{remote}/{branch}") if remote else None
    return WholeView(repo, tip, tips, main, Clones(repo, branch, remote))
