"""The one error type, and the exit codes it maps to (DESIGN.md, "Commands")."""
import os

REFUSED = 1  # lock held, not owner, unknown session
BAD_INPUT = 2  # usage error or bad input; nothing was changed
UNCONFIRMED = 3  # done locally but not confirmed by the remote
# an unexpected error, a bug (sysexits.h's EX_SOFTWARE): never 1, which an agent reads as
# "held" and so waits on a lock nobody holds; cli/console.crashed names the trace's file
CRASHED = 70


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


class Crashed(RegistryError):
    """An unexpected error (a bug) as the CLI reports it: built by cli/console.crashed
    from the exception that escaped, never raised; ``details["trace"]`` names the file
    holding its traceback."""

    exit_code = CRASHED


class SystemFailure(RegistryError):
    """The machine would not do it (disk full, read-only file system, permission
    denied).  Exit 1, as for any refusal: nothing was changed, and the message names the
    place and the cause; ``details`` carry them for --json (``cause`` is the errno name)."""

    exit_code = REFUSED


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
    import errno  # on this path only: a module every command would import (issue 35)
    place = where or (exc.filename if isinstance(exc.filename, str) else None)
    place = shown_path(place) if place else None
    reason = exc.strerror or str(exc)
    # causes that mean "this place cannot be written", as opposed to "cannot be reached"
    cannot_write = {errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
    verb = "write to" if writing or exc.errno in cannot_write else "access"
    text = f"cannot {verb} {place}: {reason}" if place else f"system error: {reason}"
    return SystemFailure(text, details={"cause": errno.errorcode.get(exc.errno or 0),
                                        "path": place})


class Unreadable(RegistryError):
    """A registry ref or object that is there but cannot be read (a damaged ref file, a
    loop of symbolic refs, a corrupt or truncated object, a pack cut short): never taken
    for "absent", which would read a held lock as free.  Exit 1 (refused); the message
    names the ref or object and the repair, ``details`` carry ``ref`` and ``object``."""

    exit_code = REFUSED
