"""This clone's own ref (layout format 3, branch/clones.py): the registry that takes its
sessions' heartbeats and diary lines.

It is the main registry's class on ``<branch>-clones/<clone>``, so with a remote it
syncs exactly like the main branch (fetch, replay, fast-forward push), and its fetch
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
_CLASSES: dict[type, type] = {}


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
        base = type(registry)
        cls = _CLASSES.get(base)
        if cls is None:
            cls = _CLASSES[base] = type("CloneRegistry", (base,), {
                "is_clone": True, "view_at": _view_at, "pages": _pages,
                "fetch_also": property(_fetch_also), "close": lambda self: None,
                "__doc__": "The registry of this clone's own ref (core/cloned.py)."})
        made = cls(registry.repo, branch=clone_branch(registry.branch, name),
                   clock=registry.clock, host=registry.host, config=registry.config)
        made.main = registry
        registry._clone = made
    return made


def _view_at(clone: Registry, tip: str | None) -> View:
    return CloneView(clone.repo, tip, main_views(clone.main))


def main_views(registry: Registry) -> list[View]:
    """The main branch as a shard or a clone ref reads it: the remote's copy (fresh from
    the fetch that brought the shard) and this clone's (its own sessions not yet pushed),
    each with the clone refs' heartbeats overlaid."""
    tips = [registry.repo.read_ref(registry.tracking_ref) if registry.tracking_ref else None,
            registry.repo.read_ref(registry.ref)]
    clones = Clones(registry.repo, registry.branch, registry.remote)
    return [MainView(registry.repo, tip, clones) for tip in dict.fromkeys(t for t in tips if t)]


def _fetch_also(clone: Registry) -> tuple[str, ...]:
    """Its fetch brings the main branch along: a heartbeat is checked against the
    session's record as the remote has it (stopped by another clone's cleanup?)."""
    main = clone.main
    return (f"+{main.ref}:{main.tracking_ref}",) if main.tracking_ref else ()


def _pages(clone: Registry, view: View, at: float, subject: str) -> dict[str, bytes]:
    from ..branch.render import fill, registry_md  # not for a recent heartbeat
    return {"registry.md": registry_md(view, at, subject),
            "README.md": fill("clone-README.md", branch=clone.branch,
                              registry=clone.main.branch).encode()}
