"""The backstop behind the shell gate: what no write form passes.

The parser (harness/shellwrites.py) refuses what it can read before a command runs;
an interpreter, a script, or a form it does not know writes anyway.  So around every
shell and edit tool call of a harness with before- and after-tool events:

- :func:`note` (before): the content of each file of this working tree that another
  live session holds (harness/held.py) is kept as a git blob (written the way ``git
  hash-object -w --no-filters`` does, through the store's object writer: the exact bytes,
  which is what a restore must put back), and a small note under this worktree's git dir
  names them, one per tool call (``agent-registry/backstop/<harness>-<session>-<call>``);
- ``check`` (after, harness/putback.py): each held file is compared with its note (its
  stat trusted as git's index trusts it, racy timestamps read again: after.untrusted,
  after.as_noted).  One that changed,
  was deleted or was created is put back at once to what its holder had (a created one is
  removed: nothing was there), the agent's version kept as a blob it can get back (``git
  show BLOB``); the agent is told who holds the path and how to reach them, and each
  holder gets a message naming both blobs.

**Why this is the one place registry code writes the user's working tree.**  Everywhere
else the registry never touches the working tree, index or HEAD (DESIGN.md, Storage): a
person may be mid-rebase.  Here the working tree is shared by two live agents, and the
file being put back is the holder's own uncommitted work, which the other agent's
command just destroyed; waiting for the commit guard would leave it lost.  Only the held
files are written, only back to the bytes noted a moment before, and nothing is lost
either way: the replaced version is a blob first.  A holder's own edit made while the
other agent's command ran cannot be told apart from that command's; it is kept as a blob
too and the holder is told.  In a separate worktree (the holder works elsewhere: another
worktree, another host) nothing of the holder's is at stake, so the change is reported,
not undone, and the commit guard refuses to commit it.
"""
import os
import time

from ..store.jsontext import dumps, loads
from ..store.layout import RepoInfo, loose_object
from .after import (folder, note_name, noted_blobs, noted_paths, read_stats, state_of,
                    stats_line, untrusted)
from .ctx import Ctx
from .where import repo_or_none, session_for

KEPT = 3600.0  # seconds another session's remembered states are kept (then read again)
# (a note's files remembered per session for the next note: _States)


def note(ctx: Ctx, call: str) -> str:
    """Before a tool call: note the held files of this working tree; a notice for
    stderr when that could not be done ("" when done, or nothing is held)."""
    from .heldcache import recall, remember
    info = repo_or_none(ctx)
    if info is None or not info.toplevel:
        return ""  # not in a working tree: nothing of ours to keep
    sid = session_for(info, ctx)
    kept, refs = recall(info, sid)
    if kept is None:
        from .held import Unreadable, file_names
        try:
            targets = _held_targets(info, sid)
        except Unreadable as exc:
            return f"agent-registry: backstop off for this call: {exc.message}"
        kept = remember(info, sid, refs, targets, file_names(targets))
    held, paths, areas = kept
    if paths == b"[]" and not areas:
        return ""  # the usual case: no held file, nothing more to import or read
    if areas:  # a held folder or glob: the files in it now (a file created there is new)
        from .held import expand
        listed = dict.fromkeys(loads(paths) + expand(areas, info.toplevel))
        paths = dumps(list(listed)).encode("utf-8", "surrogatepass")
    states = _States(info, sid)
    noted = states.note(paths)
    head = dumps({"session": sid, "call": call, "at": states.at, "areas": bool(areas)})
    where = folder(info.git_dir)
    os.makedirs(where, exist_ok=True)
    _write(os.path.join(where, note_name(ctx.harness, ctx.native_id, call)),
           b"\n".join((head.encode(), held, *noted)))
    return ""


def _held_targets(info: RepoInfo, sid: str) -> dict[str, list[dict]]:
    """{lock target: its holders} of what other live sessions hold here, as the guard
    judges it (harness/held.py)."""
    from ..enforce.guard import Guard
    from .held import held_files
    guard = Guard(info)
    try:
        out: dict[str, list[dict]] = {}
        for conflicts in held_files(guard, sid, info.toplevel or "").values():
            for conflict in conflicts:
                holder = _holder(guard, conflict, info)
                if holder not in out.setdefault(conflict.target, []):
                    out[conflict.target].append(holder)
        return out
    finally:
        guard.close()


def _holder(guard, conflict, info: RepoInfo) -> dict:
    """Who holds the path, and whether this working tree is theirs (then a change here
    destroys their work and is put back)."""
    session, _ = guard.lookup.session(conflict.owner)
    elsewhere = bool(session) and (
        (session.host and session.host != guard.host) or (
            bool(session.project) and os.path.realpath(session.project)
            != os.path.realpath(info.toplevel)))
    return {"id": conflict.owner, "working_on": conflict.working_on, "here": not elsewhere,
            "where": session.project if session else ""}


def _write(path: str, data: bytes) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


