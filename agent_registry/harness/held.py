"""The files of this working tree that other live sessions hold.

Read from the live sessions' own lists of what they hold (one pipelined read of the
live session files: O(live sessions), never a scan of the locks), each target expanded
to the files it covers here (a file lock is its name, present or not; a folder or glob
lock the files below it that git tracks or would track, as ``git ls-files`` lists them:
tracked ones, and untracked ones git does not ignore, at most MAX_FILES looked at), then
judged by the guard (enforce/guard.py), which the commit hook and the edit gate also ask,
so a stale lock, the session's own lock and a shared one count here exactly as they do
there.  What git ignores (a ``node_modules/``, a ``__pycache__/``, build output) is no
one's work: it neither spends the cap nor is put back or moved aside.
"""
from __future__ import annotations

from ..branch import paths as P
from ..errors import RegistryError

MAX_FILES = 2000  # files of folder and glob locks looked at, at most, per hook call


class Unreadable(RegistryError):
    """Who holds what is unknown: the registry branch exists and cannot be read, or git
    cannot list a held folder."""


def held_files(guard, sid: str, toplevel: str, listed: bool = True) -> dict[str, list]:
    """{repository path: the guard's conflicts} for each file of the working tree at
    *toplevel* that a live session other than *sid* holds, and for each held folder or
    glob target itself (:func:`is_area`); with *listed* False, the files a held folder
    or glob covers are not listed (its target itself says who holds it)."""
    targets: list[str] = []
    if guard.lookup is not None:
        try:
            view = guard.lookup.open()
            targets = list(dict.fromkeys(t for s in view.live_sessions() if s.id != sid
                                         for t in s.locks))
        except Exception as exc:  # noqa: BLE001 - unreadable is never "nothing held"
            raise Unreadable(f"the registry branch is unreadable ({exc})") from None
    # a folder or glob lock is asked about as itself too (it covers its own name), so a
    # held area with no file in it yet is known: a file created there is a write to it;
    # and a file no registry path can name (not UTF-8) is held by the area it is in
    named = expand(targets, toplevel)[0] if listed else \
        [P.plain(t) for t in targets if not is_area(t)]
    files = [f for f in named if _registry_name(f)] + [t for t in targets if is_area(t)]
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


def expand(targets: list[str], toplevel: str) -> tuple[list[str], list[str]]:
    """(the files *targets* cover in the working tree at *toplevel*, MAX_FILES at most
    looked at for its folders and globs; those of them cut short, some of their files not
    looked at: what else is in them is unknown).  git runs only for a folder or glob."""
    out = [P.plain(target) for target in targets if not is_area(target)]
    areas = [target for target in targets if is_area(target)]
    listed = _listed(toplevel, areas) if areas else []
    out += [path for path in listed[:MAX_FILES] if any(P.covers(a, path) for a in areas)]
    rest = listed[MAX_FILES:]
    # a glob's unlooked-at paths are not matched (a glob costs ~10 us a path, and the
    # rest may be 100,000): one under its literal prefix may be its, so it is cut
    cut = [a for a in areas if any(_under(P.literal_prefix(a), path) for path in rest)]
    return list(dict.fromkeys(out)), cut


def cut_notice(cut: list[str]) -> str:
    """The line a note says on stderr when held folders or globs were *cut* short."""
    return (f"agent-registry: backstop: held {', '.join(cut)}: more than {MAX_FILES:,} "
            f"files to look at; those looked at are kept for this call, and a file it "
            f"creates there is not moved aside")


def _listed(toplevel: str, areas: list[str]) -> list[str]:
    """The files git tracks or would track under the literal prefixes of *areas*
    (repository paths; a symbolic link is a file, never entered, as git sees it), by
    ``git ls-files``; Unreadable when it fails."""
    from ..store.layout import clean_env
    from ..store.spawn import run  # not the git module: a note may hash nothing
    prefixes = [P.literal_prefix(area).rstrip("/") for area in areas]
    # a folder's name without its slash: a symbolic link of that name is listed too
    specs = [] if "" in prefixes else \
        [f":(top,literal){prefix}" for prefix in dict.fromkeys(prefixes)]
    proc = run(["git", "-C", toplevel, "ls-files", "-z", "--cached", "--others",
                "--exclude-standard", "--", *specs], env=clean_env())
    if proc.returncode:
        said = proc.stderr.decode(errors="replace").strip().splitlines()
        why = said[-1] if said else f"exit {proc.returncode}"
        raise Unreadable(f"git cannot list the held folders ({why})")
    names = proc.stdout.decode("utf-8", "surrogateescape").split("\0")
    # "sub/": a repository nested here (git would add it as one entry, not its files)
    return [name for name in names if name and not name.endswith("/")]


def _under(prefix: str, path: str) -> bool:
    """Is *path* (or the folder of that name) under the literal *prefix*?"""
    return (path + "/").startswith(prefix)


def _registry_name(path: str) -> bool:
    """Can *path* be a registry path (UTF-8: a file system's name may be other bytes)?"""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
