"""``agent-registry mcp``: the registry as a stdio MCP server (Model Context Protocol).
Over 400 lines: every tool and resource, each a short function over the one shared
Registry and its mutex.

A harness (Claude Code, Codex, Gemini CLI …) starts this server once and keeps it for the
whole agent session, so a claim costs what ``Registry.claim`` costs in-process instead of
a Python start-up per command.  One :class:`Registry` stays open (one ``cat-file``
process), shared by the tools, the resources (which the SDK reads in worker threads) and
the heartbeat thread, so every use of it goes through one mutex.  Sessions registered
through this server are bound to the server's parent process (the harness: it lives
exactly as long as the agent) and heartbeated by a background thread while the server
runs.
Another thread makes the object files of the next writes after each answer
(store/spares.py), so a claim makes no file of its own.

Every failure is a tool error (``isError``) whose text says what is wrong and what to do:
an unknown session id lists the live ones, a refused claim names the holder and how to
reach it.  A claim the remote has not confirmed (the CLI's exit 3) is a result with
``"confirmed": false``.  Results are the documents the CLI prints with ``--json``.
"""
from __future__ import annotations

import functools
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Annotated, Any, Literal

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from .. import __version__
from ..errors import BadInput, NotFound, Refused, RegistryError, Unconfirmed, os_failure
from ..cli.output import age, check_code, to_json
from ..store.procinfo import is_alive
from ..branch.records import parse_iso
from ..branch.sessionids import closest
from ..core.registry import Registry
from ..store.git import Repo
from ..branch.staleness import DEFAULT_TTL
from . import stdio
from .lean import LeanCalls

HEARTBEAT = 120.0  # seconds between heartbeats: a fifth of the default TTL
SPARES = 16  # object files made ahead of the calls: two claims' (store/spares.py)
PID_FROM = "the MCP server's parent (the harness that started it)"
SHOWN = 20  # live sessions named in an "unknown session" error

SessionId = Annotated[str, Field(description="Session id, as returned by register.")]
MaybeSession = Annotated[str | None, Field(
    description="Session id (default: the one session this server registered).")]
Paths = Annotated[list[str], Field(min_length=1, description=(
    "Files, directories (end with /) or git globs, relative to the repository root "
    "or absolute."))]
NotifyExecuted = Annotated[str, Field(
    description="The message `watch` sends for this ending (instead of its pool's).")]
READ_ONLY = ToolAnnotations(readOnlyHint=True, openWorldHint=False)
WRITES = ToolAnnotations(readOnlyHint=False, destructiveHint=False, openWorldHint=False)

INSTRUCTIONS = """\
Coordinates the AI agents editing this git repository. Call register once at the start
(keep the session id it returns); call lock_acquire on a path before editing it and
lock_release when done; if a claim is refused, work on something else or ask the holder
it names. lock_check tells who holds a path. This server heartbeats the sessions it
registered. At the end call end (writes a wiki entry) or finish. wiki_query says whether
a task was done before. send asks another session (the holder of a path: to_path; a room:
room); inbox lists what waits for you, ack what you handled; room_who tells who is in a
room (register with rooms to join one shared with other repositories)."""


