"""The files on the registry branch: session YAML and lock records.  Standard library
only, so the guard can read them.

Session files are YAML.  We write them in a canonical form (one ``key: value`` per line,
strings JSON-quoted, lists in block style) that this module reads and writes without
ruamel.  A file a person has edited by hand (comments, other styles) no longer
re-emits byte for byte; it is then rewritten through ruamel.yaml's round-trip mode,
which keeps the comments.  So a claim, which rewrites its session file, stays fast, and
a hand edit is never lost.

Lock records are JSON, read and written by store/jsontext.py (json's C code, without
importing json).  Over 400 lines: every
record the guard reads, with its standard-library reader and writer, in the one module
the guard imports for them.
"""
import time

from ..store import jsontext
from ..store.lazyre import LazyPattern

LIVE = "OnWorking"
DEFAULT_TTL = 600  # seconds a lock lasts past its session's last heartbeat (`--ttl`)
SHORTEST_TTL = "shortest_lock_ttl"  # the session file's key for the shortest --ttl it used
STATUSES = ("OnWorking", "Finished", "Stop", "Killed")
# How a session's owner process was chosen (procinfo.choose_owner).  Only these vouch for
# the pid: a file written before owners were vouched for (no ``owner`` key) keeps its pid
# for display, and heartbeats and the TTL alone decide its liveness (docs/design.md).
VOUCHED = ("given", "env", "runtime")

# Characters JSON leaves raw that YAML would read as line breaks or a byte-order mark.
_YAML_UNSAFE = LazyPattern("[\u0080-\u009f\u2028\u2029\ufeff]")


class UnreadableRecord(ValueError):
    """A file on the branch that cannot be parsed; reported by name, the rest works."""


def iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(ts)))


def parse_iso(text: str | None) -> float | None:
    """Unix time of an ISO 8601 timestamp; the canonical ``YYYY-MM-DDTHH:MM:SSZ`` we
    write is read without the datetime module (a hot path import)."""
    if not text:
        return None
    if len(text) == 20 and text[4] == "-" and text[10] == "T" and text[19] == "Z":
        try:
            year, month, day = int(text[0:4]), int(text[5:7]), int(text[8:10])
            hour, minute, second = int(text[11:13]), int(text[14:16]), int(text[17:19])
        except ValueError:
            return None
        if not (1 <= month <= 12 and 1 <= day <= 31 and hour < 24 and minute < 60 and second < 61):
            return None
        return float(_days_from_civil(year, month, day) * 86400
                     + hour * 3600 + minute * 60 + second)
    from datetime import datetime
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def generated_at(page: bytes | None) -> float | None:
    """When *page* (registry.md, branch/render.py) was rendered, read off its front
    matter; None when it cannot tell.  Here, not in render.py: a heartbeat asks it, and
    renders nothing while the page is recent (core/registry.page_is_recent)."""
    if not page or not page.startswith(b"---\n"):
        return None
    for line in page[4:page.find(b"\n---", 3)].split(b"\n"):
        if line.startswith(b"generated_at: "):
            try:
                return parse_iso(jsontext.loads(line[len(b"generated_at: "):]))
            except (ValueError, TypeError):
                return None
    return None


