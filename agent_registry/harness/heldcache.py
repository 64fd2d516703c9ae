"""Who holds what here, remembered between the backstop's notes (harness/backstop.py).

Every shell and edit tool call takes a note, and finding the held files costs the
registry's reader (the guard, the view: most of a note's time).  What it found depends
only on the registry's refs and on time (a lock goes stale); so the held targets and
their holders are kept in ``<git dir>/agent-registry/backstop-held.json`` with a
signature of every registry ref (its loose ref files, and packed-refs' size and time)
and reused while the signature is the same, for at most MAX_AGE seconds: one answer per
session (what is held by others differs with who asks), so that several agents in one
working tree do not read again for each other's calls.  A claim, a
release, a heartbeat or a sync moves a ref and so reads again; a lock that went stale
within MAX_AGE is noted a little longer than needed, which puts nothing at risk (the
holder's version of a file is the one kept).  Without loose ref files (reftable) nothing
is remembered.
"""
from __future__ import annotations

import os
import time

from ..store.digest import hexdigest
from ..store.jsontext import dumps, loads

MAX_AGE = 30.0  # seconds a remembered answer is used at most


def _path(git_dir: str) -> str:
    return os.path.join(git_dir, "agent-registry", "backstop-held.json")


def signature(info) -> str | None:
    """A digest of the registry's refs as they are now; None when they cannot be read
    from files (then nothing is remembered)."""
    if _ref_storage(info) != "files":
        return None
    branch = _branch(info)
    parts: list[str] = []
    for base in ("refs/heads", *_remotes(info.common_dir)):
        folder = os.path.join(info.common_dir, base)
        try:
            names = sorted(n for n in os.listdir(folder) if n.startswith(branch))
        except OSError:
            continue
        for name in names:
            for root, dirs, files in os.walk(os.path.join(folder, name)) if \
                    os.path.isdir(os.path.join(folder, name)) else [(folder, [], [name])]:
                dirs.sort()
                for file in sorted(files):
                    full = os.path.join(root, file)
                    try:
                        with open(full, "rb") as f:
                            parts.append(f"{full}={f.read().strip().decode(errors='replace')}")
                    except OSError:
                        return None
    try:
        st = os.stat(os.path.join(info.common_dir, "packed-refs"))
        parts.append(f"packed={st.st_size}:{st.st_mtime_ns}")
    except FileNotFoundError:
        pass
    if not parts:
        return None
    return hexdigest("sha1", "\n".join(parts).encode("utf-8", "surrogatepass"))


def _ref_storage(info) -> str:
    """store/git.ref_storage, known without it for a repository found from its files."""
    if info.ref_format:
        return info.ref_format
    from ..store.git import ref_storage
    return ref_storage(info.common_dir)


def _branch(info) -> str:
    """The registry branch's name: from the config files where they say it plainly (the
    git module, ~1.5 ms of the hook to import, only where they do not)."""
    from ..store.gitconfig import branch_name, config_from_files
    config = config_from_files(info.git_dir)
    if config is None:
        from ..store.git import read_config
        config = read_config(info.git_dir)
    return branch_name(config)


def _remotes(common_dir: str) -> list[str]:
    try:
        return [f"refs/remotes/{r}" for r in sorted(os.listdir(os.path.join(common_dir,
                                                                             "refs", "remotes")))]
    except OSError:
        return []


def _kept(info, sign: str) -> dict:
    """The sessions' answers remembered under *sign* ({} when none, or under another)."""
    try:
        with open(_path(info.git_dir), "rb") as f:
            kept = loads(f.read())
    except (OSError, ValueError):
        return {}
    if not isinstance(kept, dict) or kept.get("signature") != sign or \
            not isinstance(kept.get("sessions"), dict):
        return {}
    return kept["sessions"]


def recall(info, sid: str, sign: str | None
           ) -> tuple[dict[str, list[dict]], dict[str, str | None]] | None:
    """({held target: its holders}, {held target: the file it names, None for a folder or
    glob}) remembered for *sid* under *sign*, or None."""
    if sign is None:
        return None
    mine = _kept(info, sign).get(sid)
    if not isinstance(mine, dict) or not isinstance(mine.get("at"), (int, float)) or \
            not 0 <= time.time() - mine["at"] <= MAX_AGE or \
            not isinstance(mine.get("targets"), dict) or not isinstance(mine.get("files"), dict):
        return None
    targets, files = mine["targets"], mine["files"]
    # each held target with the file it names (a non-empty str) or None (a folder, glob):
    # a cache that says less is worked out again, or a held file would be noted as an
    # area, never compared, and a change to it left in place
    if files.keys() != targets.keys() or not all(
            name is None or (isinstance(name, str) and name) for name in files.values()):
        return None
    return targets, files


def remember(info, sid: str, sign: str | None, targets: dict[str, list[dict]],
             files: dict[str, str | None]) -> None:
    if sign is None:
        return
    now = time.time()
    sessions = {s: kept for s, kept in _kept(info, sign).items() if isinstance(kept, dict)
                and isinstance(kept.get("at"), (int, float)) and 0 <= now - kept["at"] <= MAX_AGE}
    sessions[sid] = {"at": now, "targets": targets, "files": files}
    path = _path(info.git_dir)
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(dumps({"signature": sign, "sessions": sessions}))
        os.replace(tmp, path)
    except OSError:
        pass  # remembering is only a saving
