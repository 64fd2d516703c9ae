"""Sync with a remote: the remote committer (fetch, replay, push), reading a remote, gc,
and the conversion to lock shards (sync/convert.py)."""
from __future__ import annotations

from ..core.registry import Registry as CoreRegistry


class Registry(CoreRegistry):
    """The Registry the faces and the public API open (``from agent_registry import
    Registry``): when its config names a remote, it commits through sync's remote
    committer, which sync.remote hands to the core on import; a registry without a
    remote never pays for importing it.  When ``git config agent-registry.shards N``
    asks for lock shards, the first operation of a process converts a single-branch
    registry, or upgrades lock shards of layout format 2 to 3, first (sync/convert.py;
    never from a shard's or a clone ref's registry); without it nothing is read.
    ``init`` and ``register`` also remember the repository in the user's list."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if self.remote:
            from . import remote  # noqa: F401  (hands the remote committer to the core)

    def init(self, *args, **kwargs) -> dict:
        result = super().init(*args, **kwargs)
        self.remember()
        return result

    def register(self, *args, **kwargs):
        session = super().register(*args, **kwargs)
        self.remember()
        return session

    def remember(self) -> None:
        """Add this repository to the user's list (sync/repolist.py: ``status --repos``
        reads every one); a list that cannot be written is one warning, never a failure
        of the command that succeeded."""
        from . import repolist
        try:
            repolist.remember(self.repo.info)
        except OSError as exc:
            self.warnings.append(f"could not remember this repository in "
                                 f"{repolist.list_path()}: {exc.strerror or exc}")

    def apply(self, op: dict) -> dict:
        warnings: list[str] = []
        if "agent-registry.shards" in self.config and not getattr(self, "is_shard", False) \
                and not getattr(self, "keeps_messages", False):
            from .convert import auto_convert
            warnings = auto_convert(self)
        try:
            return super().apply(op)
        finally:
            self.warnings.extend(w for w in warnings if w not in self.warnings)
