"""``dashboard --repos``: the user's other repositories beside the one served (the list
is sync/repolist.py's).  Each registry is opened once and read by one request at a time
(a Registry's ``cat-file --batch`` serves one reader), never written: the page's actions
stay with the served repository, and nothing here fetches.  A repository that goes away
while the dashboard runs is skipped with a warning, and read again if it comes back.
Another clone of a registry already read (the served one's, or an earlier listed one's:
the same registry remote and branch, sync/repos.py ``registry_of``) is a copy of it, not
another repository: it is not read again, so no session or lock shows twice."""
from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ..errors import BadInput, NotFound, RegistryError
from ..sync import Registry
from ..sync.repolist import listed
from ..sync.repos import Gone, open_listed, registry_of, skipped_line
from .events import signature


class OtherRepositories:
    def __init__(self, served: str) -> None:
        self.served = served
        self._open: dict[str, tuple[Registry, threading.Lock]] = {}
        self._guard = threading.Lock()
        self._served_as: tuple | None = None  # the served registry's name (registry_of)
        self._names: dict[str, tuple] = {}  # each open one's, read once (a git process)

    def _served_key(self) -> tuple:
        if self._served_as is None:
            try:
                served = open_listed(self.served)
                try:
                    self._served_as = registry_of(served, self.served)
                finally:
                    served.close()
            except (Gone, RegistryError, OSError):
                self._served_as = (f"here:{self.served}",)
        return self._served_as

    def _get(self, path: str) -> tuple[Registry, threading.Lock]:
        with self._guard:
            held = self._open.get(path)
            if held is not None and not os.path.isdir(held[0].repo.info.common_dir):
                self._drop(path)
                held = None
            if held is None:
                held = self._open[path] = (open_listed(path), threading.Lock())
                self._names[path] = registry_of(held[0], path)
            return held

    def _drop(self, path: str) -> None:
        held = self._open.pop(path, None)
        self._names.pop(path, None)
        if held is not None:
            held[0].close()

    def each(self, read: Callable[[Registry], object]) -> tuple[list[tuple[str, object]],
                                                                 list[str]]:
        """``read(registry)`` in each listed repository but the served one: the
        (repository, answer) pairs, and one warning line for each that was skipped."""
        found, skipped = [], []
        try:
            paths = listed()
        except OSError as exc:  # the list itself: this repository's tables still show
            return [], [f"agent-registry: could not read the list of repositories: {exc}"]
        read_ones = {self._served_key()}
        for path in paths:
            if path == self.served:
                continue
            try:
                registry, lock = self._get(path)
                with lock:
                    name = self._names.get(path) or registry_of(registry, path)
                    if name in read_ones:
                        continue  # a copy of a registry already read: its rows are there
                    read_ones.add(name)
                    found.append((path, read(registry)))
            except (Gone, RegistryError, OSError) as exc:
                reason = str(exc) if isinstance(exc, Gone) else \
                    f"unreadable: {getattr(exc, 'message', None) or exc}"
                skipped.append(skipped_line({"repository": path, "reason": reason}))
                with self._guard:
                    self._drop(path)
        return found, skipped

    @contextmanager
    def borrow(self, path: str) -> Iterator[Registry]:
        """The registry of *path* to read, which must be one of the listed repositories
        (never any path a request names: BadInput); NotFound when it is gone."""
        try:
            known = listed()
        except OSError:
            known = []
        if path == self.served or path not in known:
            raise BadInput(f"{path}: not another repository on the list (repos list)")
        try:
            registry, lock = self._get(path)
        except Gone as exc:
            raise NotFound(f"{path}: {exc}") from None
        with lock:
            yield registry

    def signatures(self) -> tuple:
        """What identifies the other repositories' state (events.signature of each, and
        the line of each skipped): the event stream polls it."""
        found, skipped = self.each(signature)
        return tuple(found) + tuple(skipped)

    def close(self) -> None:
        with self._guard:
            for path in list(self._open):
                self._drop(path)
