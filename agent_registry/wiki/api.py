"""The wiki's library functions: search, show, ingest, rebuild.  The CLI and the dashboard
call these; none of them imports Whoosh, langchain, the LLM module or the registry
operations (ops) before it needs to: a query pays for the index only."""
from __future__ import annotations

from ..errors import BadInput, RegistryError
from .progress import Progress

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (~2 ms of a query)
if TYPE_CHECKING:  # a warm query's quick path (wiki/fastpath.py) imports no registry core
    from ..core.registry import Registry
    from .llm import LLMConfig

CANDIDATES = 10  # Whoosh candidates handed to the LLM
MEMORY = 3  # entries handed to a session as it starts
MEMORY_WHAT = 160  # characters of each entry's "what" a starting session is told


def search(registry: Registry, text: str, limit: int = 10,
           progress: Progress | None = None) -> dict:
    """``{"ranker": "whoosh"|"llm"|"latest", "results": [{id, session_id, router, what,
    score, why, ...}], "index": {built, updated, waited, entries}}``; with an LLM
    configured its rerank is the answer, unless it fails (then ``llm_error`` says why and
    the Whoosh ranking stands); without one ``llm_off`` says why.  No candidate: no LLM
    call.  An empty *text* lists the latest entries (ranker "latest").  *progress*
    reports index work (a terminal)."""
    from .index import WikiIndex
    if limit < 1:
        raise BadInput("--limit must be at least 1")
    index = WikiIndex(registry, progress)
    try:
        found = candidates(index.open(), text, limit)
    except RegistryError:
        raise
    except Exception:  # another process replaced the segments we were opening: once more
        found = candidates(index.open(), text, limit)
    return ranked(text, limit, found, index.status)


def candidates(ix, text: str, limit: int) -> list[dict]:
    """What :func:`search` ranks, from the Whoosh index *ix*: the Whoosh hits (at least
    CANDIDATES, for the LLM), or the latest entries for an empty *text*."""
    from .index import search_index
    text = (text or "").strip()
    return search_index(ix, text, max(limit, CANDIDATES)) if text else latest(ix, limit)


def ranked(text: str, limit: int, found: list[dict], status: dict) -> dict:
    """:func:`search`'s answer from its *found* candidates: the LLM's rerank when one is
    configured (and answers), else Whoosh's order; *status*: what the index took."""
    text = (text or "").strip()
    answer: dict = {"ranker": "whoosh" if text else "latest", "results": found[:limit],
                    "index": status}
    if not text:
        return answer
    from .llmconfig import resolve
    cfg, off = resolve()
    if cfg is None:
        answer["llm_off"] = off
        return answer
    if not found:
        return answer
    from . import llm
    try:
        reranked = llm.rerank(cfg, text, found)
    except llm.LLMError as exc:
        answer["llm_error"] = exc.message
        return answer
    by_id = {c["id"]: c for c in found}
    answer["ranker"], answer["model"] = "llm", cfg.model
    answer["results"] = [{**by_id[r["id"]], "description": r["description"], "why": r["why"]}
                         for r in reranked][:limit]
    return answer


def recall(registry: Registry, about: str, paths: list[str], limit: int = MEMORY) -> list[dict]:
    """The few entries most relevant to what a session works on (*about*) and the *paths*
    it holds or expects to touch, as :func:`search` ranks them with Whoosh alone: never
    the LLM, since a starting session must not wait on the network.  [] when there is
    nothing to ask about."""
    text = " ".join([about, *paths]).strip()
    if not text:
        return []
    from .index import WikiIndex, search_index
    return search_index(WikiIndex(registry).open(), text, limit)[:limit]


def memory_lines(found: list[dict]) -> list[str]:
    """What a starting session is told of the entries :func:`recall` found."""
    if not found:
        return []
    lines = ["agent-registry: past sessions on this work (agent-registry wiki show ID):"]
    for entry in found:
        what = " ".join((entry["what"] or entry["router"] or entry["excerpt"]).split())
        what = what if len(what) <= MEMORY_WHAT else what[:MEMORY_WHAT - 1] + "…"
        bugs = f"; bugs: {'; '.join(entry['bugs'][:2])}" if entry["bugs"] else ""
        lines.append(f"- {entry['id']} ({entry['session_id']}): {what}{bugs}")
    return lines


def latest(ix, limit: int) -> list[dict]:
    """The *limit* newest entries of the index (by their date), as search results."""
    import heapq
    with ix.reader() as reader:  # not a Searcher: whoosh.searching is never imported
        docs = [d for d in reader.all_stored_fields() if d.get("id")]  # not __meta__
    newest = heapq.nlargest(limit, docs, key=lambda d: (d.get("date") or "", d["key"]))
    return [{"id": d["id"], "session_id": d["key"], "router": d.get("router", ""),
             "what": d.get("what", ""), "score": 0.0, "why": "latest entry",
             "bugs": [b for b in d.get("bugs", "").split("\n") if b],
             "provider": d.get("provider", ""), "date": d.get("date", ""),
             "pending_ingest": d.get("pending") == "1", "excerpt": d.get("excerpt", "")}
            for d in newest]


