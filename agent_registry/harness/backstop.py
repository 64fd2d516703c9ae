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
from .after import (LEFTOVER, MODES, as_noted, folder, note_name, prefix, same_stat,
                    state_of)
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
        files = file_names(targets)
        remember(info, sid, sign, targets, files)
    else:
        targets, files = kept
    if not targets:
        return ""  # the usual case: no held file, nothing more to import or read
    held: dict[str, list[str]] = {}  # path -> the lock targets that hold it
    for target in targets:
        if files.get(target):
            names = [files[target]]
        else:  # a held folder or glob, noted as itself too: where a file created is new
            from .held import expand
            names = expand([target], info.toplevel) + [target]
        for name in names:
            locks = held.setdefault(name, [])
            if target not in locks:
                locks.append(target)
    areas = {target for target in targets if not files.get(target)}
    states = _States(info)
    try:
        paths = {path: {**({"area": True} if path in areas else states.of(path)),
                        "locks": locks} for path, locks in held.items()}
    finally:
        at = time.time()  # after every file was read: git's racy rule counts from here
        states.close(at)
    where = folder(info.git_dir)
    os.makedirs(where, exist_ok=True)
    # the holders once per lock, not per file: a note of many files is written at once
    record = {"session": sid, "call": call, "at": at, "holders": targets, "paths": paths}
    _write_json(os.path.join(where, note_name(ctx.harness, ctx.native_id, call)), record)
    return ""


class _States:
    """The held files' states for a note.  A file whose stat is the one the last note
    found (after.same_stat, git's racy rule included) and whose blob is still in the
    object store keeps that blob, unread (a note at 1,000 held files does not hash them
    all again); any other is read, hashed and its blob written (the git module imported
    only then).  What each file was is kept in ``<git dir>/agent-registry/
    backstop-blobs.json`` for the next note."""

    def __init__(self, info: RepoInfo) -> None:
        self.info, self.repo = info, None
        self.path = os.path.join(info.git_dir, "agent-registry", "backstop-blobs.json")
        try:
            with open(self.path, "rb") as f:
                last = loads(f.read())
        except (OSError, ValueError):
            last = {}
        self.last = last if isinstance(last, dict) else {}
        self.kept: dict[str, dict] = {}  # what goes to the file (new entries' at: close)

    def of(self, rel: str) -> dict:
        full = os.path.join(self.info.toplevel, rel)
        last = self.last.get(rel)
        if isinstance(last, dict) and same_stat(full, last, last.get("at")) and \
                self._stored(last.get("blob")):
            self.kept[rel] = last
            return {"blob": last["blob"], "mode": last["mode"], "stat": last["stat"]}
        entry = _snapshot(self._write, full)
        if entry.get("stat"):
            self.kept[rel] = {**entry, "at": None}
        return entry

    def _write(self, data: bytes) -> str:
        if self.repo is None:  # the git module: only for content to hash and write
            from ..store.git import Repo
            self.repo = Repo(self.info)
        return self.repo.write_object("blob", data)

    def _stored(self, blob: object) -> bool:
        """Is *blob* a loose object here (as the object writer checks: one pruned by a
        ``git gc`` since is written again)?"""
        return isinstance(blob, str) and len(blob) > 2 and os.path.exists(
            os.path.join(self.info.common_dir, "objects", blob[:2], blob[2:]))

    def close(self, at: float) -> None:
        if self.repo is not None:
            self.repo.close()
        for entry in self.kept.values():
            if entry["at"] is None:
                entry["at"] = at
        if self.kept != self.last:
            try:
                os.makedirs(os.path.dirname(self.path), exist_ok=True)
                _write_json(self.path, self.kept)
            except OSError:
                pass  # remembering is only a saving


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
            and e.name.endswith(".json") and e.stat().st_mtime < old]


def _write_json(path: str, data: dict) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(dumps(data))
    os.replace(tmp, path)


def _take(path: str) -> dict | None:
    """The note at *path*, taken (renamed away first, so two after-hooks never both
    act on it); None when there is none."""
    taken = f"{path}.{os.getpid()}.taken"
    try:
        os.rename(path, taken)
    except OSError:
        return None
    try:
        with open(taken, encoding="utf-8") as f:
            data = loads(f.read())
    except (OSError, ValueError):
        data = None
    finally:
        os.unlink(taken)
    return data if isinstance(data, dict) and isinstance(data.get("paths"), dict) else None


# -- a file's state -------------------------------------------------------------------

def _snapshot(write, full: str) -> dict:
    """{"blob", "mode", "stat"} of the file at *full* as git would store it (a symbolic
    link: its target; the stat: after.as_noted), the blob written by *write* (bytes ->
    its id); blob and mode None when nothing is there."""
    data, mode, stat = state_of(full)
    if data is None:
        return {"blob": None, "mode": mode}
    return {"blob": write(data), "mode": mode, **({"stat": stat} if stat else {})}


def _holder(guard, conflict, info: RepoInfo) -> dict:
    """Who holds the path, and whether this working tree is theirs (then a change here
    destroys their work and is put back)."""
    session, _ = guard.lookup.session(conflict.owner)
    elsewhere = bool(session) and (
        (session.host and session.host != guard.host) or (
            bool(session.project) and os.path.realpath(session.project)
            != os.path.realpath(info.toplevel)))
    return {"id": conflict.owner, "working_on": conflict.working_on,
            "lock": conflict.target, "here": not elsewhere,
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
    record = _take(path)
    if record is None:
        return ""
    from ..store.git import Repo
    repo = Repo(info)
    changes = []
    try:
        for rel, entry in _with_created(record["paths"], info.toplevel or ""):
            full = os.path.join(info.toplevel, rel)
            if as_noted(full, entry, record.get("at"), info.object_format):
                continue
            theirs = _snapshot(lambda data: repo.write_object("blob", data), full)["blob"]
            holders = _holders(record, entry)
            # put back unless every holder works elsewhere (none known: put back)
            here = not holders or any(h.get("here", True) for h in holders)
            problem = _restore(repo, full, entry) if here else ""
            changes.append({"path": rel, "before": entry.get("blob"), "after": theirs,
                            "restored": here and not problem, "problem": problem,
                            "holders": holders})
    finally:
        repo.close()
    if not changes:
        return ""
    sid = str(record.get("session") or session_for(info, ctx))
    told = _tell_holders(info, sid, changes, what, os.path.basename(path))
    from .backstoptext import agent_text
    return agent_text(sid, changes, told)


def _with_created(noted: dict, toplevel: str) -> list[tuple[str, dict]]:
    """The noted files, and each file now in a held folder or glob that was not there
    (noted as absent: its holder had nothing there)."""
    from .held import expand
    out = [(rel, entry) for rel, entry in noted.items() if not entry.get("area")]
    for area, entry in noted.items():
        if entry.get("area"):
            out += [(rel, {"blob": None, "mode": None, "locks": entry.get("locks", [])})
                    for rel in expand([area], toplevel) if rel not in noted]
    return out


def _holders(record: dict, entry: dict) -> list[dict]:
    """The holders of a noted file: those of each lock that holds it (the note keeps
    them once per lock)."""
    kept = record.get("holders") if isinstance(record.get("holders"), dict) else {}
    out: list[dict] = []
    for lock in entry.get("locks") or []:
        out += [h for h in kept.get(lock) or [] if isinstance(h, dict) and h not in out]
    return out


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
