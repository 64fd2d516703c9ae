"""The one error type, and the exit codes it maps to (DESIGN.md, "Commands")."""
from __future__ import annotations

import errno
import os

REFUSED = 1  # lock held, not owner, unknown session
BAD_INPUT = 2  # usage error or bad input; nothing was changed
UNCONFIRMED = 3  # done locally but not confirmed by the remote


class RegistryError(Exception):
    """A failure the user should read: one line, and the exit code the CLI returns."""

    exit_code = REFUSED

    def __init__(self, message: str, *, details: dict | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or {}


class Refused(RegistryError):
    exit_code = REFUSED


class NotFound(RegistryError):
    exit_code = REFUSED


class BadInput(RegistryError):
    exit_code = BAD_INPUT


class Unconfirmed(RegistryError):
    """The change is committed locally, but the remote has not confirmed it."""

    exit_code = UNCONFIRMED


class SystemFailure(RegistryError):
    """The machine would not do it (disk full, read-only file system, permission
    denied).  Exit 1, as for any refusal: nothing was changed, and the message names the
    place and the cause; ``details`` carry them for --json (``cause`` is the errno name)."""

    exit_code = REFUSED


# causes that mean "this place cannot be written", as opposed to "cannot be reached"
_WRITE_ERRNOS = {errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.EFBIG}


def shown_path(path: str) -> str:
    """*path* as a person finds it: relative to the current directory when below it."""
    try:
        here = os.getcwd()
    except OSError:
        return path
    if path == here or path.startswith(here.rstrip("/") + "/"):
        return os.path.relpath(path, here)
    return path


def os_failure(exc: OSError, where: str | None = None, *, writing: bool = False) -> SystemFailure:
    """An OSError as one line: what could not be written (*writing*) or reached, and the
    system's reason.  *where* names the place better than the file the call failed on
    (``.git/objects`` rather than a temporary object file)."""
    place = where or (exc.filename if isinstance(exc.filename, str) else None)
    place = shown_path(place) if place else None
    reason = exc.strerror or str(exc)
    verb = "write to" if writing or exc.errno in _WRITE_ERRNOS else "access"
    text = f"cannot {verb} {place}: {reason}" if place else f"system error: {reason}"
    return SystemFailure(text, details={"cause": errno.errorcode.get(exc.errno or 0),
                                        "path": place})
