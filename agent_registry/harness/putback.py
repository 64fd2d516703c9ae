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
from .after import (LATE, LATE_KEPT, LEFTOVER, MAX_KEPT, MODES, SUFFIX, blob_id, folder,
                    note_name, noted_blobs, noted_paths, prefix, read_note, remove, state_of,
                    perm_of, same_perm, unpacked, untrusted)
from .ctx import Ctx
from .restored import Restored
from .where import session_for


def check(ctx: Ctx, call: str, what: str, inbox: bool = False) -> str:
    """After a tool call (*what*: the command or tool, for the holders' message): put
    back what changed among the noted files; what to tell the agent ("" when nothing).
    *inbox*: this event's answer cannot reach the model, so a put-back is also sent to
    the agent's own inbox."""
    told = []
    for info in _repositories(ctx):
        where = folder(info.git_dir)
        mine = os.path.join(where, note_name(ctx.harness, ctx.native_id, call))
        for path in (mine, mine + LATE):  # its note, or told as a leftover meanwhile
            told.append(_check_note(info, ctx, path, what, inbox))
        told += [_told_late(info, ctx, path) for path in _leftovers(where, ctx, mine)]
    return "\n".join(text for text in told if text)


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
    """This session's notes that no after-tool event took, once they are LEFTOVER
    seconds old (a call denied at the harness's prompt or by another hook: it never ran;
    or interrupted); a leftover already told is removed once LATE_KEPT seconds old."""
    mine_prefix = prefix(ctx.harness, ctx.native_id)
    try:
        entries = list(os.scandir(where))
    except OSError:
        return []
    now, out = time.time(), []
    for e in entries:
        if not e.name.startswith(mine_prefix) or e.path == mine:
            continue
        try:
            age = now - e.stat().st_mtime
        except OSError:  # taken by another after-tool hook meanwhile
            continue
        if e.name.endswith(SUFFIX) and age > LEFTOVER:
            out.append(e.path)
        elif e.name.endswith(LATE) and age > LATE_KEPT:
            remove(e.path)
    return out


class _Note:
    """A note taken back (harness/after.py says its lines): the call, who holds what,
    and the noted files."""

    def __init__(self, head: dict, holders: dict, files: tuple) -> None:
        from .held import file_names
        self.session, self.at = head.get("session"), head["at"]
        # the held folders and globs cut short (harness/held.py): an earlier version's
        # note does not say, so none of its areas proves a file absent
        self.cut = head.get("cut") if isinstance(head.get("cut"), list) else None
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


def _take(path: str, keep: str = "") -> _Note | None:
    """The note at *path*, taken (renamed away first, so two after-hooks never both
    act on it; to *keep* when given, else removed); None when there is none.  Raises
    _Unreadable for one it cannot read."""
    taken = keep or f"{path}.{os.getpid()}.taken"
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
        if not keep:
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
                if entry.get("perm") is not None:  # as it was, not as git's two modes
                    os.fchmod(f.fileno(), entry["perm"])  # (a 0600 secret stays 0600)
                f.write(data)
        os.replace(tmp, full)
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)
    return ""


# -- after the call -------------------------------------------------------------------

