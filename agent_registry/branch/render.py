"""registry.md and the branch README, re-rendered into every registry commit.

registry.md is what a person reads on the forge, rendered as GitHub Flavored Markdown: every
value from the branch (paths, ids, working_on text) is escaped so that it shows literally,
and sessions and locks are marked stale as the CLI would judge them at the commit's time.

Rendering reads only live sessions (each lists the paths it holds) and the short list of
recently ended ones, so it costs O(live sessions), never O(history) or O(locks): lock
records are read only for the shown locks of sessions already past the default TTL.
"""
from __future__ import annotations

from ..store import jsontext
from ..store.shipped import read_text
from .clones import has_clones
from .records import iso, parse_iso
from .staleness import CLOCK_SKEW, DEFAULT_TTL, age, session_stale_reason, stale_reason
from .view import View
from ..store.lazyre import LazyPattern

MAX_SESSION_ROWS = 100
MAX_LOCK_ROWS = 100
MAX_LOCKS_PER_SESSION = 20
# Widths (in characters) that keep each table readable on a forge without scrolling.
WORKING_ON_WIDTH = 60
AGENT_WIDTH = 20
HOST_WIDTH = 16
PATH_WIDTH = 80
OPERATION_WIDTH = 120
STALE = "⚠ stale"
# Judged as from a host that runs none of the sessions: by heartbeat, TTL and status only,
# with the clock-skew margin.  Whether a pid still runs can only be checked on its own host.
_NO_HOST = "\0"

# What GFM would read as markup in its position, and only that: code spans, emphasis and
# strikethrough, links and images, table pipes, math on forges that render it, escapes and
# HTML anywhere; '_' unless inside a word (snake_case stays); the '.' of www., the ':' of
# scheme:// and mailto:/xmpp: (GFM's autolinks); an '@' between word characters (an email
# autolink).  A hyphen in a word, a dot, a slash are left alone.
_MARKUP = LazyPattern(r"[\\`*~\[\]|$<>&]|(?<![^\W_])_|_(?![^\W_])|(?i:(?<=www)\.)"
                     r"|:(?=//)|(?i:(?:(?<=mailto)|(?<=xmpp)):)|(?<=[\w.+-])@(?=[\w-])")
_HTML = {"<": "&lt;", "&": "&amp;", ">": "&gt;"}
_MARKUP_CHARS = frozenset("\\`*~[]|$<>&_:@\r\n")  # a text without these (nor www.) is left as it is
_FRONT_MARKUP = frozenset("\\`*~[]|$<>&_@")  # the single characters _MARKUP may match
_LINE_BREAK = LazyPattern(r"\r\n|\r|\n")


def fill(name: str, **values: str) -> str:
    """The template *name* with ``$key`` replaced (``$$`` is a literal ``$``); a
    missing key is an error.  (string.Template compiles its pattern at import: a cost
    every command would pay.)"""
    head, *pieces = read_text("templates", name).split("$")
    out = [head]
    parts = iter(pieces)
    for part in parts:  # the text after a $: $$, a key ([a-z_]+), or a lone $
        if part == "":  # $$: the next piece follows a literal $
            out.append("$" + next(parts, ""))
            continue
        key = part[:len(part) - len(part.lstrip("abcdefghijklmnopqrstuvwxyz_"))]
        out.append(values[key] + part[len(key):] if key else "$" + part)
    return "".join(out)


def _escape(match) -> str:  # a re.Match of _MARKUP
    char = match.group(0)
    if char in _HTML:
        return _HTML[char]
    if char == "@":
        # GFM links a@b.co after parsing, through any escape: an empty comment splits the
        # text (the forge drops it; the reader sees a plain '@')
        return "@<!-- -->"
    return "\\" + char


def cell(value) -> str:
    """*value* as GFM text that shows literally, even in a table cell: what GFM would read
    as markup, links, autolinks, HTML or a ``|`` is escaped (a hyphen in a word, a dot, a
    slash are left alone), line breaks shown as ``<br>``, outer whitespace trimmed."""
    text = "" if value is None else str(value).strip()
    if _MARKUP_CHARS.isdisjoint(text) and "www." not in text.lower():
        return text  # the usual words and paths: no pattern to compile (a one-shot write)
    return "<br>".join(_MARKUP.sub(_escape, line) for line in _LINE_BREAK.split(text))


