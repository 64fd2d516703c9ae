"""The one decision every harness hook asks ("may this session write these paths now?")
and the session life cycle behind the hooks, harness-agnostic.

Each harness adapter (claude.py, codex.py, gemini.py, cursor.py, opencode.py) reads its
own event JSON into a :class:`Ctx` and the paths a tool call would write, calls the
functions here, and answers in its own format:

- :func:`start` registers session ``<harness>-<native id>`` (provider named after the
  harness), bound to the harness process (the hook passes ``--pid $PPID``), and
  returns the lines for the agent's context;
- :func:`may_write` denies a path another live session holds, naming the holder, what
  it works on and how to reach it; with ``auto_claim`` it claims free ones first;
- :func:`prompt` returns the messages and handoffs waiting, each once;
- :func:`turn_end` renews the heartbeat and, when waking, hands over what waits, at
  most N times per turn (counted per native session, reset by :func:`prompt`);
- :func:`end` finishes the session.

The native id -> session id map is remembered under the common dir
(``agent-registry/<harness>/<native id>``), so a resumed conversation whose session
ended gets a fresh id once and keeps it.
"""
from __future__ import annotations

from ..errors import NotFound, Refused, RegistryError, Unconfirmed, os_failure
from ..store.layout import RepoInfo
from .ctx import ALLOW_ENV, Ctx, Decision
from . import ids
from .where import repo_of, session_for

DEFAULT_WAKES = 3


# -- the session a native id stands for -----------------------------------------------

def state_file(info: RepoInfo, ctx: Ctx):
    """The file (a pathlib.Path) that remembers the session id of this native one."""
    from pathlib import Path
    return Path(state_path(info, ctx))


def state_path(info: RepoInfo, ctx: Ctx) -> str:
    return ids.state_path(info.common_dir, ctx.harness, ctx.native_id)


def _remember(info: RepoInfo, ctx: Ctx, sid: str) -> None:
    path = state_file(info, ctx)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(sid + "\n")


def pid_from(ctx: Ctx) -> str:
    return f"the {ctx.product} hook ($PPID of its shell: {ctx.product} itself)"


class _opened:
    """(repository, registry, session id) for a hook acting on its session, closed after
    (a class: contextlib is one more import for every hook)."""

    def __init__(self, ctx: Ctx, info: RepoInfo | None = None) -> None:
        self.ctx, self.info = ctx, info  # info: the repository, when the caller found it

    def __enter__(self):
        from ..sync import Registry
        info = self.info or repo_of(self.ctx)
        self.registry = Registry.open(info.toplevel or info.git_dir)
        try:
            return info, self.registry.__enter__(), session_for(info, self.ctx)
        except BaseException:
            self.registry.close()
            raise

    def __exit__(self, *exc) -> None:
        self.registry.__exit__(*exc)


def unknown(registry, sid: str, exc: RegistryError) -> str:
    """*exc*'s message about *sid*, naming the live ids likeliest meant: the core's
    "unknown session" errors already do (branch/sessionids, as the CLI and the MCP
    server); an ended session's refusal does not, so the suggestion is added here."""
    if "closest" in exc.details:
        return exc.message
    from ..branch.sessionids import suggestion
    try:
        live = [s.id for s in registry.sessions()]
    except RegistryError:
        return exc.message
    return f"{exc.message}; {suggestion(sid, live)}"


# -- the life cycle -------------------------------------------------------------------

