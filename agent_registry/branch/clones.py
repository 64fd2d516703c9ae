"""Clone refs (layout format 3, docs/shards.md): the writes that have one writer leave
the main branch.

Each clone writes a branch of its own, ``<branch>-clones/<clone>``: its sessions'
heartbeats (``beats/<sid>.json``) and diaries (``contexts/<sid>.md``).  No other clone
writes it, so its pushes never race another clone's; the processes of one clone take
turns under its flock, as on any branch.  Readers overlay it:

- :class:`Clones` reads every clone ref this clone knows (its own branches and the
  remote-tracking copies), lazily: a view that never asks for a heartbeat runs no git.
- :class:`MainView` is the main branch as everything reads it: in format 3 a session's
  heartbeat is the newest of its record's and its beats', and its diary is the main
  branch's (frozen when the registry moved to format 3) followed by what its clone refs
  added.
- :class:`CloneView` is a clone ref as the heartbeat and diary operations write it:
  sessions read from the main branch, never written; the beat and the diary written here.
"""
from ..store import jsontext
from ..errors import RegistryError
from ..store.git import Repo, parse_tree
from .records import LIVE, Session, UnreadableRecord, parse_iso
from .view import View
from ..store.lazyre import LazyPattern

BEATS_DIR = "beats"
CONTEXTS = "contexts/"
FORMAT = 3  # the first layout with clone refs (branch/shards.py)
_LAYOUT = "layout.json"


def clone_branch(branch: str, clone: str) -> str:
    """The branch *clone* writes: beside the registry's, as the shards are."""
    return f"{branch}-clones/{clone}"


def clone_patterns(branch: str, remote: str | None) -> list[str]:
    """``for-each-ref`` patterns naming every clone branch, local and remote-tracking
    (its ``*`` stops at a slash, so not the intent refs below them, ``…-intents/…``,
    which ``git log --glob`` would also match: list the refs, then log them)."""
    return [f"refs/heads/{branch}-clones/*"] + (
        [f"refs/remotes/{remote}/{branch}-clones/*"] if remote else [])


def fetch_refspec(remote: str, branch: str) -> str:
    return f"+refs/heads/{branch}-clones/*:refs/remotes/{remote}/{branch}-clones/*"


def beat_path(sid: str) -> str:
    return f"{BEATS_DIR}/{sid}.json"


def beat_bytes(sid: str, heartbeat_at: str) -> bytes:
    return (jsontext.dumps({"session": sid, "heartbeat_at": heartbeat_at}) + "\n").encode()


def parse_beat(raw: bytes) -> str:
    """The heartbeat a beat file records; UnreadableRecord when it records none."""
    try:
        data = jsontext.loads(raw)
        beat = data.get("heartbeat_at") if isinstance(data, dict) else None
    except ValueError as exc:
        raise UnreadableRecord(f"not JSON: {exc}") from None
    if not isinstance(beat, str) or parse_iso(beat) is None:
        raise UnreadableRecord("no heartbeat_at")
    return beat


def has_clones(view: View) -> bool:
    """Whether the main branch at *view* is in a layout with clone refs."""
    raw = view.read(_LAYOUT)
    if raw is None:
        return False
    try:
        data = jsontext.loads(raw)
    except ValueError:
        return False  # the writers refuse it (shards.require_writable); readers read it as before
    return isinstance(data, dict) and isinstance(data.get("format"), int) \
        and data["format"] >= FORMAT


_COMMITTER = LazyPattern(rb"(?m)^committer .* (\d+) [+-]\d{4}$")


class Clones:
    """Every clone ref of *branch* this clone has, read once each."""

    def __init__(self, repo: Repo, branch: str, remote: str | None) -> None:
        self.repo, self.branch, self.remote = repo, branch, remote
        self.warnings: list[str] = []
        self._tips: list[str] | None = None
        self._folders: dict[str, list[dict[str, str]]] = {}

    def tips(self) -> list[str]:
        """The commits of every clone ref, local and remote-tracking (read from the ref
        files, no process: a claim or the guard judging a holder pays no fork)."""
        if self._tips is None:
            tips: list[str] = []
            for pattern in clone_patterns(self.branch, self.remote):
                tips += self.repo.refs_in(pattern[:-1]).values()
            self._tips = list(dict.fromkeys(tips))
        return self._tips

    def _listing(self, folder: str) -> list[dict[str, str]]:
        """*folder* of each clone ref (name -> blob id), in the order of tips(): read
        once per view, in one pipelined batch whatever the number of clones."""
        if folder not in self._folders:
            found = self.repo.reader.read_many([f"{tip}:{folder}" for tip in self.tips()])
            self._folders[folder] = [
                {name.decode(errors="replace"): oid.hex()
                 for name, (_, oid) in parse_tree(tree[1], self.repo.oid_len).items()}
                if tree and tree[0] == "tree" else {} for tree in found]
        return self._folders[folder]

    def beat(self, sid: str) -> str:
        """*sid*'s newest heartbeat on any clone ref, "" when none has it.  A beat file
        that cannot be read counts as written when its ref last moved (fail closed: a
        session is never judged older than what its clone last wrote), and is reported."""
        best, best_ts = "", 0.0
        for tip, names in zip(self.tips(), self._listing(BEATS_DIR)):
            oid = names.get(f"{sid}.json")
            if oid is None:
                continue
            try:
                beat = parse_beat(self.repo.read_blob(oid) or b"")
            except UnreadableRecord as exc:
                beat = self._written_at(tip)
                self.warnings.append(f"{beat_path(sid)} on a clone ref is unreadable ({exc}): "
                                     f"taken as written at {beat}")
            ts = parse_iso(beat) or 0.0
            if ts > best_ts:
                best, best_ts = beat, ts
        return best

    def _written_at(self, tip: str) -> str:
        from .records import iso
        found = self.repo.reader.read(tip)
        match = _COMMITTER.search(found[1]) if found else None
        if match is None:
            raise RegistryError(f"clone ref commit {tip} has no committer date")
        return iso(int(match.group(1)))

    def diaries(self, sid: str) -> list[bytes]:
        """*sid*'s diary on each clone ref that has one."""
        oids = [oid for names in self._listing(CONTEXTS.rstrip("/"))
                if (oid := names.get(f"{sid}.md"))]
        return [raw for raw in self.repo.read_blobs(list(dict.fromkeys(oids))) if raw is not None]


