"""The registry as of one commit, plus the writes of the operation being built on it.

Every read is a direct lookup by path through ``cat-file --batch`` (``<tree>:<path>``):
nothing here lists the whole tree or walks history.  Tree layout (see DESIGN.md):

    sessions/live/<sid>.yaml         live sessions (OnWorking)
    sessions/done/<xx>/<sid>.yaml    ended sessions, fanned out by sha1(sid)
    sessions/recent.json             the last few ended sessions, for registry.md
    locks/<xx>/<sha1(target)>.json   file and directory locks
    locks/patterns/<sha1>.json       glob locks: few, read together
    contexts/<sid>.md                session diaries

It is over 400 lines: the one class every view of a ref reads through (its files,
sessions and locks), with the caches of parsed session files beside it.
"""
from ..store import jsontext
from ..errors import RegistryError
from ..store.git import Repo
from .paths import (glob_error, is_dir, is_glob, literal_prefix, lookup_keys, overlaps,
                    record_name, sha1_hex)
from .records import (LIST_FIELDS, Holder, Lock, Session, UnreadableRecord, dump_session,
                      load_session, plain_scalar)
from .staleness import DEFAULT_TTL

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing on every command
if TYPE_CHECKING:
    from collections.abc import Iterable

LIVE_DIR = "sessions/live"
DONE_DIR = "sessions/done"
RECENT = "sessions/recent.json"
PATTERNS_DIR = "locks/patterns"


def live_path(sid: str) -> str:
    return f"{LIVE_DIR}/{sid}.yaml"


def done_path(sid: str) -> str:
    return f"{DONE_DIR}/{sha1_hex(sid)[:2]}/{sid}.yaml"


def context_path(sid: str) -> str:
    return f"contexts/{sid}.md"


