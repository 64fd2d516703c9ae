"""The refs a registry writes, each as a part handed to its Registry (docs/design.md,
"The parts of a registry").

A Registry is one transaction over one ref, built from passed-in parts: the ref's part
(below: how to read a view of it, which pages each commit renders there, what a fetch
of it brings along, whether an operation decided on its tip alone may be pushed
without a fetch), the committer (core/committer.py: the clone's flock and
``update-ref NEW OLD``, or sync's fetch-replay-push), and, for the registry branch
alone, the layout that routes an operation to the refs it writes (core/sharded.py
``route``).  Every part answers the same five questions:

- ``view_at(registry, tip)``: the View an operation is decided on at *tip*;
- ``pages(registry, view, at, subject)``: the files every commit there renders;
- ``fetch_also(registry)``: the refspecs a fetch of this ref brings in the same
  connection;
- ``decides_alone(registry, tip, op)``: whether *op*, decided on *tip*, depends on
  nothing another clone may have pushed since but this ref itself;
- ``routes`` (the layout splits its operations over other refs: the registry branch's
  only), ``kind`` (what sync's bookkeeping names it by), ``main`` (the registry this
  ref belongs to: None for one that is a registry of its own) and ``keeps_messages``
  (a send is committed on this ref itself: the messages branch's and a hub's).

The parts of the lock shards, the clone refs and the messages branch are in their own
modules (core/sharded.py, core/cloned.py, core/messages_branch.py); the registry
branch's is here.
"""
from __future__ import annotations

from ..branch.clones import Clones, MainView
from ..branch.clones import fetch_refspec as clones_refspec
from ..branch.view import View

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .registry import Registry


class RegistryBranch:
    """The registry branch (``agent-registry``): sessions, the wiki, the layout marker;
    in the layout ``init`` makes, its views overlay the clone refs' heartbeats and
    diaries, and its registry.md lists every lock shard's locks."""

    kind = "main"
    routes = True
    main = None
    keeps_messages = False

    def view_at(self, registry: Registry, tip: str | None) -> View:
        return MainView(registry.repo, tip, Clones(registry.repo, registry.branch,
                                                   registry.remote))

    def pages(self, registry: Registry, view: View, at: float,
              subject: str) -> dict[str, bytes]:
        from .sharded import locks_view, main_pages
        return main_pages(registry.branch, view, at, subject, locks_view(registry, view))

    def fetch_also(self, registry: Registry) -> tuple[str, ...]:
        """Its lock shards and the clone refs, so a read after a sync sees other
        clones' claims and heartbeats."""
        shards = f"{registry.branch}-shards/*"
        return (f"+refs/heads/{shards}:refs/remotes/{registry.remote}/{shards}",
                clones_refspec(registry.remote, registry.branch))

    def decides_alone(self, registry: Registry, tip: str, op: dict) -> bool:
        """As core/sharded.py ``judges_no_holder`` on this branch's lock records (a
        registry converted from one branch by its first write held its locks here)."""
        from .sharded import judges_no_holder
        return judges_no_holder(View(registry.repo, tip), op)


class HubBranch(RegistryBranch):
    """The registry branch of a hub (sync/rooms.py): shared rooms' messages are
    committed on it, as before the messages branch existed, and no layout routes or
    converts anything there."""

    kind = "hub"
    routes = False
    keeps_messages = True
