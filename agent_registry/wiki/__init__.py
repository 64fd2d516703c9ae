"""Collective memory: session diaries distilled into wiki entries on the registry branch,
searched with Whoosh (BM25F) and, when one is configured, reranked by an LLM.

The library API (used by the CLI and the dashboard):

    search(registry, text, limit=10) -> {"ranker": "whoosh"|"llm",
                                         "results": [{id, session_id, router, what, score, why}]}
    get_entry(registry, id_or_sid)   -> every frontmatter field + "body" (NotFound if absent)
    end_session(registry, sid, router=, what=, how=, solved=, bugs=, tools=)
    ingest(registry, sid) / ingest_pending(registry) / rebuild(registry)
    import_home(registry, path)
"""
from __future__ import annotations

import importlib

# name -> its module: imported on first use, so `wiki query` never loads the importer or
# the registry operations (and the click-free fast path imports this package for free)
_EXPORTS = {"search": "api", "get_entry": "api", "ingest": "api", "ingest_pending": "api",
            "rebuild": "api", "import_home": "importer", "end_session": "ops"}
__all__ = list(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
