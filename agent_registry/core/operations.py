"""The operation table: every mutation of the registry is an operation, a small dict
``{"op": NAME, "at": …, …}``, applied by the handler registered here under NAME
(``handler(registry, view, op) -> Outcome``) after its fields are checked against the
shape registered with it (core/shapes.py) — when a command makes it and when sync replays
it.  The core's own register from core/sessions.py, core/locks.py, core/diary.py and
core/messages.py; the wiki's and sync's from theirs."""
from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # for annotations only: collections costs a one-shot command 1 ms
    from collections.abc import Callable

from ..store.tuples import named

from .shapes import SHAPES

OPERATIONS: dict[str, Callable] = {}


def known(name: str) -> bool:
    """Whether *name* is in the operation table.  An operation registers when its module
    is imported: by the command that makes it and, for a replay, by sync (sync/remote.py
    OPERATION_MODULES), so the core names nothing above it."""
    return name in OPERATIONS


def operation(name: str, shape: dict | None = None):
    """Register *name* as an operation ``handler(registry, view, op) -> Outcome`` whose
    fields *shape* describes (core/shapes.py; checked before every apply and replay)."""
    def register(handler):
        OPERATIONS[name] = handler
        SHAPES[name] = shape or {}
        return handler
    return register


class Outcome(named("Outcome", "result subject trailers page_lasts", defaults=((), False))):
    """What an applied operation returns: the result for the caller (a dict), the
    commit subject saying what happened (None: nothing to commit), trailer lines the
    handler decided (a takeover's previous holder and why it was stale), and whether a
    recent registry.md still tells the truth after it (*page_lasts*: the operation
    changes nothing the page shows but ages, which it counts from its own rendering;
    core/registry.py's ``write_commit`` then keeps a page under PAGE_REFRESH old)."""
    __slots__ = ()