class View:
    def __init__(self, repo: Repo, tip: str | None) -> None:
        self.repo = repo
        self.tip = tip
        self._tree: str | None = None if tip else ""  # the root tree: read at first use
        self.writes: dict[str, bytes | None] = {}
        self._sessions: dict[str, Session | None] = {}
        self.warnings: list[str] = []
        self.unreadable: set[str] = set()  # live session ids whose file cannot be parsed
        # the commit never changes: each file and folder is read from git once
        self._blobs: dict[str, bytes | None] = {}
        self._folders: dict[str, dict[str, str]] = {}

    @property
    def tree(self) -> str | None:
        """The tip's root tree, from its commit read at first use: a `lock check` reads
        only the lock shards its paths are recorded in (the guard reads every one)."""
        if self._tree is None:
            self._tree = self.repo.commit_info(self.tip)[0]
        return self._tree or None

    # -- raw files -------------------------------------------------------------------
    def read(self, path: str) -> bytes | None:
        if path in self.writes:
            return self.writes[path]
        if not self.tree:
            return None
        if path not in self._blobs:
            self._blobs[path] = self.repo.read_blob(f"{self.tree}:{path}")
        return self._blobs[path]

    def write(self, path: str, data: bytes | None) -> None:
        self.writes[path] = data

    def entries(self, folder: str) -> dict[str, str | None]:
        """Entry name -> blob oid of *folder* (None for a pending write)."""
        if self.tree and folder not in self._folders:
            self._folders[folder] = {n: oid for n, _, oid in
                                     self.repo.list_tree(f"{self.tree}:{folder}")}
        found: dict[str, str | None] = dict(self._folders.get(folder, {}))
        prefix = folder + "/"
        for path, data in self.writes.items():
            if path.startswith(prefix) and "/" not in path[len(prefix):]:
                name = path[len(prefix):]
                if data is None:
                    found.pop(name, None)
                else:
                    found[name] = None
        return found

    def listing(self, folder: str) -> dict[str, str | None]:
        """:meth:`entries` to read only, not to change: the folder's listing as read
        (no copy) while this view's operation writes nothing; `status` asks it for the
        folder of every held path."""
        if self.writes or not self.tree:
            return self.entries(folder)
        if folder not in self._folders:
            self.entries(folder)
        return self._folders[folder]

    def names(self, folder: str) -> list[str]:
        """Entry names of *folder*, pending writes included."""
        return sorted(self.entries(folder))

    # -- sessions --------------------------------------------------------------------
    def session(self, sid: str, *, strict: bool = True) -> Session | None:
        """The live session *sid*.  An unreadable file raises when *strict*, else it is
        reported in ``warnings`` and treated as live-but-unknown (None)."""
        if sid not in self._sessions:
            self._parse_live(sid, self.read(live_path(sid)))
        if strict and sid in self.unreadable:
            raise RegistryError(f"{live_path(sid)} is unreadable; fix or remove it by hand")
        return self._sessions[sid]

    def recorded(self, sid: str) -> Session | None:
        """*sid* by its own record (never strict): :meth:`session` here; a view of the
        lock shards answers without their held lists (branch/shardview.py)."""
        return self.session(sid, strict=False)

    def live_summaries(self, keep: int) -> list[tuple[Session, int]]:
        """Each live session with at most *keep* of its held paths, and how many it
        holds: what registry.md shows.  Sessions this operation has not read are not
        parsed whole: their held lists (the one part that grows with locks) are sliced
        and counted as bytes, so rendering costs O(live sessions), not O(locks)."""
        entries = {n[:-5]: oid for n, oid in self.entries(LIVE_DIR).items() if n.endswith(".yaml")}
        out, unread = [], []
        for sid, oid in entries.items():
            if sid in self._sessions or not oid:
                session = self.session(sid, strict=False)
                if session is not None:
                    out.append((session, len(session.locks)))
            else:
                unread.append(sid)
        for sid in [s for s in unread if (entries[s], keep) in _SUMMARIES]:
            unread.remove(sid)
            session, count = _SUMMARIES[entries[sid], keep]
            out.append((_copy(session), count))
        for sid, raw in zip(unread, self.repo.read_blobs([entries[s] for s in unread])):
            summary = _summarize(raw or b"", keep)
            if summary is None:  # not our canonical layout (or holds nothing): read it whole
                self._parse_live(sid, raw)
                session = self._sessions.get(sid)
                summary = (_copy(session), len(session.locks)) if session else None
            if summary is not None:
                if len(_SUMMARIES) > 4096:
                    _SUMMARIES.clear()
                _SUMMARIES[entries[sid], keep] = (_copy(summary[0]), summary[1])
                out.append(summary)
        return out

    def _parse_live(self, sid: str, raw: bytes | None) -> None:
        try:
            self._sessions[sid] = parsed_session(raw) if raw is not None else None
        except UnreadableRecord as exc:
            self._sessions[sid] = None
            self.unreadable.add(sid)
            self.warn(f"{live_path(sid)} is unreadable: {exc}")

    def done_session(self, sid: str) -> Session | None:
        raw = self.read(done_path(sid))
        if raw is None:
            return None
        try:
            return load_session(raw)
        except UnreadableRecord as exc:
            raise RegistryError(f"{done_path(sid)} is unreadable: {exc}") from None

    def live_sessions(self) -> list[Session]:
        """Every live session, read in one pipelined batch by blob id (no path lookups)."""
        entries = {n[:-5]: oid for n, oid in self.entries(LIVE_DIR).items() if n.endswith(".yaml")}
        wanted = [sid for sid, oid in entries.items() if sid not in self._sessions and oid]
        for sid, raw in zip(wanted, self.repo.read_blobs([entries[s] for s in wanted])):
            self._parse_live(sid, raw)
        out = []
        for sid in sorted(entries):
            session = self.session(sid, strict=False)
            if session is not None:
                out.append(session)
        return out

    def put_session(self, session: Session) -> None:
        path = live_path(session.id)
        if session.live:
            self.write(path, dump_session(session, self.read(path)))
            self._sessions[session.id] = session
            self.unreadable.discard(session.id)
        else:
            previous = self.read(path)
            self.write(path, None)
            self.write(done_path(session.id), dump_session(session, previous))
            self._sessions[session.id] = None
            self._remember_ended(session)

    def _remember_ended(self, session: Session, keep: int = 20) -> None:
        raw = self.read(RECENT)
        try:
            recent = jsontext.loads(raw) if raw else []
        except ValueError:
            self.warnings.append(f"{RECENT} was unreadable and is rebuilt")
            recent = []
        entry = {"id": session.id, "provider": session.provider,
                 "working_on": session.working_on, "status": session.status,
                 "finished_at": session.finished_at}
        recent = [entry] + [r for r in recent if r.get("id") != session.id]
        self.write(RECENT, (jsontext.dumps(recent[:keep], indent=1, ensure_ascii=False) + "\n").encode())

    def recent(self) -> list[dict]:
        raw = self.read(RECENT)
        try:
            return jsontext.loads(raw) if raw else []
        except ValueError:
            return []

    # -- locks -----------------------------------------------------------------------
    def prefetch_locks(self, targets: "Iterable[str]") -> None:
        """Read the lock records of *targets* this view has not read yet in one
        pipelined batch (``cat-file`` answers them all for one round trip, not one each):
        what a caller about to look many of them up one by one asks first."""
        self.prefetch([record_name(t) for t in targets])

    def prefetch(self, names: list[str]) -> None:
        """prefetch_locks by the records' names."""
        names = [n for n in dict.fromkeys(names) if n not in self.writes and n not in self._blobs]
        if self.tree and names:
            for name, raw in zip(names, self.repo.read_blobs([f"{self.tree}:{n}" for n in names])):
                self._blobs[name] = raw

    def may_give_reasons(self, targets: list[str]) -> list[str]:
        """Those of *targets* whose lock record may hold a claim's reason
        (branch/reasonless.py: without parsing, and without reading again those this
        clone found without one)."""
        from .reasonless import may_give
        return may_give(self, targets)

    def lock(self, target: str) -> Lock | None:
        """The lock record of *target*.  One that cannot be read fails closed: it is held
        by the live sessions that list *target* (see :meth:`_recover`)."""
        name = record_name(target)
        raw = self.read(name)
        if raw is None:
            return None
        try:
            return parse_lock(raw, name)
        except UnreadableRecord as exc:
            return self._recover(name, str(exc), target)

    def _recover(self, name: str, why: str, target: str | None) -> Lock | None:
        """A lock for the unreadable record *name*: its target (given, or, for a glob
        record, found by name in the held lists), held by every live session that lists
        it, and by every live session whose own file is unreadable (it may).  A claim
        writes the session's held list in the same commit as the record, so no live
        holder is missed; a record nobody lists holds nothing, as a stale one."""
        sessions = self.live_sessions()
        if target is None:
            target = next((t for s in sessions for t in s.locks if record_name(t) == name), None)
        if target is None:
            self.warn(f"{name} is unreadable ({why}); no live session lists its glob: it "
                      "holds nothing")
            return None
        holders = sorted({s.id for s in sessions if target in s.locks} | self.unreadable)
        self.warn(f"{name} is unreadable ({why}): " + (
            f"counts as held by {', '.join(holders)}" if holders else "no live session holds it"))
        if not holders:
            return None
        return Lock(target, "exclusive", [Holder(sid, "unreadable", "", DEFAULT_TTL)
                                          for sid in holders])

    def covering(self, target: str) -> list[Lock]:
        """Every lock whose target overlaps *target* (a file, directory or glob), found by
        direct lookups: the exact record and each ancestor directory, the few glob locks,
        and (only for a directory or glob) the paths live sessions say they hold below
        it.  Claims, `lock check` and the guard all ask this."""
        found: dict[str, Lock] = {}
        prefix = literal_prefix(target)
        for key in (lookup_keys(prefix) if prefix else []) + [target]:
            if key not in found and (lock := self.lock(key)) and overlaps(lock.path, target):
                found[key] = lock
        for lock in self.pattern_locks():
            if self.overlap(lock.path, target):
                found.setdefault(lock.path, lock)
        # where names fold, a record of another spelling is found by the held lists
        if is_dir(target) or is_glob(target) or self.folds:
            for lock in self.below(target, found):
                found.setdefault(lock.path, lock)
        return list(found.values())

    @property
    def folds(self) -> bool:
        """Can two spellings name one file in this repository (branch/pathcase)?"""
        rule = self.repo.path_rule
        return rule is not None and rule.folds

    def overlap(self, a: str, b: str) -> bool:
        """paths.overlaps as this repository's filesystem compares names."""
        return self.repo.path_rule.overlaps(a, b) if self.folds else overlaps(a, b)

    def below(self, target: str, found: dict[str, Lock]) -> list[Lock]:
        """The locks under the directory or glob *target* not in *found*, and of its
        other spellings: those live sessions say they hold (a claim writes the held
        list with the record)."""
        return [lock for session in self.live_sessions() for held in session.locks
                if held not in found and self.overlap(held, target) and (lock := self.lock(held))]

    def put_lock(self, lock: Lock) -> None:
        self.write(record_name(lock.path), lock.to_bytes() if lock.holders else None)

    def pattern_locks(self) -> list[Lock]:
        """The glob locks.  A record that cannot be read is recovered as in :meth:`lock`;
        a glob that cannot be compiled is reported, and covers (fails closed on)
        everything under its literal prefix (paths.covers)."""
        out = []
        for name in self.names(PATTERNS_DIR):
            path = f"{PATTERNS_DIR}/{name}"
            try:
                lock = parse_lock(self.read(path) or b"", path)
            except UnreadableRecord as exc:
                lock = self._recover(path, str(exc), None)
            if lock is None:
                continue
            problem = glob_error(lock.path)
            if problem:
                self.warn(f"{path}: glob {lock.path!r} is invalid ({problem}): it counts as "
                          f"covering {literal_prefix(lock.path) or 'the whole repository'}")
            out.append(lock)
        return out

    def warn(self, message: str) -> None:
        """Report an unreadable record once, however many lookups meet it."""
        if message not in self.warnings:
            self.warnings.append(message)


