"""Who holds what here, remembered between the backstop's notes (harness/backstop.py).

Every shell and edit tool call takes a note, and finding the held files costs the
registry's reader (the guard, the view: most of a note's time).  What it found depends
only on the registry's refs and on time (a lock goes stale); so the held targets and
their holders are kept (:class:`Kept`, ``backstop-cache/held-<session>``) with a
signature of every registry ref (its loose ref files, and packed-refs' size, time and inode;
with the branch and remote they were read for)
and reused while the signature is the same, for at most MAX_AGE seconds: one answer per
session (what is held by others differs with who asks), so that several agents in one
working tree do not read again for each other's calls.  A session's answer is kept as
five lines: who holds what (each holder once), the line a note
copies as it is (harness/after.py); the files the held targets name, as the note's line
of paths is encoded (a note compares it with the last one's, unparsed); the held
folders and globs, and the length of the files' line; the signature it is kept under;
and the refs' stamp (:func:`untouched`), which spares the next call reading the refs and
the config at all while no folder the signature was read from has changed.
A note at 1,000 held files parses neither of the long lines.  A claim, a
release, a heartbeat or a sync moves a ref and so reads again; a lock that went stale
within MAX_AGE is noted a little longer than needed, which puts nothing at risk (the
holder's version of a file is the one kept).  Without loose ref files (reftable) nothing
is remembered.
"""
import os
import time

from ..store.jsontext import dumps, loads
from ..store.rawfile import read_bytes
from .ids import safe

MAX_AGE = 30.0  # seconds a remembered answer is used at most


