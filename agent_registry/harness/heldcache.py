"""Who holds what here, remembered between the backstop's notes (harness/backstop.py).

Every shell and edit tool call takes a note, and finding the held files costs the
registry's reader (the guard, the view: most of a note's time).  What it found depends
only on the registry's refs and on time (a lock goes stale); so the held targets and
their holders are kept (:class:`Kept`, ``backstop-cache/held-<session>``) with a
signature of every registry ref (its loose ref files, and packed-refs' size and time)
and reused while the signature is the same, for at most MAX_AGE seconds: one answer per
session (what is held by others differs with who asks), so that several agents in one
working tree do not read again for each other's calls.  A session's answer is kept as
four lines: who holds what (each holder once), the line a note
copies as it is (harness/after.py); the files the held targets name, as the note's line
of paths is encoded (a note compares it with the last one's, unparsed); the held
folders and globs, and the length of the files' line; the signature it is kept under.
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


def signature(info) -> bytes | None:
    """The registry's refs as they are now, each ref file's path and content (and
    packed-refs' size and time), in one line; None when they cannot be read from files
    (then nothing is remembered).  Kept as it is and compared whole: no digest, whose
    module (_sha1) would cost every note more than the comparison."""
    if _ref_storage(info) != "files":
        return None
    branch = _branch(info)
    parts: list[bytes] = []
    for base in ("refs/heads", *_remotes(info.common_dir)):
        folder = os.path.join(info.common_dir, base)
        try:
            names = sorted(e.name for e in os.scandir(folder) if e.name.startswith(branch))
        except OSError:
            continue
        for name in names:
            if not _ref_files(os.path.join(folder, name), parts):
                return None
    try:
        st = os.stat(os.path.join(info.common_dir, "packed-refs"))
        parts.append(b"packed=%d:%d" % (st.st_size, st.st_mtime_ns))
    except FileNotFoundError:
        pass
    if not parts:
        return None
    return b"\0".join(parts)  # no path or ref holds a NUL


def _ref_files(path: str, parts: list[bytes]) -> bool:
    """Add ``<path>=<its content>`` of the ref file at *path*, or of each below the
    folder at *path*, in name order, to *parts* (bare reads: a note reads some twenty);
    False when one cannot be read."""
    try:
        entries = sorted(os.scandir(path), key=lambda e: e.name)
    except NotADirectoryError:
        try:
            parts.append(os.fsencode(path) + b"=" + read_bytes(path).strip())
        except OSError:
            return False
        return True
    except OSError:
        return False
    return all(_ref_files(entry.path, parts) for entry in entries)


def _ref_storage(info) -> str:
    """store/git.ref_storage, known without it for a repository found from its files."""
    if info.ref_format:
        return info.ref_format
    from ..store.git import ref_storage
    return ref_storage(info.common_dir)


def _branch(info) -> str:
    """The registry branch's name: from the config files where they say it plainly (the
    git module, ~1.5 ms of the hook to import, only where they do not)."""
    from ..store.gitconfig import branch_name, config_from_files
    config = config_from_files(info.git_dir)
    if config is None:
        from ..store.git import read_config
        config = read_config(info.git_dir)
    return branch_name(config)


def _remotes(common_dir: str) -> list[str]:
    try:
        return [f"refs/remotes/{r}" for r in sorted(os.listdir(os.path.join(common_dir,
                                                                             "refs", "remotes")))]
    except OSError:
        return []


class Kept:
    """What a session keeps for its next hook call: one file per session in
    ``<git dir>/agent-registry/backstop-cache/`` (``<kind>-<its safe id>``), a first line
    ``<kind> <what it was kept under> <time> <count>``, then the body, read back as
    written.  A hook reads its own session's file only; writing one removes the files of
    this kind no session wrote for *max_age* seconds (ended sessions')."""

    def __init__(self, git_dir: str, kind: str, max_age: float) -> None:
        self.folder = os.path.join(git_dir, "agent-registry", "backstop-cache")
        self.kind, self.max_age = kind, max_age

    def read(self, sid: str) -> tuple[str, float, int, bytes] | None:
        """(what it was kept under, when, its count, the body) kept for *sid*; None when
        nothing is, or the file is damaged or another version's."""
        try:
            data = read_bytes(os.path.join(self.folder, f"{self.kind}-{safe(sid)}"))
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
        path = os.path.join(self.folder, f"{self.kind}-{safe(sid)}")
        tmp = f"{path}.{os.getpid()}.tmp"
        try:
            os.makedirs(self.folder, exist_ok=True)
            with open(tmp, "wb") as f:
                f.write(f"{self.kind} {under or '-'} {at!r} {count}\n".encode() + body)
            os.replace(tmp, path)
            old = time.time() - self.max_age
            for entry in os.scandir(self.folder):
                if entry.name.startswith(f"{self.kind}-") and entry.path != path and \
                        entry.stat().st_mtime < old:
                    os.unlink(entry.path)
        except OSError:
            pass


def _kept(info) -> Kept:
    return Kept(info.git_dir, "held", MAX_AGE)


def recall(info, sid: str, sign: bytes | None) -> tuple[bytes, bytes, list[str]] | None:
    """(the line a note copies, the files the held targets name: a JSON list as encoded,
    which is a note's line of paths when nothing else is held, the held folders and
    globs) remembered for *sid* under *sign*, or None."""
    if sign is None:
        return None
    mine = _kept(info).read(sid)
    if mine is None or not 0 <= time.time() - mine[1] <= MAX_AGE:
        return None
    lines = mine[3].split(b"\n")
    if len(lines) != 4 or lines[3] != sign:
        return None
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


def remember(info, sid: str, sign: bytes | None, targets: dict[str, list[dict]],
             files: dict[str, str | None]) -> tuple[bytes, bytes, list[str]]:
    """Keep *targets* ({held target: its holders}) and *files* ({held target: the file it
    names, None for a folder or glob}) for *sid* under *sign*; what :func:`recall` gives."""
    holders = {h["id"]: h for kept in targets.values() for h in kept}
    locks = {target: [h["id"] for h in kept] for target, kept in targets.items()}
    names = dumps(list(dict.fromkeys(name for name in files.values() if name))).encode(
        "utf-8", "surrogatepass")
    areas = [target for target, name in files.items() if not name]
    line = dumps({"holders": holders, "locks": locks}).encode("utf-8", "surrogatepass")
    if sign is not None and b"\n" not in sign:
        about = dumps({"areas": areas, "names": len(names)})
        _kept(info).write(sid, "", time.time(), len(files), b"\n".join(
            (line, names, about.encode("utf-8", "surrogatepass"), sign)))
    return line, names, areas
