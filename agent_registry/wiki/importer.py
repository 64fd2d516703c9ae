"""``import-home``: bring a predecessor tool's home (``~/.agent-registry``) onto the branch.

That home holds ``sessions/<sid>.yaml``, ``wiki/<sid>.md`` (Italian field names:
cosa_fatto, come_fatto, file_toccati, bug_trovati …) and ``contexts/<sid>-context.md``,
with naive timestamps in Europe/Rome.  Each file is converted here, outside the critical
section, and committed by ``import-home`` operations that carry the converted files, so
they replay anywhere.  A file whose target already exists on the branch is left alone:
running the import twice adds nothing.
"""
from __future__ import annotations

import os
import re
from datetime import datetime, timezone
from pathlib import Path

from ..branch import paths as P
from ..errors import BadInput
from ..branch.records import (STATUSES, Session, UnreadableRecord, as_list, dump_session, iso,
                              read_mapping)
from ..core.operations import Outcome, operation
from ..core.registry import Registry
from ..branch.view import View, context_path, done_path, live_path
from .entry import (LIST_FIELDS, NARRATIVE_FIELDS, NOT_DOCUMENTED, TEXT_FIELDS, documented,
                    dump_entry, entry_id, split_frontmatter, undocumented_note,
                    wiki_path)
from .progress import Progress

PREDECESSOR_ZONE = "Europe/Rome"  # the predecessor wrote local Rome time without an offset
OP_BYTES = 256 * 1024  # converted files per operation: keeps each commit message sane

WIKI_KEYS = {  # predecessor name -> ours
    "cosa_fatto": "what", "cosa": "what", "come_fatto": "how", "come": "how",
    "problema_risolto": "solved", "risolto": "solved", "file_toccati": "files_touched",
    "bug_trovati": "bugs", "bug": "bugs", "skill_tool": "tools", "skill_tools": "tools",
    "skill_tool_mcp": "tools", "strumenti": "tools", "git_push": "git_pushes",
    "push_git": "git_pushes", "data": "date", "created_at": "date", "ended_at": "date",
    "ai_version": "model", "modello": "model", "id": "legacy_id",
}
SESSION_KEYS = {
    "session_id": "id", "started_at": "registered_at", "created_at": "registered_at",
    "start_time": "registered_at", "last_update": "heartbeat_at", "updated_at": "heartbeat_at",
    "last_heartbeat": "heartbeat_at", "ended_at": "finished_at", "model": "ai_version",
}
TIME_KEYS = ("registered_at", "heartbeat_at", "finished_at", "date")


def _utc(value) -> str:
    """An ISO UTC timestamp from the predecessor's (naive = Rome) time, else the text."""
    if value in (None, ""):
        return ""
    if isinstance(value, (int, float)):
        return iso(value)
    text = str(value).strip()
    if len(text) == 10 and text[4] == "-" and text[7] == "-":
        return text  # a date without a time (a wiki entry's `data`): no hour to shift
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return text
    if moment.tzinfo is None:
        from zoneinfo import ZoneInfo
        moment = moment.replace(tzinfo=ZoneInfo(PREDECESSOR_ZONE))
    return iso(moment.astimezone(timezone.utc).timestamp())


def _english(value):
    if isinstance(value, str) and value.strip().lower() in ("non documentato", "non documentata"):
        return NOT_DOCUMENTED
    return value


def _nested(data: dict, key: str, fields: tuple[str, ...]) -> None:
    """Spread the predecessor's nested map *key* ({past: [...], present: [...]}) into our
    flat ``<key>_<field>`` fields; a flat field already given wins."""
    nested = data.pop(key, None)
    if not isinstance(nested, dict):
        if nested not in (None, "", {}):
            data[key] = nested  # not the predecessor's shape: kept as it was
        return
    for field in fields:
        if nested.get(field) not in (None, "", []) and not data.get(f"{key}_{field}"):
            data[f"{key}_{field}"] = nested[field]


def _english_note(issues) -> str:
    """The predecessor's "wiki: campi non documentati: come_fatto, ..." note in our words."""
    issues = "" if issues is None else str(issues)
    match = re.search(r"wiki: campi non documentati: (\w+(?:, \w+)*)", issues)
    if not match:
        return issues
    names = [WIKI_KEYS.get(name, name) for name in match.group(1).split(", ")]
    return undocumented_note(issues, list(dict.fromkeys(names)))


def convert_session(raw: bytes, sid: str) -> tuple[str, bytes]:
    """(status, canonical session YAML) of a predecessor session file."""
    data = {SESSION_KEYS.get(str(k), str(k)): v for k, v in read_mapping(raw).items()}
    held = data.pop("do_not_touch", None) or []
    _nested(data, "todo", ("past", "present", "future"))
    _nested(data, "notify", ("started", "executed"))
    data["issues"] = _english_note(data.get("issues"))
    data["id"] = sid  # the file name is the id, as in the predecessor
    for key in TIME_KEYS:
        if key in data:
            data[key] = _utc(data[key]) or None
    session = Session.from_dict(data)
    if isinstance(held, str):
        held = [h.strip() for h in held.split(",")]
    session.space += [str(h) for h in held if h and str(h) not in session.space]
    session.locks = []  # the predecessor's locks were local files: nothing is held here
    if session.status not in STATUSES:
        session.status = "Finished"
    return session.status, dump_session(session)


