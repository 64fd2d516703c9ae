"""The after-tool hook's quick path: the backstop's check (harness/backstop.py) when
nothing changed, which is almost always, with the cheapest parts of the standard library.

It runs after every shell and edit tool call, so it reads the event with store/jsontext
(not json), finds the repository from its files (store/layout.plain_layout), and compares
each noted file with its note: by its stat where git's index would trust it (as_noted),
else by hashing it in-process (store/digest: git's blob id, no git process).  When
this call took no note, or none of its files changed, it is done; anything else (a
change, a held folder to list again, a leftover note, an event or a repository it cannot
read this way) goes to the whole hook (harness/hook.py), which decides and answers as
for any event.  So does a person's high message marked for the
session (store/urgent.py: one more folder listing), which the whole hook tells.
"""
from __future__ import annotations

import os
import time
from stat import S_ISREG

from ..store.digest import hexdigest
from .ids import call_key, safe, urgent_waits

LEFTOVER = 600  # seconds after which a note no after-tool event took is checked anyway
MODES = {"file": "100644", "exec": "100755", "link": "120000"}


def folder(git_dir: str) -> str:
    """Where this worktree's notes are (under its own git dir: they are its files')."""
    return os.path.join(git_dir, "agent-registry", "backstop")


def prefix(harness: str, native_id: str) -> str:
    return f"{harness}-{safe(native_id)}-"


def note_name(harness: str, native_id: str, call: str) -> str:
    return f"{prefix(harness, native_id)}{safe(call)}.json"


def state_of(full: str) -> tuple[bytes | None, str | None, list[int] | None]:
    """(the bytes git would store, the mode, the stat git's index keeps: size, mtime,
    inode, ctime) of the file at *full*, the stat taken before the bytes are read: a
    symbolic link is its target; (None, None, None) when nothing is there, (None, "dir",
    None) for a folder."""
    try:
        st = os.lstat(full)
    except FileNotFoundError:
        return None, None, None
    if os.path.islink(full):
        return os.fsencode(os.readlink(full)), MODES["link"], None
    if os.path.isdir(full):
        return None, "dir", None
    with open(full, "rb") as f:
        data = f.read()
    return data, _mode(st), _stat(st)


def _mode(st: os.stat_result) -> str:
    return MODES["exec"] if st.st_mode & 0o111 else MODES["file"]


def _stat(st: os.stat_result) -> list[int]:
    return [st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns]


def same_stat(full: str, entry: dict, at: object) -> bool:
    """Does the file at *full* still hold what *entry* (its blob, mode and stat) says,
    taken at *at* (seconds), by its stat alone?  A regular file whose size, mtime, inode
    and ctime are the noted ones does, as git's index trusts them (a write changes ctime,
    which nothing sets back), unless it was changed in the second the entry was taken or
    later: a rewrite within one tick of the clock keeps them all (git's racy-timestamp
    rule), so False: that file is to be read and hashed."""
    noted = entry.get("stat")
    if not (isinstance(noted, list) and isinstance(at, (int, float)) and
            entry.get("mode") in (MODES["file"], MODES["exec"])):
        return False
    try:
        st = os.lstat(full)
    except OSError:
        return False
    return S_ISREG(st.st_mode) and _mode(st) == entry["mode"] and _stat(st) == noted and \
        max(st.st_mtime_ns, st.st_ctime_ns) < int(at) * 10**9


def as_noted(full: str, entry: dict, at: object, object_format: str) -> bool:
    """Is the file at *full* as *entry* of a note taken at *at* (seconds) has it?  By its
    stat where that says so (:func:`same_stat`), else read and hashed."""
    if same_stat(full, entry, at):
        return True
    data, mode, _ = state_of(full)
    now = blob_id(data, object_format) if data is not None else None
    return (now, mode) == (entry.get("blob"), entry.get("mode"))


def blob_id(data: bytes, object_format: str) -> str:
    return hexdigest(object_format, b"blob %d\0" % len(data) + data)


PROJECT_ENVS = ("CLAUDE_PROJECT_DIR", "GEMINI_PROJECT_DIR")  # where a harness started
# (session id, tool, tool input) keys of an after-tool event, as the adapters read them
# (harness/adapter.py, opencode_hook.py), without importing them
CLAUDE_KEYS = ("session_id", "tool_name", "tool_input")
EVENT_KEYS = {"opencode": ("sessionID", "tool", "args")}


def quick(harness: str, raw: str, env: dict) -> bool:
    """Settle the after-tool event *raw* of *harness* if nothing needs doing; False
    leaves it to the whole hook (also when the harness's project is another worktree
    than the event's cwd: the command may have moved it, and the note is there)."""
    from ..store.layout import plain_layout
    from ..store.jsontext import loads
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
    if urgent_waits(info.common_dir, harness, native):
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
    if any(e.name.startswith(mine_prefix) and e.path != mine and e.name.endswith(".json")
           and e.stat().st_mtime < old for e in entries):
        return False
    if not any(e.path == mine for e in entries):
        return True
    return _unchanged(mine, info)


def _unchanged(path: str, info) -> bool:
    """Is every file of the note at *path* as noted?  Then the note is done with."""
    from ..store.jsontext import loads
    from ..store.rawfile import read_bytes
    try:
        record = loads(read_bytes(path))
    except (OSError, ValueError):
        return False
    noted = record.get("paths") if isinstance(record, dict) else None
    if not isinstance(noted, dict) or not info.toplevel:
        return False
    for rel, entry in noted.items():
        if not isinstance(entry, dict) or entry.get("area"):
            return False  # a held folder: what is new in it needs the whole check
        if not as_noted(os.path.join(info.toplevel, rel), entry, record.get("at"),
                        info.object_format):
            return False
    try:
        os.unlink(path)
    except OSError:
        return False
    return True