def start(ctx: Ctx, pid: int | None, *, export=None,
          memory: bool = True) -> tuple[str, list[str]]:
    """Register the harness's session; (its id, the lines for the agent's context).
    *export(sid)* makes the id the default of the agent's shell where the harness lets
    a hook do that (Claude Code's env file), and says whether it did.  With *memory*,
    the few wiki entries most relevant to its work come last (harness/memory.py)."""
    with _opened(ctx) as (info, registry, sid):
        fields = dict(provider=ctx.provider, ai_version=ctx.model, pid=pid, pid_from=pid_from(ctx))
        try:
            registry.register(sid, working_on=f"{ctx.product} session ({ctx.source or 'startup'})",
                              **fields)
        except Refused:  # this id has ended (a resumed conversation), or another live
            # process of the harness holds it (the conversation resumed twice): a fresh one
            sid = f"{sid.split('+')[0]}+{int(registry.clock())}"
            registry.register(sid, working_on=f"{ctx.product} session (resumed)", **fields)
        _remember(info, ctx, sid)
        _wakes_file(info, ctx).unlink(missing_ok=True)
        live = registry.sessions()
        others = [s for s in live if s.id != sid]
        stale = {(lock["owner"], lock["path"]): lock["stale_reason"]
                 for lock in registry.locks() if lock["stale_reason"]}
        from ..sync.rooms import refresh_messages
        refresh_messages(registry)  # register synced the registry branch, not the messages'
        news = _unseen(registry, info, ctx, sid)
        from .memory import recalled
        told = recalled(registry, ctx.product, live, sid) if memory else []
    exported = bool(export(sid)) if export else False
    how = "exported as AGENT_REGISTRY_SESSION" if exported else \
        f"pass --session {sid} to agent-registry commands"
    lines = [f"agent-registry: you are session {sid} ({how}). Claim paths before editing "
             f"them (agent-registry lock acquire --session {sid} PATH); an edit of a path "
             "another live session holds is denied. Ask a session with "
             f"agent-registry send --to SID --from {sid} 'TEXT'."]
    for other in others[:10]:
        lines.append(f"- {other.id} ({other.provider}) works on {other.working_on!r}"
                     f"{_holdings(other, stale)}")
    return sid, lines + news + told


def _holdings(other, stale: dict) -> str:
    """What *other* holds, its stale locks apart: a lock past its TTL holds nothing (a
    claim takes it over), and an agent told it is held would wait for nobody."""
    held = [p for p in other.locks if (other.id, p) not in stale]
    gone = [p for p in other.locks if (other.id, p) in stale]
    text = f"; holds {', '.join(held[:5])}" if held else ""
    if gone:
        text += (f"; stale, held by nobody ({stale[other.id, gone[0]]}; a claim takes them "
                 f"over): {', '.join(gone[:5])}")
    return text


def new_turn(ctx: Ctx) -> None:
    """A prompt was submitted: the wake count of the turn restarts."""
    _wakes_file(repo_of(ctx), ctx).unlink(missing_ok=True)


def prompt(ctx: Ctx, *, new_turn: bool = True) -> list[str]:
    """The messages and handoffs that arrived for the session since it last heard (a
    person's prompt also starts a new turn: the wake count restarts; the prompt a wake
    made, which Gemini CLI submits again, does not)."""
    from ..sync.rooms import refresh
    with _opened(ctx) as (info, registry, sid):
        if new_turn:
            _wakes_file(info, ctx).unlink(missing_ok=True)
        refresh(registry)
        return _unseen(registry, info, ctx, sid)


def turn_end(ctx: Ctx, wake: int = 0) -> tuple[list[str], str]:
    """End of a turn: renew the heartbeat (and so the locks).  With *wake* > 0, the
    messages waiting that the agent was not told of, to keep it going (at most *wake*
    times per turn); ([], notice) otherwise."""
    from ..sync.rooms import mirror, refresh
    with _opened(ctx) as (info, registry, sid):
        try:
            registry.heartbeat(sid)
        except (NotFound, Refused) as exc:  # not registered here, or ended
            return [], f"agent-registry: {unknown(registry, sid, exc)}"
        mirror(registry, sid, "heartbeat")
        if wake <= 0:
            return [], ""
        counter = _wakes_file(info, ctx)
        try:
            woken = int(counter.read_text())
        except (OSError, ValueError):
            woken = 0
        if woken >= wake:
            return [], ""
        refresh(registry)
        news = _unseen(registry, info, ctx, sid)
        if news:
            counter.write_text(str(woken + 1))
        return news, ""


