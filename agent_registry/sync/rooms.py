"""Reading what others wrote: other clones (``refresh``) and other repositories, through
rooms (docs/messages.md, "Rooms").

A room is an audience.  ``repo:<name>`` is the repository's own room: every live session
of its registry, nothing to join.  ``room:<name>`` rooms are shared by several code
repositories through a *hub*: a registry repository they all name with
``git config agent-registry.hub URL``.  The hub's registry branch holds the presence of
the sessions that joined a room (``register --room room:<name>``: a session file on the
hub carrying the room among its tags, and the repository it works in) and the messages
sent to rooms.  Each clone reaches the hub through a bare cache clone in its local state
folder (``<common dir>/agent-registry/hub.git``), synced like the main registry: fetch,
replay, push.  The hub keeps its messages on its own registry branch (it is a
repository of its own, written only by room traffic), not on a ``-messages`` branch as a
code repository's registry does (core/messages_branch.py).
"""
from __future__ import annotations

import os
import re
import time

from ..branch.mailbox import in_room, order, pending_for
from ..branch.paths import validate_tag
from ..branch.staleness import DEFAULT_TTL
from ..core.messages_branch import mailbox, views
from ..core.refs import HubBranch
from ..core.registry import Registry
from ..core.sessions import repo_name
from ..errors import BadInput, NotFound, Refused, RegistryError, Unconfirmed
from ..store.git import Repo, discover, run_git
from .remote import COMMITTER, local_sessions, sync
from .state import redact

HUB_KEY = "agent-registry.hub"
# the remote_error kinds (sync/remote.py Offline) of a remote no branch of it gets past
UNUSABLE = ("unreachable", "not-found", "credentials")
SHARED, REPO = "room:", "repo:"
# hubs this process found unreachable (url -> (when, why)): not contacted again for
# DOWN_FOR seconds, so a hung hub costs a command one network timeout, not one per step;
# a long-lived process (the MCP server) tries again after that
_DOWN: dict[str, tuple[float, str]] = {}
DOWN_FOR = 60.0
# hub URL -> when this process last synced it (time.monotonic()): a read of the hub
# right after another in one process (mark_arrived, then the inbox it precedes) takes
# that sync, not a second fetch; a long-lived process (a --hold, the MCP server) asks
# again at its next look, SYNCED_FOR seconds later
_SYNCED: dict[str, float] = {}
SYNCED_FOR = 1.0


def _down(url: str) -> str | None:
    """Why *url* did not answer this process within the last DOWN_FOR seconds."""
    when, why = _DOWN.get(url, (0.0, None))
    return why if time.monotonic() - when < DOWN_FOR else None


def member_id(hub: Registry, sid: str) -> str:
    """*sid*'s id on *hub*: the session and the repository it works in (``kimi-1@api``),
    so two repositories' ``kimi-1`` are two members, and one's finish ends only its own.
    A registry that is not a hub (a repo: room's own) keeps the id as it is."""
    repo = getattr(hub, "member_repo", None)
    if repo is None:
        return sid
    key = re.sub(r"[^A-Za-z0-9._-]", "-", repo).strip(".-")[:48] or "repo"
    member = f"{sid}@{key}"
    if len(member) > 128:
        raise BadInput(f"session id {sid!r} is too long to join a room (with @{key}: at "
                       "most 128 characters)")
    return member


def local_id(member: str) -> str:
    """The session id a hub member has in its own repository."""
    return member.rsplit("@", 1)[0] if "@" in member else member


def in_shared_room(registry: Registry, sid: str) -> bool:
    """Did *sid* join a room through the hub (``register --room room:…``)?  Only such a
    session's commands contact the hub."""
    if not hub_url(registry):
        return False
    view = registry.view()
    session = view.session(sid, strict=False) or view.done_session(sid)
    return session is not None and any(tag.startswith(SHARED) for tag in session.tags)


def _named(hub: Registry, text: str) -> str:
    """*text* (git's and sync's words about the cache's remote, ``origin``) naming the
    hub by its URL, credentials removed."""
    return re.sub(r"\borigin\b", f"the hub {redact(hub.hub_url)}", text)


def _offline(hub: Registry) -> None:
    """This process no longer contacts *hub*: what it writes stays in the cache clone,
    pushed by the next command that reaches the hub."""
    hub.config["agent-registry.remote"] = "none"
    hub.down = _down(hub.hub_url)