def _days_from_civil(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm)."""
    year -= month <= 2
    era = (year if year >= 0 else year - 399) // 400
    yoe = year - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    return era * 146097 + yoe * 365 + yoe // 4 - yoe // 100 + doy - 719468


# Fields of a session file, in the order they are written, with their defaults (a type
# stands for a new empty one).  Plain classes, not dataclasses: importing dataclasses
# (and inspect with it) costs every one-shot command several ms.
SESSION_FIELDS: dict = {
    "id": "", "provider": "", "ai_version": "", "working_on": "", "status": LIVE,
    "project": "", "repo": "", "git_branch": "", "host": "", "pid": None, "pid_start": None,
    "owner": None, "cmdline": "", "registered_at": "", "heartbeat_at": "", "finished_at": None,
    "todo_past": list, "todo_present": list, "todo_future": list, "space": list,
    "issues": "", "handoff": "", "locks": list,
    # what the agent wants `watch` to say when it starts and when it finishes
    "notify_started": "", "notify_executed": "",
    "tags": list,  # `register --tag`: how `send --to-tag` reaches the session
}
LIST_FIELDS = ("todo_past", "todo_present", "todo_future", "space", "locks", "tags")


def as_list(value) -> list[str]:
    """A list field read from a file, as strings: missing is empty, a string is a
    comma-separated list (as people write one by hand), a lone scalar is one item."""
    if value is None:
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    return [str(value)]


class Session:
    """One agent session: what its file on the branch holds.  Keys a person or a later
    version added are kept in ``extra`` and written back as they were."""

    def __init__(self, id: str, extra: dict | None = None, **values) -> None:
        unknown = set(values) - set(SESSION_FIELDS)
        if unknown:
            raise TypeError(f"unknown session field(s): {', '.join(sorted(unknown))}")
        for name, default in SESSION_FIELDS.items():
            if name in values:
                setattr(self, name, values[name])
            else:
                setattr(self, name, default() if isinstance(default, type) else default)
        self.id = id
        self.extra = dict(extra or {})

    def __eq__(self, other) -> bool:
        return isinstance(other, Session) and self.to_dict() == other.to_dict()

    def __repr__(self) -> str:
        return f"Session({self.id!r}, status={self.status!r})"

    @property
    def live(self) -> bool:
        return self.status == LIVE

    @property
    def vouched(self) -> bool:
        """Is the recorded pid known to live exactly as long as the agent?  Only then
        does its death end the session, and only then may ``kill`` signal it."""
        return bool(self.pid) and self.owner in VOUCHED

    def to_dict(self) -> dict:
        out = {name: getattr(self, name) for name in SESSION_FIELDS}
        out.update(self.extra)
        return out

    @classmethod
    def from_dict(cls, data: dict) -> "Session":
        known = SESSION_FIELDS
        kwargs = {k: v for k, v in data.items() if k in known}
        for name in LIST_FIELDS:
            kwargs[name] = as_list(kwargs.get(name))
        for name in ("pid", "pid_start"):
            if kwargs.get(name) is not None:
                try:
                    kwargs[name] = int(kwargs[name])
                except (TypeError, ValueError):
                    kwargs[name] = None
        if "id" not in kwargs:
            raise UnreadableRecord("no id")
        if kwargs.get("status", LIVE) not in STATUSES:  # not "stale": a record we cannot read
            raise UnreadableRecord(f"status {kwargs['status']!r} is none of {', '.join(STATUSES)}")
        for name, value in list(kwargs.items()):
            if name not in ("pid", "pid_start", "finished_at") and value is None:
                kwargs.pop(name)
            elif hasattr(value, "strftime"):  # ruamel reads unquoted timestamps as dates
                kwargs[name] = value.strftime("%Y-%m-%dT%H:%M:%SZ")
        session = cls(**kwargs)
        session.extra = {k: v for k, v in data.items() if k not in known}
        return session

    def heartbeat_ts(self) -> float:
        return parse_iso(self.heartbeat_at) or parse_iso(self.registered_at) or 0.0

    @property
    def shortest_lock_ttl(self) -> int:
        """The shortest ``--ttl`` this session ever claimed with, when shorter than the
        default: kept in the session file (an extra key, absent for nearly every session)
        so registry.md reads lock records only for a session that may have one expired."""
        value = self.extra.get(SHORTEST_TTL)
        return value if isinstance(value, int) and 0 < value < DEFAULT_TTL else DEFAULT_TTL


# -- session YAML ---------------------------------------------------------------------

def _scalar(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    nested = isinstance(value, (dict, list, tuple))  # JSON is YAML flow style; repr is not
    text = jsontext.dumps(value if nested else str(value), ensure_ascii=False)
    if text.isascii():  # nothing to escape, and no need to compile the pattern
        return text
    return _YAML_UNSAFE.sub(lambda m: "\\u%04x" % ord(m.group()), text)


def emit_yaml(data: dict) -> str:
    lines = []
    for key, value in data.items():
        if isinstance(value, (list, tuple)):
            if not value:
                lines.append(f"{key}: []")
            else:
                lines.append(f"{key}:")
                lines.extend(f"- {_scalar(v)}" for v in value)
        else:
            lines.append(f"{key}: {_scalar(value)}")
    return "\n".join(lines) + "\n"


def _key_line(line: str) -> tuple[str, str | None] | None:
    r"""``key:`` and ``key: value`` lines (the pattern ``([A-Za-z_][\w-]*):(?:\s+(.*))?$``,
    without compiling it): the key and the value's text, None when there is none."""
    key, colon, rest = line.partition(":")
    if not colon or not key or not (key[0] == "_" or key[0].isascii() and key[0].isalpha()) \
            or not all(c.isalnum() or c in "_-" for c in key):
        return None
    if not rest:
        return key, None
    return (key, rest.lstrip()) if rest[0].isspace() else None