def end(ctx: Ctx) -> dict:
    from ..sync.rooms import mirror
    with _opened(ctx) as (info, registry, sid):
        _wakes_file(info, ctx).unlink(missing_ok=True)
        try:
            result = registry.finish(sid)
        except NotFound:
            return {}
        mirror(registry, sid, "finish")
        return result


def _wakes_file(info: RepoInfo, ctx: Ctx):
    state = state_file(info, ctx)
    return state.with_name(state.name + ".wakes")


def _unseen(registry, info: RepoInfo, ctx: Ctx, sid: str, keep=None) -> list[str]:
    """What waits for *sid* that this conversation was not told yet (the ids told are
    kept beside its session id); *keep*, when given, picks which to tell now."""
    from .messages import unseen
    state = state_file(info, ctx)
    return unseen(registry, sid, state.with_name(state.name + ".shown"), keep)


def urgent(ctx: Ctx) -> list[str]:
    """The high-importance messages waiting for the session, told at its next tool call,
    before it or after it (store/urgent.py); [] at the cost of one folder listing when
    none is marked.  Never raises: the hook's answer must not depend on it (what is not
    told here is told at the next prompt)."""
    try:
        info = repo_of(ctx)  # found once: the look and the telling both need it
        if not ids.urgent_waits(info.common_dir, ctx.harness, ctx.native_id):
            return []
    except Exception:  # noqa: BLE001 - see above
        return []
    from ..branch.mailbox import field
    from ..store.urgent import take
    try:
        with _opened(ctx, info) as (info, registry, sid):
            take(info.common_dir, sid)
            return _unseen(registry, info, ctx, sid,
                           keep=lambda m: field(m, "importance") == "high")
    except Exception:  # noqa: BLE001 - see above
        return []


# -- the decision before a write ------------------------------------------------------

def _undecided(ctx: Ctx, allowed: str, why: str, refusal: str) -> Decision:
    """When the gate cannot decide: refused, saying why (*refusal*), unless the person set
    AGENT_REGISTRY_ALLOW=1, which lets it through with a notice (*allowed*: why)."""
    if ctx.allowed:
        return Decision(True, notice=f"agent-registry: {allowed} ({ALLOW_ENV}=1): {why}")
    return Decision(False, refusal)


def unnoted(ctx: Ctx, why: str) -> Decision:
    """A command the gate cannot see into, when the backstop cannot note the held files
    around it (who holds what cannot be read): refused as a write the gate cannot check
    is, unless the person set AGENT_REGISTRY_ALLOW=1."""
    return _undecided(ctx, "a command run unchecked", why, (
        f"agent-registry: cannot tell whether this command writes a locked file: {why}. "
        f"Do not run it until the registry branch is repaired (git fsck; agent-registry "
        f"sync), or the user sets {ALLOW_ENV}=1."))


