"""Names the hooks derive from what a harness sends, with the standard library's cheapest
parts only (no re, json or hashlib: the after-tool hook, harness/after.py, runs on every
tool call): a native session id or tool call id as it may appear in a file name, and the
key that names one tool call in both its before- and after-tool events, the session id a
native one stands for, and whether a person's high message waits for it."""
import os

from ..store.jsontext import dumps

_SAFE_FIRST = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_SAFE = _SAFE_FIRST | frozenset("._-")
MAX_SAFE = 91


def safe(native_id: str) -> str:
    """*native_id* when it may appear in a session id and a file name as it is
    (``[A-Za-z0-9][A-Za-z0-9._-]{0,90}``); else the first 16 hex of its SHA-1."""
    if native_id and len(native_id) <= MAX_SAFE and native_id[0] in _SAFE_FIRST \
            and all(c in _SAFE for c in native_id):
        return native_id
    from ..store.digest import hexdigest  # imported only for an id that needs it (rare)
    return hexdigest("sha1", native_id.encode("utf-8", "surrogatepass"))[:16]


def call_key(event: dict, tool_key: str, input_key: str) -> str:
    """The harness's tool call id (``tool_use_id``, ``tool_call_id``, OpenCode's
    ``callID``), else a digest of the tool and its input, which both events of one call
    carry."""
    given = event.get("tool_use_id") or event.get("tool_call_id") or event.get("callID")
    if isinstance(given, str) and given:
        return given
    from ..store.digest import hexdigest  # a harness that sends no call id (Gemini CLI)
    shown = dumps([event.get(tool_key), event.get(input_key)], sort_keys=True, default=str)
    return hexdigest("sha1", shown.encode("utf-8", "surrogatepass"))[:20]


def state_path(common_dir: str, harness: str, native_id: str) -> str:
    """The file that remembers the session id of *harness*'s native session."""
    return os.path.join(common_dir, "agent-registry", harness, safe(native_id))


def session_of(common_dir: str, harness: str, native_id: str) -> str:
    """Our session id for the native one: remembered locally, else derived."""
    try:
        with open(state_path(common_dir, harness, native_id), encoding="utf-8") as f:
            return f.read().strip()
    except (OSError, UnicodeDecodeError):
        return f"{harness}-{safe(native_id)}"


def urgent_waits(common_dir: str, harness: str, native_id: str) -> bool:
    """Whether a high message is marked for the native session (store/urgent.py, which
    this does not import: the look before and after every tool call): one listing of a
    folder usually missing; its session id is read only when something is marked."""
    from ..store.layout import URGENT, state_path
    try:
        waiting = {e.name for e in os.scandir(state_path(common_dir, URGENT))
                   if not e.name.startswith(".")}  # not the record of what was marked
    except OSError:
        return False
    return bool(waiting) and session_of(common_dir, harness, native_id) in waiting
