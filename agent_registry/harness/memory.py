"""Memory at the start (issue 36): the wiki entries of past sessions most relevant to
what a starting harness session works on, for its context (wiki/api.py ``recall``)."""
from __future__ import annotations

from ..errors import RegistryError, os_failure


def recalled(registry, product: str, live: list, sid: str) -> list[str]:
    """The wiki entries most relevant to what session *sid* (one of *live*) works on (its
    own words, else the words of its branch's name) and to the paths it holds, for the
    agent's context; a wiki that cannot be read is one line, never a failed start."""
    session = next((s for s in live if s.id == sid), None)
    if session is None:
        return []
    from ..wiki.api import memory_lines, recall
    about = "" if session.working_on.startswith(f"{product} session") else \
        session.working_on
    branch = session.git_branch if session.git_branch not in ("main", "master") else ""
    words = " ".join([about, branch.replace("/", " ").replace("-", " ").replace("_", " ")])
    try:
        return memory_lines(recall(registry, words, [*session.locks, *session.space]))
    except (RegistryError, OSError) as exc:
        why = (os_failure(exc) if isinstance(exc, OSError) else exc).message
        return [f"agent-registry: the wiki could not be searched for past sessions: {why}"]
