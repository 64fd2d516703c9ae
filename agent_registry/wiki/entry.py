"""The wiki entry: ``wiki/<session_id>.md`` on the registry branch.

A YAML frontmatter (flat keys, lists of scalars: the same canonical form as session files,
so the standard library reads it) followed by the session's full diary as markdown body.

The entry id is derived from the session id (a hash prefix): it is the same on every
machine and for every replay of the operation that wrote it, and two machines can never
hand out the same id to different entries the way a ``MAX(id)+1`` counter would.
"""
from __future__ import annotations

import re

from ..errors import BadInput, NotFound, RegistryError
from ..branch.paths import sha1_hex
from ..branch.records import UnreadableRecord, as_list, emit_yaml, read_mapping

WIKI_DIR = "wiki"
NOT_DOCUMENTED = "not documented"
ID_LENGTH = 12
MIN_PREFIX = 6
ROUTER_MAX = 300

TEXT_FIELDS = ("router", "what", "how", "solved")
LIST_FIELDS = ("bugs", "tools")
NARRATIVE_FIELDS = TEXT_FIELDS + LIST_FIELDS
# frontmatter keys, in the order they are written
FIELD_ORDER = ("id", "session_id", "provider", "model", "date", "router", "what", "how",
               "solved", "files_touched", "bugs", "tools", "handoff", "git_pushes", "status",
               "pending_ingest", "undocumented")
LIST_KEYS = ("files_touched", "bugs", "tools", "git_pushes", "undocumented")

_HEX = re.compile(r"[0-9a-f]+")


def entry_id(sid: str) -> str:
    return sha1_hex(sid)[:ID_LENGTH]


def wiki_path(sid: str) -> str:
    return f"{WIKI_DIR}/{sid}.md"


def sid_of(name: str) -> str | None:
    """The session id of a file name under wiki/, or None for other files."""
    return name[:-3] if name.endswith(".md") and not name.startswith(".") else None


def dump_entry(entry: dict) -> bytes:
    meta = {k: entry[k] for k in FIELD_ORDER if k in entry}
    meta.update({k: v for k, v in entry.items() if k not in FIELD_ORDER and k != "body"})
    body = entry.get("body", "")
    return ("---\n" + emit_yaml(meta) + "---\n\n" + body.rstrip("\n") + "\n").encode()


def split_frontmatter(raw: bytes) -> tuple[dict, str]:
    """(frontmatter mapping, body) of a markdown file that starts with ``---``."""
    text = raw.decode("utf-8", errors="replace")
    if not text.startswith("---\n"):
        raise UnreadableRecord("no YAML frontmatter (the file must start with ---)")
    end = text.find("\n---\n", 3)
    if end < 0:
        if not text.endswith("\n---"):
            raise UnreadableRecord("frontmatter is not closed by ---")
        end = len(text) - 4
    head, body = text[4:end + 1], text[end + 5:]
    meta = read_mapping(head.encode())  # a hand-edited frontmatter goes through ruamel
    return {str(k): _plain_value(v) for k, v in meta.items()}, body.lstrip("\n")


def parse_entry(raw: bytes, sid: str) -> dict:
    """Frontmatter fields + ``body``.  ``id`` and ``session_id`` always follow the file
    name, so an entry is found under the id every other clone computes for it."""
    entry, body = split_frontmatter(raw)
    for key in LIST_KEYS:
        entry[key] = as_list(entry.get(key))
    for key in ("provider", "model", "date", "router", "what", "how", "solved", "handoff",
                "status"):
        entry[key] = "" if entry.get(key) is None else str(entry[key])
    entry["pending_ingest"] = entry.get("pending_ingest") in (True, "true", "yes", 1)
    entry["id"], entry["session_id"] = entry_id(sid), sid
    entry["body"] = body
    return entry


def _plain_value(value):
    if isinstance(value, list):
        return [str(_plain_value(v)) for v in value]
    if hasattr(value, "isoformat"):  # ruamel reads unquoted dates as datetimes
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): _plain_value(v) for k, v in value.items()}
    return value


def documented(value) -> bool:
    if isinstance(value, list):
        return bool(value)
    return bool(value) and value.strip().lower() != NOT_DOCUMENTED


def missing(entry: dict) -> list[str]:
    """The narrative fields an LLM may fill: a text field saying "not documented", and a
    list the agent did not give (an empty list it gave means "none", e.g. no bugs)."""
    listed = entry.get("undocumented") or []
    out = []
    for name in NARRATIVE_FIELDS:
        gap = name in listed if name in LIST_FIELDS else not documented(entry.get(name, ""))
        if gap:
            out.append(name)
    return out


# the note `end` adds to a session's issues; the predecessor wrote it in Italian and
# joined notes with " | " where we use "; "
_NOTE = re.compile(r"(?:\s*[;|]\s*)?\bwiki: (?:not documented|campi non documentati): "
                   r"\w+(?:, \w+)*")


def undocumented_note(issues: str, undocumented: list[str]) -> str:
    """*issues* with its "wiki: not documented: ..." note saying *undocumented* (or
    gone when nothing is left undocumented); the rest of the text is kept."""
    rest = _NOTE.sub("", issues or "").strip().strip(";|").strip()
    if not undocumented:
        return rest
    note = f"wiki: not documented: {', '.join(undocumented)}"
    return f"{rest}; {note}" if rest else note


def read_entry(view, sid: str) -> dict | None:
    raw = view.read(wiki_path(sid))
    if raw is None:
        return None
    try:
        return parse_entry(raw, sid)
    except UnreadableRecord as exc:
        raise RegistryError(f"{wiki_path(sid)} is unreadable: {exc}") from None


def entry_sids(view) -> list[str]:
    if not view.tree:
        return []
    return [s for s in (sid_of(n) for n in view.names(WIKI_DIR)) if s]


def legacy_sid(view, number: int) -> str | None:
    """The session id of the entry imported with the predecessor's numeric id *number*
    (``legacy_id``).  Those ids live only in the entries, so every entry is read, in one
    pipelined batch: the price of a numeric id, which no other lookup pays."""
    folder = view.entries(WIKI_DIR) if view.tree else {}
    sids = [s for s in map(sid_of, folder) if s and folder[f"{s}.md"]]
    for sid, raw in zip(sids, view.repo.read_blobs([folder[f"{s}.md"] for s in sids])):
        if raw and b"legacy_id:" in raw:  # parse only the few that can match
            try:
                meta, _ = split_frontmatter(raw)
            except UnreadableRecord:
                continue
            if str(meta.get("legacy_id")).strip() == str(number):
                return sid
    return None


def resolve(view, id_or_sid: str) -> str:
    """The session id of the entry named by a session id, an entry id, or a unique
    prefix of at least 6 characters of an entry id (like git's short hashes)."""
    if not id_or_sid or "/" in id_or_sid or "\n" in id_or_sid:
        raise BadInput(f"invalid wiki entry id {id_or_sid!r}")
    if view.read(wiki_path(id_or_sid)) is not None:
        return id_or_sid
    if id_or_sid.isascii() and id_or_sid.isdigit() and (sid := legacy_sid(view, int(id_or_sid))):
        return sid
    wanted = id_or_sid.lower()
    if _HEX.fullmatch(wanted) and len(wanted) >= MIN_PREFIX:
        matches = [sid for sid in entry_sids(view) if entry_id(sid).startswith(wanted)]
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            raise BadInput(f"wiki id prefix {id_or_sid} is ambiguous: "
                           + ", ".join(entry_id(s) for s in matches[:5]))
    raise NotFound(f"no wiki entry {id_or_sid}")