class Service:
    """The registry behind the tools: one Registry, one mutex, and the sessions this
    server registered (session id -> the shortest TTL it claimed with)."""

    def __init__(self, registry: Registry, interval: float = HEARTBEAT) -> None:
        self.registry = registry
        self.interval = interval
        self.mutex = threading.Lock()
        self.owned: dict[str, int] = {}
        self.beaten: dict[str, float] = {}  # session -> monotonic time of its last renewal
        self.stopping = threading.Event()
        self.spent = threading.Event()  # an answer went out: its call may have used spares

    # -- calling the registry ---------------------------------------------------------
    def call(self, fn: Callable[[], dict], sid: str | None = None,
             then: Callable[[], None] | None = None) -> dict:
        """Run *fn* under the mutex, then *then* if *fn* succeeded (the server's own
        bookkeeping); a RegistryError becomes a ToolError that says what to do, a claim
        the remote did not confirm a result with ``confirmed: false``."""
        with self.mutex:
            self.registry.unpushed, self.registry.warnings = {}, []
            try:
                result = fn()
                if then is not None:
                    then()
            except Unconfirmed as exc:
                result = {**exc.details, "warning": exc.message}
            except RegistryError as exc:
                raise ToolError(self.explain(exc, sid)) from None
            except OSError as exc:
                raise ToolError(os_failure(exc).message) from None
            result = {**result, **self.registry.unpushed}
            if self.registry.warnings:
                result["warnings"] = list(self.registry.warnings)
            return result

    def inline(self) -> bool:
        """Whether a call runs on the event loop: the registry is local (milliseconds; a
        thread hop would cost more than the work)."""
        return self.registry.remote is None

    async def run(self, fn: Callable[[], dict], sid: str | None = None,
                  then: Callable[[], None] | None = None) -> dict:
        """:meth:`call` on the event loop when :meth:`inline`, in a worker thread when
        changes go through a remote (the network), so the server keeps answering
        meanwhile."""
        if self.inline():
            return self.call(fn, sid, then)
        return await anyio.to_thread.run_sync(functools.partial(self.call, fn, sid, then))

    def default_sid(self, sid: str | None) -> str:
        """*sid*, else the one session this server registered."""
        if sid:
            return sid
        if len(self.owned) == 1:
            return next(iter(self.owned))
        mine = ", ".join(self.owned) or "none yet"
        raise ToolError(f"session_id is required: this server registered {mine} "
                        "(call register first, and pass the id it returns)")

    def renewed(self, sid: str, ttl: int | None = None) -> None:
        """*sid* was just written (its heartbeat renewed): the heartbeat thread waits."""
        self.beaten[sid] = time.monotonic()
        if sid in self.owned and ttl:
            self.owned[sid] = min(self.owned[sid], ttl)

    def forget(self, sid: str) -> None:
        self.owned.pop(sid, None)
        self.beaten.pop(sid, None)

    # -- what an error says -----------------------------------------------------------
    def explain(self, exc: RegistryError, sid: str | None) -> str:
        text = exc.message
        unknown = exc.details.get("session") if "closest" in exc.details else None
        if isinstance(exc, NotFound) and unknown:  # the core's hint, this server's first
            return f"unknown session {unknown}. {self.live_hint(unknown)}"
        if sid and isinstance(exc, (NotFound, Refused)) and \
                text.startswith((f"unknown session {sid}", f"session {sid} has ")):
            return f"{text}. {self.live_hint(sid)}"
        owners = [c["owner"] for c in exc.details.get("conflicts", [])] or \
            exc.details.get("owners", [])
        if owners:
            return f"{text}. " + " ".join(self.reach(o) for o in dict.fromkeys(owners))
        return text

    def live_hint(self, sid: str) -> str:
        """The live session ids, this server's first, and the likeliest one meant."""
        try:
            live = [s.id for s in self.registry.sessions()]
        except RegistryError:
            return ""
        mine = [s for s in self.owned if s in live]
        listed = mine + [s for s in live if s not in mine]
        if not listed:
            return "No session is live: call register first."
        guess = next(iter(closest(sid, live, mine)), None)
        more = f" (and {len(listed) - SHOWN} more)" if len(listed) > SHOWN else ""
        return ((f"Did you mean {guess}? " if guess else "")
                + f"Live sessions: {', '.join(listed[:SHOWN])}{more}"
                + (f"; registered through this server: {', '.join(mine)}." if mine else "."))

    def reach(self, owner: str) -> str:
        """Who holds a lock, and how to reach it: a message, or the person running it."""
        try:
            s = self.registry.session(owner)
        except RegistryError:
            return f"Holder {owner}: its session file is unreadable."
        now = self.registry.clock()
        beat = parse_iso(s.heartbeat_at)
        seen = f", last heartbeat {age(now - beat)} ago" if beat else ""
        where = f" on {s.host}" + (f", pid {s.pid}" if s.pid else "")
        handoff = f"; its handoff document: {s.handoff}" if s.handoff else ""
        return (f"Holder {s.id}: {s.provider}{where}, working on "
                f"{s.working_on or '(not said)'}{seen}{handoff}. Reach it with send (to: "
                f"{s.id}; the answer comes to your inbox) or through the person running it "
                f"(show {s.id} for details; its diary: `agent-registry context show {s.id}`); "
                f"its locks go stale when its "
                "process exits or its heartbeat passes the TTL.")

    # -- the heartbeat thread ---------------------------------------------------------
    def beat_loop(self) -> None:
        """Renew every session this server registered whose last renewal is older than
        the interval (or a third of the shortest TTL it claimed with).  The thread has a
        registry of its own (its own ``cat-file``; the clone's flock and the ref's
        compare-and-swap order its commits with the tools'), so a heartbeat waiting on a
        slow remote never holds the tools' mutex."""
        mine = self.registry
        beater = type(mine)(Repo(mine.repo.info), branch=mine.branch, clock=mine.clock,
                            host=mine.host, config=mine.config)
        try:
            while not self.stopping.wait(min(1.0, self.interval)):
                self.beat_due(beater)
        finally:
            beater.close()

    def beat_due(self, beater: Registry) -> None:
        now = time.monotonic()
        with self.mutex:  # the bookkeeping only: which sessions are due
            due = [sid for sid, ttl in self.owned.items()
                   if now - self.beaten.get(sid, 0.0) >= max(1.0, min(self.interval, ttl / 3))]
            for sid in due:
                self.beaten[sid] = now  # a failure is tried again when the next one is due
        for sid in due:
            try:
                beat(beater, sid)
            except (NotFound, Refused) as exc:  # ended elsewhere, or its agent is gone
                with self.mutex:
                    self.forget(sid)
                print(f"agent-registry mcp: stopped heartbeating {sid}: {exc.message}",
                      file=sys.stderr)
            except (RegistryError, OSError) as exc:
                print(f"agent-registry mcp: heartbeat of {sid} failed: {exc}",
                      file=sys.stderr)

    # -- object files made between calls ---------------------------------------------
    def spare_loop(self) -> None:
        """Keep SPARES empty object files made for the tools' registry, made again after
        each answer, while the client reads it: a claim then makes no file of its own
        (store/spares.py).  The files are the registry's, closed with it."""
        repo = self.registry.repo
        while not self.stopping.is_set():
            repo.fill_spares(SPARES)
            self.spent.wait()
            self.spent.clear()

    def stop(self) -> None:
        """End the heartbeats and the spare files' thread (serve joins both; the
        heartbeat thread closes its registry)."""
        self.stopping.set()
        self.spent.set()
        with self.mutex:
            self.owned.clear()


