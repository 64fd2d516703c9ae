"""Fresh reads: what an agent or a hook decides by is either fresh or says it is not
(docs/design.md, "Fresh reads").

Before ``lock check``, the harness edit gate, ``status``, ``show``, ``wiki query`` (and
``inbox``, which syncs on every look), a clone with a remote fetches its registry branch
when its last fetch is older than ``git config agent-registry.readFreshness`` seconds
(default 30; 0: every read fetches), within the network timeout, and puts its pending
operations on top (no push).  A fetch of the main branch brings the lock shards and the
clone refs with it, so every layout is read fresh.  When the fetch cannot be made (an
unreachable or hung remote), the read answers from the clone and says so: one line on
stderr (a warning) and, in ``--json``, ``as_of`` (the view's last fetch), ``stale_view:
true``, ``view_age_seconds`` and ``remote_error`` ({kind, message}).  Within the bound
after a failed fetch, reads answer from the clone at once (saying why) rather than wait
on the remote again.

A fresh view costs one ``stat`` (store/freshness.py): the click-free ``lock check``
stays click-free and starts no process.
"""
from __future__ import annotations

import time

from ..errors import NotFound
from ..store import freshness
from ..store.freshness import view_doc


def stale_line(doc: dict, now: float | None = None) -> str:
    """The one line a stale read says (after ``agent-registry: warning: ``)."""
    from ..branch.records import parse_iso
    now = time.time() if now is None else now
    error = doc.get("remote_error") or {}
    return (f"stale view: answering from this clone's copy of the registry, "
            f"{freshness.as_of_text(parse_iso(doc.get('as_of')), now)}: could not fetch it: "
            f"{error.get('message', 'unknown error')}")


def freshen(registry, *, force: bool = False) -> dict:
    """Fetch *registry*'s branch first when this clone's last fetch of it is older than
    the freshness bound (*force*: whatever its age); the view's freshness for ``--json``
    (``{}`` without a remote: the clone is the registry).  A stale view adds its one
    line to ``registry.warnings`` and is kept as ``registry.view_state``."""
    return _freshen(registry, force)[0]


def _freshen(registry, force: bool) -> tuple[dict, bool]:
    """:func:`freshen`'s answer, and whether it went to the remote for it."""
    if not registry.remote:
        return {}, False
    common, branch = registry.repo.info.common_dir, registry.branch
    now = time.time()
    if not force and (doc := freshness.fresh_view(common, branch, registry.config, now)):
        return _set(registry, doc), False
    limit = freshness.bound(registry.config)
    last = freshness.last_fetch(common, branch)
    recent = freshness.last_failure(common, branch)
    if not force and recent is not None and limit > 0 and now - recent[0] < limit \
            and (last is None or recent[0] > last):
        # tried just now: no second wait
        return _set(registry, view_doc(last, now, recent[1])), False
    from .remote import catch_up
    failure = catch_up(registry)
    now = time.time()
    if failure is None:
        last = freshness.last_fetch(common, branch) or now
        return _set(registry, view_doc(last, now, None)), True
    error = failure.to_dict()
    freshness.failed(common, branch, error["kind"], error["message"])
    return _set(registry, view_doc(last, now, error)), True


def checked(registry, paths, sid: str | None) -> tuple[list[dict], dict]:
    """`lock check`'s answer and its view's freshness: fetched first when older than the
    freshness bound; a session id this view does not know is fetched for once more
    before it is called unknown (another clone may have registered it since), unless
    this read went to the remote already (a view older than the bound, or a
    ``readFreshness`` of 0): one fetch either way."""
    view, fetched = _freshen(registry, False)
    try:
        results = registry.check(paths, sid)
    except NotFound:
        if not registry.remote or not sid or fetched:
            raise
        view = freshen(registry, force=True)
        results = registry.check(paths, sid)
    said(registry)
    return results, view


def _set(registry, doc: dict) -> dict:
    registry.view_state = doc
    return said(registry)


def said(registry) -> dict:
    """The view's freshness, its line among ``registry.warnings`` when it is stale (a
    read replaces the warnings with its own: a face calls this again after it)."""
    doc = view_state(registry)
    if doc.get("stale_view"):
        line = stale_line(doc)
        if line not in registry.warnings:
            registry.warnings.append(line)
    return doc


def stale_after_sync(registry, error: dict) -> dict:
    """The view's freshness after a sync that could not fetch (``inbox`` syncs on each
    look): said as a stale read says it."""
    common, branch = registry.repo.info.common_dir, registry.branch
    freshness.failed(common, branch, error.get("kind", "error"), error.get("message", ""))
    return _set(registry, view_doc(freshness.last_fetch(common, branch), time.time(), error))


def fresh_after_sync(registry) -> dict:
    """The view's freshness after a sync that fetched."""
    last = freshness.last_fetch(registry.repo.info.common_dir, registry.branch)
    return _set(registry, view_doc(last or time.time(), time.time(), None))


def view_state(registry) -> dict:
    """What the last read of *registry* said of its view's freshness (``{}``: none)."""
    return dict(getattr(registry, "view_state", None) or {})


def freshen_at(info) -> dict:
    """For a hook that reads the registry without opening it (the harness edit gate,
    which asks the guard), in repository *info* (a RepoInfo): fetch first when the view
    is older than the bound.  Costs a config read and one ``stat`` when it is fresh or
    there is no remote.  Never raises: a registry it cannot open is the guard's to judge."""
    from ..errors import RegistryError
    from ..store.git import branch_name, read_config, remote_name
    config = read_config(info.git_dir)
    if not remote_name(config):
        return {}
    doc = freshness.fresh_view(info.common_dir, branch_name(config), config, time.time())
    if doc:
        return doc
    from . import Registry
    try:
        with Registry.open(info.toplevel or info.git_dir) as registry:
            return freshen(registry)
    except (RegistryError, OSError):
        return {}
