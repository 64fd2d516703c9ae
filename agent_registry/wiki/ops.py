"""The wiki's registry operations: ``end`` (write the entry, finish the session, release
its locks, in one commit) and ``wiki-ingest`` (fill in what the agent left undocumented).

The library functions compute everything environment-dependent first (git facts, the
LLM's answer) and put it in the operation dict; the handlers decide only from that dict
and the branch tip, so an operation replays the same on any tip.
"""
from __future__ import annotations

from typing import Iterable

from ..branch import paths as P
from ..errors import BadInput, NotFound, Refused, RegistryError
from ..branch.records import dump_session, iso
from ..core.operations import Outcome, operation
from ..core.registry import Registry
from ..core.sessions import releasing
from ..branch.view import View, context_path, done_path
from . import gitfacts
from .entry import (LIST_FIELDS, NARRATIVE_FIELDS, NOT_DOCUMENTED, ROUTER_MAX, TEXT_FIELDS,
                    dump_entry, entry_id, missing, read_entry, undocumented_note, wiki_path)

NO_DIARY = "_No diary was logged for this session (`agent-registry context log`)._"


def end_session(registry: Registry, sid: str, *, router: str | None = None,
                what: str | None = None, how: str | None = None, solved: str | None = None,
                bugs: Iterable[str] | str | None = None,
                tools: Iterable[str] | str | None = None, notify_executed: str = "") -> dict:
    """Write ``wiki/<sid>.md`` and end the session as Finished, releasing its locks;
    *notify_executed* is stored on the session for ``watch`` to send."""
    P.validate_session_id(sid)
    P.validate_text("notify-executed", notify_executed)
    narrative: dict = {}
    for name, value in (("router", router), ("what", what), ("how", how), ("solved", solved)):
        if value is not None and value.strip():
            P.validate_text(f"--{name}", value, allow_newlines=name != "router")
            narrative[name] = value.strip()
    if len(narrative.get("router", "")) > ROUTER_MAX:
        raise BadInput(f"--router is {len(narrative['router'])} characters: at most {ROUTER_MAX}")
    for name, value in (("bugs", bugs), ("tools", tools)):
        if value is not None:  # given, even empty: "--bugs ''" documents that there were none
            narrative[name] = P.csv_items(value)
    registry.catch_up()  # the session may be another clone's, registered after our fetch
    session = registry.session(sid)  # NotFound before any git work
    since = session.registered_at
    facts = {
        "git_files": gitfacts.branch_files(registry, session.git_branch, since),
        "git_pushes": gitfacts.pushed_commits(registry, session.git_branch, since),
        "claimed": gitfacts.claimed_paths(registry, sid, since),
    }
    extra = {"notify_executed": notify_executed} if notify_executed else {}
    return registry.apply(registry.new_op("end", session=sid, fields=narrative, facts=facts,
                                       **extra))


@operation("end")
def _op_end(registry: Registry, view: View, op: dict) -> Outcome:
    sid, given, facts = op["session"], op["fields"], op["facts"]
    session = view.session(sid)
    ended_before = session is None
    if session is None:
        session = view.done_session(sid)
        if session is None:
            raise registry.unknown(view, sid)
    existing = read_entry(view, sid)
    if existing is not None:
        differing = sorted(k for k, v in given.items() if existing.get(k) != v)
        if differing:
            raise Refused(f"session {sid} already has wiki entry {existing['id']}; "
                          f"end does not rewrite it ({', '.join(differing)} differ)")
        return Outcome({"session": session.to_dict(), "entry": entry_summary(existing),
                        "released": [], "already": True}, None)
    undocumented = [name for name in NARRATIVE_FIELDS if name not in given]
    files = list(dict.fromkeys([*session.locks, *facts["claimed"], *session.space,
                                *facts["git_files"]]))
    diary = view.read(context_path(sid))
    entry = {
        "id": entry_id(sid), "session_id": sid, "provider": session.provider,
        "model": session.ai_version, "date": iso(op["at"]),
        **{name: given.get(name, NOT_DOCUMENTED) for name in TEXT_FIELDS},
        "files_touched": files[:gitfacts.MAX_FILES],
        **{name: given.get(name, []) for name in LIST_FIELDS},
        "handoff": session.handoff, "git_pushes": facts["git_pushes"],
        "status": "Finished" if not ended_before else session.status,
        "pending_ingest": bool(undocumented), "undocumented": undocumented,
        "body": diary.decode("utf-8", errors="replace") if diary else NO_DIARY,
    }
    view.write(wiki_path(sid), dump_entry(entry))
    if undocumented:
        session.issues = undocumented_note(session.issues, undocumented)
    if ended_before:
        released = []
        if undocumented:
            view.put_session(session)
    else:
        session.notify_executed = op.get("notify_executed") or session.notify_executed
        released = registry.close_session(view, session, "Finished", op["at"])
    return Outcome({"session": session.to_dict(), "entry": entry_summary(entry),
                    "released": released, "already": False},
                   f"end {sid}: wiki entry {entry['id']}, {releasing(op, released)}")


def _renote(view: View, sid: str, undocumented: list[str]) -> None:
    """Bring the session's "wiki: not documented: ..." note in line with its entry (an
    ingest fills what `end` noted as missing); a session file that is gone or cannot be
    read is left alone: the entry is what the wiki answers from."""
    live = view.session(sid, strict=False)
    try:
        session = live or view.done_session(sid)
    except RegistryError:
        return
    if session is None or undocumented_note(session.issues, undocumented) == session.issues:
        return
    session.issues = undocumented_note(session.issues, undocumented)
    if live is not None:
        view.put_session(session)
    else:  # written in place: put_session would count it as ending again
        view.write(done_path(sid), dump_session(session, view.read(done_path(sid))))


def entry_summary(entry: dict) -> dict:
    """The entry as the JSON of ``end`` and ``wiki ingest`` names it."""
    fields = ("id", "session_id", "router", "what", "pending_ingest", "undocumented",
              "files_touched")
    return {k: entry[k] for k in fields} | {"path": wiki_path(entry["session_id"])}


def apply_ingest(registry: Registry, sid: str, distilled: dict, model: str) -> dict:
    """Commit an LLM's distillation of entry *sid* (see :mod:`.llm`)."""
    return registry.apply(registry.new_op("wiki-ingest", session=sid, fields=distilled, by=model))


@operation("wiki-ingest")
def _op_wiki_ingest(registry: Registry, view: View, op: dict) -> Outcome:
    sid, distilled = op["session"], op["fields"]
    entry = read_entry(view, sid)
    if entry is None:
        raise NotFound(f"no wiki entry for session {sid}")
    # only what is still undocumented now: the agent's words are never replaced, also
    # when someone documented a field between the LLM call and this commit
    open_fields = missing(entry)
    filled = [name for name in open_fields if name in distilled]
    for name in filled:
        entry[name] = distilled[name]
    entry["undocumented"] = [n for n in open_fields if n not in filled]
    was_pending = entry["pending_ingest"]
    entry["pending_ingest"] = False
    entry["ingested_at"], entry["ingested_by"] = iso(op["at"]), op["by"]
    if not filled and not was_pending:
        return Outcome({"entry": entry_summary(entry), "filled": []}, None)
    view.write(wiki_path(sid), dump_entry(entry))
    _renote(view, sid, entry["undocumented"])
    return Outcome({"entry": entry_summary(entry), "filled": filled},
                   f"wiki ingest {sid}: {', '.join(filled) or 'nothing to fill'} by {op['by']}")
