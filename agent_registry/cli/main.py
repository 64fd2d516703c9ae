"""The ``agent-registry`` command: a thin click layer over :mod:`agent_registry.core.registry`.

Each command parses its arguments, calls one library function, and prints the result:
a short human text, or with ``--json`` the result as one JSON document on stdout.  Every
failure is a RegistryError, turned into a one-line message and an exit code in one place
(:func:`agent_registry.cli.console.report`, called by :func:`main`).  Feature areas (sync,
hooks, wiki, dashboard …) live in their own modules, imported only when their command
runs, so a hot command pays only for itself.

Over 400 lines: the core commands (setup, sessions, locks, status) with their help
texts, one short function each; a split would only scatter the command tree.
"""
from __future__ import annotations

import importlib
import json
import os
import sys

import click

from . import output
from .console import (BY_SESSION, SESSION_ENV, changed_elsewhere, lock_arguments, new_session_id,
                      report, resolve_session)
from .context import Output, pass_out
from .reports import heartbeat_report, layout_doc, layout_text, status_report
from .table import render_table
from ..errors import BAD_INPUT, BadInput, RegistryError
from .output import age, local_time

# name -> "module:attribute" of commands that live outside this file
LAZY_COMMANDS: dict[str, str] = {
    "sync": "agent_registry.cli.sync:sync",
    "gc": "agent_registry.cli.sync:gc",
    "shard": "agent_registry.cli.shard:shard",
    "guard": "agent_registry.cli.guard:guard",
    "hooks": "agent_registry.cli.guard:hooks",
    "server": "agent_registry.cli.server:server",
    "ci": "agent_registry.cli.server:ci",
    "harness": "agent_registry.cli.harness:harness",
    "end": "agent_registry.wiki.cli:end",
    "wiki": "agent_registry.wiki.cli:wiki",
    "import-home": "agent_registry.wiki.cli:import_home",
    "dashboard": "agent_registry.dashboard.cli:dashboard",
    "doctor": "agent_registry.cli.doctor:doctor",
    "send": "agent_registry.cli.messages:send",
    "inbox": "agent_registry.cli.messages:inbox",
    "ack": "agent_registry.cli.messages:ack",
    "thread": "agent_registry.cli.messages:thread",
    "handoff": "agent_registry.cli.messages:handoff",
    "uninstall": "agent_registry.cli.uninstall:uninstall",
    "completion": "agent_registry.cli.completion:completion",
    "repos": "agent_registry.cli.repos:repos",
    "overlap": "agent_registry.cli.overlap:overlap",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx):
        return sorted(set(super().list_commands(ctx)) | set(LAZY_COMMANDS))

    def get_command(self, ctx, name):
        if name in LAZY_COMMANDS and name not in self.commands:
            module, attr = LAZY_COMMANDS[name].split(":")
            self.add_command(getattr(importlib.import_module(module), attr), name)
        return super().get_command(ctx, name)