def build(service: Service) -> MCPServer:
    """The MCP server: its tools and resources, each a thin call into *service*."""
    server = MCPServer("agent-registry", version=__version__, instructions=INSTRUCTIONS,
                       log_level="WARNING")
    reg = service.registry
    tool = server.tool

    def fresh(read: Callable[[], dict]) -> Callable[[], dict]:
        """*read*, after a fetch when this clone's view is older than readFreshness (as
        the CLI's reads): its answer says how old the view is when it could not fetch."""
        def run() -> dict:
            from ..sync.fresh import freshen, said
            freshen(reg)
            answer = read()
            return {**answer, **said(reg)}
        return run

    @tool(annotations=WRITES)
    async def register(
        provider: Annotated[str | None, Field(description=(
            "Agent or tool: Claude, Codex, Gemini … (required, but for a resume: the "
            "session's is kept)."))] = None,
        session_id: Annotated[str | None, Field(
            description="Id to register (default: made up as <provider>-<time>-<hex>).")] = None,
        ai_version: Annotated[str | None, Field(description=(
            "Model or tool version (not given: a session registered again keeps its)."))] = None,
        working_on: Annotated[str | None, Field(description=(
            "What this session works on (not given: a session registered again keeps "
            "it)."))] = None,
        space: Annotated[list[str] | None, Field(description=(
            "Paths it expects to touch (not given: a session registered again keeps "
            "them)."))] = None,
        todo_present: Annotated[list[str] | None, Field(description=(
            "Current to-do items (not given: a session registered again keeps them)."))] = None,
        pid: Annotated[int | None, Field(description=(
            "The agent's own process (default: this server's parent, the harness)."))] = None,
        notify_started: Annotated[str, Field(description=(
            "The message `watch` sends when this session starts (instead of its pool's)."))] = "",
        tags: Annotated[list[str], Field(description=(
            "Tags send's to_tag reaches this session by."))] = [],
        rooms: Annotated[list[str], Field(description=(
            "Rooms shared with other repositories through the hub to join: room:<name> "
            "(git config agent-registry.hub URL)."))] = [],
        resume: Annotated[bool, Field(description=(
            "Take over the live session session_id (an agent restarted into its own "
            "session); without it a live session registered by another process is "
            "refused."))] = False,
        memory: Annotated[bool, Field(description=(
            "Return the few past sessions' wiki entries most relevant to working_on and "
            "space, with their ids (wiki_show ID reads one in full)."))] = True,
    ) -> dict[str, Any]:
        """Register this agent's session first; pass the returned session.id to other tools."""
        from ..cli.console import new_session_id
        sid = session_id or new_session_id(provider or "")

        def run() -> dict:
            from ..sync import rooms as R
            if provider is None and not resume:  # named as this tool names it
                raise BadInput("provider is required (a resume keeps the session's)")
            for room in rooms:  # checked before anything is written, as `register --room`
                if not R.validate_room(room).startswith(R.SHARED):
                    raise BadInput(f"{room}: a repository's room is joined by working in "
                                   "it; rooms take room:<name>")
            if rooms:
                R.open_hub(reg).close()  # no hub, or an unusable one: nothing registered
            session = reg.register(sid, provider=provider, ai_version=ai_version,
                                   working_on=working_on, space=space,
                                   todo_present=todo_present, pid=pid or os.getppid(),
                                   pid_from="pid" if pid else PID_FROM,
                                   notify_started=notify_started,
                                   tags=list(tags) + list(rooms), resume=resume)
            service.owned.setdefault(sid, DEFAULT_TTL)
            service.renewed(sid)
            result = {"session": session.to_dict(), "bound_to": reg.bound}
            if rooms:
                result["rooms"] = R.join(reg, sid, list(dict.fromkeys(rooms)))
            if memory:
                from ..wiki.api import recall
                result["memory"] = [{k: e[k] for k in ("id", "session_id", "what", "router",
                                                       "bugs", "why")}
                                    for e in recall(reg, session.working_on, session.space)]
            R.refresh_messages(reg)  # what other clones sent it meanwhile, as the CLI
            return {**result, "waiting": R.waiting(reg, session)}
        return await service.run(run, sid)

    @tool(annotations=READ_ONLY)
    async def status(
        all: Annotated[bool, Field(description="Include ended sessions.")] = False,
    ) -> dict[str, Any]:
        """Live sessions (all: ended ones too), the sync state and clocks running ahead."""
        return await service.run(fresh(lambda: reg.status(include_ended=all)))

    @tool(annotations=READ_ONLY)
    async def show(
        session_id: Annotated[str | None, Field(
            description="Session id (default: every live session).")] = None,
    ) -> dict[str, Any]:
        """One session in full (default: every live session)."""
        return await service.run(fresh(lambda: {"sessions": [s.to_dict() for s in (
            [reg.session(session_id)] if session_id else reg.sessions())]}), session_id)

    @tool(annotations=WRITES)
    async def lock_acquire(
        paths: Paths, session_id: MaybeSession = None,
        ttl: Annotated[int, Field(ge=1, le=604800, description=(
            "Seconds without a heartbeat before the lock goes stale."))] = DEFAULT_TTL,
        shared: Annotated[bool, Field(description="Shared mode: many readers, no writer.")] = False,
        generations: Annotated[list[str], Field(description=(
            "Optional, to renew: the generation of each path's claim (as returned), in "
            "order; an error when the lock was taken over since."))] = [],
        reason: Annotated[str | None, Field(description=(
            "Optional: why you claim it, shown to whoever meets the lock (lock list, "
            "status, lock check, a refused claim)."))] = None,
    ) -> dict[str, Any]:
        """Claim every path before editing it, or none (an error names the holder)."""
        sid = service.default_sid(session_id)
        return await service.run(lambda: reg.claim(sid, paths, ttl=ttl, shared=shared,
                                                   generations=generations, reason=reason),
                                 sid,
                                 then=lambda: service.renewed(sid, ttl))

    @tool(annotations=WRITES)
    async def lock_release(
        paths: Paths, session_id: MaybeSession = None,
        generations: Annotated[list[str], Field(description=(
            "Optional: the generation of each path's claim, in order; an error when the "
            "lock was taken over since."))] = [],
    ) -> dict[str, Any]:
        """Release paths this session holds (an error if another session holds one)."""
        sid = service.default_sid(session_id)
        return await service.run(lambda: reg.release(sid, paths, generations=generations), sid)

    @tool(annotations=READ_ONLY)
    async def lock_check(
        paths: Paths,
        session_id: Annotated[str | None, Field(
            description="Your session id, to tell your own locks apart.")] = None,
    ) -> dict[str, Any]:
        """Per path: free, locked (by whom), locked-by-me or stale; free_to_edit sums it up."""
        def run() -> dict:  # fetched first as the CLI's check is (sync/fresh.checked)
            from ..sync.fresh import checked
            results, view = checked(reg, paths, session_id)
            return {"paths": results, "free_to_edit": check_code(results) == 0, **view}
        return await service.run(run, session_id)

    @tool(annotations=WRITES)
    async def heartbeat(
        session_id: MaybeSession = None,
        paths: Annotated[list[str], Field(
            description="Optional: an error unless the session holds each.")] = [],
    ) -> dict[str, Any]:
        """Renew the session and all its locks now (this server also does it on its own)."""
        sid = service.default_sid(session_id)
        return await service.run(lambda: mirrored(reg, sid, "heartbeat",
                                                  reg.heartbeat(sid, paths)), sid,
                                 then=lambda: service.renewed(sid))

    @tool(annotations=WRITES)
    async def context_log(
        text: Annotated[str, Field(description="What happened, one or more lines.")],
        session_id: MaybeSession = None,
    ) -> dict[str, Any]:
        """Append a timestamped line to the session's diary (contexts/<sid>.md)."""
        sid = service.default_sid(session_id)
        return await service.run(lambda: reg.context_log(sid, text), sid)

    @tool(annotations=WRITES)
    async def send(
        body: Annotated[str, Field(description="The message, at most 64 KiB.")],
        to: Annotated[str | None, Field(description="One session id.")] = None,
        to_path: Annotated[str | None, Field(description=(
            "Every live session holding a lock that covers this path."))] = None,
        to_tag: Annotated[str | None, Field(description=(
            "Every live session registered with this tag."))] = None,
        room: Annotated[str | None, Field(description=(
            "Everyone in a room: room:<name> (through the hub) or repo:<name>."))] = None,
        all: Annotated[bool, Field(description="Every other live session.")] = False,
        key: Annotated[str | None, Field(description=(
            "Idempotency key: a retry with the same key and content sends nothing."))] = None,
        reply_to: Annotated[str | None, Field(description=(
            "The message id this answers; with no audience, the reply goes to its sender."))] = None,
        subject: Annotated[str | None, Field(description="A one-line subject.")] = None,
        importance: Annotated[Literal["high", "normal", "low"], Field(description=(
            "high: told at the recipient's next tool call, not only its next prompt."))] = "normal",
        ack_required: Annotated[bool, Field(description=(
            "Ask the recipients to acknowledge it."))] = False,
        session_id: MaybeSession = None,
    ) -> dict[str, Any]:
        """Send a durable message (to one of to, to_path, to_tag, room, all; or a reply)."""
        from ..core import messages
        sid = service.default_sid(session_id)

        def run() -> dict:
            to_sel = messages.selector(to, [to_path] if to_path else [], to_tag, room, all,
                                       required=reply_to is None)
            from ..sync.rooms import registry_for
            from ..sync.whereis import reply_audience
            if to_sel is None:  # a reply naming no audience: to the original's sender
                target, to_sel = reply_audience(reg, reply_to, sid)
            elif room is None:
                target = reg
            else:
                target = registry_for(reg, room)  # the hub for room:<name>, as `send --room`
            if target is reg:
                return messages.send(reg, sid, to_sel, body, subject=subject, key=key,
                                     reply_to=reply_to, importance=importance,
                                     ack_required=ack_required)
            try:
                from ..sync.rooms import member_id  # on the hub: this repository's member
                result = messages.send(target, member_id(target, sid), to_sel, body,
                                       subject=subject, key=key, reply_to=reply_to,
                                       importance=importance, ack_required=ack_required)
                return {**result, **(target.unpushed if target is not reg else {})}
            finally:
                if target is not reg:
                    reg.warnings.extend(target.warnings)
                    target.close()
        return await service.run(run, sid)

    @tool(annotations=READ_ONLY)
    async def room_who(
        room: Annotated[str, Field(description=(
            "room:<name> (shared through the hub) or repo:<name> (this repository's own)."))],
    ) -> dict[str, Any]:
        """Who is in a room: each live session, its repository, and whether it is present."""
        from ..sync.rooms import presence
        return await service.run(lambda: presence(reg, room))

    @tool(annotations=READ_ONLY)
    async def inbox(
        session_id: MaybeSession = None,
        all: Annotated[bool, Field(description="Also the acknowledged ones.")] = False,
    ) -> dict[str, Any]:
        """Messages and handoffs waiting for the session (sync first with a remote)."""
        from ..core import messages
        from ..sync.rooms import HubInbox, refresh
        sid = service.default_sid(session_id)

        def run() -> dict:
            hub = HubInbox(reg, sid, True)  # what its rooms sent it (inbox drops the acked)
            try:
                return messages.inbox(reg, sid, include_acked=all, refresh=lambda: refresh(reg),
                                      more=hub)
            finally:
                hub.close()
        return await service.run(run, sid)

    @tool(annotations=WRITES)
    async def ack(
        message_ids: Annotated[list[str], Field(min_length=1, description=(
            "Ids of messages this session received."))],
        session_id: MaybeSession = None,
    ) -> dict[str, Any]:
        """Acknowledge messages you received and handled (recipients only)."""
        from ..core import messages
        sid = service.default_sid(session_id)
        return await service.run(lambda: messages.ack(reg, sid, message_ids), sid)

    @tool(annotations=READ_ONLY)
    async def thread(
        message_id: Annotated[str, Field(description="Any message of the conversation.")],
    ) -> dict[str, Any]:
        """A conversation, oldest first, with who acknowledged each message."""
        from ..core import messages
        return await service.run(lambda: messages.thread(reg, message_id))

    @tool(annotations=WRITES)
    async def finish(
        session_id: MaybeSession = None, notify_executed: NotifyExecuted = "",
    ) -> dict[str, Any]:
        """Mark the session Finished and release every lock it holds."""
        sid = service.default_sid(session_id)
        return await service.run(lambda: mirrored(reg, sid, "finish", reg.finish(
            sid, notify_executed=notify_executed)), sid, then=lambda: service.forget(sid))

    @tool(annotations=WRITES)
    async def end(
        session_id: MaybeSession = None,
        router: Annotated[str | None, Field(
            description="One line a later search should find this session by.")] = None,
        what: Annotated[str | None, Field(description="What was done.")] = None,
        how: Annotated[str | None, Field(description="How it was done.")] = None,
        solved: Annotated[str | None, Field(description="The problem it solved.")] = None,
        bugs: Annotated[list[str] | None, Field(description="Bugs found.")] = None,
        tools: Annotated[list[str] | None, Field(
            description="Skills, tools, MCP servers used.")] = None,
        notify_executed: NotifyExecuted = "",
    ) -> dict[str, Any]:
        """End the session with a wiki entry (wiki/<sid>.md), Finished, locks released."""
        sid = service.default_sid(session_id)
        from ..wiki.ops import end_session
        return await service.run(
            lambda: mirrored(reg, sid, "finish", end_session(
                reg, sid, router=router, what=what, how=how, solved=solved, bugs=bugs,
                tools=tools, notify_executed=notify_executed)),
            sid, then=lambda: service.forget(sid))

    @tool(annotations=READ_ONLY)
    async def wiki_query(
        text: Annotated[str, Field(description="The task, in a few words.")],
        limit: Annotated[int, Field(ge=1, description="Most results.")] = 10,
    ) -> dict[str, Any]:
        """Has this been done before? Past sessions ranked for text, best first."""
        from ..wiki import api
        return await service.run(fresh(lambda: api.search(reg, text, limit)))

    @tool(annotations=READ_ONLY)
    async def wiki_show(
        id: Annotated[str, Field(
            description="Entry id (or a unique prefix of 6+) or session id.")],
    ) -> dict[str, Any]:
        """One wiki entry in full: fields and the session's diary."""
        from ..wiki import api
        return await service.run(lambda: api.get_entry(reg, id))

    add_resources(server, service)
    return server


