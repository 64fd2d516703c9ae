"""Reading what others wrote: other clones (``refresh``) and, to come, other
repositories through rooms (docs/messages.md)."""
from __future__ import annotations

from ..core.registry import Registry
from ..errors import Unconfirmed
from .remote import sync


def refresh(registry: Registry) -> None:
    """Before a read that must see what other clones wrote (an inbox): sync when there
    is a remote; offline, this clone's copy answers and a warning says so."""
    if not registry.remote:
        return
    try:
        sync(registry)
    except Unconfirmed as exc:
        registry.warnings.append(f"{exc.message} (showing this clone's copy)")