def may_write(ctx: Ctx, targets: list[str], *, auto_claim: bool = False,
              pid: int | None = None, deny_overlap: bool = False) -> Decision:
    """May the session write *targets* (absolute, or relative to ``ctx.cwd``)?  Denied
    when another live session holds one, or when the registry exists but cannot be
    read; paths outside the repository are not ours to guard.  A folder (the root
    included: ``git restore .``, TOP) covers every held file below it; a command whose
    writes could not all be followed (``targets.unfollowed``) is denied while anything
    here is held.  A file another live session has changed (forecast/edits.py) is let
    through with a warning naming it, or with *deny_overlap* denied."""
    unfollowed = getattr(targets, "unfollowed", [])
    if not targets and not unfollowed:
        return Decision(True)  # most shell commands write nothing: no repository needed
    info = repo_of(ctx)
    from .writepaths import repository_paths
    paths, folders = repository_paths(info, targets)
    if not paths and not folders and not unfollowed:
        return Decision(True)
    sid = session_for(info, ctx)
    from ..sync.fresh import freshen_at
    freshen_at(info)  # fetched first when older than agent-registry.readFreshness
    from ..enforce.guard import UNREADABLE, Guard, describe
    guard = Guard(info)
    try:
        if folders or unfollowed:
            from .held import Unreadable, held_files
            try:
                held = held_files(guard, sid, info.toplevel or "")
            except Unreadable as exc:
                return _undecided(ctx, "a write allowed unchecked", exc.message, (
                    f"agent-registry: cannot tell whether what this command writes is "
                    f"locked: {exc.message}. Do not run it until the registry branch is "
                    f"repaired (git fsck; agent-registry sync), or the user sets "
                    f"{ALLOW_ENV}=1."))
            if unfollowed and held:
                from .gatetexts import unfollowed_text
                return Decision(False, unfollowed_text(sid, unfollowed, held))
            paths += [p for p in held if any(p.startswith(f) for f in folders)]
        if not paths:
            return Decision(True)
        # the write is made by this harness session, whatever the env of the hook says
        report = guard.check(paths, committer=sid)
        from .elsewhere import changed_elsewhere, elsewhere_text, told, unsure_text
        from .gatetexts import held_text
        elsewhere = [] if report.unreadable or report.conflicts else \
            changed_elsewhere(guard, sid, paths)
    finally:
        guard.close()
    shown = ", ".join(paths[:3]) + (f" (and {len(paths) - 3} more)" if len(paths) > 3 else "")
    if report.unreadable:  # a registry that exists but cannot be read: fail closed
        why = report.mode[len(UNREADABLE):]
        return _undecided(ctx, f"{shown} allowed unchecked", why, (
            f"agent-registry: cannot tell whether {shown} is locked: {why}. Do not edit it "
            f"until the registry branch is repaired (git fsck; agent-registry sync), or the "
            f"user sets {ALLOW_ENV}=1."))
    conflicts = report.conflicts
    if deny_overlap and isinstance(elsewhere, str):  # cannot tell: refused, as for locks
        return _undecided(ctx, f"{shown} allowed unchecked", elsewhere,
                          unsure_text(shown, elsewhere))
    if deny_overlap and elsewhere:  # refused before anything is claimed
        return Decision(False, elsewhere_text(sid, elsewhere, denied=True))
    if not conflicts and auto_claim:
        try:
            conflicts = _claim(info, ctx, sid, paths, pid)
        except Unconfirmed:
            pass  # claimed in this clone; the remote confirms it at the next sync
        except (RegistryError, OSError) as exc:  # the claim was not made: fail closed
            why = (os_failure(exc) if isinstance(exc, OSError) else exc).message
            return _undecided(ctx, f"{shown} not claimed, allowed", why, (
                f"agent-registry: could not claim {shown} before the edit: {why}. Do not "
                f"edit it until `agent-registry lock acquire --session {sid} {paths[0]}` "
                f"works."))
    if conflicts:
        return Decision(False, held_text(sid, conflicts, describe))
    return Decision(True, **told(sid, elsewhere))


def _claim(info: RepoInfo, ctx: Ctx, sid: str, paths: list[str], pid: int | None) -> list:
    """Claim *paths* for *sid*; the conflicts when someone was faster."""
    from ..branch.paths import literal
    from ..enforce.guard import Conflict
    from ..sync import Registry
    # a file being written is a name, never a pattern (a new `a[1].py` is not a glob);
    # the files listed under a written directory are covered by its own claim
    folders = [p for p in paths if p.endswith("/")]
    targets = [literal(p) for p in paths
               if not any(p != d and p.startswith(d) for d in folders)]
    with Registry.open(info.toplevel or info.git_dir) as registry:
        try:
            registry.claim(sid, targets)
        except NotFound:  # the session-start hook did not run (installed mid-session)
            registry.register(sid, provider=ctx.provider, working_on=f"{ctx.product} session",
                              pid=pid, pid_from=pid_from(ctx))
            registry.claim(sid, targets)
        except Refused as exc:
            conflicts = exc.details.get("conflicts", [])
            if not conflicts:  # not a holder: this session itself (ended) is refused
                raise Refused(unknown(registry, sid, exc)) from None
            return [Conflict(c["path"], c["target"], c["owner"], c.get("working_on", ""),
                             c.get("since", ""), c.get("mode", ""), "") for c in conflicts]
    return []