def parse_lock(raw: bytes, name: str) -> Lock:
    """A lock record, checked against its name: a record of another target (written by
    hand, or moved) would otherwise go unseen by every lookup of its own target."""
    lock = Lock.from_bytes(raw)
    if not isinstance(lock.path, str) or not all(isinstance(h.session, str)
                                                 for h in lock.holders):
        raise UnreadableRecord("lock record: unexpected types")
    if record_name(lock.path) != name:
        raise UnreadableRecord(f"lock record of {lock.path!r} stored as {name}")
    return lock


def _held_block(raw: bytes) -> tuple[int, int] | None:
    """Where the ``locks:`` line and the ``- item`` lines after it are in a session file
    (the pattern ``(?m)^locks:\\n((?:- [^\\n]*\\n)*)``, with no regex to compile)."""
    if raw.startswith(b"locks:\n"):
        start = 0
    elif (line_start := raw.find(b"\nlocks:\n")) != -1:
        start = line_start + 1
    else:
        return None
    end = start + len(b"locks:\n")
    while raw.startswith(b"- ", end) and (line_end := raw.find(b"\n", end)) != -1:
        end = line_end + 1
    return start, end


# (blob id, keep) -> summary: a blob never changes, and a process that commits many
# operations in a row (a replay, helping another clone) renders registry.md for each,
# over mostly the same session files
_SUMMARIES: dict[tuple[str, int], tuple[Session, int]] = {}
# a live session file's bytes -> what they parse to: a long-lived process (the MCP
# server, the dashboard) reads the claiming session's unchanged file on every call
_PARSED: dict[bytes, Session] = {}
PARSED_KEPT = 256