# what git's config files are found and read by (store/gitconfig.py): a stamp taken
# under other values says nothing of the config now
CONFIG_ENV = ("HOME", "XDG_CONFIG_HOME", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_NOSYSTEM",
              "GIT_CONFIG_SYSTEM", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT", "GIT_CONFIG")


def signature(info) -> tuple[bytes, bytes] | None:
    """(the registry's refs as they are now, each ref file's path and content (and
    packed-refs' size, time and inode), in one line, after the branch and remote they are
    read for; their stamp: :func:`untouched`); None when they cannot be read from files
    (then nothing is remembered).  The refs are kept as they are and compared whole: no
    digest, whose module (_sha1) would cost every note more than the comparison."""
    stamp = _Stamp()  # each file and folder stamped before it is read
    for name in CONFIG_ENV:
        stamp.env[name] = os.environ.get(name)
    if _ref_storage(info) != "files":
        return None
    branch, remote = _names(info, stamp)
    # a branch named team/reg is the file reg (and reg-shards/, ...) in refs/heads/team
    folder, _, leaf = branch.rpartition("/")
    parts: list[bytes] = [os.fsencode(f"branch={branch} remote={remote or ''}")]
    remotes = _remotes(info.common_dir, stamp)
    if remote and f"refs/remotes/{remote}" not in remotes:
        remotes.append(f"refs/remotes/{remote}")  # a remote named team/origin
    for base in ("refs/heads", *remotes):
        where = os.path.join(info.common_dir, base, *([folder] if folder else []))
        try:
            stamp.add(where)
            entries = sorted((e for e in os.scandir(where) if e.name.startswith(leaf)),
                             key=_name)
        except OSError:
            continue
        if not all(_ref_files(entry, parts, stamp) for entry in entries):
            return None
    packed = os.path.join(info.common_dir, "packed-refs")
    key = stamp.add(packed)
    if key is not None:  # rewritten by a rename: a new inode, whatever its size and times
        parts.append(b"packed=%d:%d:%d" % (key[3], key[0], key[2]))
    if len(parts) == 1:
        return None  # no registry ref found at all: nothing to remember it under
    return b"\0".join(parts), stamp.line()  # no path or ref holds a NUL


class _Stamp:
    """What the refs were read from, as it was before they were read: the config
    files, every folder listed (a ref written, created or deleted is a file renamed
    into or out of its folder, which moves the folder's times), packed-refs, and the
    environment that finds the config."""

    def __init__(self) -> None:
        self.at = time.time()  # before the first stat: git's racy rule counts from here
        self.env: dict[str, str | None] = {}
        self.stats: list[tuple[str, list[int] | None]] = []

    def add(self, path: str) -> list[int] | None:
        """The stat of *path* (None: nothing there), stamped; one that cannot be taken
        (OSError, raised) is stamped as what no later stat matches."""
        try:
            key = _stat_key(path)
        except OSError:
            self.stats.append((path, ["unreadable"]))
            raise
        self.stats.append((path, key))
        return key

    def line(self) -> bytes:
        return dumps({"at": self.at, "env": self.env, "stats": self.stats}).encode(
            "utf-8", "surrogatepass")


def _stat_key(path: str) -> list[int] | None:
    """(mtime, ctime, inode, size) of *path*, None when nothing is there; OSError for
    anything else."""
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return [st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_size]


def untouched(line: bytes) -> bool:
    """Are the refs as they were when the stamp *line* was taken: the same environment,
    each file and folder it names with the same times, inode and size (or still absent),
    and none of them changed within a second before the stamp or later?  (git's racy
    rule: a change in the same tick of the file system's clock as the stamp keeps the
    times; that clock is coarse and may lag the one that took the stamp, hence the
    extra second.)  The refs' folders, packed-refs and the config files stat'ed: no ref
    read, no config parsed, store/gitconfig.py not imported."""
    try:
        stamp = loads(line)
        racy = (int(stamp["at"]) - 1) * 1_000_000_000
        if any(os.environ.get(name) != value for name, value in stamp["env"].items()) \
                or set(stamp["env"]) != set(CONFIG_ENV):
            return False
        for path, key in stamp["stats"]:
            if _stat_key(path) != key or (key is not None and max(key[0], key[1]) >= racy):
                return False
    except (ValueError, RecursionError, TypeError, LookupError, AttributeError, OSError):
        return False  # damaged, or another version's: the refs are read
    return True


def _ref_files(entry: os.DirEntry, parts: list[bytes], stamp: _Stamp) -> bool:
    """Add ``<path>=<its content>`` of the ref file *entry*, or of each below the folder
    *entry*, in name order, to *parts* (bare reads: a note reads some twenty), each
    folder stamped before it is listed; False when one cannot be read."""
    try:
        if not entry.is_dir():
            parts.append(os.fsencode(entry.path) + b"=" + read_bytes(entry.path).strip())
            return True
        stamp.add(entry.path)
        entries = sorted(os.scandir(entry.path), key=_name)
    except OSError:
        return False
    return all(_ref_files(e, parts, stamp) for e in entries)


def _name(entry: os.DirEntry) -> str:
    return entry.name


def _ref_storage(info) -> str:
    """store/git.ref_storage, known without it for a repository found from its files."""
    if info.ref_format:
        return info.ref_format
    from ..store.git import ref_storage
    return ref_storage(info.common_dir)


def _names(info, stamp: _Stamp) -> tuple[str, str | None]:
    """The registry branch's name and the remote it syncs with: from the config files
    where they say it plainly (the git module, ~1.5 ms of the hook to import, only where
    they do not), each stamped before it is read."""
    from ..store.gitconfig import branch_name, config_files, config_from_files, remote_name
    for path in config_files(info.git_dir):
        try:
            stamp.add(path)
        except OSError:
            pass  # stamped as unreadable; config_from_files skips it as git does not
    config = config_from_files(info.git_dir)
    if config is None:
        from ..store.git import read_config
        config = read_config(info.git_dir)
    return branch_name(config), remote_name(config)


def _remotes(common_dir: str, stamp: _Stamp) -> list[str]:
    folder = os.path.join(common_dir, "refs", "remotes")
    try:
        stamp.add(folder)
        return [f"refs/remotes/{r}" for r in sorted(os.listdir(folder))]
    except OSError:
        return []


class Kept:
    """What a session keeps for its next hook call: one file per session in
    ``<git dir>/agent-registry/backstop-cache/`` (``<kind>-<its safe id>``), a first line
    ``<kind> <what it was kept under> <time> <count>``, then the body, read back as
    written (or a file of the kind's own form: :meth:`replace`).  A hook reads its own
    session's file only; writing one removes the files of this kind no session wrote for
    *max_age* seconds (ended sessions')."""

    def __init__(self, git_dir: str, kind: str, max_age: float) -> None:
        self.folder = os.path.join(git_dir, "agent-registry", "backstop-cache")
        self.kind, self.max_age = kind, max_age

    def path(self, sid: str) -> str:
        return os.path.join(self.folder, f"{self.kind}-{safe(sid)}")

    def read(self, sid: str) -> tuple[str, float, int, bytes] | None:
        """(what it was kept under, when, its count, the body) kept for *sid*; None when
        nothing is, or the file is damaged or another version's."""
        try:
            data = read_bytes(self.path(sid))
        except OSError:
            return None
        first, _, body = data.partition(b"\n")
        fields = first.split(b" ")
        try:
            if len(fields) != 4 or fields[0].decode() != self.kind:
                return None
            return fields[1].decode(), float(fields[2]), int(fields[3]), body
        except (UnicodeDecodeError, ValueError):
            return None

    def write(self, sid: str, under: str, at: float, count: int, body: bytes) -> None:
        """Keep *body* for *sid* (best effort: keeping is only a saving)."""
        self.replace(sid, f"{self.kind} {under or '-'} {at!r} {count}\n".encode() + body)

    def replace(self, sid: str, data: bytes) -> bool:
        """The file of *sid* replaced whole by *data* (a new file renamed over it: one
        read or linked before keeps what it held); False when it could not be."""
        path = self.path(sid)
        tmp = f"{path}.{os.getpid()}.tmp"
        try:
            os.makedirs(self.folder, exist_ok=True)
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except OSError:
            return False
        try:
            old = time.time() - self.max_age
            for entry in os.scandir(self.folder):
                if entry.name.startswith(f"{self.kind}-") and entry.path != path and \
                        entry.stat().st_mtime < old:
                    os.unlink(entry.path)
        except OSError:
            pass
        return True


def _kept(info) -> Kept:
    return Kept(info.git_dir, "held", MAX_AGE)


def recall(info, sid: str) -> tuple[tuple[bytes, bytes, list[str]] | None,
                                    tuple[bytes, bytes] | None]:
    """(the line a note copies, the files the held targets name: a JSON list as encoded,
    which is a note's line of paths when nothing else is held, the held folders and
    globs) remembered for *sid* while the refs are as they were, or None; and the refs'
    signature to remember a new answer under (None when their stamp said they are as
    they were, or they cannot be read from files)."""
    mine = _kept(info).read(sid)
    lines = mine[3].split(b"\n") if mine is not None and \
        0 <= time.time() - mine[1] <= MAX_AGE else []
    if len(lines) != 5:
        lines = []  # none, too old, or another version's
    elif untouched(lines[4]):
        kept = _answer(lines)
        if kept is not None:
            return kept, None
    refs = signature(info)
    if refs is None or not lines or lines[3] != refs[0]:
        return None, refs
    kept = _answer(lines)
    if kept is not None:  # the same refs: kept under their new stamp, for the next call
        _kept(info).write(sid, "", mine[1], mine[2], b"\n".join((*lines[:4], refs[1])))
    return kept, refs


def _answer(lines: list[bytes]) -> tuple[bytes, bytes, list[str]] | None:
    try:
        areas = loads(lines[2])
    except (ValueError, RecursionError):
        return None
    # the files named, unparsed, are those written with their length (the file is
    # written whole, by one rename): a cache that says less is worked out again, or a
    # held file would be noted as neither file nor area, never compared, and a change
    # to it left in place
    if not isinstance(areas, dict) or areas.get("names") != len(lines[1]) or \
            not isinstance(areas.get("areas"), list) or \
            not all(isinstance(area, str) and area for area in areas["areas"]):
        return None
    return lines[0], lines[1], areas["areas"]


def remember(info, sid: str, refs: tuple[bytes, bytes] | None,
             targets: dict[str, list[dict]], files: dict[str, str | None]
             ) -> tuple[bytes, bytes, list[str]]:
    """Keep *targets* ({held target: its holders}) and *files* ({held target: the file it
    names, None for a folder or glob}) for *sid* under *refs* (:func:`signature`); what
    :func:`recall` gives."""
    holders = {h["id"]: h for kept in targets.values() for h in kept}
    locks = {target: [h["id"] for h in kept] for target, kept in targets.items()}
    names = dumps(list(dict.fromkeys(name for name in files.values() if name))).encode(
        "utf-8", "surrogatepass")
    areas = [target for target, name in files.items() if not name]
    line = dumps({"holders": holders, "locks": locks}).encode("utf-8", "surrogatepass")
    if refs is not None and b"\n" not in refs[0]:
        about = dumps({"areas": areas, "names": len(names)})
        _kept(info).write(sid, "", time.time(), len(files), b"\n".join(
            (line, names, about.encode("utf-8", "surrogatepass"), *refs)))
    return line, names, areas