def _check_note(info: RepoInfo, ctx: Ctx, path: str, what: str, inbox: bool = False) -> str:
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
    from .backstoptext import shown
    repo = Repo(info)
    changes = []
    top = info.toplevel.rstrip(os.sep) + os.sep
    restored = Restored(os.path.dirname(folder(info.git_dir)))
    try:
        for rel, entry in _noted_states(noted, info.toplevel, restored):
            full = top + rel
            try:  # read once: its blob is its hash and its keeping
                data, mode, key = state_of(full)
                theirs = repo.write_object("blob", data) if data is not None else None
            except OSError as exc:  # a loop of links where its folder was: said, and on
                changes.append({"path": shown(rel), "before": entry["blob"], "after": None,
                                "restored": False, "holders": noted.holders_of(rel),
                                "problem": f"it cannot be read: {exc.strerror or exc}"})
                continue
            if "large" in (mode, entry["mode"]):  # noted or found by its stat alone
                if (mode, tuple(key or ())) == (entry["mode"], tuple(entry.get("key") or ())):
                    continue
                changes.append({"path": shown(rel), "before": entry["blob"], "after": theirs,
                                "restored": False, "holders": noted.holders_of(rel),
                                "problem": f"it is over {MAX_KEPT >> 20} MiB, so its "
                                           f"holder's version was not kept"})
                continue
            if (theirs, mode if data is not None else None) == (entry["blob"], entry["mode"]) \
                    and same_perm(entry.get("perm"), key):
                continue
            holders = noted.holders_of(rel)
            # put back unless every holder works elsewhere (none known: put back)
            here = not holders or any(h.get("here", True) for h in holders)
            problem = _restore(repo, info.toplevel, rel, entry) if here else ""
            if here and not problem:
                restored.record(rel, entry)
            perms = (entry.get("perm"), perm_of(key))  # told when they differ
            changes.append({"path": shown(rel), "before": entry["blob"], "after": theirs,
                            "restored": here and not problem, "problem": problem,
                            "holders": holders, "perms": perms if None not in perms
                            and perms[0] != perms[1] else None})
    finally:
        repo.close()
    if not changes:
        return ""
    sid = str(noted.session or session_for(info, ctx))
    told = _tell_holders(info, sid, changes, what, os.path.basename(path))
    from .backstoptext import agent_text
    text = agent_text(sid, changes, told)
    if inbox:
        _tell(info, sid, sid, text, f"backstop/{os.path.basename(path)}/{sid}")
    return text


def _noted_states(noted: _Note, toplevel: str, restored: Restored | None = None):
    """(path, its state as noted: blob, mode, permission bits) of each noted file whose
    stat moved since, and of each file now in a held folder that was not noted (absent
    then).  A file another call's check put back after this note was taken is as it put
    it back: this note may have been taken while that call's command had changed it
    (two tool calls at once, of one agent or of two), and that is not the holder's."""
    stats = unpacked(noted.stats) if isinstance(noted.stats, memoryview) else noted.stats
    for i in untrusted(toplevel, noted.paths, noted.stats, noted.at):
        key = stats[i] if isinstance(stats, list) and i < len(stats) else None
        entry = {"blob": noted.blobs[i], "mode": noted.modes[i], "key": key,
                 "perm": perm_of(key)}
        yield noted.paths[i], (restored and restored.since(noted.paths[i], noted.at)) or entry
    for rel in _created(noted, toplevel):
        entry = {"blob": None, "mode": None, "perm": None}
        yield rel, (restored and restored.since(rel, noted.at)) or entry


def _told_late(info: RepoInfo, ctx: Ctx, path: str) -> str:
    """A leftover note (a call whose after-tool event never came), told to the agent:
    which held files changed since it was taken.  Nothing is put back: the call may
    never have run (denied at the harness's prompt), and a holder working on since
    cannot be told from it; the note stays (renamed, LATE) for its own after-tool event,
    which may still come, and checks it in full."""
    try:
        noted = _take(path, keep=path + LATE)
    except _Unreadable:  # said, as an unreadable note of this call is
        return (f"agent-registry: the backstop's note of an earlier call of yours whose end "
                f"was never told ({os.path.basename(path)}) could not be read; see `git "
                f"status` for what changed and `agent-registry status` for who holds what")
    if noted is None or not info.toplevel:
        return ""
    top = info.toplevel.rstrip(os.sep) + os.sep
    changed = {}
    for rel, entry in _noted_states(noted, info.toplevel):
        try:
            data, mode, key = state_of(top + rel)
        except OSError:
            data, mode, key = None, "unreadable", None
        now = blob_id(data, info.object_format) if data is not None else None
        if (now, mode if data is not None else None) != (entry["blob"], entry["mode"]) \
                or not same_perm(entry.get("perm"), key):
            changed[rel] = entry
    from .backstoptext import shown
    lines = []
    sid = str(noted.session or session_for(info, ctx))
    for rel, holders in _held_now(info, sid, list(changed)).items():
        entry = changed[rel]
        then = (f"its holder's version then is kept: git show {entry['blob']}"
                if entry["blob"] else "nothing was there then")
        lines.append(f"agent-registry: {shown(rel)}, which {holders} holds, changed after a "
                     f"call of yours whose end was never told (denied, or interrupted), noted "
                     f"{time.strftime('%H:%M:%S', time.localtime(noted.at))}; nothing was "
                     f"put back, as its holder may have written it since. If that call "
                     f"wrote it, {then}. Tell them (agent-registry send --to HOLDER "
                     f"--from {sid} 'TEXT').")
    return "\n".join(lines)