def clip(value, width: int, *, keep_end: bool = False) -> str:
    """*value* cut to *width* characters with an ellipsis (at the start for *keep_end*:
    a path's file name is what identifies it)."""
    text = "" if value is None else str(value).strip()
    if len(text) <= width:
        return text
    return "…" + text[len(text) - width + 1:] if keep_end else text[:width - 1] + "…"


def table(headers: list[str], rows: list[list[str]]) -> str:
    """A GFM table; every row value is already escaped."""
    if not rows:
        return "_none_"
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def stale_locks(view: View, session, at: float, shown: int,
                every: bool = False) -> tuple[bool, set[str]]:
    """Whether *session* is stale at *at*, and which of its first *shown* locks (the rows
    the page lists) are, each judged by its own TTL as the CLI judges it.  A session
    within the shortest TTL it ever claimed with (the default for nearly all) holds its
    locks.  Only for one past it (rare: a zombie, or a short ``--ttl``) are those few lock
    records read; the session is stale when it is past the default TTL and none of them
    counts, as ``cleanup`` judges it.  (A zombie whose locks are past the page's cap is
    judged by the default TTL alone: the reads stay bounded by the rows shown.)  *every*:
    each shown record is judged whatever the session's shortest TTL says (the main
    page of lock shards reads them anyway, and a shard's held list keeps no TTL)."""
    if not every and session_stale_reason(session, at, session.shortest_lock_ttl,
                                          _NO_HOST) is None:
        return False, set()
    paths = session.locks[:shown]
    stale = set()
    for path in paths:
        lock = view.lock(path)
        holder = lock.holder(session.id) if lock else None
        if holder is None or stale_reason(holder, session, at, _NO_HOST):
            stale.add(path)
    past_default = session_stale_reason(session, at, DEFAULT_TTL, _NO_HOST) is not None
    return past_default and len(stale) == len(paths), stale


def ago(at: float, then: float | None) -> str:
    """How long before the page's time *then* was ("4m ago"); "?" when unknown."""
    return "?" if not then else age(max(0.0, at - then)) + " ago"


def more(shown: int, total: int, where: str) -> str:
    return f"\n\n… and {total - shown} more (see `{where}`)" if total > shown else ""


def lock_shards(view: View) -> int | None:
    """How many lock shards the registry at *view* keeps its locks on (layout format 2:
    ``layout.json`` on the main branch); None in the single-branch layout, or when the
    marker cannot be read (the page then renders as it always did)."""
    raw = view.read("layout.json")
    if raw is None:
        return None
    try:
        count = jsontext.loads(raw).get("shards")
    except (ValueError, AttributeError):
        return None
    return count if isinstance(count, int) and count >= 1 else None


def shard_note(branch: str | None, count: int, cloned: bool = False) -> str:
    """What the Locks section of a main branch whose locks live on *count* shard branches
    says under its table (and, *cloned*, whose heartbeats live on the clone refs)."""
    last = f"{count - 1:02d}"
    # a branch name is letters, digits and ._/- (core/registry.py): literal in a code span
    names = (f"`{branch}-shards/00` … `{branch}-shards/{last}`" if branch else
             f"named after this one with `-shards/00` … `-shards/{last}`")
    return (f"The locks are recorded on {count} lock shard branches ({names}, split by "
            "path); this table lists every held one as they stood when this page was "
            "generated. Any write finding this page a minute old renders it again; "
            "`agent-registry lock list` shows them now." + (
                " Heartbeats are written on each clone's own ref, so the Heartbeat column "
                "is as of the generation time too." if cloned else ""))


def front_value(value) -> str:
    """A front-matter value as JSON (valid YAML) with what GFM would read as markup
    (what :func:`cell` escapes: links and images, autolinks, emphasis, HTML…) as ``\\u``
    escapes: a renderer that does not know front matter (cmark-gfm) reads those lines
    as Markdown, and the commit subject there is agent text (a path a shard's claim
    names, what a session works on).  JSON's own backslashes are left as they are."""
    text = jsontext.dumps(value, ensure_ascii=False)
    low = text.lower()
    # nothing _MARKUP can match (a time's ':' is no autolink): no pattern compiled, as
    # every write renders these lines
    if _FRONT_MARKUP.isdisjoint(text) and not any(
            word in low for word in ("://", "www.", "mailto:", "xmpp:")):
        return text
    return _MARKUP.sub(lambda m: m.group(0) if m.group(0) == "\\"
                       else f"\\u{ord(m.group(0)):04x}", text)


