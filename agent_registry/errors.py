"""The one error type, and the exit codes it maps to (DESIGN.md, "Commands")."""
from __future__ import annotations

DONE = 0
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
