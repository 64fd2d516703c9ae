"""The dashboard's FastAPI app: the JSON API, the page, and the event stream.

Every endpoint is a thin call into the registry, the sync module, or the wiki (imported
only when asked for: 503 if it cannot be).  Endpoints are plain functions, so
FastAPI runs them in its thread pool; each borrows a Registry from a small pool because a
Registry's ``git cat-file --batch`` serves one reader at a time.  Every call re-reads the
branch tip, so nothing here caches registry state.
"""
from __future__ import annotations

import getpass
import hashlib
import importlib
import os
import secrets
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Iterator, Literal

from fastapi import FastAPI, Query, Request
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, Field
from sse_starlette import EventSourceResponse

from .. import __version__
from ..errors import BadInput, NotFound, RegistryError, Unconfirmed
from ..store.git import GitError, Repo, read_config
from ..sync import Registry
from ..sync.repolist import repository_path
from . import queries
from .events import Probe, change_stream
from .repos import OtherRepositories
from .security import MAX_BODY, TOKEN_COOKIE, BodyLimit, RequestGuard, offers_token
from .timeline import DEFAULT_LIMIT, session_timeline

APP_NAME = "agent-registry-dashboard"
STATIC = Path(__file__).resolve().parent / "static"
# who acted becomes part of a commit's author line: keep it to plain name characters
AUTHOR_PATTERN = r"^[\w.@+:-][\w .@+:-]{0,63}$"
TEXT_PATTERN = r"^[^\x00-\x1f\x7f]*$"
STATUS_BY_ERROR = ((BadInput, 400), (NotFound, 404), (Unconfirmed, 202), (GitError, 500))
# polls of the event stream (0.3 s each) between two reads of: the overlap forecast (a git
# status per worktree with a live session), the other repositories of --repos (a git
# for-each-ref each in the lock-shard layout)
OVERLAP_EVERY, ELSEWHERE_EVERY = 10, 5
REPOSITORY_AREAS = ("sessions", "locks", "repositories")


class Unavailable(Exception):
    """A feature whose module is not installed (yet): answered with 503."""


class RegistryPool:
    """Registries lent to one request at a time; idle ones keep their cat-file process."""

    def __init__(self, first: Registry) -> None:
        self.info, self.config = first.repo.info, first.config
        self._idle = [first]

    @contextmanager
    def borrow(self) -> Iterator[Registry]:
        try:
            registry = self._idle.pop()  # list.pop/append are atomic: no lock needed
        except IndexError:
            registry = Registry(Repo(self.info), config=self.config)
        reusable = True
        try:
            yield registry
        except GitError:
            reusable = False  # its cat-file may be mid-answer: do not lend it again
            raise
        finally:
            if reusable:
                self._idle.append(registry)
            else:
                registry.close()

    def reload(self) -> None:
        """Read the git configuration again (a remote was added): the registries lent
        from now on see it."""
        self.config = read_config(self.info.git_dir)
        self.close()

    def close(self) -> None:
        while self._idle:
            self._idle.pop().close()


class Action(BaseModel):
    by: str | None = Field(None, pattern=AUTHOR_PATTERN,
                           description="Who acts (default: the user running the dashboard).")
    reason: str = Field(..., min_length=1, max_length=300, pattern=TEXT_PATTERN,
                        description="Why; recorded in the registry commit.")


class KillRequest(Action):
    force: bool = Field(False, description="SIGKILL at once instead of SIGTERM, then SIGKILL after 5 s.")


class RemoteRequest(BaseModel):
    url: str = Field(..., min_length=1, max_length=2048, pattern=TEXT_PATTERN,
                     description="The repository to share the registry through.")
    name: str = Field("origin", pattern=r"^[A-Za-z0-9][\w.-]{0,63}$",
                      description="The name to add it under as a git remote.")


class ForceReleaseRequest(Action):
    path: str = Field(..., min_length=1, max_length=4096, description="The locked path or pattern.")
    force: bool = Field(False, description="Required to free a lock whose owner is alive.")


