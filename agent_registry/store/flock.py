"""The clone's critical section: an exclusive OS lock on a file in its state folder.

Standard library only (fcntl; the filelock package on Windows, the platform-conditional
dependency), so the guard, the core and sync share one.
"""
from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:  # for annotations only: collections costs a one-shot command 1 ms
    from collections.abc import Callable

FILE_LOCK_ENV = "AGENT_REGISTRY_FILE_LOCK"


class file_lock:
    """``with file_lock(path, on_wait):`` an exclusive OS lock on *path* (flock; filelock
    on Windows), released when the block ends or the process dies, so a kill -9 never
    leaves it held.  *on_wait* is called once before blocking, when another process holds
    it.  ``$AGENT_REGISTRY_FILE_LOCK=filelock`` takes the filelock branch where fcntl
    exists too (tests).  A class, not a contextlib generator: contextlib is an import
    every one-shot command would pay for."""

    def __init__(self, path: str, on_wait: Callable[[], None] | None = None) -> None:
        self.path, self.on_wait = path, on_wait
        self._fd: int | None = None
        self._portable = None  # filelock.FileLock, where fcntl is not used

    def __enter__(self) -> None:
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        try:
            if os.environ.get(FILE_LOCK_ENV) == "filelock":
                raise ImportError(FILE_LOCK_ENV)
            import fcntl
        except ImportError:  # Windows: the platform-conditional dependency
            from filelock import FileLock, Timeout
            self._portable = FileLock(self.path)
            try:
                self._portable.acquire(timeout=0 if self.on_wait else -1)
            except Timeout:
                self.on_wait()  # type: ignore[misc]
                self._portable.acquire()
            return
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | (fcntl.LOCK_NB if self.on_wait else 0))
            except BlockingIOError:
                self.on_wait()  # type: ignore[misc]
                fcntl.flock(self._fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(self._fd)
            raise

    def __exit__(self, *exc) -> None:
        if self._portable is not None:
            self._portable.release()
        else:
            os.close(self._fd)  # closing releases the lock, also when we are killed