class _States:
    """The held files' states for a note, remembered per session for the next
    (``<git dir>/agent-registry/backstop-states``: the note's last two lines, kept under
    the time they were taken).  A file whose stat is the one the last note found
    (after.untrusted, git's racy rule included) and whose blob is still a loose object
    keeps that blob, unread (a note at 1,000 held files does not hash them all again);
    any other is read, hashed and its blob written (the git module imported only then).
    When every file is as the last note found it, the remembered lines are the note's,
    copied as they were read, and nothing is written but the note."""

    def __init__(self, info: RepoInfo, sid: str) -> None:
        from .heldcache import Kept
        self.info, self.repo, self.sid = info, None, sid
        self.kept = Kept(info.git_dir, "states", KEPT)
        self.at = 0.0  # when the note was taken: after every file was read
        self.stored: dict[str, bool] = {}

    def note(self, line: bytes) -> tuple[bytes, bytes, bytes]:
        """The note's lines of the files *line* lists (a JSON list of paths, as encoded):
        the paths, their blobs and modes, their stats."""
        section = self.kept.read(self.sid)  # (under, when, count, body)
        lines = section[3].split(b"\n") if section is not None else []
        paths = None
        if len(lines) == 4 and lines[0] == line:
            # the same files as the last note: parsed, their stats and the blobs' names only
            try:
                paths, stats, stored = loads(line), read_stats(lines[2]), loads(lines[3])
            except (ValueError, RecursionError):
                stats = stored = None
            if isinstance(stats, list) and len(stats) == len(paths) and \
                    isinstance(stored, list) and \
                    self._as_found(paths, stats, section[1], lines[1]) and \
                    all(self._stored(blob) for blob in stored):
                self.at = time.time()
                return line, lines[1], lines[2]
        try:
            return self._noted(loads(line) if paths is None else paths, _remembered(section))
        finally:
            if self.repo is not None:
                self.repo.close()

    def _as_found(self, paths: list[str], stats: list, at: float, blobs_line: bytes) -> bool:
        """Is every file as the last note (at *at*) found it: its stat trusted, or absent
        then and now?"""
        moved = untrusted(self.info.toplevel, paths, stats, at)
        if not moved:
            return True
        kept = noted_blobs(blobs_line, len(paths))
        return kept is not None and all(
            self._absent(paths[i], kept[0][i], stats[i]) for i in moved)

    def _noted(self, paths: list[str], last) -> tuple[bytes, bytes, bytes]:
        """The note's lines, each file's blob the last note's where its stat says so,
        else read, hashed and written; remembered for the next note."""
        old = {rel: i for i, rel in enumerate(last[0])} if last is not None else {}
        blobs, modes, stats = [], [], []
        top = self.info.toplevel.rstrip(os.sep) + os.sep
        for rel in paths:
            j = old.get(rel)
            if j is not None and not untrusted(self.info.toplevel, [rel], [last[3][j]],
                                               last[4]) and self._stored(last[1][j]):
                # as the last note found it: the same blob, and as trusted now as then
                blobs.append(last[1][j])
                modes.append(last[2][j])
                stats.append(last[3][j])
                continue
            data, mode, key = state_of(top + rel)
            blobs.append(self._write(data) if data is not None else None)
            modes.append(mode if data is not None else None)
            stats.append(key)
        self.at = time.time()  # after every file was read: git's racy rule counts from here
        lines = (dumps(paths).encode("utf-8", "surrogatepass"),
                 dumps({"blobs": blobs, "modes": modes}).encode(), stats_line(stats))
        stored = dumps(sorted({blob for blob in blobs if blob})).encode()
        self.kept.write(self.sid, "", self.at, len(paths), b"\n".join((*lines, stored)))
        return lines

    def _absent(self, rel: str, blob: object, key: object) -> bool:
        """Is a file noted as absent (a held name not created yet) still absent?"""
        return blob is None and key is None and \
            not os.path.lexists(os.path.join(self.info.toplevel, rel))

    def _write(self, data: bytes) -> str:
        if self.repo is None:  # the git module: only for content to hash and write
            from ..store.git import Repo
            self.repo = Repo(self.info)
        return self.repo.write_object("blob", data)

    def _stored(self, blob: object) -> bool:
        """Is *blob* a loose object here (as the object writer checks: one pruned by a
        ``git gc`` since is written again)?"""
        if not isinstance(blob, str) or len(blob) not in (40, 64) or not blob.isalnum():
            return False
        if blob not in self.stored:
            self.stored[blob] = os.path.exists(loose_object(self.info.common_dir, blob))
        return self.stored[blob]


def _remembered(section) -> tuple[list, list, list, list, float] | None:
    """(paths, blobs, modes, stats, when they were taken) of a session's remembered
    states; None when there are none or they do not say that of each file."""
    if section is None:
        return None
    _, at, count, body = section
    lines = body.split(b"\n")
    found = noted_paths(lines[0], lines[2]) if len(lines) == 4 else None
    kept = noted_blobs(lines[1], count) if found is not None else None
    if found is None or kept is None or len(found[0]) != count:
        return None
    return found[0], kept[0], kept[1], found[1], at
