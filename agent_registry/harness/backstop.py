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
worktree, another host) the holder's files are not in this tree, so the change is
reported, not undone, and the commit guard refuses to commit it.  Only this working tree
is noted: a write by path into the holder's own worktree from here is the gate's to
refuse, or the commit guard's there.
"""
import os
import time

from ..store.jsontext import dumps, loads
from ..store.layout import RepoInfo
from ..store.rawfile import read_bytes
from .after import (NOTE_LINES, folder, note_name, noted_blobs, noted_paths, remove, state_of,
                    stats_line, unpacked, untrusted)
from .ctx import Ctx
from .where import repo_or_none, session_for

KEPT = 3600.0  # seconds another session's remembered states are kept (then read again)
# (a note's files remembered per session for the next note: _States)


def note(ctx: Ctx, call: str) -> str:
    """Before a tool call: note the held files of this working tree; a notice for
    stderr when not all could be noted ("" when done, or nothing is held).  Raises
    held.Unreadable when who holds what cannot be read: nothing is noted then."""
    from .heldcache import recall, remember
    info = repo_or_none(ctx)
    if info is None or not info.toplevel:
        return ""  # not in a working tree: nothing of ours to keep
    sid = session_for(info, ctx)
    kept, refs = recall(info, sid)
    if kept is None:
        from .held import file_names
        targets, lasting = _held_targets(info, sid)
        kept = remember(info, sid, refs if lasting else None, targets, file_names(targets))
    held, paths, areas = kept
    if paths == b"[]" and not areas:
        return ""  # the usual case: no held file, nothing more to import or read
    cut: list[str] = []
    said = ""
    if areas:  # a held folder or glob: the files in it now (a file created there is new)
        from .held import Unreadable, cut_notice, expand
        try:
            files, cut = expand(areas, info.toplevel)
            said = cut_notice(cut) if cut else ""
        except Unreadable as exc:  # the files held by name are noted all the same
            files, cut = [], list(areas)
            said = (f"agent-registry: backstop: {exc.message}: this call's note keeps the "
                    f"files held by name, not those of {', '.join(areas)}")
        listed = dict.fromkeys(loads(paths) + files)
        paths = dumps(list(listed)).encode("utf-8", "surrogatepass")
    where = folder(info.git_dir)
    os.makedirs(where, exist_ok=True)
    _States(info, sid).note(held, paths, bool(areas), cut,
                            os.path.join(where, note_name(ctx.harness, ctx.native_id, call)))
    return said


def _held_targets(info: RepoInfo, sid: str) -> tuple[dict[str, list[dict]], bool]:
    """({lock target: its holders} of what other live sessions hold here, as the guard
    judges it (harness/held.py); whether that answer lasts until a ref moves)."""
    from ..enforce.guard import Guard
    from .held import held_files, may_count_again
    guard = Guard(info)
    try:
        out: dict[str, list[dict]] = {}
        # who holds which target: a held folder's files need not be listed for that (a
        # note lists them itself), so a folder git cannot list leaves the rest noted
        for conflicts in held_files(guard, sid, info.toplevel or "", listed=False).values():
            for conflict in conflicts:
                holder = _holder(guard, conflict, info)
                if holder not in out.setdefault(conflict.target, []):
                    out[conflict.target].append(holder)
        return out, not may_count_again(guard, sid)
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
    (``<git dir>/agent-registry/backstop-cache/states-<session>``): a note as the last
    one was written, and a sixth line, the blobs it names, each once, with the stamps of
    the object folders they are in (harness/storedblobs.py).  A file whose stat
    is the one the last note found (after.untrusted, git's racy rule included) and whose
    blob is still a loose object keeps that blob, unread (a note at 1,000 held files does
    not hash them all again); any other is read, hashed and its blob written (the git
    module imported only then).  When every file is as the last note found it, and who
    holds what is as it was, the note is that file under the call's name (a hard link,
    its time set to now: no 200 kB written at 1,000 held files), taken when it was, which
    is as good a time for git's racy rule: no noted file changed in its second or later.
    The file is only ever replaced whole (renamed over), never written in place, so a
    note linked to it earlier keeps what it said."""

    def __init__(self, info: RepoInfo, sid: str) -> None:
        from .heldcache import Kept
        self.info, self.repo, self.sid = info, None, sid
        self.kept = Kept(info.git_dir, "states", KEPT)
        from .storedblobs import StoredBlobs  # only where something is held
        self.objects = StoredBlobs(info.common_dir)

    def note(self, held: bytes, line: bytes, areas: bool, cut: list[str], note: str
             ) -> None:
        """Write the note at *note* of the files *line* lists (a JSON list of paths, as
        encoded), held as *held* says (who holds what, as encoded), *cut*: the held
        folders and globs not all of whose files were looked at (harness/held.py)."""
        kept = self.kept.path(self.sid)
        try:
            lines = read_bytes(kept).split(b"\n")
        except OSError:
            lines = []
        last = _last(lines, self.sid, areas, cut)
        found = None
        try:
            if last is not None:
                self.objects.stamped(lines[5])
            if last is not None and lines[2] == line and lines[1] == held:
                # the same files and holders as the last note: parsed, their stats and
                # the blobs' names only
                found = noted_paths(line, lines[4])
                if found is not None and self._as_found(*found, last["at"], lines[3]) \
                        and self.objects.all_stored():
                    if self.objects.restamp_due():  # the folders' stamps again
                        lines[5] = self.objects.line(self.objects.blobs)
                        self.kept.replace(self.sid, b"\n".join(lines))
                    if not _link(kept, note):
                        _write(note, b"\n".join(lines))
                    return
            data = self._noted(held, loads(line) if found is None else found[0], areas,
                               cut, _remembered(lines, last))
        finally:
            self.objects.close()
            if self.repo is not None:
                self.repo.close()
        if not (self.kept.replace(self.sid, data) and _link(kept, note)):
            _write(note, data)

    def _as_found(self, paths: list[str], stats: list | memoryview, at: float,
                  blobs_line: bytes) -> bool:
        """Is every file as the last note (at *at*) found it: its stat trusted, or absent
        then and now?"""
        moved = untrusted(self.info.toplevel, paths, stats, at)
        if not moved:
            return True
        kept = noted_blobs(blobs_line, len(paths))
        keys = unpacked(stats) if isinstance(stats, memoryview) else stats
        return kept is not None and all(
            self._absent(paths[i], kept[0][i], keys[i]) for i in moved)

    def _noted(self, held: bytes, paths: list[str], areas: bool, cut: list[str],
               last) -> bytes:
        """The note's lines and the blobs it names, each file's blob the last note's
        where its stat says so, else read, hashed and written."""
        old = {rel: i for i, rel in enumerate(last[0])} if last is not None else {}
        blobs, modes, stats = [], [], []
        top = self.info.toplevel.rstrip(os.sep) + os.sep
        for rel in paths:
            j = old.get(rel)
            if j is not None and not untrusted(self.info.toplevel, [rel], [last[3][j]],
                                               last[4]) and self.objects.stored(last[1][j]):
                # as the last note found it: the same blob, and as trusted now as then
                blobs.append(last[1][j])
                modes.append(last[2][j])
                stats.append(last[3][j])
                continue
            data, mode, key = state_of(top + rel)
            blobs.append(self._write(data) if data is not None else None)
            modes.append(mode if data is not None or mode == "large" else None)
            stats.append(key)
        at = time.time()  # after every file was read: git's racy rule counts from here
        head = dumps({"session": self.sid, "at": at, "areas": areas, "cut": cut})
        return b"\n".join((head.encode(), held, dumps(paths).encode("utf-8", "surrogatepass"),
                           dumps({"blobs": blobs, "modes": modes}).encode(),
                           stats_line(stats), self.objects.line(blobs)))

    def _absent(self, rel: str, blob: object, key: object) -> bool:
        """Is a file noted as absent (a held name not created yet) still absent?"""
        return blob is None and key is None and \
            not os.path.lexists(os.path.join(self.info.toplevel, rel))

    def _write(self, data: bytes) -> str:
        if self.repo is None:  # the git module: only for content to hash and write
            from ..store.git import Repo
            self.repo = Repo(self.info)
        return self.repo.write_object("blob", data)