def refresh_hub(hub: Registry) -> None:
    """Bring the hub's cache up to date (fetch, replay, push) within the network
    timeout; a hub that does not answer is contacted once per process, and each read
    of its cache then says why (the line of that one try)."""
    if getattr(hub, "down", None):
        line = f"{hub.down} (showing this clone's copy of the hub)"
        if line not in hub.warnings:
            hub.warnings.append(line)
        return
    synced = _SYNCED.get(hub.hub_url)
    if synced is not None and 0 <= time.monotonic() - synced < SYNCED_FOR:
        return  # this process synced it a moment ago
    try:
        sync(hub)
    except Unconfirmed as exc:  # git's words, not sync's advice (`sync` is not the hub's)
        error = exc.details.get("remote_error") or {}
        why = _named(hub, error.get("message") or exc.message)
        _DOWN[hub.hub_url] = (time.monotonic(), why)
        hub.warnings.append(f"{why} (showing this clone's copy of the hub)")
        _offline(hub)
        return
    _SYNCED[hub.hub_url] = time.monotonic()


def unpushed(hub: Registry) -> dict:
    """*hub*'s outcome of its last write, naming the hub: not confirmed when it is down."""
    if getattr(hub, "down", None):
        return {"confirmed": False, "remote_error": {"kind": "unreachable", "message": hub.down}}
    out = dict(hub.unpushed)
    if isinstance(out.get("remote_error"), dict) and "message" in out["remote_error"]:
        out["remote_error"] = {**out["remote_error"],
                               "message": _named(hub, out["remote_error"]["message"])}
    return out


def refresh(registry: Registry) -> None:
    """Before a read that must see what other clones wrote (an inbox): sync the registry
    branch and the messages branch when there is a remote; offline, this clone's copy
    answers and a warning says so.  Then what arrived is marked (mark_arrived)."""
    if not registry.remote:
        if hub_url(registry):
            mark_arrived(registry)  # the hub's rooms may have brought something
        return
    from .fresh import fresh_after_sync, stale_after_sync
    box = mailbox(registry)
    for each in (registry,) if box is registry else (registry, box):
        try:
            sync(each)
        except Unconfirmed as exc:  # one line: how old the view is and why (sync/fresh.py)
            stale_after_sync(registry, exc.details.get("remote_error") or {
                "kind": "error", "message": exc.message})
            return
    fresh_after_sync(registry)
    mark_arrived(registry)


def refresh_messages(registry: Registry) -> None:
    """Bring only the messages branch up to date (after a mutation that already synced
    the registry branch, e.g. ``register`` before it lists what waits)."""
    box = mailbox(registry)
    failed = (registry.unpushed.get("remote_error") or {}).get("kind")
    if failed in UNUSABLE:
        return  # the remote failed this command already, and its line says so: no retry
    if box is not registry and box.remote:
        try:
            sync(box)
        except Unconfirmed as exc:
            registry.warnings.append(f"{exc.message} (showing this clone's copy)")
            return
        mark_arrived(registry)


def validate_room(room: str) -> str:
    validate_tag(room)
    if not room.startswith((SHARED, REPO)) or len(room.split(":", 1)[1]) == 0:
        raise BadInput(f"invalid room {room!r}: room:<name> (shared through the hub) or "
                       "repo:<name> (a repository's own)")
    return room


def repo_room(registry: Registry) -> str:
    return REPO + repo_name(registry)


def _is_own(registry: Registry, room: str) -> bool:
    """Whether *room* is this repository's own, read from its registry; any other room is
    read through the hub.  Without a hub, another repo: room is a wrong name (a clone's
    folder named unlike its remote: repo:proj where the room is repo:remote), said so
    rather than as a missing hub, which a repo: room never needs."""
    own = repo_room(registry)
    if room == own:
        return True
    if room.startswith(REPO) and not hub_url(registry):
        raise BadInput(f"{room} is not this repository's room, which is {own} (named after "
                       "its remote's URL, else its folder, the same in every clone); other "
                       f"repositories' rooms are read through a hub: git config {HUB_KEY} URL")
    return False


def hub_url(registry: Registry) -> str | None:
    return registry.config.get(HUB_KEY) or None


