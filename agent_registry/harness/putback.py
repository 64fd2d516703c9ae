"""The backstop's check after a tool call (harness/backstop.py says why and how): each
file the call's note names is compared with it, and what changed is put back to what
its holder had, the agent's version kept as a blob, the agent told and each holder sent
a message.  The quick path (harness/after.py) settles a call where nothing changed
without this module; it is imported for a change, a held folder, or a leftover note."""
from __future__ import annotations

import os
import time

from ..errors import BadInput, RegistryError, Unreadable
from ..store.jsontext import loads
from ..store.layout import RepoInfo
from .after import (LEFTOVER, MODES, SUFFIX, folder, note_name, noted_blobs, noted_paths,
                    prefix, read_note, state_of, untrusted)
from .ctx import Ctx
from .where import session_for


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


class _Unreadable(Exception):
    """A note is there but cannot be read back (damaged, cut short)."""


def _take(path: str) -> _Note | None:
    """The note at *path*, taken (renamed away first, so two after-hooks never both
    act on it); None when there is none.  Raises _Unreadable for one it cannot read."""
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
        raise _Unreadable
    head, lines = read
    found = noted_paths(lines[1], lines[3])
    kept = noted_blobs(lines[2], len(found[0])) if found is not None else None
    try:
        holders = loads(lines[0])
    except (ValueError, RecursionError):
        raise _Unreadable from None
    if kept is None or not isinstance(holders, dict):
        raise _Unreadable
    return _Note(head, holders, (found[0], *kept, found[1]))


def _restore(repo, toplevel: str, rel: str, entry: dict) -> str:
    """Put the noted state of *rel* back in the working tree at *toplevel*; why it
    could not be done ("" when done), so that one file that cannot be put back leaves
    the others to be.  Never through a link: a folder on its way that is a symbolic
    link now would take the bytes out of the tree."""
    top = os.path.realpath(toplevel)
    folder = os.path.dirname(rel)
    while folder and not os.path.lexists(os.path.join(toplevel, folder)):
        folder = os.path.dirname(folder)  # the deepest that is there (the rest is made)
    try:
        if folder and os.path.realpath(os.path.join(toplevel, folder)) != \
                os.path.join(top, folder):
            return "a folder on its way is a symbolic link now"
        return _put_back(repo, os.path.join(toplevel, rel), entry)
    except OSError as exc:  # its folder is a file now, the disk is full
        return f"writing it failed: {exc.strerror or exc}"


def _put_back(repo, full: str, entry: dict) -> str:
    """:func:`_restore`'s work.  The bytes go to a new file beside it that replaces
    whatever is there (a file, a link) in one rename: a reader sees the agent's version
    or the holder's, never half."""
    if os.path.isdir(full) and not os.path.islink(full):
        return "a folder is there now"
    if entry["blob"] is None:  # nothing was there: removing it is the restore
        if os.path.lexists(full):
            os.unlink(full)
        return ""
    try:  # gone: a prune while the command ran
        data = repo.read_blob(entry["blob"])
    except Unreadable:
        return (f"its holder's version, object {entry['blob']}, is missing or damaged "
                f"in this repository: see git fsck")
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
    try:
        noted = _take(path)
    except _Unreadable:  # what it noted is unknown: said, never taken as "unchanged"
        return (f"agent-registry: the backstop's note of this call "
                f"({os.path.basename(path)}) could not be read, so no held file this call "
                f"changed was put back; see `agent-registry status` for who holds what "
                f"and `git status` for what changed before you go on")
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
            try:  # read once: its blob is its hash and its keeping
                data, mode, _ = state_of(full)
                theirs = repo.write_object("blob", data) if data is not None else None
            except OSError as exc:  # a loop of links where its folder was: said, and on
                changes.append({"path": rel, "before": entry["blob"], "after": None,
                                "restored": False, "holders": noted.holders_of(rel),
                                "problem": f"it cannot be read: {exc.strerror or exc}"})
                continue
            if (theirs, mode if data is not None else None) == (entry["blob"], entry["mode"]):
                continue
            holders = noted.holders_of(rel)
            # put back unless every holder works elsewhere (none known: put back)
            here = not holders or any(h.get("here", True) for h in holders)
            problem = _restore(repo, info.toplevel, rel, entry) if here else ""
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