def plain_scalar(text: str):
    """One YAML scalar as we read it: a JSON-quoted string, a quoted or plain word,
    null, a boolean, an integer or ``[]``."""
    text = text.strip()
    if text.startswith('"'):
        value, end = jsontext.raw_decode(text)
        rest = text[end:].strip()
        if rest and not rest.startswith("#"):
            raise UnreadableRecord(f"unexpected text after a string: {rest[:20]!r}")
        return value
    if " #" in text:
        text = text[:text.index(" #")].rstrip()
    if text.startswith("'") and text.endswith("'") and len(text) >= 2:
        return text[1:-1].replace("''", "'")
    if text in ("", "null", "~"):
        return None
    if text in ("true", "false"):
        return text == "true"
    if text == "[]":
        return []
    digits = text[1:] if text[:1] == "-" else text
    if digits.isdecimal():  # -?\d+
        return int(text)
    if text.startswith(("[", "{", "|", ">", "&", "*", "!")):
        raise UnreadableRecord(f"YAML construct this reader does not handle: {text[:20]!r}")
    return text


def parse_yaml(text: str) -> dict:
    """Read a flat YAML mapping of scalars and lists of scalars (the session files,
    hand edits with comments included).  Anything else raises UnreadableRecord."""
    data: dict = {}
    current: str | None = None
    loads = jsontext.loads
    lines = text.splitlines()
    number = 0
    while number < len(lines):
        line = lines[number]
        number += 1
        # fast paths: the canonical `key: "json string"` and `- "json string"` lines we
        # write ourselves
        if line[:3] == '- "' and line[-1:] == '"' and current is not None:
            try:
                data[current].append(loads(line[2:]))
                continue
            except ValueError:
                pass
        key, sep, rest = line.partition(": ")
        if sep and rest[:1] == '"' and rest[-1:] == '"' and key.isidentifier():
            try:
                data[key], current = loads(rest), None
                continue
            except ValueError:
                pass  # not plain JSON (a comment after it, say): read it the slow way
        stripped = line.strip()
        if not stripped or stripped.startswith("#") or stripped == "---":
            continue
        try:
            if stripped.startswith("- ") or stripped == "-":
                if current is None or not isinstance(data.get(current), list):
                    raise UnreadableRecord("list item outside a list")
                data[current].append(plain_scalar(stripped[1:]))
                continue
            parts = _key_line(line)
            if parts is None:
                raise UnreadableRecord(f"cannot read {stripped[:30]!r}")
            key, rest = parts
            if rest is None or rest.strip() == "" or rest.strip().startswith("#"):
                data[key], current = [], key
                number = _quoted_items(lines, number, data[key])
            else:
                data[key], current = plain_scalar(rest), None
        except (ValueError, IndexError) as exc:
            raise UnreadableRecord(f"line {number}: {exc}") from None
    return data


QUOTED_BLOCK = 16  # a list of at least this many ``- "..."`` lines is read in one parse


def _quoted_items(lines: list[str], start: int, into: list) -> int:
    """Where reading goes on after the ``- "..."`` lines at *start* (appended to *into*),
    read as one JSON array rather than line by line: a session holding 1,000 paths is
    parsed on every check and claim that meets it.  Only when that reads as the lines
    would one by one: every line starts with ``- "`` and the array has one item per
    line.  A JSON string cannot hold a raw line break (jsontext is strict), so each item
    lies within its line, and a line of one string and spaces reads the same either
    way; anything else (a comment, two values on a line) is left to the line reader."""
    end = start
    while end < len(lines) and lines[end][:3] == '- "':
        end += 1
    if end - start < QUOTED_BLOCK:
        return start
    try:
        items = jsontext.loads("[" + "\n".join(lines[start:end])[2:].replace('\n- "', '\n,"')
                               + "]")
    except ValueError:
        return start
    if len(items) != end - start:
        return start
    into.extend(items)
    return end


def read_mapping(raw: bytes) -> dict:
    """A YAML mapping: our fast reader first, ruamel.yaml for anything else."""
    text = raw.decode("utf-8", errors="replace")
    try:
        data = parse_yaml(text)
    except UnreadableRecord:
        data = _ruamel_load(text)
    if not isinstance(data, dict):
        raise UnreadableRecord("not a mapping")
    return data


def load_session(raw: bytes) -> Session:
    return Session.from_dict(read_mapping(raw))


def dump_session(session: Session, previous: bytes | None = None) -> bytes:
    """The session file's new bytes.  A hand-edited *previous* is updated in place
    through ruamel.yaml so its comments and layout survive."""
    data = session.to_dict()
    if previous is not None:
        text = previous.decode("utf-8", errors="replace")
        try:
            canonical = emit_yaml(parse_yaml(text)) == text
        except UnreadableRecord:
            canonical = False
        if not canonical:
            return _ruamel_update(text, data).encode()
    return emit_yaml(data).encode()