def open_hub(registry: Registry, *, fetch: bool = True) -> Registry:
    """The hub's registry, through this clone's cache of it, fetched up to date (unless
    not *fetch*, or the hub did not answer this process before), within this
    repository's ``agent-registry.networkTimeout``."""
    url = hub_url(registry)
    if not url:
        raise BadInput(f"no hub for shared rooms: set `git config {HUB_KEY} URL` to a "
                       "registry repository the other repositories name too")
    path = registry.repo.state_path("hub.git")
    if not os.path.exists(os.path.join(path, "HEAD")):
        os.makedirs(path, exist_ok=True)
        run_git(["init", "-q", "--bare", path])
    run_git(["--git-dir", path, "config", "remote.origin.url", url])
    # on the hub's registry branch, as before (see above): its part keeps the messages
    hub = Registry(Repo(discover(path)), clock=registry.clock, host=registry.host,
                   part=HubBranch(), committer=COMMITTER)
    hub.hub_url = url
    hub.member_repo = repo_name(registry)  # member_id()
    timeout = registry.config.get("agent-registry.networktimeout")
    if timeout:  # the repository's setting, not the cache clone's (which has none)
        hub.config["agent-registry.networktimeout"] = timeout
    if _down(url):
        _offline(hub)
    elif fetch:
        refresh_hub(hub)
    registry.warnings.extend(w for w in hub.warnings if w not in registry.warnings)
    hub.warnings = []
    return hub


def join(registry: Registry, sid: str, rooms: list[str]) -> dict:
    """Show session *sid* (registered here) in the shared *rooms*: its presence on the
    hub, with the repository it works in."""
    session = registry.session(sid)
    hub = open_hub(registry)
    try:
        fields = {"provider": session.provider, "ai_version": session.ai_version,
                  "working_on": session.working_on, "project": session.project,
                  "repo": session.repo, "git_branch": session.git_branch,
                  "host": session.host, "tags": list(dict.fromkeys(rooms))}
        member = member_id(hub, sid)  # keyed by repository and session
        hub.apply(hub.new_op("register", session=member, fields=fields))
        registry.warnings.extend(_named(hub, w) for w in hub.warnings)
        if getattr(hub, "down", None):
            registry.warnings.append(f"{', '.join(rooms)} not joined on the hub yet: "
                                     f"{hub.down}; kept in this clone's copy of the hub, "
                                     "pushed by the next command that reaches it")
        return {"hub": redact(hub_url(registry)), "rooms": rooms, **unpushed(hub),
                "session": sid, "member": member}
    finally:
        hub.close()


def presence(registry: Registry, room: str) -> dict:
    """Who is in *room*: each live session with its repository, and whether its
    heartbeat is within the TTL (present) or older (away)."""
    validate_room(room)
    hub = registry if _is_own(registry, room) else None
    owned = hub is None
    if owned:
        hub = open_hub(registry)
    try:
        now = hub.clock()
        sessions = [s for s in hub.sessions() if s.live and in_room(s, room)]
        registry.warnings.extend(w for w in hub.warnings if w not in registry.warnings)
        return {"room": room, "hub": None if not owned else redact(hub_url(registry)),
                "sessions": [{"id": local_id(s.id) if owned else s.id, "member": s.id,
                              "repo": s.repo, "provider": s.provider,
                              "working_on": s.working_on, "host": s.host,
                              "heartbeat_at": s.heartbeat_at,
                              "present": now - s.heartbeat_ts() <= DEFAULT_TTL}
                             for s in sessions]}
    finally:
        if owned:
            hub.close()


def registry_for(registry: Registry, room: str) -> Registry:
    """Where a message to *room* is sent: this registry for its own repo: room, else the
    hub (the caller closes a registry it did not have)."""
    validate_room(room)
    return registry if _is_own(registry, room) else open_hub(registry)


def hub_pending(hub: Registry, sid: str, include_acked: bool) -> list[dict]:
    """What waits for *sid* on the hub (nothing when it never joined a room)."""
    refresh_hub(hub)
    view = hub.view()
    sid = member_id(hub, sid)
    session = view.session(sid, strict=False) or view.done_session(sid)
    view.where = "the hub's " + hub.branch  # how a bad record there is named
    found = pending_for(view, session, include_acked=include_acked) if session else []
    hub.warnings.extend(w for w in view.warnings if w not in hub.warnings)
    return found


