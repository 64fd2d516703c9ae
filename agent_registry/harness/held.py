"""The files of this working tree that other live sessions hold.

Read from the live sessions' own lists of what they hold (one pipelined read of the
live session files: O(live sessions), never a scan of the locks), each target expanded
to the files it covers here (a file lock is its name, present or not; a folder or glob
lock the files found on disk below it, at most MAX_FILES), then judged by the guard
(enforce/guard.py), which the commit hook and the edit gate also ask, so a stale lock,
the session's own lock and a shared one count here exactly as they do there.
"""
from __future__ import annotations

import os

from ..branch import paths as P
from ..errors import RegistryError

MAX_FILES = 2000  # files of folder and glob locks looked at, at most, per hook call


class Unreadable(RegistryError):
    """The registry branch exists and cannot be read: who holds what is unknown."""


def held_files(guard, sid: str, toplevel: str) -> dict[str, list]:
    """{repository path: the guard's conflicts} for each file of the working tree at
    *toplevel* that a live session other than *sid* holds, and for each held folder or
    glob target itself (:func:`is_area`)."""
    targets: list[str] = []
    if guard.lookup is not None:
        try:
            view = guard.lookup.open()
            targets = list(dict.fromkeys(t for s in view.live_sessions() if s.id != sid
                                         for t in s.locks))
        except Exception as exc:  # noqa: BLE001 - unreadable is never "nothing held"
            raise Unreadable(f"the registry branch is unreadable ({exc})") from None
    # a folder or glob lock is asked about as itself too (it covers its own name), so a
    # held area with no file in it yet is known: a file created there is a write to it
    files = expand(targets, toplevel) + [t for t in targets if is_area(t)]
    if not files and guard.lookup is not None:
        return {}  # nothing held (without a tip, check says whether its ref is broken)
    report = guard.check(files, committer=sid)
    if report.unreadable:
        raise Unreadable(report.mode.split(": ", 1)[-1])
    out: dict[str, list] = {}
    for conflict in report.conflicts:
        out.setdefault(conflict.path, []).append(conflict)
    return out


def may_count_again(guard, sid: str) -> bool:
    """Whether a lock of another session that does not count now may count again with
    no ref moving: one whose holder's heartbeat is dated ahead (branch/staleness.py
    ages it from when this clone first saw it, then counts it again once the clock comes
    within the margin of it).  An answer read then is not to be remembered
    (harness/heldcache.py: it assumes time only ever makes a lock stale)."""
    if guard.lookup is None:
        return False
    from ..branch.staleness import ahead_by
    view = guard.lookup.open()
    return any(ahead_by(session, guard.lookup.now) for session in view.live_sessions()
               if session.id != sid)


def is_area(target: str) -> bool:
    """Is *target* a folder or a glob (it covers files that may not exist yet)?"""
    return P.is_glob(target) or P.is_dir(P.plain(target))


def file_names(targets) -> dict[str, str | None]:
    """{target: the file it names, or None for a folder or glob}: what a note needs of
    each held target, kept with it (harness/heldcache.py) so that a note of held files
    imports no path rules."""
    return {target: None if is_area(target) else P.plain(target) for target in targets}


def expand(targets: list[str], toplevel: str) -> list[str]:
    """The files *targets* cover in the working tree at *toplevel*."""
    out: list[str] = []
    for target in targets:
        if not is_area(target):
            out.append(P.plain(target))
            continue
        for path in _walk(toplevel, P.literal_prefix(target), MAX_FILES - len(out)):
            if P.covers(target, path):
                out.append(path)
        if len(out) >= MAX_FILES:
            break
    return list(dict.fromkeys(out))


def _walk(toplevel: str, folder: str, limit: int) -> list[str]:
    """Up to *limit* files (and symbolic links) below *folder*, repository paths; the
    repository's own ``.git`` is never entered."""
    found: list[str] = []
    for root, dirs, files in os.walk(os.path.join(toplevel, folder)):
        dirs[:] = sorted(d for d in dirs if d != ".git")
        rel = os.path.relpath(root, toplevel).replace(os.sep, "/")
        prefix = "" if rel == "." else rel + "/"
        found += [prefix + name for name in sorted(files)]
        found += [prefix + d for d in dirs if os.path.islink(os.path.join(root, d))]
        if len(found) >= limit:
            return found[:limit]
    return found