def convert_wiki(raw: bytes, sid: str, diary: bytes | None) -> bytes:
    meta, body = split_frontmatter(raw)
    entry: dict = {}
    for key, value in meta.items():
        entry[WIKI_KEYS.get(key, key)] = _english(value)
    for key in LIST_FIELDS + ("files_touched", "git_pushes"):
        entry[key] = [v for v in map(_english, as_list(entry.get(key))) if documented(v)]
    for key in TEXT_FIELDS:
        entry[key] = str(entry.get(key) or NOT_DOCUMENTED)
    entry["date"] = _utc(entry.get("date"))
    if isinstance(entry.get("handoff"), list):  # the predecessor listed the one handoff
        entry["handoff"] = ", ".join(map(str, entry["handoff"]))
    entry["id"], entry["session_id"] = entry_id(sid), sid
    undocumented = [n for n in NARRATIVE_FIELDS if not documented(entry.get(n))]
    entry["undocumented"] = undocumented
    pending = entry.get("pending_ingest")
    entry["pending_ingest"] = bool(undocumented) if pending is None else \
        pending in (True, "true", "yes", 1, "1")
    entry["imported_from"] = "agent-registry home"
    entry["body"] = body if body.strip() or diary is None else diary.decode("utf-8", errors="replace")
    return dump_entry(entry)


def _files(folder: Path, suffixes: tuple[str, ...]) -> list[tuple[str, Path]]:
    """(session id, file) of the files of *folder* named <sid><suffix>."""
    out = []
    if folder.is_dir():
        for item in sorted(folder.iterdir()):
            for suffix in suffixes:
                if item.is_file() and item.name.endswith(suffix):
                    out.append((item.name[:-len(suffix)], item))
                    break
    return out


def collect(home: Path) -> tuple[list[dict], list[dict]]:
    """(items to write, files skipped with the reason)."""
    items, skipped = [], []

    def valid(sid: str, file: Path) -> bool:
        try:
            P.validate_session_id(sid)
            return True
        except BadInput:
            skipped.append({"file": str(file), "reason": f"invalid session id {sid!r}"})
            return False

    diaries = {sid: file for sid, file in _files(home / "contexts", ("-context.md", ".md"))}
    for sid, file in _files(home / "sessions", (".yaml", ".yml")):
        if valid(sid, file):
            try:
                status, data = convert_session(file.read_bytes(), sid)
                items.append({"kind": "session", "session": sid, "status": status,
                              "data": data.decode(), "source": str(file)})
            except (UnreadableRecord, OSError) as exc:
                skipped.append({"file": str(file), "reason": str(exc)})
    for sid, file in _files(home / "wiki", (".md",)):
        if valid(sid, file):
            diary = diaries[sid].read_bytes() if sid in diaries else None
            try:
                items.append({"kind": "wiki", "session": sid, "source": str(file),
                              "data": convert_wiki(file.read_bytes(), sid, diary).decode()})
            except (UnreadableRecord, OSError) as exc:
                skipped.append({"file": str(file), "reason": str(exc)})
    for sid, file in diaries.items():
        if valid(sid, file):
            items.append({"kind": "context", "session": sid, "source": str(file),
                          "data": file.read_bytes().decode("utf-8", errors="replace")})
    return items, skipped


def import_home(registry: Registry, path: str | None = None,
                progress: Progress | None = None) -> dict:
    """Import a predecessor home; returns what was imported, already present, or skipped.
    *progress* shows the files committed so far (a terminal).  Without *path*: the
    predecessor's own default, ``$AGENT_REGISTRY_HOME``, else ``~/.agent-registry``."""
    from ..sync.repolist import HOME_ENV
    home = Path(os.path.expanduser(path or os.environ.get(HOME_ENV)
                                   or "~/.agent-registry")).resolve()
    if not home.is_dir():
        raise BadInput(f"no predecessor home at {home}")
    if not any((home / d).is_dir() for d in ("sessions", "wiki", "contexts")):
        raise BadInput(f"{home} has no sessions/, wiki/ or contexts/: not an agent-registry home")
    items, skipped = collect(home)
    registry.init()
    batches: list[list[dict]] = [[]]
    size = 0
    for item in items:
        if batches[-1] and size + len(item["data"]) >= OP_BYTES:
            batches.append([])
            size = 0
        batches[-1].append(item)
        size += len(item["data"])
    results: list[dict] = []
    progress = progress or Progress(None)
    progress.start(f"importing {home}", len(items), "files")
    for batch in filter(None, batches):
        op = registry.new_op("import-home", source=str(home), items=batch)
        results += registry.apply(op)["items"]
        progress.step(len(results))
    progress.finish(f"imported {len(items):,} files from {home}")
    summary = {kind: {state: sum(1 for r in results if r["kind"] == kind and r["state"] == state)
                      for state in ("imported", "unchanged", "kept")}
               for kind in ("session", "wiki", "context")}
    return {"source": str(home), "summary": summary, "items": results, "skipped": skipped}


def _target(view: View, item: dict) -> tuple[str, bytes | None]:
    sid = item["session"]
    if item["kind"] == "wiki":
        return wiki_path(sid), view.read(wiki_path(sid))
    if item["kind"] == "context":
        return context_path(sid), view.read(context_path(sid))
    live, done = live_path(sid), done_path(sid)
    path = live if item["status"] == "OnWorking" else done
    existing = view.read(live)
    return path, existing if existing is not None else view.read(done)


@operation("import-home")
def _op_import_home(registry: Registry, view: View, op: dict) -> Outcome:
    results = []
    for item in op["items"]:
        path, existing = _target(view, item)
        data = item["data"].encode()
        state = "imported" if existing is None else "unchanged" if existing == data else "kept"
        if state == "imported":
            view.write(path, data)
        results.append({"kind": item["kind"], "session": item["session"], "path": path,
                        "source": item["source"], "state": state})
    count = sum(1 for r in results if r["state"] == "imported")
    if not count:
        return Outcome({"items": results}, None)
    return Outcome({"items": results}, f"import-home: {count} file(s) from {op['source']}")