def mirror(registry: Registry, sid: str, action: str) -> None:
    """Carry a ``heartbeat`` or a ``finish`` of *sid* over to its presence on the hub,
    when it joined a room, so ``status --room`` shows it present while it works and not
    after it ends.  Best effort: a hub that cannot be reached is a warning."""
    view = registry.view()
    session = view.session(sid, strict=False) or view.done_session(sid)
    if not hub_url(registry) or session is None or \
            not any(tag.startswith(SHARED) for tag in session.tags):
        return
    try:
        hub = open_hub(registry)
    except RegistryError as exc:
        registry.warnings.append(f"hub not updated: {exc.message}")
        return
    try:
        member = member_id(hub, sid)  # this repository's member, never another's
        hub.heartbeat(member) if action == "heartbeat" else hub.finish(member)
    except (NotFound, Refused):
        pass  # never joined from here, or already gone: nothing to carry over
    except RegistryError as exc:
        registry.warnings.append(f"hub not updated: {exc.message}")
    finally:
        registry.warnings.extend(_named(hub, w) for w in hub.warnings)
        hub.close()


def waiting(registry: Registry, session) -> list[dict]:
    """What waits for *session*, oldest first: on this repository's branches and, once
    it joined a shared room, on the hub (``register``'s list, each hook's news)."""
    found = pending_for(views(registry), session)
    hub = HubInbox(registry, session.id, False)
    try:
        found += hub()
    finally:
        hub.close()
    return sorted(found, key=order)


def mark_arrived(registry: Registry) -> None:
    """After a fetch that may have brought messages (``refresh``, ``refresh_messages``,
    ``sync``): mark the waiting high messages of this clone's live sessions, on this
    repository's branches and on their rooms' hub, as a send from this clone marks them
    (store/urgent.py, which marks each once), so the tool hooks, which never fetch, tell
    a high message sent from another clone at the next tool call.  The branches are read
    once and the hub fetched once, whatever the number of sessions.  Never raises: what
    is not marked is told at the next prompt."""
    from ..branch.mailbox import field
    from ..store.urgent import mark_all
    hub, pairs, complete = None, [], False
    try:
        read = views(registry)
        for session in local_sessions(registry, registry.view()):
            found = pending_for(read, session)
            if in_shared_room(registry, session.id):
                hub = hub or open_hub(registry)
                on_hub = hub.view().session(member_id(hub, session.id), strict=False)
                found += pending_for(hub.view(), on_hub) if on_hub else []
            pairs += [(session.id, message["id"]) for message in found
                      if field(message, "importance") == "high"]
        complete = True
    except Exception:  # noqa: BLE001 - a best effort beside the command's own answer
        pass
    finally:
        if hub is not None:
            hub.close()
    # one read of the record for the pass; pruned only after a pass that saw everything
    mark_all(registry.repo.info.common_dir, pairs, complete)


class HubInbox:
    """``more`` for an inbox (core/messages.inbox): what waits for *sid* on the hub.
    The hub is contacted only once the session is seen in a shared room (a session in
    no room never waits on it), opened once, refreshed on each look; its warnings are
    kept for ``close``, which hands them to *registry*."""

    def __init__(self, registry: Registry, sid: str, include_acked: bool) -> None:
        self.registry, self.sid, self.include_acked = registry, sid, include_acked
        self.hub: Registry | None = None
        self.warnings: list[str] = []

    def __call__(self) -> list[dict]:
        if self.hub is None:
            if not in_shared_room(self.registry, self.sid):
                return []
            before = list(self.registry.warnings)
            self.hub = open_hub(self.registry, fetch=False)  # hub_pending refreshes it
            self.warnings += [w for w in self.registry.warnings if w not in before]
        found = hub_pending(self.hub, self.sid, self.include_acked)
        self.warnings += [_named(self.hub, w) for w in self.hub.warnings
                          if _named(self.hub, w) not in self.warnings]
        self.hub.warnings = []
        return found

    def close(self) -> None:
        if self.hub is not None:
            self.hub.close()
        self.registry.warnings.extend(w for w in self.warnings if w not in self.registry.warnings)
