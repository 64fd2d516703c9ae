"""The after-tool hook's quick path: the backstop's check (harness/backstop.py) when
nothing changed, which is almost always, with the cheapest parts of the standard library;
and the backstop's note as a file, which both read.

It runs after every shell and edit tool call, so it reads the event with store/jsontext
(not json), finds the repository from its files (store/layout.plain_layout), and compares
each noted file with its note: by its stat where git's index would trust it
(:func:`untrusted`), else by hashing it in-process (store/digest: git's blob id, no git
process) and by its permission bits (0600 and 0644 are one mode to git).  When this call
took no note, or none of its files changed, it is done; anything else (a change, a held folder to list again, a leftover note, an event or a
repository it cannot read this way) goes to the whole hook (harness/hook.py), which
decides and answers as for any event.  So does a person's high message marked for the
session (store/urgent.py: one more folder listing), which the whole hook tells.

**A note** is five lines, each one JSON value, so that what a check needs is parsed and
nothing else: the call ({"session", "at", "areas", "cut"}: the session, the time it was
taken, whether a held folder or glob is among its targets, and those of them not all of
whose files were looked at: harness/held.py); who holds what ({"holders": {id:
holder}, "locks": {target: [id, ...]}}: each holder once, the line harness/heldcache.py
keeps, copied as it is); the noted files' paths; their blobs and modes ({"blobs",
"modes"}, read only for a file its stat does not vouch for); and their stats
(:func:`stat_key` each, in one string: :func:`stats_line`), all in one order.  A sixth
line, the blobs it names each once, is for the backstop's next note, which takes the
last one (its remembered states, harness/backstop.py) as it is, a hard link, when
nothing changed since; no check reads it.

It is over 400 lines because it is one module: every module the quick path imports costs
each tool call its finding, reading and running (tests/test_import_budget.py), so the
note's format, the check and the adapters' facts it needs live here together.
"""
import os
import time
from stat import S_ISDIR, S_ISLNK, S_ISREG

try:  # the C functions, without operator.py's own import (~0.4 ms of a hook)
    from _operator import attrgetter, eq, itemgetter
except ImportError:  # another Python than CPython
    from operator import attrgetter, eq, itemgetter

from .ids import call_key, safe, urgent_waits

# seconds after which a note no after-tool event took (a call denied, or interrupted) is
# told to the agent by another call of its session, nothing put back (harness/putback.py)
LEFTOVER = 600
LATE = ".late"  # a leftover note once told: its own after-tool event may still come
LATE_KEPT = 86400  # seconds a told leftover waits for it
MODES = {"file": "100644", "exec": "100755", "link": "120000"}
# a regular file larger is noted by its stat alone ("large": never read, so a hook
# stays within its harness's time limit and memory); a change to it is told, not put back
MAX_KEPT = 64 << 20
SUFFIX = ".note"
NOTE_LINES = 5  # the call, who holds what, the noted paths, their blobs and modes, stats


def remove(path: str) -> None:
    """Remove the file at *path*, if it is still there (another hook may have taken it)."""
    try:
        os.unlink(path)
    except OSError:  # gone already
        pass


def folder(git_dir: str) -> str:
    """Where this worktree's notes are (under its own git dir: they are its files')."""
    return os.path.join(git_dir, "agent-registry", "backstop")


def prefix(harness: str, native_id: str) -> str:
    return f"{harness}-{safe(native_id)}-"


def note_name(harness: str, native_id: str, call: str) -> str:
    return f"{prefix(harness, native_id)}{safe(call)}{SUFFIX}"


def state_of(full: str) -> tuple[bytes | None, str | None, list[int] | None]:
    """(the bytes git would store, the mode, :func:`stat_key`) of the file at *full*, from
    one ``lstat`` taken before the bytes are read: a symbolic link is its target; (None,
    None, None) when nothing is there, (None, "dir", None) for a folder, (None,
    "special", None) for what git stores nothing of: a FIFO, whose reading would wait for
    a writer, a socket, a device, which may never end; (None, "large", its stat key) for
    a file over MAX_KEPT bytes, unread."""
    try:
        st = os.lstat(full)
    except (FileNotFoundError, NotADirectoryError):  # a file where a folder was: none
        return None, None, None
    if S_ISLNK(st.st_mode):
        return os.fsencode(os.readlink(full)), MODES["link"], None
    if S_ISDIR(st.st_mode):
        return None, "dir", None
    if not S_ISREG(st.st_mode):
        return None, "special", None
    if st.st_size > MAX_KEPT:
        return None, "large", stat_key(st)
    with open(full, "rb") as f:
        data = f.read()
    return data, MODES["exec"] if st.st_mode & 0o111 else MODES["file"], stat_key(st)