# no envvar here: lock_arguments must tell a --session given from the default
def not_blank(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """An option given with an empty or blank value is bad input (exit 2), never taken
    for the option left out (a script's unset variable)."""
    if value is not None and not value.strip():
        raise click.BadParameter("empty value", ctx=ctx, param=param)
    return value


def complete_sessions(ctx: click.Context, param: click.Parameter, incomplete: str) -> list:
    """Shell completion of a session id: the live ones (cli/completion.py)."""
    from .completion import session_ids
    return session_ids(ctx, param, incomplete)


def complete_held(ctx: click.Context, param: click.Parameter, incomplete: str) -> list:
    """Shell completion of `lock release`'s paths: those the session holds."""
    from .completion import held_paths
    return held_paths(ctx, param, incomplete)


def set_no_color(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value:
        from .console import no_color
        no_color()


session_option = click.option("--session", "--session-id", "sid", metavar="SID",
                              shell_complete=complete_sessions,
                              help=f"Session id (default: ${SESSION_ENV}).")
sid_argument = click.argument("sid", required=False, shell_complete=complete_sessions)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--json", "json_mode", is_flag=True, help="Print the result as JSON on stdout.")
@click.option("--quiet", "-q", is_flag=True, help="Print nothing on success.")
@click.option("-C", "directory", default=".", metavar="PATH",
              help="Run as if started in PATH (like git -C).")
@click.option("--no-color", is_flag=True, expose_value=False, is_eager=True,
              callback=set_no_color,
              help="No colour (also: a non-empty $NO_COLOR); colour is used on a terminal only.")
@click.version_option(package_name="agent-registry")
@click.pass_context
def cli(ctx: click.Context, json_mode: bool, quiet: bool, directory: str) -> None:
    """Coordinate AI coding agents working on one git repository.

    State lives on the orphan branch `agent-registry` of this repository. Exit codes:
    0 done, 1 refused or not found, 2 bad input, 3 done locally but not confirmed by
    the remote, 70 an internal error (a bug; the line names its traceback's file).
    """
    ctx.obj = Output(json_mode, quiet, directory)
    ctx.call_on_close(ctx.obj.close)


# -- setup ----------------------------------------------------------------------------

@cli.command()
@click.option("--branch", metavar="NAME", callback=not_blank,
              help="Use NAME as the registry branch (saved in git config).")
@click.option("--remote", metavar="NAME|URL", callback=not_blank,
              help="Sync with remote NAME (saved in git config; `none` turns sync off), or "
                   "with the repository at URL: checked with `git ls-remote`, added as a "
                   "remote (see --remote-name), the branch pushed; warns when an http(s) "
                   "URL is publicly readable.")
@click.option("--remote-name", metavar="NAME", callback=not_blank,
              help="The name to add a --remote URL under (default: origin).")
@click.option("--hooks", "with_hooks", is_flag=True,
              help="Also install the git hooks (as `hooks install`).")
@click.option("--shards", metavar="N",
              help="How many lock shards a new registry gets: 1 to 64 (default: git "
                   "config agent-registry.shards, else 16). A registry of an older layout "
                   "is converted by its first write.")
@pass_out
def init(out: Output, branch: str | None, remote: str | None, remote_name: str | None,
         with_hooks: bool = False, shards: str | None = None) -> None:
    """Create the registry branch (idempotent; never touches the working tree).

    A new registry is made in lock shards with clone refs (layout format 3, 16 shards:
    claims of unrelated paths, heartbeats and diary lines do not queue behind each
    other through a remote); `--shards N` sets their count (1 to 64). See docs/shards.md.
    """
    from ..sync import Registry  # the face's class: it remembers the repository
    from ..sync.convert import shard_count
    count = None if shards is None else shard_count(shards, "--shards")
    repo = out.registry.repo
    named = bool(remote) and (remote.lower() == "none" or not repo.git(
        "remote", "get-url", "--", remote, check=False).returncode)
    url = remote if remote and not named else None
    if url is not None:
        from ..sync.setup import looks_like_url
        if not looks_like_url(url):
            raise BadInput(f"no remote named {remote!r} (see `git remote -v`), and not a URL")
    elif remote_name:
        raise BadInput("--remote-name names a remote added from a --remote URL")
    if branch:
        Registry(repo, branch=branch, config=out.registry.config)  # validates the name
        repo.git("config", "agent-registry.branch", branch)
    if named:
        repo.git("config", "agent-registry.remote", remote)
    if branch or named:
        out._registry = Registry(repo)
    if url is not None:
        return _init_with_url(out, url, remote_name or "origin", with_hooks, count)
    had = repo.read_ref(out.registry.ref) is not None
    result = out.registry.init(count)
    result["layout"] = layout_doc(out.registry)
    result.setdefault("pushed", None)
    result["adopted"] = None if had or result["created"] else out.registry.remote
    text = f"{'created' if result['created'] else 'already have'} branch {result['branch']}" \
        f" ({layout_text(result['layout'])})"
    if result["pushed"]:  # the remote every clone shares changed: say so
        text += f", pushed to {result['pushed']['remote']} ({result['pushed']['refs']} branches)"
    elif result["adopted"]:
        text = f"adopted branch {result['branch']} from {result['adopted']} " \
            f"({layout_text(result['layout'])})"
    if with_hooks:
        from ..enforce.hooks import install
        result["hooks"] = install(repo.info)
        text += f"\ninstalled git hooks in {result['hooks']['hooks_dir']}"
    out.emit(result, text)


def _init_with_url(out: Output, url: str, name: str, with_hooks: bool,
                   shards: int | None) -> None:
    """``init --remote URL``: add, check, push (agent_registry.sync.setup); exit 3 when
    the branch could not be pushed (a read-only URL), as a change left unconfirmed."""
    from ..errors import Unconfirmed
    from ..sync.setup import connect, public_warning
    result = connect(out.registry, url, name, shards)
    remote = result["remote"]
    if remote["public"]:
        out.warn(public_warning(remote))
    if with_hooks:
        from ..enforce.hooks import install
        result["hooks"] = install(out.registry.repo.info)
    if not remote["pushed"]:
        raise Unconfirmed(f"remote {name} ({remote['url']}) added, but {result['branch']} "
                          f"was not pushed: {remote['error']}", details=result)
    out.emit(result, f"{'created' if result['created'] else 'already have'} branch "
                     f"{result['branch']}, pushed to {name} ({remote['url']})"
             + (f"\ninstalled git hooks in {result['hooks']['hooks_dir']}" if with_hooks else ""))


# -- sessions -------------------------------------------------------------------------

def owner_text(s) -> str:
    if s.vouched:
        return f"pid {s.pid} ({s.owner})"
    return f"pid {s.pid} (not vouched for)" if s.pid else "no owner process"


def session_text(s) -> str:
    lines = [f"{s.id}  {s.status}  {s.provider} {s.ai_version}".rstrip()]
    for label, value in (("working on", s.working_on), ("project", s.project),
                         ("branch", s.git_branch), ("host", f"{s.host}, {owner_text(s)}"),
                         ("registered", local_time(s.registered_at)),
                         ("heartbeat", local_time(s.heartbeat_at)),
                         ("ended", local_time(s.finished_at)),
                         ("todo past", ", ".join(s.todo_past)),
                         ("todo present", ", ".join(s.todo_present)),
                         ("todo future", ", ".join(s.todo_future)),
                         ("space", ", ".join(s.space)), ("locks", ", ".join(s.locks)),
                         ("tags", ", ".join(s.tags)),
                         ("issues", s.issues), ("handoff", s.handoff)):
        if value:
            lines.append(f"  {label + ':':<14}{value}")
    return "\n".join(lines)


@cli.command(context_settings={"ignore_unknown_options": False})
@click.argument("positional", nargs=-1, metavar="[SID [PROVIDER AI_VERSION WORKING_ON]]")
@click.option("--provider", help="Agent or tool: Claude, Codex, Gemini, Kimi, human … "
                                 "(a resume keeps the session's).")
@click.option("--ai-version", default=None, help="Model or tool version.")
@click.option("--working-on", default=None, help="What this session works on.")
@click.option("--space", default=None, metavar="CSV", help="Paths this session expects to touch.")
@click.option("--todo-present", default=None, metavar="CSV", help="Current to-do items.")
@click.option("--pid", type=int, default=None,
              help="The agent's own process, which lives exactly as long as the session "
                   "(default: $AGENT_REGISTRY_PID, else an ancestor that is a known agent "
                   "runtime, else none: heartbeats and the TTL decide).")
@click.option("--notify-started", metavar="TEXT", default="",
              help="The message `watch` sends when this session starts (instead of its pool's).")
@click.option("--tag", "tags", metavar="TAG", multiple=True,
              help="A tag `send --to-tag TAG` reaches this session by (repeatable).")
@click.option("--room", "rooms", metavar="room:NAME", multiple=True,
              help="Join a room shared with other repositories through the hub "
                   "(git config agent-registry.hub URL; repeatable).")
@click.option("--resume", is_flag=True,
              help="Take over the live session SID (an agent restarted into its own "
                   "session): it is bound to this process, its locks stay with it.")
@pass_out
def register(out: Output, positional: tuple, provider, ai_version, working_on, space,
             todo_present, pid, notify_started, tags, rooms, resume) -> None:
    """Register a session (also: register SID PROVIDER AI_VERSION WORKING_ON).

    Without SID a new id is made up as <provider>-<unix time>-<random> and printed, to
    export as AGENT_REGISTRY_SESSION ($AGENT_REGISTRY_SESSION is never reused). A SID of
    a live session is refused (exit 1) unless this is its vouched-for owner (--pid the
    same process) or --resume is given. A session registered again (resumed, or by its
    owner) keeps every field not given: its provider, working-on, space, tags, rooms.
    Which process the session is bound to, and why, is said on stderr, followed by the
    messages and handoffs waiting for it (sent to it, its tags, its rooms, or paths in
    its --space).
    """
    if len(positional) not in (0, 1, 4):
        raise BadInput("give SID alone, or SID PROVIDER AI_VERSION WORKING_ON")
    sid = resolve_session(positional[0], required=False) if positional else None
    if resume and not sid:
        raise BadInput("--resume takes the SID of the session to resume "
                       f"(register \"${SESSION_ENV}\" --resume …)")
    if len(positional) == 4:
        provider = provider or positional[1]
        ai_version = ai_version if ai_version is not None else positional[2]
        working_on = working_on if working_on is not None else positional[3]
    if (provider is None and not resume) or (provider is not None and not provider.strip()):
        raise BadInput("--provider is required")
    exported = os.environ.get(SESSION_ENV)
    if not sid and exported:
        out.notice([f"agent-registry: a new session: ${SESSION_ENV} ({exported}) is not "
                    "reused (to come back to it: register \"$" + SESSION_ENV + "\" --resume)"])
    sid = sid or new_session_id(provider)
    if rooms:
        from ..sync.rooms import open_hub, validate_room
        for room in rooms:
            if not validate_room(room).startswith("room:"):
                raise BadInput(f"{room}: a repository's room is joined by working in it; "
                               "--room takes room:<name>")
        open_hub(out.registry).close()  # no hub, or an unusable one: nothing registered
    session = out.registry.register(sid, provider=provider, ai_version=ai_version,
                                     working_on=working_on, space=space,
                                     todo_present=todo_present, pid=pid,
                                     notify_started=notify_started,
                                     tags=list(tags) + list(rooms), resume=resume)
    bound = out.registry.bound
    from ..branch.mailbox import waiting_text
    from ..sync.rooms import join, refresh_messages, waiting
    refresh_messages(out.registry)  # what other clones sent it meanwhile
    joined = join(out.registry, session.id, list(rooms)) if rooms else {}
    waits = waiting(out.registry, session)  # its rooms' too, on the hub
    out.notice([f"agent-registry: {owner_line(bound)}"] + waiting_text(waits))
    out.emit({"session": session.to_dict(), "bound_to": bound, "waiting": waits,
              **({"rooms": joined} if joined else {}), **out.registry.unpushed}, session.id)


def owner_line(bound: dict) -> str:
    """Which process a registered session is bound to, and why (or why none)."""
    if bound["pid"] is None:
        return f"bound to no process: {bound['why']}"
    return f"bound to pid {bound['pid']} ({bound['cmdline'] or '?'}): {bound['why']}"


@cli.command()
@sid_argument
@click.option("--working-on")
@click.option("--todo-past", metavar="CSV")
@click.option("--todo-present", metavar="CSV")
@click.option("--todo-future", metavar="CSV")
@click.option("--space", metavar="CSV")
@click.option("--issues", metavar="TEXT")
@click.option("--status", type=click.Choice(["OnWorking", "Finished", "Stop", "Killed"]))
@pass_out
def update(out: Output, sid, **fields) -> None:
    """Update fields of a live session (lists are comma-separated)."""
    session = out.registry.update(resolve_session(sid), **fields)
    out.emit({"session": session.to_dict()}, f"updated {session.id}")


@cli.command()
@sid_argument
@click.option("--notify-executed", metavar="TEXT", default="",
              help="The message `watch` sends for this ending (instead of its pool's).")
@pass_out
def finish(out: Output, sid, notify_executed) -> None:
    """Mark a session Finished and release every lock it holds, in one commit."""
    result = out.registry.finish(resolve_session(sid), notify_executed=notify_executed)
    from ..sync.rooms import mirror
    mirror(out.registry, result["session"]["id"], "finish")
    s = result["session"]
    note = " (had already ended)" if result.get("already") else \
        f", released {len(result['released'])} lock(s)"
    out.emit(result, f"{s['id']} {s['status']}{note}")


@cli.group()
def context() -> None:
    """The session diary (contexts/<sid>.md on the branch, or on this clone's own branch
    in the lock-shard layout)."""


@context.command("log")
@click.argument("words", nargs=-1, required=True, metavar="[SID] TEXT")
@click.option("--session", "session_opt", metavar="SID",
              help="The session (default: $AGENT_REGISTRY_SESSION).")
@pass_out
def context_log(out: Output, words: tuple[str, ...], session_opt: str | None) -> None:
    """Append a timestamped line to the session's diary: `context log SID TEXT`, or
    `context log TEXT` with --session or $AGENT_REGISTRY_SESSION naming the session."""
    from ..errors import BadInput
    if len(words) > 2 or (len(words) == 2 and session_opt):
        raise BadInput("context log takes [SID] TEXT: quote the text as one argument")
    sid, text = (words[0], words[1]) if len(words) == 2 else \
        (resolve_session(session_opt, given_by="SID TEXT or --session SID"), words[0])
    result = out.registry.context_log(sid, text)
    out.emit({**result, **out.registry.unpushed}, result["line"])


@context.command("show")
@sid_argument
@pass_out
def context_show(out: Output, sid) -> None:
    """Print the session's diary as the branch holds it (read back what `context log`
    wrote). Exit 1 for an unknown session or one with no diary yet."""
    result = out.registry.diary(resolve_session(sid))
    out.emit(result, result["diary"].rstrip("\n"))


@cli.command()
@sid_argument
@pass_out
def show(out: Output, sid) -> None:
    """Show one session in full (default: every live session)."""
    from ..sync.fresh import freshen, said
    view = freshen(out.registry)  # fetched first when older than agent-registry.readFreshness
    sessions = [out.registry.session(sid)] if sid is not None else out.registry.sessions()
    said(out.registry)
    out.emit({"sessions": [s.to_dict() for s in sessions], **view},
             "\n\n".join(session_text(s) for s in sessions) or "no live sessions")


@cli.command()
@click.option("--status", "status_filter", metavar="S",
              help="Only sessions with this status (OnWorking, Finished, Stop, Killed; any case).")
@click.option("--provider", metavar="P", help="Only this provider (case-insensitive).")
@click.option("--project", metavar="P", help="Only projects whose path contains P.")
@click.option("--all", "show_all", is_flag=True, help="Include ended sessions.")
@click.option("--remote", "remote_url", metavar="URL", callback=not_blank,
              help="Read sessions and locks straight from a remote, without a clone.")
@click.option("--room", metavar="ROOM", callback=not_blank,
              help="Who is in ROOM (room:<name> through the hub, or repo:<name>), from "
                   "which repository, present or away.")
@click.option("--repos", "every_repo", is_flag=True,
              help="The sessions of every repository on your list (`repos list`), with a "
                   "REPOSITORY column; each read as its clone has it, nothing fetched.")
@pass_out
def status(out: Output, status_filter, provider, project, show_all, remote_url, room,
           every_repo=False) -> None:
    """Table of sessions (default: live ones) and the sync state."""
    if every_repo:
        if remote_url or room:
            raise BadInput("--repos reads every repository on your list: not with "
                           "--remote or --room")
        from .repos import status_repos
        return status_repos(out, include_ended=show_all, status=status_filter,
                            provider=provider, project=project)
    if remote_url:
        return remote_status(out, remote_url)
    if room:
        return room_status(out, room)
    doc, text = status_report(out.registry, show_all=show_all, status_filter=status_filter,
                              provider=provider, project=project)
    out.emit(doc, text)


def room_status(out: Output, room: str) -> None:
    from ..sync.rooms import presence
    found = presence(out.registry, room)
    rows = [[s["id"], s["repo"], s["provider"], s["working_on"],
             "present" if s["present"] else "away", local_time(s["heartbeat_at"])]
            for s in found["sessions"]]
    text = (render_table(["SESSION", "REPO", "PROVIDER", "WORKING ON", "PRESENCE", "HEARTBEAT"],
                         rows) if rows else f"nobody in {room}")
    out.emit(found, text)


def remote_status(out: Output, url: str) -> None:
    from ..sync.remote import remote_snapshot
    snap = remote_snapshot(url, where=out.directory)
    rows = [[s["id"], s["provider"], s["project"], s["working_on"], s["status"], s["host"]]
            for s in snap["sessions"]]
    locks = [[l["path"], l["mode"], l["owner"], "stale" if l["stale_reason"] else "fresh"]
             for l in snap["locks"]]
    text = (render_table(["SESSION", "PROVIDER", "PROJECT", "WORKING ON", "STATUS", "HOST"], rows)
            if rows else "no live sessions") + "\n\n" + \
        (render_table(["PATH", "MODE", "OWNER", "STATE"], locks) if locks else "no locks") + \
        f"\nread from {url} at {snap['tip'][:12]}"
    out.emit(snap, text)


@cli.command()
@pass_out
def cleanup(out: Output) -> None:
    """Stop zombie sessions (dead process, or no heartbeat past the TTL) and free their locks."""
    result = out.registry.cleanup()
    text = "\n".join(f"stopped {s['session']}: {s['reason']} (released {len(s['released'])})"
                     for s in result["stopped"]) or "no zombie sessions"
    out.emit(result, text)


@cli.command()
@click.argument("sid", shell_complete=complete_sessions)
@click.option("--force", is_flag=True, help="SIGKILL at once instead of SIGTERM then SIGKILL after 5 s.")
@pass_out
def kill(out: Output, sid, force) -> None:
    """End a session as Killed: signal its agent process if it runs here and was vouched
    for, else stop it logically and say why.

    Never signals a process it cannot vouch for: an owner nobody vouched for, init, a
    terminal multiplexer, sshd, a terminal emulator or a login shell."""
    result = out.registry.kill(sid, force=force)
    how = result["signal"] or f"logical stop, no signal: {result['not_signalled']}"
    out.emit(result, f"{sid} Killed ({how}), released {len(result['released'])} lock(s)")


# -- locks ----------------------------------------------------------------------------

@cli.group()
def lock() -> None:
    """Claim, release and inspect locks on files, directories (dir/) and globs."""


@lock.command("acquire")
@click.argument("paths", nargs=-1, required=True, metavar="PATH... [SID]")
@session_option
@click.option("--ttl", type=int, default=600, show_default=True,
              help="Seconds without a heartbeat before the lock goes stale.")
@click.option("--shared", is_flag=True, help="Shared mode: many readers, no writer.")
@click.option("--generation", "generations", multiple=True, metavar="TOKEN",
              help="Renew only the claim of this generation (as acquire printed it; one per "
                   "PATH, in order): refused when the lock was taken over since.")
@click.option("--reason", metavar="TEXT",
              help="Why you hold it: stored with the claim, shown by lock list, on "
                   "registry.md and to whoever meets the lock.")
@pass_out
def lock_acquire(out: Output, paths, sid, ttl, shared, generations=(),
                 reason: str | None = None) -> None:
    """Claim every PATH, or none of them (exit 1 naming the owner).

    A last argument naming a registered session is the session (the predecessor's
    `lock acquire PATH SID`); an argument naming a session and no file is refused.
    A symlink and its target are one lock."""
    sid, paths = lock_arguments(out.registry, paths, sid)
    sid = resolve_session(sid, given_by=BY_SESSION)
    result = out.registry.claim(sid, paths, ttl=ttl, shared=shared, generations=generations,
                                reason=reason)
    out.notice(output.takeover_lines(result) + changed_elsewhere(out.registry, sid, result))
    out.emit(result, output.claim_text(result))


@lock.command("release")
@click.argument("paths", nargs=-1, required=True, metavar="PATH... [SID]",
                shell_complete=complete_held)
@session_option
@click.option("--generation", "generations", multiple=True, metavar="TOKEN",
              help="Release only the claim of this generation (one per PATH, in order): "
                   "refused when the lock was taken over since.")
@pass_out
def lock_release(out: Output, paths, sid, generations=()) -> None:
    """Release PATHs held by the session (refused if another session holds one)."""
    sid, paths = lock_arguments(out.registry, paths, sid)
    result = out.registry.release(resolve_session(sid, given_by=BY_SESSION), paths,
                                  generations=generations)
    out.emit(result, output.claim_text(result))


@lock.command("check")
@click.argument("paths", nargs=-1, required=True, metavar="PATH... [SID]")
@session_option
@pass_out
def lock_check(out: Output, paths, sid) -> None:
    """Per PATH: free, locked (owner, age), locked-by-me or stale.

    Exit 1 when another live session holds one of the paths, 0 when all are free,
    yours or stale: `if agent-registry lock check PATH...; then edit; fi`."""
    sid, paths = lock_arguments(out.registry, paths, sid)
    from ..sync.fresh import checked  # fetched first when older than readFreshness
    results, view = checked(out.registry, paths, sid)
    out.emit({"paths": results, **view}, output.check_text(results))
    click.get_current_context().exit(output.check_code(results))


@lock.command("list")
@click.option("--repos", "every_repo", is_flag=True,
              help="The locks of every repository on your list (`repos list`), with a "
                   "REPOSITORY column; each read as its clone has it, nothing fetched.")
@pass_out
def lock_list(out: Output, every_repo: bool = False) -> None:
    """Every lock held by a live session."""
    if every_repo:
        from .repos import lock_list_repos
        return lock_list_repos(out)
    from ..sync.fresh import freshen, said
    view = freshen(out.registry)  # fetched first when older than agent-registry.readFreshness
    locks = out.registry.locks()
    said(out.registry)
    rows = [[l["path"], l["mode"], l["owner"], age(l["age_seconds"]),
             ("stale" if l["stale_reason"] else "fresh")
             + ("" if l["confirmed"] else ", unconfirmed"), l["reason"]] for l in locks]
    out.emit({"locks": locks, **view},
             render_table(["PATH", "MODE", "OWNER", "AGE", "STATE", "REASON"], rows)
             if rows else "no locks")


@lock.command("heartbeat")
@click.argument("args", nargs=-1, metavar="[PATH...] [SID]")
@session_option
@pass_out
def lock_heartbeat(out: Output, args, sid) -> None:
    """Renew the session and every lock it holds, in one commit.

    With PATHs (the predecessor's `lock heartbeat PATH SID`): exit 1 unless the
    session holds each of them."""
    out.emit(*heartbeat_report(out.registry, args, sid))


@lock.command("heartbeat-loop")
@click.argument("args", nargs=-1, metavar="[PATH...] [SID [SECONDS]]")
@session_option
@click.option("--interval", type=click.FloatRange(min=1), default=300, show_default=True,
              help="Seconds between heartbeats (keep it under half the TTL).")
@pass_out
def lock_heartbeat_loop(out: Output, args, sid, interval) -> None:
    """Heartbeat until the session ends or its process dies (run it in the background).

    The predecessor's `lock heartbeat-loop PATH SID [SECONDS]` works too: SECONDS is the
    interval, and the loop also stops once the session no longer holds PATH."""
    from ..branch.sessionids import looks_like_session_id
    args = list(args)
    if len(args) >= 2 and args[-1].replace(".", "", 1).isdigit() and \
            (looks_like_session_id(args[-2]) or out.registry.session_names(args[-2:-1])):
        interval = float(args.pop())
        if interval < 1:
            raise BadInput(f"SECONDS {interval:g}: at least 1")
    sid, paths = lock_arguments(out.registry, args, sid, need_path=False)
    sid = resolve_session(sid, given_by=BY_SESSION)
    # the start line once the first beat landed: an unknown session or a path it does not
    # hold is the one line the command prints
    why = out.registry.heartbeat_loop(sid, interval, paths=paths, started=lambda: out.notice([
        f"agent-registry: heartbeat-loop: renewing {sid} and its locks every {interval:g} s "
        f"until the session ends or its process dies; stop it with Ctrl-C or "
        f"`kill {os.getpid()}`"]))
    out.emit({"stopped": why}, f"heartbeat-loop stopped: {why}")


@lock.command("force-release")
@click.argument("path")
@click.option("--force", is_flag=True, help="Required to free a lock whose owner is alive.")
@click.option("--reason", required=True, help="Why; recorded in the registry commit.")
@click.option("--by", default=None, help="Who frees it (default: $AGENT_REGISTRY_SESSION or $USER).")
@pass_out
def lock_force_release(out: Output, path, force, reason, by) -> None:
    """Free another session's lock (a fresh one only with --force), recording who and why;
    each holder still live gets a high-importance message naming who took it and why."""
    author = by or os.environ.get(SESSION_ENV) or os.environ.get("USER") or "a person"
    from ..core.takeover import tell_holders  # the holder hears who took it and why
    result = tell_holders(out.registry, out.registry.force_release(
        path, reason=reason, by=author, force=force))
    told = "".join(f"; told {t['session']} ({t['id']})" for t in result["told"])
    out.emit(result, f"freed {result['path']} (held by {', '.join(result['previous'])}){told}")


# -- watch ----------------------------------------------------------------------------

@cli.command()
@click.option("--interval", type=click.FloatRange(min=0.1), default=60, show_default=True,
              metavar="SECONDS", help="Seconds between passes (each fetches when sync is on).")
@click.option("--idle-minutes", type=click.FloatRange(min=0, min_open=True), default=60,
              show_default=True, metavar="M",
              help="Notify a live session with no heartbeat and no commit for M minutes.")
@click.option("--once", is_flag=True,
              help="One pass, then exit (for cron): also retries every pending message now.")
@pass_out
def watch(out: Output, interval: float, idle_minutes: float, once: bool) -> None:
    """Notify when a session starts, finishes (executed), is stopped, or sits idle.

    Each event is sent once per session (idle: once per idle spell) to the Apprise URLs
    in $AGENT_REGISTRY_NOTIFY_URLS (or a git-ignored .env) and `git config
    agent-registry.notify`. The first run records the registry and sends nothing for
    history. A failed delivery is kept and retried with backoff; --once exits 3 when
    one is still pending. Needs the notify extra: pip install '.[notify]' from a clone
    (docs/watch.md)."""
    from ..errors import Unconfirmed
    from ..watch.follow import pass_lines
    from ..watch.follow import watch as run_watch
    last: dict = {}

    def report(result: dict) -> None:
        if not once and not last:  # after the first pass: the targets were found
            out.notice([f"agent-registry: watch: checking the registry every {interval:g} s, "
                        f"notifying session starts, ends, stops and {idle_minutes:g} idle "
                        f"minutes; stop it with Ctrl-C or `kill {os.getpid()}`"])
        last.update(result)
        if out.json and once and result["failed"]:
            return  # the error document below carries the pass
        if out.json:
            click.echo(json.dumps(result, ensure_ascii=False))
        elif not out.quiet:
            for line in pass_lines(result):
                click.echo(line)

    run_watch(out.registry, interval=interval, idle_minutes=idle_minutes, once=once,
              report=report)
    if last["failed"]:
        raise Unconfirmed(f"{len(last['failed'])} message(s) not delivered yet; kept for "
                          "the next pass", details={"pass": last})


# -- MCP ------------------------------------------------------------------------------

@cli.command()
@click.option("--heartbeat", "interval", type=click.FloatRange(min=1), default=120,
              show_default=True, metavar="SECONDS",
              help="Seconds between heartbeats of the sessions this server registered.")
@pass_out
def mcp(out: Output, interval: float) -> None:
    """Serve this repository's registry over MCP on stdin/stdout, for an agent harness.

    Tools: register, status, show, lock_acquire, lock_release, lock_check, heartbeat,
    context_log, send, room_who, inbox, ack, thread, finish, end, wiki_query, wiki_show;
    resources registry://status,
    registry://locks, registry://registry.md. Sessions it registers are bound to its
    parent (the harness) and heartbeated while it runs. Needs the mcp extra:
    pip install '.[mcp]' from a clone (docs/mcp.md)."""
    from ..store.extras import needed, require
    try:
        require("mcp")  # every module of the extra: one missing is one line, no traceback
        from ..mcp.server import serve
    except ImportError as exc:
        raise needed("mcp", exc) from None
    serve(out.registry, interval)


SHORT_HELP = """\
agent-registry: coordinate AI coding agents working on one git repository.

  agent-registry register --provider NAME   start a session (prints its id)
  agent-registry status                     who is working on what
  agent-registry lock acquire PATH...       claim files before editing (exit 1: held)
  agent-registry lock release PATH...       let them go
  agent-registry end --what TEXT            finish, with a wiki entry
  agent-registry doctor                     is this clone ready for agents?

Every command: agent-registry --help; one command: agent-registry COMMAND --help."""


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the CLI and map every failure to one line and an exit code."""
    args = argv if argv is not None else sys.argv[1:]
    if not [a for a in args if a != "--no-color"] and \
            "_AGENT_REGISTRY_COMPLETE" not in os.environ:
        click.echo(SHORT_HELP)  # a bare `agent-registry`: short help, exit 0
        return 0
    json_mode = "--json" in args
    try:
        # a command's ctx.exit(code) (lock check's exit 1) comes back as the return value
        code = cli.main(args=argv, prog_name="agent-registry", standalone_mode=False)
    except (RegistryError, OSError) as exc:
        return report(exc, json_mode, lambda text, err: click.echo(text, err=err))
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        return 1
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.ClickException as exc:
        # usage errors too are one line (and a JSON document with --json), exit 2
        where = getattr(getattr(exc, "ctx", None), "command_path", None) or "agent-registry"
        message = exc.format_message()
        if json_mode:
            click.echo(json.dumps({"error": {"code": BAD_INPUT, "message": message}},
                                  indent=2, ensure_ascii=False))
        click.echo(f"{where}: {message} (see --help)", err=True)
        return BAD_INPUT
    except KeyboardInterrupt:
        return 130
    return code if isinstance(code, int) else 0


if __name__ == "__main__":
    sys.exit(main())