class MessageRequest(BaseModel):
    to: str = Field(..., min_length=1, max_length=128, description="The session to write to.")
    body: str = Field(..., min_length=1, max_length=64 * 1024, description="The message.")
    importance: Literal["high", "normal", "low"] = Field("normal", description="high: told now.")
    ack_required: bool = Field(False, description="Ask the session to acknowledge it.")
    by: str | None = Field(None, pattern=AUTHOR_PATTERN, description="Who writes (default: you).")


def repo_id(common_dir: str) -> str:
    """Names the repository without revealing its path (for the port probe)."""
    return hashlib.sha256(os.path.realpath(common_dir).encode()).hexdigest()[:16]


def default_author() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "dashboard"


def load_feature(module: str, what: str):
    """agent_registry.<module>, or Unavailable saying what is missing."""
    try:
        return importlib.import_module(f"agent_registry.{module}")
    except ImportError as exc:
        if getattr(exc, "name", None) == f"agent_registry.{module}":
            raise Unavailable(f"{what} is not available: this installation has no "
                              f"agent_registry.{module} module") from None
        raise Unavailable(f"{what} is not available: {exc}") from None


def create_app(repo: str | Registry, token: str | None = None, *,
               max_body: int = MAX_BODY, repos: bool = False) -> FastAPI:
    """The dashboard for the repository at *repo* (a path, or a Registry already open,
    which the app then owns and closes).  With *token*, every request but
    /api/health must carry it (for a bind other than loopback); without, only loopback
    Host names are answered.  Changes always need ``app.state.post_token``.  A request
    body over *max_body* bytes is refused with 413 before it is read.  With *repos*, the
    sessions and locks of the user's other repositories are listed too, read-only
    (dashboard/repos.py); every action still acts on this repository only."""
    pool = RegistryPool(Registry.open(repo) if isinstance(repo, str) else repo)
    served = repository_path(pool.info)
    others = OtherRepositories(served) if repos else None
    post_token = token or secrets.token_urlsafe(24)
    author = default_author()
    page = (STATIC / "index.html").read_text(encoding="utf-8").replace("{{token}}", post_token)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        yield
        pool.close()
        if others is not None:
            others.close()

    app = FastAPI(title="agent-registry dashboard", version=__version__, lifespan=lifespan,
                  docs_url=None, redoc_url=None, openapi_url="/api/openapi.json",
                  description="Sessions, locks, sync and wiki of one repository's registry "
                              "branch, live. Changes are POSTs with the X-Agent-Registry-Token "
                              "header.")
    app.state.post_token = post_token
    app.state.repo_id = repo_id(pool.info.common_dir)
    app.add_middleware(RequestGuard, access_token=token, post_token=post_token)
    app.add_middleware(BodyLimit, limit=max_body)  # outermost: before anything reads
    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    @app.exception_handler(RegistryError)
    async def registry_error(request: Request, exc: RegistryError) -> JSONResponse:
        status = next((code for kind, code in STATUS_BY_ERROR if isinstance(exc, kind)), 409)
        return JSONResponse({"error": {"code": exc.exit_code, "message": exc.message,
                                       **exc.details}}, status_code=status)

    @app.exception_handler(Unavailable)
    async def unavailable(request: Request, exc: Unavailable) -> JSONResponse:
        return JSONResponse({"error": {"code": 503, "message": str(exc)}}, status_code=503)

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def index(request: Request):
        if token and request.query_params.get("token"):
            # the printed link carries the token once; from now on a cookie does
            response = RedirectResponse("/", status_code=303)
            response.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="strict")
            return response
        return HTMLResponse(page)

    @app.get("/favicon.ico", include_in_schema=False)
    def favicon() -> FileResponse:
        # browsers and tools ask for /favicon.ico whatever the page's <link rel="icon">
        # names: the same small SVG, so no request of the page ends in a 404
        return FileResponse(STATIC / "favicon.svg", media_type="image/svg+xml")

    @app.get("/api/health", summary="Which repository this dashboard serves")
    def health(request: Request) -> dict:
        answer = {"app": APP_NAME, "version": __version__, "repo_id": app.state.repo_id}
        headers = {k.lower(): v for k, v in request.headers.items()}
        if token is None or offers_token(request.scope, headers, token):
            with pool.borrow() as registry:
                answer.update(common_dir=pool.info.common_dir, branch=registry.branch,
                              repo=os.path.basename(pool.info.toplevel or pool.info.common_dir),
                              host=registry.host, timezone=os.environ.get("AGENT_REGISTRY_TZ"),
                              default_author=author, repos=others is not None,
                              repository=served)
        return answer

    @app.get("/api/sessions", summary="Sessions, newest first (default: the live ones)")
    def sessions(status: str | None = Query(None, description="OnWorking, Finished, Stop or Killed"),
                 provider: str | None = Query(None, description="Only this provider (any case)"),
                 project: str | None = Query(None, description="Projects whose path contains this"),
                 date: str | None = Query(None, description="Active on this day: YYYY-MM-DD or today"),
                 history: bool = Query(False, description="Include ended sessions"),
                 limit: int = Query(500, ge=1, le=5000)) -> dict:
        def read(registry: Registry) -> dict:
            return queries.list_sessions(registry, status=status or None, provider=provider,
                                         project=project, day=date or None, history=history,
                                         limit=limit)
        with pool.borrow() as registry:
            mine = read(registry)
        if others is None:
            return mine
        found, skipped = others.each(read)
        return queries.across([(served, mine), *found], "sessions", skipped, limit)

    @contextmanager
    def reading(repository: str | None) -> Iterator[Registry]:
        """The served registry, or with --repos another listed repository's, to read."""
        if not repository or repository == served:
            with pool.borrow() as registry:
                yield registry
        elif others is None:
            raise BadInput("this dashboard reads one repository (dashboard --repos reads them all)")
        else:
            with others.borrow(repository) as registry:
                yield registry

    elsewhere = Query(None, max_length=4096, pattern=TEXT_PATTERN,
                      description="With --repos: another repository on the list, read-only")

    @app.get("/api/sessions/{sid}", summary="One session in full, with its diary")
    def session(sid: str, repository: str | None = elsewhere) -> dict:
        with reading(repository) as registry:
            return queries.session_detail(registry, sid)

    @app.get("/api/sessions/{sid}/timeline", summary="A session's history: events and chart lanes")
    def timeline(sid: str, limit: int = Query(DEFAULT_LIMIT, ge=1, le=20000),
                 repository: str | None = elsewhere) -> dict:
        queries.check_session_id(sid)
        with reading(repository) as registry:
            return session_timeline(registry, sid, limit)

    @app.get("/api/sessions/{sid}/inbox", summary="Messages and handoffs for a session "
                                                  "(all=true: acknowledged ones too)")
    def inbox(sid: str, all: bool = Query(False, description="Include acknowledged ones"),
              repository: str | None = elsewhere) -> dict:
        from ..core import messages
        with reading(repository) as registry:
            return messages.inbox(registry, sid, include_acked=all)

    @app.get("/api/rooms/{room}", summary="Who is in a room (room:<name> through the hub, "
                                          "repo:<name>), present or away")
    def room(room: str) -> dict:
        from ..sync.rooms import presence
        with pool.borrow() as registry:
            return presence(registry, room)

    @app.get("/api/messages/{mid}/thread", summary="The conversation a message belongs to")
    def thread(mid: str) -> dict:
        from ..core import messages
        with pool.borrow() as registry:
            return messages.thread(registry, mid)

    @app.get("/api/overlaps", summary="The conflict forecast: pairs of live sessions on two "
                                      "branches or worktrees that changed the same paths "
                                      "(agent-registry overlap)")
    def overlap() -> dict:
        forecast = load_feature("forecast.overlap", "the conflict forecast")
        with pool.borrow() as registry:
            return forecast.overlaps(registry)

    def overlap_keys() -> object:
        """What the overlap pane shows, in short (each overlap's pair, paths and kinds),
        or why it cannot be read: the event stream's probe."""
        try:
            return [found["key"] for found in overlap()["overlaps"]]
        except (RegistryError, Unavailable) as exc:
            return str(exc)

    probes = (Probe(overlap_keys, ("overlap",), OVERLAP_EVERY),) + (
        () if others is None else (Probe(others.signatures, REPOSITORY_AREAS, ELSEWHERE_EVERY),))

    @app.get("/api/locks", summary="Every lock held by a live session, with its state")
    def locks() -> dict:
        with pool.borrow() as registry:
            mine = queries.list_locks(registry)
        if others is None:
            return mine
        found, skipped = others.each(queries.list_locks)
        return queries.across([(served, mine), *found], "locks", skipped)

    @app.get("/api/sync", summary="Where this clone stands against its remote")
    def sync_state() -> dict:
        with pool.borrow() as registry:
            state = registry.sync_state()
            if state.get("enabled"):  # lock shards: how many hold unpushed operations
                from ..sync.shardsync import clone_sync_state, shard_sync_state
                shards = shard_sync_state(registry)
                if shards is not None:
                    state["shards"] = shards
                clone = clone_sync_state(registry)  # format 3: this clone's own ref
                if clone is not None:
                    state["clone"] = clone
            return state

    @app.get("/api/watch", summary="The watchdog's state: running, last pass, pending, "
                                   "last deliveries and failures (agent-registry watch)")
    def watch_state() -> dict:
        from ..watch.follow import status as watch_status
        with pool.borrow() as registry:
            return watch_status(registry)

    @app.get("/api/wiki", summary="Search the wiki; an empty or missing q lists the latest entries")
    def wiki_search(q: str = Query("", max_length=500, pattern=TEXT_PATTERN),
                    limit: int = Query(10, ge=1, le=100)) -> dict:
        wiki = load_feature("wiki", "wiki search")
        with pool.borrow() as registry:
            return wiki.search(registry, q, limit=limit)

    @app.get("/api/wiki/{entry_id}", summary="One wiki entry (by id or session id); body is the diary")
    def wiki_entry(entry_id: str) -> dict:
        wiki = load_feature("wiki", "the wiki")
        with pool.borrow() as registry:
            return wiki.get_entry(registry, entry_id)

    @app.get("/api/events", summary="Server-Sent Events: hello, then change {areas, sessions, tip}",
             response_class=EventSourceResponse)
    async def events():
        return EventSourceResponse(change_stream(pool.borrow, probes=probes), ping=15)

    @app.post("/api/sessions/{sid}/kill", summary="End a session as Killed (signals its process if local)")
    def kill(sid: str, action: KillRequest) -> dict:
        with pool.borrow() as registry:
            # Registry.kill validates the id itself, more strictly than check_session_id
            return registry.kill(sid, force=action.force, by=action.by or author,
                                 reason=action.reason)

    @app.post("/api/locks/force-release", summary="Free a lock: at once if stale, with force if fresh")
    def force_release(action: ForceReleaseRequest) -> dict:
        from ..core.takeover import tell_holders  # the holder hears who took it and why
        with pool.borrow() as registry:
            return tell_holders(registry, registry.force_release(
                action.path, reason=action.reason, by=action.by or author, force=action.force))

    @app.post("/api/messages", summary="Write to a session, as a person (send --from NAME)")
    def write(action: MessageRequest) -> dict:
        from ..core.messages import send
        from ..core.persons import person_or_session
        with pool.borrow() as registry:
            sender = action.by or author
            result = send(registry, sender, {"session": action.to}, action.body,
                          importance=action.importance, ack_required=action.ack_required,
                          person=person_or_session(registry, sender))
            return {**result, **registry.unpushed}

    @app.post("/api/cleanup", summary="Stop zombie sessions and free their locks")
    def cleanup(action: Action) -> dict:
        with pool.borrow() as registry:
            return registry.cleanup(by=action.by or author, reason=action.reason)

    @app.post("/api/sync", summary="Fetch, replay and push now")
    def sync_now() -> dict:
        from ..sync.shardsync import sync_all  # the registry branch, its shards, its clone ref
        with pool.borrow() as registry:
            return sync_all(registry)

    @app.post("/api/sync/remote", summary="Share the registry through a remote URL: checked "
                                          "with ls-remote, added, the branch pushed (init --remote URL)")
    def sync_remote(action: RemoteRequest) -> dict:
        from ..sync.setup import connect, public_warning
        with pool.borrow() as registry:
            result = connect(registry, action.url, action.name)
        pool.reload()
        if result["remote"]["public"]:
            result["warning"] = public_warning(result["remote"])
        if not result["remote"]["pushed"]:
            raise Unconfirmed(f"remote {action.name} added, but the branch was not pushed: "
                              f"{result['remote']['error']}", details=result)
        return result

    return app
