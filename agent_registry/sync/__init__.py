"""Sync with a remote: the remote committer (fetch, replay, push), reading a remote, gc,
and the conversion to lock shards (sync/convert.py)."""
from __future__ import annotations

from ..branch import shards as S
from ..core.registry import Registry as CoreRegistry

# (common dir, branch) found in the layout this version writes, by this process
_SETTLED: set[tuple[str, str]] = set()


class Registry(CoreRegistry):
    """The Registry the faces and the public API open (``from agent_registry import
    Registry``): when its config names a remote, it hands the core sync's remote
    committer (sync/remote.py ``COMMITTER``, core/committer.py); a registry without a
    remote never pays for importing it.  The first operation of a process converts a
    single-branch registry, or upgrades lock shards of layout format 2 to 3, first
    (sync/convert.py; never from a shard's or a clone ref's registry): the layout
    ``init`` makes is the only one a face writes.
    ``init`` and ``register`` also remember the repository in the user's list."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if self.remote and self.committer is None:
            from .remote import COMMITTER
            self.committer = COMMITTER

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

    def create(self, shards: int | None = None) -> dict:
        """A new registry in lock shards with clone refs (layout format 3; *shards*, else
        ``git config agent-registry.shards``, else 16): sync/convert.py."""
        from .convert import create, new_count
        made = create(self, new_count(self, shards))
        if made is not None:
            return made
        said = list(self.warnings)  # why not in shards: the init operation resets them
        try:
            return super().create(shards)
        finally:
            self.warnings.extend(w for w in said if w not in self.warnings)

    applying = False  # an operation is running: the init and settling it starts are its
    silent = None  # a remote gave it no answer in time: sync/remote.py git_net

    def apply(self, op: dict) -> dict:
        if self.applying or self.part.main is not None:
            # the init an operation starts, or its part on a lock shard or the clone's
            # ref: the main registry's operation, whose `silent` they share
            return self._apply(op)
        self.applying, self.silent = True, None
        try:
            return self._apply(op)
        finally:
            self.applying, self.silent = False, None

    def _apply(self, op: dict) -> dict:
        # the first write where there is no registry makes it as init does (a cleanup,
        # which has nothing to stop there, makes none)
        if op["op"] not in ("init", "cleanup") and self.tip() is None and self.part.routes:
            self.init()
        warnings = self.settle_layout()
        try:
            return super().apply(op)
        finally:
            self.warnings.extend(w for w in warnings if w not in self.warnings)

    def settle_layout(self) -> list[str]:
        """Convert a single-branch registry, or upgrade format 2, before an operation
        (sync/convert.py ``auto_convert``: once per process); only the registry branch's
        registry converts, never a shard's, a clone ref's or the messages branch's."""
        if not self.part.routes or self._in_layout():
            return []
        from .convert import auto_convert
        said = auto_convert(self)
        self.warnings.extend(w for w in said if w not in self.warnings)
        return said

    def _in_layout(self) -> bool:
        """Whether the registry branch is in the layout this version writes (or in a
        newer one, which the operation refuses): one read of ``layout.json``, once per
        process, without importing sync/convert.py (500 lines for what is, but for a
        registry's first write by a new version, nothing to do)."""
        key = (self.repo.info.common_dir, self.branch)
        if key in _SETTLED:
            return True
        if self.config.get(S.CONFIG) is not None:
            return False  # a count asked for: auto_convert refuses one it cannot make
        tip = self.tip()
        raw = self.repo.read_blob(f"{tip}:{S.LAYOUT}") if tip else None
        try:
            settled = raw is not None and S.layout_of(raw)["format"] >= S.FORMAT
        except S.NewerFormat:  # newer, or unreadable: the operation refuses
            settled = True
        if settled:
            _SETTLED.add(key)
        return settled
