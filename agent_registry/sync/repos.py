"""One view over every repository (``status --repos``, ``lock list --repos``, ``dashboard
--repos``): each repository on the user's list (sync/repolist.py), its registry read as
this clone has it.

Read-only: a registry is opened and read, never written: no branch is made where there
is none, nothing is fetched and nothing is synced (a remote's latest is one ``status`` in
that repository away; each repository says ``as_of``, when its clone last fetched).  A
repository that is gone (its folder deleted, or no longer a git repository) is skipped,
named with the reason, so the caller says it in one line.  Two clones of one repository
(the same registry remote and branch) are two copies of one registry: what both hold is
one row, not two (:func:`one_each`).
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ..branch.staleness import FirstSeen
from ..errors import RegistryError
from ..store import freshness
from ..store.git import Repo, discover
from . import Registry
from .repolist import listed, repository_path


class Gone(Exception):
    """A listed repository that cannot be read any more, and why."""


def forget_hint(path: str) -> str:
    return f"`agent-registry repos forget {path}` takes it off the list"


def skipped_line(skip: dict) -> str:
    """The one line a skipped repository gets on stderr."""
    return f"skipped {skip['repository']}: {skip['reason']} ({forget_hint(skip['repository'])})"


def open_listed(path: str) -> Registry:
    """The registry of the listed repository at *path*, or Gone: a folder that is not
    there, or one that is no longer that repository (a folder inside another repository
    would otherwise be read as that one)."""
    if not os.path.isdir(path):
        raise Gone("the folder is not there any more")
    try:
        info = discover(path)
    except RegistryError:
        raise Gone("not a git repository any more") from None
    if repository_path(info) != path:
        raise Gone("not a git repository any more (the folder belongs to "
                   f"{repository_path(info)})")
    try:
        registry = Registry(Repo(info))
    except RegistryError as exc:
        raise Gone(exc.message) from None
    # read-only: a heartbeat dated ahead is taken as first seen now (held, the safe way)
    # rather than recorded in that repository's heartbeats-seen file
    registry.seen = FirstSeen(None)
    return registry


def described(registry: Registry, path: str) -> dict:
    """What a multi-repository answer says of one repository: where, which branch, and
    how old its view is (``as_of``: this clone's last fetch; null without a remote,
    where the clone is the registry, or when it never fetched)."""
    last = freshness.last_fetch(registry.repo.info.common_dir, registry.branch) \
        if registry.remote else None
    return {"repository": path, "branch": registry.branch, "remote": registry.remote,
            "as_of": freshness.iso(last) if last else None}


@contextmanager
def reading(path: str) -> Iterator[Registry]:
    registry = open_listed(path)
    try:
        yield registry
    finally:
        registry.close()


def registry_of(registry: Registry, path: str) -> tuple[str, str]:
    """What every clone of one repository shares, so their copies are one registry: its
    registry remote's URL (a local one resolved) and the branch; a repository without a
    remote is its own."""
    url = ""
    if registry.remote:
        url = registry.repo.git("config", "--get", f"remote.{registry.remote}.url",
                                check=False).stdout.decode(errors="replace").strip()
        local = url.removeprefix("file://")
        if local and "://" not in local and not _scp_like(local):
            url = os.path.realpath(os.path.join(path, local))  # as git reads it there
    return (url.rstrip("/") or f"here:{path}", registry.branch)


def _scp_like(url: str) -> bool:
    """``host:path``, git's scp-like syntax (a colon before any slash)."""
    colon = url.find(":")
    return colon > 0 and "/" not in url[:colon]


def one_each(rows: list[dict], registries: dict[str, tuple], key: Callable[[dict], object]
             ) -> list[dict]:
    """*rows* with what two clones of one registry both hold (the same ``key(row)``)
    kept once: the row read in the clone its session works in (a ``project`` inside
    that repository), else the first listed."""
    def own(row: dict) -> bool:
        project, path = row.get("project") or "", row["repository"]
        return project == path or project.startswith(path.rstrip("/") + "/")
    kept: dict[tuple, dict] = {}
    for row in rows:
        name = (registries[row["repository"]], key(row))
        if name not in kept or (own(row) and not own(kept[name])):
            kept[name] = row
    return list(kept.values())


def across(read: Callable[[Registry], list[dict]], paths: list[str] | None = None,
           *, key: Callable[[dict], object] | None = None) -> dict:
    """``read(registry)`` in every listed repository (or *paths*), each row given its
    ``repository``: ``{"repositories": [...], "rows": [...], "skipped": [...],
    "warnings": [...]}``.  With *key* (what names a row: a session's id), a row that
    several clones of one registry hold is given once (:func:`one_each`), and each
    repository's ``count`` is of the rows given under it."""
    repositories, rows, skipped, warnings = [], [], [], []
    registries: dict[str, tuple] = {}
    for path in listed() if paths is None else paths:
        try:
            with reading(path) as registry:
                found = read(registry)
                about = described(registry, path)
                warnings += [f"{path}: {w}" for w in registry.warnings]
                registries[path] = registry_of(registry, path) if key else (path,)
        except Gone as exc:
            skipped.append({"repository": path, "reason": str(exc)})
            continue
        except (RegistryError, OSError) as exc:  # one unreadable registry (GitError too)
            reason = getattr(exc, "message", None) or str(exc)
            skipped.append({"repository": path, "reason": f"unreadable: {reason}"})
            continue
        repositories.append(about)
        rows += [{"repository": path, **row} for row in found]
    if key is not None:
        rows = one_each(rows, registries, key)
    for about in repositories:
        about["count"] = sum(row["repository"] == about["repository"] for row in rows)
    return {"repositories": repositories, "rows": rows, "skipped": skipped,
            "warnings": warnings}


def remember_here(directory: str) -> None:
    """Run in a repository whose registry is not on the list (made before the list
    existed, or the list was lost), ``--repos`` adds it: reading the refs is all it
    costs.  Anywhere else (not a repository, no registry there), nothing."""
    try:
        registry = Registry(Repo(discover(directory)))
    except RegistryError:
        return
    try:
        if registry.tip() is not None:
            registry.remember()
    finally:
        registry.close()