def _held_now(info: RepoInfo, sid: str, paths: list[str]) -> dict[str, str]:
    """{path: who holds it} of those of *paths* another live session holds now (a lock
    released since, or handed to this session, is no longer the holder's)."""
    if not paths:
        return {}
    from ..enforce.guard import UNREADABLE, Guard
    guard = Guard(info)
    try:
        report = guard.check(paths, committer=sid)
    finally:
        guard.close()
    out: dict[str, list[str]] = {}
    for conflict in report.conflicts:
        out.setdefault(conflict.path, []).append(conflict.owner)
    if report.mode.startswith(UNREADABLE):  # who holds what is unknown: each is said
        return {path: "another session" for path in paths}
    return {path: ", ".join(dict.fromkeys(owners)) for path, owners in out.items()}


def _created(noted: _Note, toplevel: str) -> list[str]:
    """Each file now in a held folder or glob that the note did not list and that was
    absent then (its holder had nothing there), as far as can be shown: the note looked
    at every file of that area (none cut short: harness/held.py), and the file was made
    or changed in the note's second or later (git's racy rule), so it is not one git
    ignored at the note and no longer does (the call changed the ignore rules)."""
    areas = [target for target, name in noted.targets.items()
             if name is None and noted.cut is not None and target not in noted.cut]
    if not areas:
        return []
    from .held import Unreadable, expand
    try:
        files, _ = expand(areas, toplevel)
    except Unreadable:  # git cannot list them now: nothing is proved created
        return []
    known = set(noted.paths)
    since = int(noted.at) * 1_000_000_000  # git's racy rule: the note's whole second
    return [rel for rel in files if rel not in known and _changed_since(
        os.path.join(toplevel, rel), since)]


def _changed_since(full: str, ns: int) -> bool:
    """Was the file at *full* made or changed at *ns* (nanoseconds) or later?"""
    try:
        return os.lstat(full).st_ctime_ns >= ns
    except OSError:  # gone again
        return False


def _tell_holders(info: RepoInfo, sid: str, changes: list[dict], what: str, key: str
                  ) -> list[str]:
    """Send each holder one message about its paths; the holders told."""
    from .backstoptext import holder_text
    holders = {h["id"]: h for c in changes for h in c["holders"]}
    return [holder for holder in holders if _tell(
        info, sid, holder, holder_text(sid, [c for c in changes if any(
            h["id"] == holder for h in c["holders"])], what, info.toplevel or ""),
        f"backstop/{key}/{holder}")]


def _tell(info: RepoInfo, sid: str, to: str, body: str, key: str) -> bool:
    """Send *to* a "backstop" message from *sid* (from *to* itself when *sid* is no live
    session); whether it was sent.  A courtesy: the agent's answer says it regardless."""
    try:
        from ..core.messages import send
        from ..sync import Registry
        with Registry.open(info.toplevel or info.git_dir) as registry:
            try:
                send(registry, sid, {"session": to}, body, subject="backstop", key=key[:200])
            except RegistryError:  # the writer is no live session: say it as the holder
                send(registry, to, {"session": to}, body, subject="backstop", key=key[:200])
        return True
    except (RegistryError, OSError):
        return False
