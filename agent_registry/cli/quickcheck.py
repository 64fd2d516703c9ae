"""`lock check` without importing the core (issue 35: check at its floor).

A check reads and writes nothing: importing the Registry, with every operation family
it mixes in (sessions, locks, diary, kill: a dozen modules, some 2 ms of a 17 ms
command), buys it nothing.  :class:`CheckRegistry` is what the check command of
cli/fast.py asks of a registry (its repository, ``remote``, ``session_names``, ``check``,
``warnings``), read through the same parts: branch/lockcheck.py's CheckCalls, which the
core's Registry mixes in too, over the view the core reads (the lock shards in their
layout, the clone refs' heartbeats).  It serves only the plain case; :func:`open_check`
says None, and the core's Registry serves, where that reads anything more: a remote
(a check fetches first when the view is old, and says which claims it has not
confirmed), a registry branch named in git config (the core checks its name), or names
that compare ignoring case (respelled from the index and the live claims).
"""
import time

from ..branch import shards as S
from ..branch.clones import Clones, MainView
from ..branch.lockcheck import CheckCalls
from ..branch.pathcase import rule_of
from ..branch.staleness import FirstSeen
from ..branch.view import View
from ..errors import NotFound
from ..store.git import Repo, discover, read_config
from ..store.gitconfig import DEFAULT_BRANCH, branch_name, remote_name
from ..store.liveness import hostname


class CheckRegistry(CheckCalls):
    """The registry of *repo* as `lock check` reads it, with no remote, on the default
    registry branch (:func:`open_check`)."""

    remote = None  # nothing to fetch first, nothing unconfirmed

    def __init__(self, repo: Repo, directory: str) -> None:
        self.repo, self.directory = repo, directory
        self.branch = DEFAULT_BRANCH
        self.host = hostname()
        self.clock = time.time
        self.seen = FirstSeen(repo.state_path("heartbeats-seen.json"))
        self.warnings: list[str] = []
        self._view: View | None = None

    def view(self) -> View:
        """The core's Registry.view() of the registry branch tip, read once: the lock
        shards overlaid in the layout ``init`` makes, else the branch with the clone
        refs' heartbeats (core/refs.RegistryBranch)."""
        if self._view is None:
            tip = self.repo.read_ref(f"refs/heads/{self.branch}")
            marker = S.newest_layout(self.repo, (tip,))
            if marker["format"] >= 2:
                from ..branch.shardview import open_whole  # the lock shards' reader: not
                # imported for a registry on one branch (layout format 1)
                self._view = open_whole(self.repo, self.branch, None, tip, S.count_of(marker))
            else:
                self._view = MainView(self.repo, tip, Clones(self.repo, self.branch, None))
        return self._view

    def unconfirmed_claims(self) -> set[tuple[str, str]]:
        return set()  # without a remote every claim is the registry's own

    def unknown(self, view: View | None, sid: str) -> NotFound:
        """The core's error for an unknown session id, naming the live ids likeliest
        meant (read on that error path only)."""
        from ..sync import Registry
        with Registry.open(self.directory) as registry:
            return registry.unknown(None, sid)

    def close(self) -> None:
        self.repo.close()


def open_check(directory: str) -> CheckRegistry | None:
    """The registry of *directory* for a check, or None where the core's Registry
    must read it (a remote, a branch named in config, names compared ignoring case).
    A repository that is not there raises as Registry.open raises: the same function
    finds it."""
    repo = Repo(discover(directory))
    config = read_config(repo.info.git_dir)
    rule = rule_of(config)
    if remote_name(config) or branch_name(config) != DEFAULT_BRANCH or rule.ignorecase:
        repo.close()
        return None
    repo.path_rule = rule
    return CheckRegistry(repo, directory)
