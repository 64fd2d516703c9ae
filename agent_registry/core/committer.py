"""How a registry commits: the committer part, handed to every Registry.

- :data:`LOCAL`, for a clone without a remote (or with its remote turned off, as a hub
  that does not answer is for the rest of a process): under the clone's flock, the operation
  is decided on the local tip and the ref moved by ``update-ref NEW OLD``
  (``Registry.apply_locally``: a lost compare-and-swap is decided again).
- Through a remote, sync's committer (sync/remote.py ``COMMITTER``: fetch, replay,
  fast-forward push; the sync line; the claims the remote has not seen), which
  ``sync.Registry`` (what every face and the public API open) hands in.  The core never
  imports sync: a core Registry opened on a clone with a remote and no committer
  refuses every write and sync question in one line (:func:`missing`), rather than
  commit what the remote would never see.

A registry's lock shards, clone ref and messages branch are committed by their main
registry's committer.
"""
from __future__ import annotations

from ..errors import RegistryError
from ..store.flock import file_lock

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .registry import Registry


class LocalCommitter:
    """Commits on the local ref under the clone's flock (no remote)."""

    @staticmethod
    def apply(registry: Registry, op: dict) -> dict:
        with file_lock(registry.lock_file):
            return registry.apply_locally(op)


LOCAL = LocalCommitter()


def missing(registry: Registry) -> RegistryError:
    return RegistryError(f"this clone syncs with {registry.remote!r} but no remote "
                         "committer was handed in: open it as agent_registry.Registry "
                         "(sync.Registry), which commits through sync")