def add_resources(server: MCPServer, service: Service) -> None:
    reg = service.registry

    def read(fn: Callable[[], str]) -> str:
        with service.mutex:
            try:
                return fn()
            except RegistryError as exc:
                raise ResourceError(exc.message) from None

    @server.resource("registry://status", name="status", mime_type="application/json",
                     description="Live sessions, the sync state, clocks running ahead.")
    def status_resource() -> str:
        return read(lambda: to_json(reg.status()))

    @server.resource("registry://locks", name="locks", mime_type="application/json",
                     description="Every lock held by a live session, with its state.")
    def locks_resource() -> str:
        return read(lambda: to_json({"locks": reg.locks()}))

    @server.resource("registry://registry.md", name="registry.md", mime_type="text/markdown",
                     description="The registry branch's rendered page, as the forge shows it.")
    def registry_md() -> str:
        def page() -> str:
            raw = reg.view().read("registry.md")
            if raw is None:
                raise ResourceError(f"no {reg.branch} branch yet: register a session first")
            return raw.decode("utf-8", errors="replace")
        return read(page)


def beat(registry: Registry, sid: str) -> None:
    """Renew *sid*, unless its owner process (the harness) is gone: a server left running
    must not keep a dead agent's locks alive (as ``lock heartbeat-loop``)."""
    session = registry.session(sid)
    if session.host == registry.host and session.vouched and \
            not is_alive(session.pid, session.pid_start):
        raise Refused(f"its owner process {session.pid} is gone")
    mirrored(registry, sid, "heartbeat", registry.heartbeat(sid))


def mirrored(registry: Registry, sid: str, action: str, result: dict) -> dict:
    """*result*, after carrying the heartbeat or finish of *sid* over to its presence
    in the rooms it joined on the hub (as the CLI does; a no-op without rooms)."""
    from ..sync.rooms import mirror
    mirror(registry, sid, action)
    return result


def serve(registry: Registry, interval: float = HEARTBEAT) -> None:
    """Serve *registry* on stdin/stdout until the client goes away."""
    service = Service(registry, interval)
    server = build(service)
    threads = [threading.Thread(target=service.beat_loop, name="heartbeat", daemon=True),
               threading.Thread(target=service.spare_loop, name="spares", daemon=True)]
    for thread in threads:
        thread.start()
    try:
        stdio.serve(server, answered=service.spent.set,
                    lean=lambda lowlevel: LeanCalls(lowlevel, inline=service.inline))
    finally:
        service.stop()
        for thread in threads:
            thread.join()