# what a note keeps of a file's stat (:func:`stat_key`), taken by C code
_KEY = attrgetter("st_size", "st_mtime_ns", "st_ino", "st_ctime_ns", "st_mode")
# a key as a note's stats line keeps it (:func:`stats_line`): five signed 64-bit
# integers, the machine's own order, read through a memoryview (the struct module is a
# shared library: loading it would cost a hook more than it saves); None (not a regular
# file) as a size no file has, so no stat is ever equal to it
FIELDS = 5
ITEM = 8
_NONE = (-1,) * FIELDS
_TIMES = itemgetter(1, 3)  # a key's mtime and ctime


def stat_key(st: os.stat_result) -> tuple[int, ...] | None:
    """What a note keeps of a file's stat: what git's index trusts (size, mtime, inode,
    ctime) and ``st_mode`` (its type and mode bits); None for anything but a regular file,
    which is then read at every check."""
    if not S_ISREG(st.st_mode):
        return None
    return _KEY(st)


def stats_line(stats: list) -> bytes:
    """A note's line of *stats* (:func:`stat_key` each): one JSON string, ``=`` and the
    hex of FIELDS signed 64-bit integers each (-1s for None), which a check compares
    key by key in C as it reads them (:func:`records`), no list of 1,000 parsed keys kept
    (a JSON list of lists cost a hook at 1,000 held files ~0.5 ms more; the ``marshal``
    form an earlier version wrote, ~0.1 ms more)."""
    from struct import Struct, error  # writing only: a note that changed
    record = Struct("=" + "q" * FIELDS)  # the machine's order, as memoryview reads it
    out = []
    for key in stats:
        try:
            out.append(record.pack(*(key if key is not None else _NONE)))
        except error:  # a value out of range, or not a stat: read at every check
            out.append(record.pack(*_NONE))
    return b'"=' + b"".join(out).hex().encode() + b'"'


def packed_stats(line: bytes, count: int) -> memoryview | None:
    """The FIELDS integers of each of *count* files, in one flat view, of a note's stats
    line (:func:`stats_line`); None when it is not one (damaged, or an earlier version's:
    :func:`read_stats`)."""
    if line[:2] != b'"=' or line[-1:] != b'"':
        return None
    try:
        packed = bytes.fromhex(line[2:-1].decode("ascii"))
    except (ValueError, UnicodeDecodeError):
        return None
    return memoryview(packed).cast("q") if len(packed) == count * FIELDS * ITEM else None


def records(flat: memoryview):
    """The keys of :func:`packed_stats`' view, one tuple at a time (by C code)."""
    return zip(*[iter(flat)] * FIELDS)


def unpacked(flat: memoryview) -> list:
    """The keys (None for -1s) of :func:`packed_stats`' view, in a list."""
    return [None if key == _NONE else key for key in records(flat)]


def read_stats(line: bytes, count: int) -> list | None:
    """The stats of *count* files of a note's line of them (:func:`stats_line`, or the
    hex of their ``marshal`` form or the JSON list of lists earlier versions wrote);
    None when it cannot be read."""
    packed = packed_stats(line, count)
    if packed is not None:
        return unpacked(packed)
    try:
        if line[:1] == b'"' and line[-1:] == b'"':
            from marshal import loads as unmarshal
            stats = unmarshal(bytes.fromhex(line[1:-1].decode("ascii")))
        else:
            from ..store.jsontext import loads
            stats = loads(line)
            if isinstance(stats, list):
                stats = [tuple(k) if isinstance(k, list) else k for k in stats]
    except (ValueError, EOFError, TypeError, RecursionError, UnicodeDecodeError):
        return None
    return stats if isinstance(stats, list) and len(stats) == count else None


