"""How old this clone's view of the registry is: when it last fetched each branch, and
when a fetch last failed and why (docs/design.md, "Fresh reads").

Standard library only: the guard, which never fetches, reads it to say its view's age,
and the click-free ``lock check`` reads it before every edit, so a fresh view costs one
``stat``.  A fetch that lands touches ``<common dir>/agent-registry/fetched/<branch>``
(sync/remote.py ``fetch``); a fetch a read attempted and could not make leaves
``fetched/<branch>.failed`` (when, and why), so the reads within the freshness bound
after it answer from the clone at once instead of waiting on the remote each time.
"""
from __future__ import annotations

import os
import time

from . import jsontext

DEFAULT_FRESHNESS = 30.0  # seconds (git config agent-registry.readFreshness; 0: always fetch)
FRESHNESS_KEY = "agent-registry.readfreshness"


def bound(config: dict[str, str]) -> float:
    """``agent-registry.readFreshness`` in seconds: a read fetches first when this
    clone's last fetch is older (0: every read fetches)."""
    raw = config.get(FRESHNESS_KEY)
    if raw is None or not raw.strip():
        return DEFAULT_FRESHNESS
    try:
        value = float(raw)
    except ValueError:
        return DEFAULT_FRESHNESS
    return value if value >= 0 else DEFAULT_FRESHNESS


def view_doc(last: float | None, now: float, failure: dict | None) -> dict:
    """A read's view freshness for ``--json``: ``as_of`` (its last fetch), ``stale_view``
    and, when the fetch it tried failed (*failure*), the view's age and why."""
    doc = {"as_of": iso(last) if last else None, "stale_view": failure is not None}
    if failure is not None:
        doc["view_age_seconds"] = int(now - last) if last else None
        doc["remote_error"] = failure
    return doc


def fresh_view(common_dir: str, branch: str, config: dict[str, str], now: float) -> dict | None:
    """The view's freshness when this clone's last fetch of *branch* is within the bound,
    so a read answers from the clone at once; None when a read fetches first."""
    last = last_fetch(common_dir, branch)
    limit = bound(config)
    if last is not None and limit > 0 and now - last < limit:
        return view_doc(last, now, None)
    return None


def mark_path(common_dir: str, branch: str) -> str:
    """The file whose mtime says when *branch* was last fetched."""
    return os.path.join(common_dir, "agent-registry", "fetched", branch.replace("/", "%2F"))


def last_fetch(common_dir: str, branch: str) -> float | None:
    """When this clone last fetched *branch* (and what a fetch of it brings: its lock
    shards and the clone refs), or None when it never did so here."""
    try:
        return os.stat(mark_path(common_dir, branch)).st_mtime
    except OSError:
        return None


def mark(common_dir: str, branch: str) -> None:
    """Note a fetch of *branch* that landed now (a failure noted before is over)."""
    path = mark_path(common_dir, branch)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w"):
            pass
        if os.path.exists(path + ".failed"):
            os.unlink(path + ".failed")
    except OSError:
        pass  # no mark: the next read fetches first, as it would anyway


def failed(common_dir: str, branch: str, kind: str, message: str) -> None:
    """Note a fetch of *branch* that could not be made now, and why."""
    path = mark_path(common_dir, branch) + ".failed"
    try:
        from .atomic import replace_file  # a failed fetch only: not on every fresh read
        replace_file(path, jsontext.dumps({"kind": kind, "message": message}), prefix=".failed.")
    except OSError:
        pass


def last_failure(common_dir: str, branch: str) -> tuple[float, dict] | None:
    """(when, {"kind", "message"}) of the last failed fetch of *branch* since the last
    one that landed, or None."""
    path = mark_path(common_dir, branch) + ".failed"
    try:
        at = os.stat(path).st_mtime
        with open(path) as f:
            data = jsontext.loads(f.read())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("message"), str):
        return None
    return at, {"kind": str(data.get("kind") or "error"), "message": data["message"]}


def iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(ts)))


def age_text(seconds: float) -> str:
    """A view's age as people read it: 45 s, 12 min, 3 h, 2 d."""
    seconds = max(0, int(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"


def as_of_text(last: float | None, now: float) -> str:
    """``as of 2026-12-01T23:50:12Z (3 min ago)``, or ``never fetched here``."""
    if last is None:
        return "never fetched here"
    return f"as of {iso(last)} ({age_text(now - last)} ago)"
