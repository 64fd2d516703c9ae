"""Sync with a remote: the remote committer (fetch, replay, push), reading a remote, gc."""
from __future__ import annotations

from ..core.registry import Registry as CoreRegistry


class Registry(CoreRegistry):
    """The Registry the faces and the public API open (``from agent_registry import
    Registry``): when its config names a remote, it commits through sync's remote
    committer, which sync.remote hands to the core on import; a registry without a
    remote never pays for importing it."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if self.remote:
            from . import remote  # noqa: F401  (hands the remote committer to the core)