def _ruamel():
    from ruamel.yaml import YAML  # only for hand-edited files: costs ~20 ms to import
    yaml = YAML()
    yaml.preserve_quotes = True
    return yaml


def _ruamel_load(text: str):
    try:
        return _ruamel().load(text)
    except Exception as exc:  # ruamel raises many types; all mean "cannot read"
        raise UnreadableRecord(str(exc).splitlines()[0]) from None


def _ruamel_update(text: str, data: dict) -> str:
    import io
    yaml = _ruamel()
    try:
        doc = yaml.load(text)
    except Exception:
        doc = None
    if not hasattr(doc, "items"):
        return emit_yaml(data)  # unreadable before: replaced by what we know
    for key in [k for k in doc if k not in data]:
        del doc[key]
    for key, value in data.items():
        if doc.get(key) != value:
            doc[key] = value
    out = io.StringIO()
    yaml.dump(doc, out)
    return out.getvalue()


# -- lock records ---------------------------------------------------------------------

def status_named(text: str) -> str:
    """The status *text* names, case-insensitively ("finished" is Finished)."""
    for status in STATUSES:
        if status.lower() == text.lower():
            return status
    from ..errors import BadInput
    raise BadInput(f"invalid status {text!r}: one of {', '.join(STATUSES)}")


def select_sessions(sessions: list[Session], *, status: str | None = None,
                    provider: str | None = None, project: str | None = None) -> list[Session]:
    """The one session filter of `status`, the dashboard and MCP: status and provider match
    case-insensitively, project is a substring of the session's project path."""
    if status:
        wanted = status_named(status)
        sessions = [s for s in sessions if s.status == wanted]
    if provider:
        sessions = [s for s in sessions if s.provider.lower() == provider.lower()]
    if project:
        sessions = [s for s in sessions if project in s.project]
    return sessions


class Holder:
    """One session's claim on a lock: who, its generation token, when, for how long, and
    why (``lock acquire --reason``; written only when given, so other records keep their
    bytes)."""

    def __init__(self, session: str, generation: str, acquired_at: str, ttl: int,
                 reason: str = "") -> None:
        self.session, self.generation, self.acquired_at, self.ttl = \
            session, generation, acquired_at, ttl
        self.reason = reason

    def __eq__(self, other) -> bool:
        return isinstance(other, Holder) and self.to_dict() == other.to_dict()

    def __repr__(self) -> str:
        return f"Holder({self.session!r}, {self.generation!r})"

    def to_dict(self) -> dict:
        return {"session": self.session, "generation": self.generation,
                "acquired_at": self.acquired_at, "ttl": self.ttl,
                **({"reason": self.reason} if self.reason else {})}


def _ttl(value) -> int:
    """A holder's TTL as recorded: a positive number of seconds (ValueError for anything
    else: a lock whose TTL is 0 or below would read as stale at once, letting a commit
    through, where one that cannot be read keeps it refused)."""
    ttl = int(value)
    if ttl < 1:
        raise ValueError(f"ttl {value!r} is not a positive number of seconds")
    return ttl


class Lock:
    """One locked target: a file, a directory (``dir/``) or a glob; one or more holders
    (more than one only in shared mode)."""

    def __init__(self, path: str, mode: str = "exclusive",
                 holders: list[Holder] | None = None) -> None:
        self.path, self.mode, self.holders = path, mode, list(holders or [])

    def __eq__(self, other) -> bool:
        return isinstance(other, Lock) and self.to_bytes() == other.to_bytes()

    def __repr__(self) -> str:
        return f"Lock({self.path!r}, {self.mode!r}, {self.holders!r})"

    def to_bytes(self) -> bytes:
        body = {"path": self.path, "mode": self.mode,
                "holders": [h.to_dict() for h in self.holders]}
        return (jsontext.dumps(body, indent=1, ensure_ascii=False) + "\n").encode()

    @classmethod
    def from_bytes(cls, raw: bytes) -> "Lock":
        try:
            body = jsontext.loads(raw)
            return cls(body["path"], body.get("mode", "exclusive"),
                       [Holder(h["session"], h.get("generation", ""),
                               h.get("acquired_at", ""), _ttl(h.get("ttl", 600)),
                               str(h.get("reason") or ""))
                        for h in body.get("holders", [])])
        except (ValueError, KeyError, TypeError) as exc:
            raise UnreadableRecord(f"lock record: {exc}") from None

    def holder(self, sid: str) -> Holder | None:
        return next((h for h in self.holders if h.session == sid), None)