def _last(lines: list[bytes], sid: str, areas: bool, cut: list[str]) -> dict | None:
    """The head of the last note of *sid* (the remembered states' *lines*), when they
    are one taken as this one is (with or without held folders, the same of them cut
    short: the same files listed say nothing of those beyond); else None."""
    if len(lines) != NOTE_LINES + 1:
        return None
    try:
        head = loads(lines[0])
    except (ValueError, RecursionError):
        return None
    if not isinstance(head, dict) or head.get("session") != sid or \
            head.get("areas") is not areas or head.get("cut") != cut or \
            not isinstance(head.get("at"), (int, float)):
        return None
    return head


def _link(kept: str, note: str) -> bool:
    """The remembered states at *kept* as the note at *note* (a hard link, replacing a
    note of the same name left there), its time now: a leftover note is told by its age
    (after.LEFTOVER); False where links cannot be made."""
    try:
        os.link(kept, note)
    except FileExistsError:  # the same call id again (Gemini's: the tool and its input)
        tmp = f"{note}.{os.getpid()}.tmp"
        try:
            os.link(kept, tmp)
            os.replace(tmp, note)
        except OSError:
            return False
        finally:  # renamed over a link to the same file, tmp stays (rename(2)): removed
            remove(tmp)
    except OSError:
        return False
    try:
        os.utime(note)
    except OSError:  # a note as old as the states would be taken for a leftover
        remove(note)
        return False
    return True


def _remembered(lines: list[bytes], head: dict | None
                ) -> tuple[list, list, list, list, float] | None:
    """(paths, blobs, modes, stats, when they were taken) of the last note's *lines*
    (*head*: its first, read); None when there is none or it does not say that of each
    file."""
    if head is None:
        return None
    found = noted_paths(lines[2], lines[4])
    kept = noted_blobs(lines[3], len(found[0])) if found is not None else None
    if found is None or kept is None:
        return None
    stats = unpacked(found[1]) if isinstance(found[1], memoryview) else found[1]
    return found[0], kept[0], kept[1], stats, head["at"]