def merge_diary(main: bytes | None, parts: list[bytes]) -> bytes | None:
    """One diary from the main branch's (*main*) and the clone refs' (*parts*): the
    first header, then every entry, in time order.  A clone ref's diary starts as a copy
    of the main branch's (CloneView), and a line replayed after the move may still land
    on the main branch, so an entry found in several is kept as often as the one that
    has it most often (a line logged twice in one second stays twice)."""
    sources = [raw for raw in (main, *parts) if raw]
    if len(sources) < 2:
        return sources[0] if sources else main
    header, counts, order = b"", {}, []
    for raw in sources:
        head, entries = _entries(raw)
        header = header or head
        seen: dict[bytes, int] = {}
        for entry in entries:
            seen[entry] = seen.get(entry, 0) + 1
            if seen[entry] > counts.get(entry, 0):
                counts[entry] = seen[entry]
                order.append(entry)
    order.sort(key=lambda entry: entry[2:22])  # "- YYYY-MM-DDTHH:MM:SSZ": stable
    return header + b"".join(order)


def _entries(raw: bytes) -> tuple[bytes, list[bytes]]:
    """(header, entries) of a diary: its entries are the lines from the first dated one
    on (core/diary.py), each with the indented lines that continue it."""
    match = _FIRST_ENTRY.search(raw)
    if match is None:
        return raw, []
    head, body = raw[:match.start()], raw[match.start():]
    return head, [entry for entry in _ENTRY_START.split(body) if entry]


_FIRST_ENTRY = LazyPattern(rb"(?m)^- \d{4}-\d\d-\d\dT")
_ENTRY_START = LazyPattern(rb"(?m)^(?=- )")


class MainView(View):
    """The main branch at *tip*; in a layout with clone refs, each session's heartbeat is
    raised to its newest beat there and its diary merged with theirs (read-only: what
    is written goes to the main branch as on any view)."""

    def __init__(self, repo: Repo, tip: str | None, clones: Clones) -> None:
        super().__init__(repo, tip)
        self.clones = clones
        self._on: bool | None = None

    @property
    def cloned(self) -> bool:
        if self._on is None:
            self._on = has_clones(self)
        return self._on

    def read(self, path: str) -> bytes | None:
        data = super().read(path)
        if path.startswith(CONTEXTS) and path not in self.writes and self.cloned:
            sid = path[len(CONTEXTS):-3]
            return merge_diary(data, self.clones.diaries(sid))
        return data

    def _parse_live(self, sid: str, raw: bytes | None) -> None:
        super()._parse_live(sid, raw)
        session = self._sessions.get(sid)
        if session is not None and self.cloned:
            self._raise(session)

    def live_summaries(self, keep: int) -> list[tuple[Session, int]]:
        out = super().live_summaries(keep)
        if self.cloned:
            for session, _ in out:
                self._raise(session)
        return out

    def _raise(self, session: Session) -> None:
        beat = self.clones.beat(session.id)
        if beat and (parse_iso(beat) or 0.0) > session.heartbeat_ts():
            session.heartbeat_at = beat
        for warning in self.clones.warnings:
            self.warn(warning)
        self.clones.warnings.clear()


class CloneView(View):
    """A clone ref at *tip*, as ``heartbeat`` and ``context log`` write it: sessions are
    read from *mains* (views of the main branch, the freshest first), never written here;
    a session's heartbeat goes to ``beats/<sid>.json``; its diary starts from the main
    branch's copy, so what it wrote before the move is kept in order."""

    def __init__(self, repo: Repo, tip: str | None, mains: list[View]) -> None:
        super().__init__(repo, tip)
        self.mains = mains
        for main in mains:
            main.warnings = self.warnings

    def session(self, sid: str, *, strict: bool = True) -> Session | None:
        best = None
        for main in self.mains:
            found = main.session(sid, strict=strict)
            if found is not None and (best is None or found.heartbeat_ts() > best.heartbeat_ts()):
                best = found
        return best

    def done_session(self, sid: str) -> Session | None:
        return next((found for main in self.mains if (found := main.done_session(sid))), None)

    def live_sessions(self) -> list[Session]:
        """The sessions that beat on this ref and are live on the main branch."""
        return [s for name in self.names(BEATS_DIR) if name.endswith(".json")
                if (s := self.session(name[:-5], strict=False)) is not None]

    def live_summaries(self, keep: int) -> list[tuple[Session, int]]:
        return [(session, 0) for session in self.live_sessions()]

    def recent(self) -> list[dict]:
        return []

    def read(self, path: str) -> bytes | None:
        data = super().read(path)
        if data is None and path.startswith(CONTEXTS) and path not in self.writes:
            # the first line here continues the main branch's diary (View.read: not merged)
            data = next((found for main in self.mains
                         if (found := View.read(main, path)) is not None), None)
        return data

    def put_session(self, session: Session) -> None:
        if session.status != LIVE:
            raise RegistryError(f"a clone ref does not end sessions ({session.id})")
        self.write(beat_path(session.id), beat_bytes(session.id, session.heartbeat_at))