def parsed_session(raw: bytes) -> Session:
    """``load_session(raw)``, kept by the file's bytes (the same bytes parse the same:
    nothing else decides it), returned as a copy the caller may change."""
    session = _PARSED.get(raw)
    if session is None:
        session = load_session(raw)
        if len(_PARSED) >= PARSED_KEPT:
            _PARSED.clear()
        _PARSED[raw] = session
    return _copy(session)


def _copy(session: Session) -> Session:
    """A copy a caller may change without changing the cached one (not copy.copy: the
    guard and a warm wiki query must not import the copy module)."""
    twin = Session.__new__(Session)
    twin.__dict__.update(session.__dict__, extra=dict(session.extra),
                         **{name: list(getattr(session, name)) for name in LIST_FIELDS})
    return twin


def _summarize(raw: bytes, keep: int) -> tuple[Session, int] | None:
    """A session whose held list is cut to *keep* entries, and the full count."""
    found = _held_block(raw)
    if found is None:
        return None
    start, end = found
    block = raw[start + len(b"locks:\n"):end]
    try:
        session = load_session(raw[:start] + b"locks: []\n" + raw[end:])
        session.locks = [plain_scalar(line[2:].decode()) for line in block.split(b"\n", keep)[:keep]
                         if line.startswith(b"- ")]
    except (UnreadableRecord, UnicodeDecodeError, ValueError):
        return None
    return session, block.count(b"\n")
