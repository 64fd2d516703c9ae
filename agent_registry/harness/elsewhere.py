"""The edit gate's second question (issue 36): has another live session already changed
what this edit writes (forecast/edits.py)?  Its answer in words: a warning while the edit
goes on, or the refusal of ``--deny-overlap``."""
from __future__ import annotations

from ..errors import RegistryError, os_failure


def changed_elsewhere(guard, sid: str, paths: list[str]) -> list[dict] | str:
    """What another live session changed of *paths* (forecast/edits.py), or why that
    could not be read.  Nobody elsewhere, the usual case, is one read of the session
    files and no import of the forecast."""
    if guard.tip is None:
        return []
    from ..branch.view import View
    from ..forecast.gate import sessions_elsewhere
    try:
        if not sessions_elsewhere(View(guard.repo, guard.tip), sid)[1]:
            return []
        from ..branch.paths import literal
        from ..store.git import remote_name
        from ..forecast.edits import changed_elsewhere, trusted_for
        return changed_elsewhere(guard.repo, guard.tip, sid, [literal(p) for p in paths],
                                 host=guard.host, remote=remote_name(guard.config),
                                 now=guard.now, writing=True,
                                 trusted=trusted_for(guard.config))
    except (RegistryError, OSError) as exc:
        return " ".join(str((os_failure(exc) if isinstance(exc, OSError) else exc).message)
                        .split())


def elsewhere_text(sid: str, found: list[dict], *, denied: bool = False) -> str:
    """Who changed what of the files an edit writes, and how to reach them."""
    from ..forecast.edits import described
    whom = list(dict.fromkeys(f["session"] for f in found))
    ask = " or ".join(f"agent-registry send --to {w} --from {sid} 'TEXT'" for w in whom)
    what = "; ".join(described(f) for f in found[:3]) + \
        (f" (and {len(found) - 3} more)" if len(found) > 3 else "")
    then = ("Do not edit it (this gate refuses files changed elsewhere: --deny-overlap): "
            "work on something else, or agree with them first" if denied else
            "The edit goes on; agree with them who changes what, or your branches will "
            "need merging by hand")
    return f"agent-registry: {what}. {then} ({ask})."


def unsure_text(shown: str, why: str) -> str:
    """Why ``--deny-overlap`` refuses an edit when it cannot tell."""
    return (f"agent-registry: cannot tell whether another session changed {shown}: {why}. "
            "Do not edit it until `agent-registry overlap` works, or the user sets "
            "AGENT_REGISTRY_ALLOW=1.")


def told(sid: str, found: list[dict] | str) -> dict:
    """What an allowed edit says: the warning for the model, or (when the question could
    not be answered) a notice on stderr."""
    if isinstance(found, str):
        return {"notice": "agent-registry: warning: could not look for changes elsewhere: "
                          + found}
    return {"warning": elsewhere_text(sid, found)} if found else {}