def get_entry(registry: Registry, id_or_sid: str) -> dict:
    """Every frontmatter field of one entry, plus ``body``; NotFound when absent."""
    from .entry import read_entry, resolve
    view = registry.view()
    entry = read_entry(view, resolve(view, id_or_sid))  # resolve raises NotFound
    assert entry is not None
    return entry


def rebuild(registry: Registry, progress: Progress | None = None) -> dict:
    """A new index; ``built`` is false when another process rebuilt it meanwhile."""
    from .index import WikiIndex
    index = WikiIndex(registry, progress)
    index.rebuild()
    return {"entries": index.status["entries"], "path": str(index.root),
            "built": index.status["built"], "waited": index.status["waited"]}


def _required_config() -> LLMConfig:
    from .llmconfig import resolve
    cfg, off = resolve()
    if cfg is None:
        raise RegistryError(off)
    return cfg


def ingest(registry: Registry, sid: str, cfg: LLMConfig | None = None) -> dict:
    """Let the LLM fill what entry *sid* left undocumented, and a router line.  On any
    failure the entry is left exactly as it was (still pending) and LLMError is raised."""
    from . import llm
    from .entry import missing
    from .ops import apply_ingest, entry_summary
    cfg = cfg or _required_config()
    entry = get_entry(registry, sid)
    wanted = missing(entry)
    if not wanted and not entry["pending_ingest"]:
        return {"entry": entry_summary(entry), "filled": [], "already": True}
    distilled = llm.distil(cfg, entry, wanted) if wanted else {}
    return apply_ingest(registry, entry["session_id"], distilled, cfg.model)


def ingest_pending(registry: Registry, progress: Progress | None = None) -> dict:
    """Ingest every pending entry; one failure does not stop the others.  *progress*
    shows the entries done so far (a terminal: each is an LLM call)."""
    from .entry import entry_id
    from .index import WikiIndex, pending_sids
    cfg = _required_config()
    done, failed = [], []
    pending = pending_sids(WikiIndex(registry, progress).open())
    progress = progress or Progress(None)
    progress.start("ingesting pending wiki entries", len(pending))
    for number, sid in enumerate(pending, 1):
        try:
            result = ingest(registry, sid, cfg)
            done.append({"session_id": sid, "id": entry_id(sid), "filled": result["filled"]})
        except RegistryError as exc:
            failed.append({"session_id": sid, "id": entry_id(sid), "error": exc.message})
        progress.step(number)
    progress.finish(f"ingested {len(done):,} of {len(pending):,} pending entries")
    return {"ingested": done, "failed": failed}


def index_text(status: dict) -> str:
    """The line of `wiki query` saying what the index took, "" when it was up to date."""
    if status["built"]:
        return f"index: built ({status['reason']}), {status['entries']:,} entries"
    if status["updated"]:
        n = status["updated"]
        return f"index: updated {n:,} entr{'y' if n == 1 else 'ies'}"
    return ""


def query_text(answer: dict) -> str:
    """The text output of `wiki query`: the ranker, the results, what the index took."""
    head = f"ranker: {answer['ranker']}"
    if answer.get("llm_error"):
        head += f" (LLM failed: {answer['llm_error']})"
    if answer.get("llm_off"):
        head += f" (LLM off: {answer['llm_off']})"
    lines = [head]
    if not answer["results"]:
        lines.append("not found in past sessions" if answer["ranker"] != "latest"
                     else "the wiki has no entries yet")
    for r in answer["results"]:
        lines.append(f"{r['id']}  {r['session_id']}  " + (
            f"score {r['score']}" if answer["ranker"] != "latest" else r["date"]))
        summary = r.get("description") or r["router"] or r["what"]
        if summary:
            lines.append(f"    {summary}")
        if answer["ranker"] != "latest":
            lines.append(f"    why: {r['why']}")
    return "\n".join(filter(None, [*lines, index_text(answer["index"])]))


def entry_text(entry: dict) -> str:
    """A wiki entry for a person: the fields, then the diary."""
    lines = [f"{entry['id']}  {entry['session_id']}  {entry['provider']} {entry['model']}  "
             f"{entry['date']}  {entry['status']}".rstrip()]
    if entry.get("pending_ingest"):
        lines[0] += "  (pending ingest)"
    for name in ("router", "what", "how", "solved"):
        lines.append(f"{name + ':':<15}{entry.get(name, '')}")
    for name in ("files_touched", "bugs", "tools", "git_pushes"):
        lines.append(f"{name + ':':<15}{', '.join(entry.get(name, []))}")
    if entry.get("handoff"):
        lines.append(f"{'handoff:':<15}{entry['handoff']}")
    return "\n".join(lines) + "\n\n" + entry.get("body", "").rstrip() + "\n"
