"""Click commands of the wiki: ``end``, ``wiki query|show|ingest|ingest-pending|rebuild``
and ``import-home``.  Each calls one library function and prints its result."""
from __future__ import annotations

import click

from ..cli.console import resolve_session
from ..cli.context import Output, pass_out
from .entry import ROUTER_MAX
from .progress import Progress

json_option = click.option("--json", "json_here", is_flag=True,
                           help="Print the result as JSON (same as the global --json).")


@click.command()
@click.argument("sid", required=False)
@click.option("--router", metavar="TEXT", help=f"One line (at most {ROUTER_MAX} characters) "
              "a later search should find this session by.")
@click.option("--what", "--cosa", "what", metavar="TEXT", help="What was done.")
@click.option("--how", "--come", "how", metavar="TEXT", help="How it was done.")
@click.option("--solved", "--risolto", "solved", metavar="TEXT", help="The problem it solved.")
@click.option("--bugs", "--bug", "bugs", metavar="CSV", help="Bugs found, comma-separated.")
@click.option("--tools", "--skill-tool", "tools", metavar="CSV",
              help="Skills, tools, MCP servers used, comma-separated.")
@click.option("--notify-executed", metavar="TEXT", default="",
              help="The message `watch` sends for this ending (instead of its pool's).")
@pass_out
def end(out: Output, sid, router, what, how, solved, bugs, tools, notify_executed) -> None:
    """End a session with a wiki entry: write wiki/<SID>.md (fields + the full diary),
    mark the session Finished and release its locks, in one commit.

    Fields left out become "not documented", are noted in the session's issues, and
    leave the entry pending_ingest for `wiki ingest`.  The Italian flags of the
    predecessor tool (--cosa --come --risolto --bug --skill-tool) are accepted.
    """
    from .ops import end_session
    result = end_session(out.registry, resolve_session(sid), router=router, what=what, how=how,
                         solved=solved, bugs=bugs, tools=tools,
                         notify_executed=notify_executed)
    entry = result["entry"]
    if result["already"]:
        text = f"{entry['session_id']} already has wiki entry {entry['id']} ({entry['path']})"
    else:
        text = (f"{entry['session_id']} Finished: wiki entry {entry['id']} ({entry['path']}), "
                f"released {len(result['released'])} lock(s)")
        if entry["undocumented"]:
            text += (f"\nnot documented: {', '.join(entry['undocumented'])} "
                     "(pending ingest: `agent-registry wiki ingest` can distil them)")
    out.emit(result, text)


@click.group()
def wiki() -> None:
    """Search and read the wiki of past sessions (wiki/<sid>.md on the branch)."""


@wiki.command("query")
@click.argument("text", required=False, default="")
@click.option("--limit", type=click.IntRange(min=1), default=10, show_default=True,
              help="Most results to show.")
@json_option
@pass_out
def wiki_query(out: Output, text, limit, json_here) -> None:
    """Has this been done before? Rank past sessions for TEXT.

    Whoosh (BM25F over router, what, bugs and diary, with stemming) finds candidates;
    with an LLM configured (AGENT_REGISTRY_LLM_*, or the predecessor's KIMI_API_KEY)
    it reranks them and says why each is relevant. The output names the ranker used,
    and when the LLM is off, why. No candidate: "not found in past sessions", and the
    LLM is not called. No TEXT (or an empty one): the latest entries, newest first. A query first brings the local index up to
    the branch (built on a clone's first query: a progress line on a terminal's
    stderr; a last "index:" line says what it took).
    """
    from . import api
    from ..sync.fresh import freshen, said
    out.json = out.json or json_here
    view = freshen(out.registry)  # fetched first when older than agent-registry.readFreshness
    answer = api.search(out.registry, text, limit, Progress.on_terminal())
    said(out.registry)
    out.emit({**answer, **view}, api.query_text(answer))


@wiki.command("show")
@click.argument("ident", metavar="ID|SID")
@json_option
@pass_out
def wiki_show(out: Output, ident, json_here) -> None:
    """Show one entry in full, by entry id (or a unique prefix of 6+) or session id."""
    from . import api
    out.json = out.json or json_here
    entry = api.get_entry(out.registry, ident)
    out.emit(entry, api.entry_text(entry))


@wiki.command("ingest")
@click.argument("sid", required=False)
@pass_out
def wiki_ingest(out: Output, sid) -> None:
    """Let the LLM fill the fields SID's entry left "not documented" and write its router
    line. What the agent wrote is never replaced; on failure the entry stays pending,
    unchanged (exit 1)."""
    from . import api
    result = api.ingest(out.registry, resolve_session(sid))
    entry = result["entry"]
    text = (f"{entry['session_id']}: nothing to ingest" if not result["filled"]
            else f"{entry['session_id']}: filled {', '.join(result['filled'])}")
    out.emit(result, text)


@wiki.command("ingest-pending")
@pass_out
def wiki_ingest_pending(out: Output) -> None:
    """Ingest every pending entry. If any fails (it stays pending), exit 1 with the
    failures in the error (its JSON carries "ingested" and "failed")."""
    from ..errors import Refused
    from . import api
    result = api.ingest_pending(out.registry, None if out.json else Progress.on_terminal())
    lines = [f"ingested {r['session_id']}: {', '.join(r['filled']) or 'nothing to fill'}"
             for r in result["ingested"]]
    if result["failed"]:
        if not out.json and lines:
            click.echo("\n".join(lines))
        failures = "; ".join(f"{r['session_id']}: {r['error']}" for r in result["failed"])
        raise Refused(f"{len(result['failed'])} pending entr"
                      f"{'y' if len(result['failed']) == 1 else 'ies'} failed (left pending): "
                      f"{failures}", details=result)
    out.emit(result, "\n".join(lines) or "no pending entries")


@wiki.command("rebuild")
@pass_out
def wiki_rebuild(out: Output) -> None:
    """Recreate the local search index from the branch (it is a cache under the git dir).
    A progress line on a terminal's stderr; if another process was rebuilding it, that
    index is used instead of building a second one."""
    from . import api
    result = api.rebuild(out.registry, Progress.on_terminal())
    how = "indexed" if result["built"] else "another process indexed"
    out.emit(result, f"{how} {result['entries']} entries in {result['path']}")


@click.command("import-home")
@click.argument("path", required=False, metavar="[PATH]")
@pass_out
def import_home(out: Output, path) -> None:
    """Import a predecessor agent-registry home (default $AGENT_REGISTRY_HOME, else
    ~/.agent-registry): sessions, wiki entries (cosa_fatto -> what, ...) and diaries.
    Idempotent: what is already on the branch is left alone."""
    from .importer import import_home as run_import
    result = run_import(out.registry, path, None if out.json else Progress.on_terminal())
    lines = [f"from {result['source']}:"]
    for kind, label in (("session", "sessions"), ("wiki", "wiki entries"), ("context", "diaries")):
        counts = result["summary"][kind]
        lines.append(f"  {label}: {counts['imported']} imported, {counts['unchanged']} already "
                     f"present, {counts['kept']} kept (the branch has a different version)")
    lines += [f"  skipped {s['file']}: {s['reason']}" for s in result["skipped"]]
    out.emit(result, "\n".join(lines))
