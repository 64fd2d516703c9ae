"""The clone's local sync state, ``<common dir>/agent-registry/sync.json``: the confirmed
tip per remote and branch, the last success and error, refusals, this clone's id and the
intent it has out (sync/intents.py).  Written under the clone's flock, replaced whole."""
from __future__ import annotations

from ..store import jsontext
from ..core.registry import Registry
from ..store.atomic import replace_file
from ..store.rawfile import read_bytes
from ..store.lazyre import LazyPattern

_URL_USERINFO = LazyPattern(r"([A-Za-z][A-Za-z0-9+.-]*://)[^/\s@]*@")


def redact(text: str) -> str:
    """*text* with the user information (``user:password@``) of every URL removed, as git
    removes it from what it prints: the tool prints and stores no credential."""
    return _URL_USERINFO.sub(r"\1", text) if "@" in text else text


def _state_path(registry: Registry) -> str:
    return registry.repo.state_path("sync.json")


def load_state(registry: Registry) -> dict:
    try:
        return jsontext.loads(read_bytes(_state_path(registry)))
    except (OSError, ValueError):  # a lost or broken state: as a clone that never synced
        return {}


def save_state(registry: Registry, **changes) -> dict:
    """Merge *changes* into the local sync state (caller holds the flock)."""
    state = {**load_state(registry), **changes, "remote": redact(registry.remote or "")}
    replace_file(_state_path(registry), jsontext.dumps(state, indent=1), prefix="sync.")
    return state


def state_key(registry: Registry) -> str:
    return f"{redact(registry.remote or '')} {registry.branch}"


def confirmed_tip(registry: Registry, fallback: str | None = None) -> str | None:
    """The last tip of the remote branch this clone saw and holds (fetched and rebased
    onto, or pushed), per remote and branch; *fallback* (the tracking ref) for a clone
    that has none recorded yet."""
    return load_state(registry).get("confirmed", {}).get(state_key(registry)) or fallback


def confirm(registry: Registry, tip: str, **changes) -> None:
    """Record *tip* as the confirmed tip, with other *changes* to the sync state (caller
    holds the flock)."""
    confirmed = {**load_state(registry).get("confirmed", {}), state_key(registry): tip}
    save_state(registry, confirmed=confirmed, **changes)


def takes_atomic(registry: Registry) -> bool | None:
    """Whether the remote accepts atomic pushes, as this clone last found (True: a push
    or a dry run took one; False: its server said it does not); None when not known."""
    return load_state(registry).get("atomic", {}).get(redact(registry.remote or ""))


def found_atomic(registry: Registry, accepts: bool | None) -> None:
    """Record what :func:`takes_atomic` answers from now (None forgets it; caller holds
    the flock)."""
    known = dict(load_state(registry).get("atomic", {}))
    key = redact(registry.remote or "")
    if accepts is None:
        known.pop(key, None)
    else:
        known[key] = accepts
    save_state(registry, atomic=known)


def record_refused(registry: Registry, refused: list[dict]) -> None:
    """Keep *refused* (operations a replay dropped) in the sync state, the last 50, each
    with when (caller holds the flock): what `status` shows for an hour."""
    if refused:
        from ..branch.records import iso
        old = load_state(registry).get("refused", [])
        save_state(registry, refused=(old + [{**r, "at": iso(registry.clock())}
                                              for r in refused])[-50:])