def untrusted(toplevel: str, paths: list[str], noted: list | memoryview,
              at: float) -> list[int]:
    """The indexes of *paths* (repository paths) whose stat now does not say they hold
    what was noted (*noted*: their :func:`stat_key` when the note was taken, at *at*,
    seconds; a list, or the records of :func:`packed_stats`).  A regular file whose stat
    is the noted one does, as git's index trusts it
    (a write changes ctime, which nothing sets back), unless it was changed in the second
    the note was taken or later: a rewrite within one tick of the clock keeps them all
    (git's racy-timestamp rule), so it is to be read and hashed.  One ``lstat`` a file,
    compared field by field (written out, no os.path.join: 1,000 held files a call), by
    its repository path when the process's directory is the top of the working tree, as
    a harness starts its hooks (the kernel walks two names, not the whole path: ~0.4 ms
    of a hook at 1,000 files)."""
    top = toplevel.rstrip(os.sep) + os.sep
    try:
        if os.getcwd() + os.sep == top:
            top = ""
    except OSError:  # the process's directory is gone: whole paths
        pass
    racy = int(at) * 1_000_000_000
    packed = isinstance(noted, memoryview)
    try:  # every file's stat compared with its note by C code, each dropped once
        # compared (no list of them: in a fresh process the memory 1,000 new stats
        # take costs more than comparing them): the usual case, each as noted
        if len(noted) == len(paths) * (FIELDS if packed else 1) and all(map(eq, map(
                _KEY, map(os.lstat, [top + rel for rel in paths] if top else paths)),
                records(noted) if packed else noted)) and _newest(noted) < racy:
            return []
    except OSError:  # one is gone (or cannot be read): file by file below
        pass
    if packed:
        noted = unpacked(noted)
    out: list[int] = []
    lstat = os.lstat
    for i, rel in enumerate(paths):
        key = noted[i] if i < len(noted) else None
        try:
            st = lstat(top + rel)
        except OSError:
            out.append(i)
            continue
        try:  # None (not a regular file then), or not a stat (a damaged note): read it
            if st.st_mtime_ns != key[1] or st.st_ctime_ns != key[3] or st.st_size != key[0] \
                    or st.st_ino != key[2] or st.st_mode != key[4] or key[1] >= racy or \
                    key[3] >= racy:
                out.append(i)
        except (TypeError, LookupError):
            out.append(i)
    return out


def _newest(noted: list | memoryview) -> int:
    """The latest mtime or ctime of *noted* keys (each a stat: the ones just compared)."""
    if isinstance(noted, memoryview):
        return max(max(noted[1::FIELDS], default=0), max(noted[3::FIELDS], default=0))
    return max(map(max, map(_TIMES, noted)), default=0)


def as_noted(full: str, blob: object, mode: object, object_format: str,
             perm: int | None = None) -> bool:
    """Does the file at *full*, read and hashed, hold *blob* with *mode* and *perm*?
    (A large one whose stat moved is left to the whole check.)"""
    data, now_mode, key = state_of(full)
    if now_mode == "large" or mode == "large" or not same_perm(perm, key):
        return False
    now = blob_id(data, object_format) if data is not None else None
    return (now, now_mode) == (blob, mode)


def perm_of(key: object) -> int | None:
    """The permission bits of a :func:`stat_key`; None for none (not a regular file)."""
    return key[4] & 0o7777 if isinstance(key, (list, tuple)) and len(key) == FIELDS and \
        isinstance(key[4], int) and key[0] != -1 else None


def same_perm(perm: int | None, key: object) -> bool:
    """Has the stat *key* the noted permission bits *perm* (0600 and 0644: one git mode,
    two here)?  True when either is unknown."""
    return perm is None or perm_of(key) is None or perm == perm_of(key)


def blob_id(data: bytes, object_format: str) -> str:
    from ..store.digest import hexdigest  # only where a file's stat changed
    return hexdigest(object_format, b"blob %d\0" % len(data) + data)


def read_note(data: bytes) -> tuple[dict, list[bytes]] | None:
    """(the call, the note's other lines unparsed) of the note *data*; None when it is not
    one (damaged, or another version's)."""
    from ..store.jsontext import loads
    lines = data.split(b"\n")
    if len(lines) not in (NOTE_LINES, NOTE_LINES + 1):  # a sixth: what the next note
        return None  # reads of it (harness/backstop.py), no check
    try:
        head = loads(lines[0])
    except (ValueError, RecursionError):
        return None
    if not isinstance(head, dict) or not isinstance(head.get("at"), (int, float)):
        return None
    return head, lines[1:]


def noted_paths(paths_line: bytes, stats_line: bytes
                ) -> tuple[list, list | memoryview] | None:
    """(paths, stats: the records of :func:`packed_stats`, or a list from an earlier
    version's line) from a note's lines of them; None when they do not say that of
    each file."""
    from ..store.jsontext import loads
    try:
        paths = loads(paths_line)
    except (ValueError, RecursionError):
        return None
    if not (isinstance(paths, list) and all(map(isinstance, paths, [str] * len(paths)))
            and "" not in paths):
        return None
    stats = packed_stats(stats_line, len(paths))
    if stats is None:
        stats = read_stats(stats_line, len(paths))
    return (paths, stats) if stats is not None else None