def registry_md(view: View, at: float, operation: str, branch: str | None = None,
                locks: View | None = None) -> bytes:
    """registry.md of the registry *branch* at *view*, its sessions and their locks read
    from *locks* (default: *view*).  On the main branch of a sharded registry that is the
    whole view, the shards overlaid on *view* (core/registry.py ``pages``): a person
    browsing the branch on a forge sees every held lock.  Without it (a page built where
    the shards cannot be read) the Locks section only names the shard branches."""
    shards = lock_shards(view)
    held_view = view if locks is None else locks
    listed = shards is None or locks is not None
    sessions = sorted(held_view.live_summaries(MAX_LOCKS_PER_SESSION),
                      key=lambda s: s[0].registered_at)
    if shards is not None:
        from .shards import FENCE_SESSION  # the fence for older tools is no session
        sessions = [(s, n if listed else 0) for s, n in sessions if s.id != FENCE_SESSION]
    session_rows, lock_rows, held, stale_count = [], [], 0, 0
    for s, count in sessions:
        shown = min(MAX_LOCKS_PER_SESSION, MAX_LOCK_ROWS - len(lock_rows)) if listed else 0
        stale, stale_paths = stale_locks(held_view, s, at, shown, every=locks is not None)
        stale_count += stale
        held += count
        if len(session_rows) < MAX_SESSION_ROWS:
            heartbeat = ago(at, s.heartbeat_ts()) + (f", {STALE}" if stale else "")
            session_rows.append([cell(s.id), cell(clip(f"{s.provider} {s.ai_version}", AGENT_WIDTH)),
                                 cell(clip(s.host, HOST_WIDTH)),
                                 cell(clip(s.working_on, WORKING_ON_WIDTH)), heartbeat,
                                 str(count) if listed else "on the shards"])
        for path in s.locks[:shown]:
            state = STALE if path in stale_paths else "held"
            lock_rows.append([cell(clip(path, PATH_WIDTH, keep_end=True)), cell(s.id),
                              *(_holding(held_view, s, path, at) if locks is not None else ()),
                              state])
    ended = [[cell(r.get("id")), cell(clip(r.get("provider"), AGENT_WIDTH)),
              cell(clip(r.get("working_on"), WORKING_ON_WIDTH)), cell(r.get("status")),
              ago(at, parse_iso(r.get("finished_at")))] for r in view.recent()]
    front = {"generated_at": iso(at), "live_sessions": len(sessions), "stale_sessions": stale_count,
             "held_locks": held if listed else None, "ttl": DEFAULT_TTL,
             "clock_skew_margin": int(CLOCK_SKEW), "last_operation": operation}
    if shards is not None:
        front["lock_shards"] = shards
    lock_table = table(["Path", "Session", *(("Working on", "Held since") if locks is not None
                                             else ()), "State"], lock_rows) \
        + more(len(lock_rows), held, "agent-registry lock list")
    note = shard_note(branch, shards, has_clones(view)) if shards is not None else ""
    text = fill("registry.md",
        frontmatter="\n".join(f"{k}: {front_value(v)}" for k, v in front.items()),
        generated_at=iso(at), operation=cell(clip(operation, OPERATION_WIDTH)),
        ttl=str(DEFAULT_TTL), skew=str(int(CLOCK_SKEW)), stale=STALE,
        sessions=table(["Session", "Agent", "Host", "Working on", "Heartbeat", "Locks"],
                       session_rows) + more(len(session_rows), len(sessions), "agent-registry status"),
        locks=(lock_table + "\n\n" + note if listed else note) if note else lock_table,
        ended=table(["Session", "Provider", "Working on", "Status", "Ended"], ended))
    return text.encode()


def _holding(view: View, session, path: str, at: float) -> tuple[str, str]:
    """What the whole registry's page says of *session*'s lock on *path* besides who
    holds it: what the session works on, and since when it holds the path (its lock
    record's claim time: one record per listed row, read only for the page that lists
    every shard's locks, the main branch's, which claims do not render)."""
    lock = view.lock(path)
    holder = lock.holder(session.id) if lock else None
    why = f" (because: {holder.reason})" if holder and holder.reason else ""
    return (cell(clip(session.working_on + why, WORKING_ON_WIDTH)),
            ago(at, parse_iso(holder.acquired_at)) if holder else "?")


def branch_readme(branch: str) -> bytes:
    return fill("README.md", branch=branch).encode()
