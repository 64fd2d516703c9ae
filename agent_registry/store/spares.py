"""Object files made ahead of need, for a process that writes objects again and again
(the MCP server).

A loose object is written as git writes one: a new temporary file in ``objects/``,
renamed onto the object's name.  Making the file (an inode and a directory entry) is
most of that: about 55 of 65 µs an object on this project's test machine, and a claim
writes eight.  A long-lived process makes a few such files while it has nothing else
to do (:meth:`SpareFiles.fill`, from a thread of its own), and ``Repo.write_object``
fills one and renames it into place instead of making one in the middle of a claim.
Nothing else changes: the same kind of file (git's ``tmp_obj_`` prefix, read-only from
birth), the same rename, the same object.

A spare file removed meanwhile (``git prune`` removes such files) is noticed at the
rename, and the object is written through a file made on the spot.  The process removes
the spares it holds when it closes; a killed one leaves empty ``tmp_obj_`` files, which
git's prune removes as it removes those of a killed git.
"""
from __future__ import annotations

import os
import threading

from .rawfile import create_read_only_fd, write_all

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable


class SpareFiles:
    """Empty temporary files, each kept open for writing, named by *new_name* (a new
    temporary name in the object folder each call: store/git.py's)."""

    def __init__(self, new_name: Callable[[], str]) -> None:
        self._new_name = new_name
        self._files: list[tuple[str, int]] = []  # (path, descriptor open for writing)
        self._mutex = threading.Lock()  # fill runs in its own thread, take in the tools'
        self._closed = False

    def fill(self, count: int) -> None:
        """Make files until *count* are spare (a failure, a full disk: fewer, and each
        object then makes its own file, which says what is wrong)."""
        while True:
            with self._mutex:
                if self._closed or len(self._files) >= count:
                    return
            path = self._new_name()
            try:
                fd = create_read_only_fd(path)
            except OSError:
                return
            with self._mutex:
                if not self._closed:
                    self._files.append((path, fd))
                    continue
            _discard(path, fd)
            return

    def take(self, data: bytes) -> str | None:
        """The path of a spare file now holding *data* (closed, ready for the rename),
        None when there is none (or writing it failed: it is removed)."""
        with self._mutex:
            if not self._files:
                return None
            path, fd = self._files.pop()
        try:
            write_all(fd, data)
        except OSError:
            _discard(path, fd)
            return None
        os.close(fd)
        return path

    def close(self) -> None:
        """Remove every spare file (a fill still running stops)."""
        with self._mutex:
            self._closed = True
            files, self._files = self._files, []
        for path, fd in files:
            _discard(path, fd)


def _discard(path: str, fd: int) -> None:
    os.close(fd)
    try:
        os.unlink(path)
    except OSError:
        pass  # removed already (git prune): nothing left to clean
