"""Names the hooks derive from what a harness sends, with the standard library's cheapest
parts only (no re, json or hashlib: the after-tool hook, harness/after.py, runs on every
tool call): a native session id or tool call id as it may appear in a file name, and the
key that names one tool call in both its before- and after-tool events."""
from __future__ import annotations

from ..store.digest import hexdigest
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
    return hexdigest("sha1", native_id.encode("utf-8", "surrogatepass"))[:16]


def call_key(event: dict, tool_key: str, input_key: str) -> str:
    """The harness's tool call id (``tool_use_id``, ``tool_call_id``, OpenCode's
    ``callID``), else a digest of the tool and its input, which both events of one call
    carry."""
    given = event.get("tool_use_id") or event.get("tool_call_id") or event.get("callID")
    if isinstance(given, str) and given:
        return given
    shown = dumps([event.get(tool_key), event.get(input_key)], sort_keys=True, default=str)
    return hexdigest("sha1", shown.encode("utf-8", "surrogatepass"))[:20]
