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

from .api import get_entry, ingest, ingest_pending, rebuild, search
from .importer import import_home
from .ops import end_session

__all__ = ["search", "get_entry", "end_session", "ingest", "ingest_pending", "rebuild",
           "import_home"]
