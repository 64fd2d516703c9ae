"""This clone's own ref (layout format 3, branch/clones.py): the registry that takes its
sessions' heartbeats and diary lines.

It is a registry of the main registry's class and committer on ``<branch>-clones/<clone>``
with a part of its own (:class:`CloneRef`), so with a remote it syncs exactly like the
main branch (fetch, replay, fast-forward push), and its fetch
brings the main branch along, so a heartbeat of a session another clone stopped is
refused as before.  Only this clone pushes that ref: its pushes wait for no other
clone's.
"""
from __future__ import annotations

import os

from ..branch.clones import CloneView, Clones, MainView, clone_branch
from ..branch.view import View
from ..store.lazyre import ALNUM

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .registry import Registry

_NAME_CHARS = ALNUM | frozenset("._-")


def clone_name(registry: Registry, create: bool = True) -> str | None:
    """This clone's name, ``<host>-<12 hex>``: made once, kept in its state folder (its
    worktrees share it), so it names the same ref in every process.  None when it has
    none yet and *create* is false (a clone that never wrote has no ref to read)."""
    path = registry.repo.state_path("clone")
    try:
        with open(path, encoding="ascii") as f:
            name = f.read().strip()
        if name and all(c in _NAME_CHARS for c in name):
            return name
    except (OSError, UnicodeDecodeError):
        pass
    if not create:
        return None
    host = "".join(c if c in _NAME_CHARS else " " for c in registry.host)
    host = "-".join(host.split()).strip(".-")[:40] or "clone"  # a run of others: one -
    name = f"{host}-{os.urandom(6).hex()}"
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}"
    with open(tmp, "w", encoding="ascii") as f:
        f.write(name + "\n")
    try:
        os.link(tmp, path)  # the first process to name the clone wins; the others read it
    except FileExistsError:
        pass
    finally:
        os.unlink(tmp)
    with open(path, encoding="ascii") as f:
        return f.read().strip()


def clone_registry(registry: Registry, create: bool = True) -> Registry | None:
    """The registry of this clone's ref: made once per registry, closed with it.  None
    when the clone has no name yet and *create* is false (what reads and sync ask)."""
    made = registry.__dict__.get("_clone")
    if made is None:
        name = clone_name(registry, create)
        if name is None:
            return None
        made = registry.__dict__["_clone"] = registry.derived(
            clone_branch(registry.branch, name), CloneRef(registry))
    return made


class CloneRef:
    """The part of this clone's own ref (core/refs.py): its views overlay the main
    branch's sessions, its fetch brings the main branch along (a heartbeat is checked
    against the session's record as the remote has it: stopped by another clone's
    cleanup?), and nothing decided on it stands alone (it holds no lock, and its
    heartbeats are judged against the main branch)."""

    kind = "clone"
    routes = False
    keeps_messages = False

    def __init__(self, main: Registry) -> None:
        self.main = main

    def view_at(self, clone: Registry, tip: str | None) -> View:
        return CloneView(clone.repo, tip, main_views(self.main))

    def decides_alone(self, clone: Registry, tip: str, op: dict) -> bool:
        return False

    def fetch_also(self, clone: Registry) -> tuple[str, ...]:
        main = self.main
        return (f"+{main.ref}:{main.tracking_ref}",) if main.tracking_ref else ()

    def pages(self, clone: Registry, view: View, at: float, subject: str) -> dict[str, bytes]:
        from ..branch.render import fill, registry_md  # not for a recent heartbeat
        return {"registry.md": registry_md(view, at, subject),
                "README.md": fill("clone-README.md", branch=clone.branch,
                                  registry=self.main.branch).encode()}


def main_views(registry: Registry) -> list[View]:
    """The main branch as a shard or a clone ref reads it: the remote's copy (fresh from
    the fetch that brought the shard) and this clone's (its own sessions not yet pushed),
    each with the clone refs' heartbeats overlaid."""
    tips = [registry.repo.read_ref(registry.tracking_ref) if registry.tracking_ref else None,
            registry.repo.read_ref(registry.ref)]
    clones = Clones(registry.repo, registry.branch, registry.remote)
    return [MainView(registry.repo, tip, clones) for tip in dict.fromkeys(t for t in tips if t)]
