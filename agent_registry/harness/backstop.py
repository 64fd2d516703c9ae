"""The backstop behind the shell gate: what no write form passes.

The parser (harness/shellwrites.py) refuses what it can read before a command runs;
an interpreter, a script, or a form it does not know writes anyway.  So around every
shell and edit tool call of a harness with before- and after-tool events:

- :func:`note` (before): the content of each file of this working tree that another
  live session holds (harness/held.py) is kept as a git blob (written the way ``git
  hash-object -w --no-filters`` does, through the store's object writer: the exact bytes,
  which is what a restore must put back), and a small note under this worktree's git dir
  names them, one per tool call (``agent-registry/backstop/<harness>-<session>-<call>``);
- :func:`check` (after): each held file is compared with its note (its stat trusted as
  git's index trusts it, racy timestamps read again: after.as_noted).  One that changed,
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
from __future__ import annotations

import os
import time

from ..errors import BadInput, RegistryError
from ..store.jsontext import dumps, loads
from ..store.layout import RepoInfo
from .after import (LEFTOVER, MODES, SUFFIX, folder, note_name, noted_blobs, noted_paths,
                    prefix, read_note, state_of, untrusted)
from .decision import Ctx, repo_of, session_for


def note(ctx: Ctx, call: str) -> str:
    """Before a tool call: note the held files of this working tree; a notice for
    stderr when that could not be done ("" when done, or nothing is held)."""
    from .heldcache import recall, remember, signature
    try:
        info = repo_of(ctx)
    except BadInput:
        return ""  # not in a repository: nothing of ours to keep
    if not info.toplevel:
        return ""
    sid = session_for(info, ctx)
    sign = signature(info)
    kept = recall(info, sid, sign)
    if kept is None:
        from .held import Unreadable, file_names
        try:
            targets = _held_targets(info, sid)
        except Unreadable as exc:
            return f"agent-registry: backstop off for this call: {exc.message}"
        kept = remember(info, sid, sign, targets, file_names(targets))
    held, paths, areas = kept
    if paths == b"[]" and not areas:
        return ""  # the usual case: no held file, nothing more to import or read
    if areas:  # a held folder or glob: the files in it now (a file created there is new)
        from .held import expand
        listed = dict.fromkeys(loads(paths) + expand(areas, info.toplevel))
        paths = dumps(list(listed)).encode("utf-8", "surrogatepass")
    from .heldstates import States
    states = States(info, sid)
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


def check(ctx: Ctx, call: str, what: str) -> str:
    """After a tool call (*what*: the command or tool, for the holders' message): put
    back what changed among the noted files; what to tell the agent ("" when nothing)."""
    told = []
    for info in _repositories(ctx):
        where = folder(info.git_dir)
        mine = os.path.join(where, note_name(ctx.harness, ctx.native_id, call))
        notes = [mine] + _leftovers(where, ctx, mine)
        told += [text for path in notes if (text := _check_note(info, ctx, path, what))]
    return "\n".join(told)


def _repositories(ctx: Ctx) -> list[RepoInfo]:
    """Where the note of this call can be: the repository of the agent's directory now,
    and the project's, since the harness's cwd follows a ``cd`` the command made (the
    note was taken where the command started)."""
    from ..store.git import discover
    found: list[RepoInfo] = []
    for where in (ctx.cwd, ctx.project):
        try:
            info = discover(where) if where else None
        except BadInput:
            continue
        if info is not None and all(info.git_dir != f.git_dir for f in found):
            found.append(info)
    return found


# -- the notes ------------------------------------------------------------------------

def _leftovers(where: str, ctx: Ctx, mine: str) -> list[str]:
    """This session's notes that no after-tool event took (an interrupted call), once
    they are LEFTOVER seconds old."""
    mine_prefix = prefix(ctx.harness, ctx.native_id)
    try:
        entries = list(os.scandir(where))
    except OSError:
        return []
    old = time.time() - LEFTOVER
    return [e.path for e in entries if e.name.startswith(mine_prefix) and e.path != mine
            and e.name.endswith(SUFFIX) and e.stat().st_mtime < old]


def _write(path: str, data: bytes) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


class _Note:
    """A note taken back (harness/after.py says its lines): the call, who holds what,
    and the noted files."""

    def __init__(self, head: dict, holders: dict, files: tuple) -> None:
        from .held import file_names
        self.session, self.at = head.get("session"), head["at"]
        self.holders = holders.get("holders") if isinstance(holders.get("holders"), dict) \
            else {}
        self.locks = holders.get("locks") if isinstance(holders.get("locks"), dict) else {}
        self.targets = file_names(self.locks)  # {target: its file, None for an area}
        self.paths, self.blobs, self.modes, self.stats = files

    def holders_of(self, rel: str) -> list[dict]:
        """Who holds *rel*: the holders of each lock that names it or covers it."""
        from ..branch.paths import covers
        out: list[dict] = []
        for target, name in self.targets.items():
            if name == rel or (name is None and covers(target, rel)):
                for holder in self.locks.get(target) or []:
                    found = self.holders.get(holder)
                    if isinstance(found, dict) and found not in out:
                        out.append(found)
        return out


def _take(path: str) -> _Note | None:
    """The note at *path*, taken (renamed away first, so two after-hooks never both
    act on it); None when there is none."""
    taken = f"{path}.{os.getpid()}.taken"
    try:
        os.rename(path, taken)
    except OSError:
        return None
    try:
        with open(taken, "rb") as f:
            read = read_note(f.read())
    except OSError:
        read = None
    finally:
        os.unlink(taken)
    if read is None:
        return None
    head, lines = read
    found = noted_paths(lines[1], lines[3])
    kept = noted_blobs(lines[2], len(found[0])) if found is not None else None
    try:
        holders = loads(lines[0])
    except (ValueError, RecursionError):
        return None
    if kept is None or not isinstance(holders, dict):
        return None
    return _Note(head, holders, (found[0], *kept, found[1]))


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


def _restore(repo, full: str, entry: dict) -> str:
    """Put the noted state back at *full*; why it could not be done ("" when done).
    The bytes go to a new file beside it that replaces whatever is there (a file, a
    link) in one rename: a reader sees the agent's version or the holder's, never half."""
    if os.path.isdir(full) and not os.path.islink(full):
        return "a folder is there now"
    if entry["blob"] is None:  # nothing was there: removing it is the restore
        if os.path.lexists(full):
            os.unlink(full)
        return ""
    data = repo.read_blob(entry["blob"])
    if data is None:
        return f"its blob {entry['blob']} cannot be read"
    os.makedirs(os.path.dirname(full), exist_ok=True)
    tmp = os.path.join(os.path.dirname(full), f".{os.path.basename(full)}.agent-registry-"
                                              f"{os.getpid()}")
    try:
        if entry["mode"] == MODES["link"]:
            os.symlink(os.fsdecode(data), tmp)
        else:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL,
                         0o755 if entry["mode"] == MODES["exec"] else 0o644)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        os.replace(tmp, full)
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)
    return ""


# -- after the call -------------------------------------------------------------------

def _check_note(info: RepoInfo, ctx: Ctx, path: str, what: str) -> str:
    noted = _take(path)
    if noted is None or not info.toplevel:
        return ""
    from ..store.git import Repo
    repo = Repo(info)
    changes = []
    top = info.toplevel.rstrip(os.sep) + os.sep
    try:
        for i in untrusted(info.toplevel, noted.paths, noted.stats, noted.at) + \
                _created(noted, info.toplevel):
            rel = noted.paths[i] if isinstance(i, int) else i
            entry = {"blob": noted.blobs[i], "mode": noted.modes[i]} if isinstance(i, int) \
                else {"blob": None, "mode": None}
            full = top + rel
            data, mode, _ = state_of(full)  # read once: its blob is its hash and its keeping
            theirs = repo.write_object("blob", data) if data is not None else None
            if (theirs, mode if data is not None else None) == (entry["blob"], entry["mode"]):
                continue
            holders = noted.holders_of(rel)
            # put back unless every holder works elsewhere (none known: put back)
            here = not holders or any(h.get("here", True) for h in holders)
            problem = _restore(repo, full, entry) if here else ""
            changes.append({"path": rel, "before": entry["blob"], "after": theirs,
                            "restored": here and not problem, "problem": problem,
                            "holders": holders})
    finally:
        repo.close()
    if not changes:
        return ""
    sid = str(noted.session or session_for(info, ctx))
    told = _tell_holders(info, sid, changes, what, os.path.basename(path))
    from .backstoptext import agent_text
    return agent_text(sid, changes, told)


def _created(noted: _Note, toplevel: str) -> list[str]:
    """Each file now in a held folder or glob that was not noted (absent when the note
    was taken: its holder had nothing there)."""
    areas = [target for target, name in noted.targets.items() if name is None]
    if not areas:
        return []
    from .held import expand
    known = set(noted.paths)
    return [rel for rel in expand(areas, toplevel) if rel not in known]


def _tell_holders(info: RepoInfo, sid: str, changes: list[dict], what: str, key: str
                  ) -> list[str]:
    """Send each holder one message about its paths; the holders told."""
    from .backstoptext import holder_text
    holders = {h["id"]: h for c in changes for h in c["holders"]}
    told = []
    try:
        from ..core.messages import send
        from ..sync import Registry
        with Registry.open(info.toplevel or info.git_dir) as registry:
            for holder in holders:
                mine = [c for c in changes if any(h["id"] == holder for h in c["holders"])]
                body = holder_text(sid, mine, what, info.toplevel or "")
                try:
                    send(registry, sid, {"session": holder}, body,
                         subject="backstop", key=f"backstop/{key}/{holder}"[:200])
                except RegistryError:  # the writer is no live session: say it as the holder
                    send(registry, holder, {"session": holder}, body,
                         subject="backstop", key=f"backstop/{key}/{holder}"[:200])
                told.append(holder)
    except (RegistryError, OSError):
        pass  # the agent is told regardless; the message is a courtesy to the holder
    return told