def noted_blobs(line: bytes, count: int) -> tuple[list, list] | None:
    """(blobs, modes) of *count* files from a note's line of them; None when it does not
    say that of each."""
    from ..store.jsontext import loads
    try:
        kept = loads(line)
    except (ValueError, RecursionError):
        return None
    blobs, modes = (kept.get("blobs"), kept.get("modes")) if isinstance(kept, dict) \
        else (None, None)
    if not (isinstance(blobs, list) and isinstance(modes, list)
            and len(blobs) == len(modes) == count):
        return None
    return blobs, modes


PROJECT_ENVS = ("CLAUDE_PROJECT_DIR", "GEMINI_PROJECT_DIR", "CURSOR_PROJECT_DIR")  # started
# (session id, tool, tool input) keys of an after-tool event, as the adapters read them
# (harness/adapter.py, cursor.py, opencode_hook.py), without importing them
CLAUDE_KEYS = ("session_id", "tool_name", "tool_input")
EVENT_KEYS = {"opencode": ("sessionID", "tool", "args"),
              "cursor": ("conversation_id", "tool_name", "tool_input")}
TELLS_AFTER_TOOL = frozenset({"claude", "codex", "gemini", "qwen", "opencode"})  # not copilot
# the answer that says nothing, as each adapter's empty() writes it (none: no output):
# Cursor's is a JSON object always, OpenCode's plugin parses every answer as JSON
SAYS_NOTHING = {"cursor": "{}", "opencode": "{}"}


def quick(harness: str, raw: str, env: dict) -> bool:
    """Settle the after-tool event *raw* of *harness* if nothing needs doing (the hook
    then answers ``SAYS_NOTHING``'s, if any); False leaves it to the whole hook (also
    when the harness's project is another worktree than the event's cwd: the command
    may have moved it, and the note is there)."""
    from ..store.jsontext import loads
    from ..store.layout import plain_layout
    try:
        event = loads(raw)
    except (ValueError, RecursionError):
        return False
    id_key, tool_key, input_key = EVENT_KEYS.get(harness, CLAUDE_KEYS)
    native, cwd = (event.get(id_key), event.get("cwd")) if isinstance(event, dict) \
        else (None, None)
    if not isinstance(native, str) or not native or not isinstance(cwd, str) or not cwd:
        return False
    try:
        info = plain_layout(cwd)
    except OSError:
        return False
    if info is None or not info.toplevel or any(
            env.get(name) and not (os.path.realpath(env[name]) + os.sep).startswith(
                info.toplevel.rstrip(os.sep) + os.sep) for name in PROJECT_ENVS):
        return False
    if harness in TELLS_AFTER_TOOL and urgent_waits(info.common_dir, harness, native):
        return False  # a person's high message: the whole hook tells it now
    where = folder(info.git_dir)
    mine = os.path.join(where, note_name(harness, native, call_key(event, tool_key, input_key)))
    try:
        entries = list(os.scandir(where))
    except FileNotFoundError:
        return True  # no note was ever taken in this worktree
    except OSError:
        return False
    old = time.time() - LEFTOVER
    mine_prefix = prefix(harness, native)
    try:
        if any(e.name.startswith(mine_prefix) and e.path != mine and e.name.endswith(SUFFIX)
               and e.stat().st_mtime < old for e in entries):
            return False
    except FileNotFoundError:  # a note another after-tool hook took meanwhile: the whole
        # hook looks again
        return False
    names = {e.path for e in entries}
    if mine + LATE in names:  # told as a leftover, its call was still running
        return False
    return mine not in names or _unchanged(mine, info)


def _unchanged(path: str, info) -> bool:
    """Is every file of the note at *path* as noted?  Then the note is done with."""
    from ..store.rawfile import read_bytes
    try:
        note = read_note(read_bytes(path))
    except OSError:
        return False
    if note is None or note[0].get("areas") is not False or not info.toplevel:
        return False  # a held folder: what is new in it needs the whole check
    head, lines = note
    found = noted_paths(lines[1], lines[3])
    if found is None:
        return False
    paths, stats = found
    moved = untrusted(info.toplevel, paths, stats, head["at"])
    if moved:  # not trusted by their stat: read and hashed
        kept = noted_blobs(lines[2], len(paths))
        if kept is None:
            return False
        top = info.toplevel.rstrip(os.sep) + os.sep
        keys = unpacked(stats) if isinstance(stats, memoryview) else stats
        if not all(as_noted(top + paths[i], kept[0][i], kept[1][i], info.object_format,
                            perm_of(keys[i])) for i in moved):
            return False
    try:
        os.unlink(path)
    except OSError:
        return False
    return True
