"""Agents that follow the protocol without being told: harness integration.

Claude Code runs hooks at fixed points and talks JSON (its hooks reference): each hook
command gets the event as a JSON object on stdin (``session_id``, ``cwd``,
``hook_event_name``, and per event ``tool_name``/``tool_input``, ``source``, ``reason``);
a PreToolUse hook denies a tool call by printing
``{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
"permissionDecisionReason": "..."}}``.  ``install_claude`` merges five hooks into
``.claude/settings.json``:

- SessionStart registers the session (id ``claude-<session_id>``), bound to Claude Code's
  own process: the hook command passes ``--pid $PPID``, and the shell Claude Code runs
  it through is Claude Code's child, so ``$PPID`` is Claude Code itself, which lives
  exactly as long as the agent.  It exports the id as ``AGENT_REGISTRY_SESSION``
  through ``$CLAUDE_ENV_FILE``;
- PreToolUse on Edit|Write|MultiEdit|NotebookEdit denies an edit of a path another live
  session holds, naming the owner (with ``--auto-claim`` it claims a free path first);
- UserPromptSubmit adds the messages and handoffs waiting for the session (each once)
  to the agent's context, so it learns of a question without polling its inbox;
- Stop (which Claude Code fires at the end of every turn, not of the session) renews the
  session's heartbeat, so its locks stay fresh while it works;
- SessionEnd finishes the session and releases its locks.

Harnesses without such hooks (Codex, Gemini CLI, any other) get the protocol as text in
the file they read at start (AGENTS.md, GEMINI.md), between markers, idempotently.  The
text is the protocol section of the branch README (templates/README.md), so the two
never disagree.

Over 400 lines: each harness's settings format with its merge, and each Claude Code hook.
"""
from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import shutil
import sys
from contextlib import contextmanager
from pathlib import Path

from ..errors import BadInput, NotFound, Refused, RegistryError, Unconfirmed, os_failure
from ..store.git import RepoInfo, discover

CLAUDE_EDIT_TOOLS = "Edit|Write|MultiEdit|NotebookEdit"
HOOK_MARK = "harness hook claude"  # how we recognise our own entries in settings.json
AGENT_PID_ARG = "--pid $PPID"
PID_FROM = "the Claude Code hook ($PPID of its shell: Claude Code itself)"
BLOCK_START = "<!-- agent-registry:protocol:start -->"
BLOCK_END = "<!-- agent-registry:protocol:end -->"
PROTOCOL_FILES = {"claude": "CLAUDE.md", "codex": "AGENTS.md", "gemini": "GEMINI.md",
                  "generic": "AGENTS.md"}
_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,90}")


# -- installing ---------------------------------------------------------------------

def default_command() -> str:
    """How settings.json calls us: plain ``agent-registry`` when that is on PATH and is
    this installation, else the absolute path of this installation's script."""
    here = Path(sys.executable).parent / "agent-registry"
    found = shutil.which("agent-registry")
    if found and (not here.exists() or Path(found).resolve() == here.resolve()):
        return "agent-registry"
    return str(here) if here.exists() else "agent-registry"


def _claude_hooks(command: str, auto_claim: bool) -> dict[str, dict]:
    run = f"{command} {HOOK_MARK}"
    # the hooks that may register pass Claude Code's pid: the parent of the hook's shell
    claim = f" {AGENT_PID_ARG} --auto-claim" if auto_claim else ""
    return {
        "SessionStart": {"hooks": [{"type": "command",
                                    "command": f"{run} session-start {AGENT_PID_ARG}"}]},
        "PreToolUse": {"matcher": CLAUDE_EDIT_TOOLS,
                       "hooks": [{"type": "command", "command": f"{run} pre-tool-use{claim}"}]},
        "UserPromptSubmit": {"hooks": [{"type": "command",
                                        "command": f"{run} user-prompt-submit"}]},
        "Stop": {"hooks": [{"type": "command", "command": f"{run} stop"}]},
        "SessionEnd": {"hooks": [{"type": "command", "command": f"{run} session-end"}]},
    }


def _is_ours(group) -> bool:
    return isinstance(group, dict) and any(
        isinstance(h, dict) and HOOK_MARK in str(h.get("command", ""))
        for h in group.get("hooks") or [])


def merge_claude_settings(settings: dict, command: str, auto_claim: bool) -> dict:
    """*settings* with our hooks added, or updated in place when already there; every
    other key, event and hook is kept as it is."""
    hooks = settings.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise BadInput("settings.json: \"hooks\" is not an object")
    for event, group in _claude_hooks(command, auto_claim).items():
        groups = hooks.setdefault(event, [])
        if not isinstance(groups, list):
            raise BadInput(f"settings.json: hooks.{event} is not a list")
        mine = [i for i, g in enumerate(groups) if _is_ours(g)]
        if mine:
            groups[mine[0]] = group
        else:
            groups.append(group)
    return settings


def claude_state(toplevel: str) -> dict | None:
    """None when ``.claude/settings.json`` holds none of our hooks; else ``current``
    (the file says what :func:`install_claude` would write now) and ``auto_claim``
    (whether the PreToolUse hook claims), for ``doctor``."""
    try:
        settings = json.loads(Path(toplevel, ".claude", "settings.json").read_text(
            encoding="utf-8") or "{}")
    except (OSError, ValueError):
        return None
    hooks = settings.get("hooks") if isinstance(settings, dict) else None
    ours = [g for groups in (hooks.values() if isinstance(hooks, dict) else [])
            if isinstance(groups, list) for g in groups if _is_ours(g)]
    if not ours:
        return None
    auto_claim = any("--auto-claim" in str(h.get("command", "")) for g in ours
                     for h in g.get("hooks") or [] if isinstance(h, dict))
    expected = merge_claude_settings(copy.deepcopy(settings), default_command(), auto_claim)
    return {"current": expected == settings, "auto_claim": auto_claim}


def install_claude(toplevel: str, *, auto_claim: bool = False,
                   command: str | None = None) -> dict:
    path = Path(toplevel, ".claude", "settings.json")
    settings: dict = {}
    if path.exists():
        try:
            settings = json.loads(path.read_text(encoding="utf-8") or "{}")
        except ValueError as exc:
            raise BadInput(f"{path} is not valid JSON ({exc}); nothing changed") from None
        if not isinstance(settings, dict):
            raise BadInput(f"{path} is not a JSON object; nothing changed")
    merge_claude_settings(settings, command or default_command(), auto_claim)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(".settings.json.agent-registry-tmp")
    tmp.write_text(json.dumps(settings, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    block = install_protocol(toplevel, "claude")
    return {"harness": "claude", "settings": str(path), "auto_claim": auto_claim,
            "events": list(_claude_hooks("", False)), "protocol_file": block["file"]}


def protocol_text(branch: str = "agent-registry") -> str:
    """The protocol section of the branch README, as the branch renders it."""
    from ..branch.render import fill
    readme = fill("README.md", branch=branch)
    start = readme.index("## The protocol")
    end = readme.find("\n## ", start + 1)
    body = readme[start:end if end != -1 else len(readme)].strip()
    return (body.replace("## The protocol", "## agent-registry: the protocol", 1)
            + "\n\nThe state lives on the git branch `" + branch + "` of this repository; "
            "`git log " + branch + "` is the audit trail.")


def install_protocol(toplevel: str, harness: str, *, file_name: str | None = None,
                     branch: str = "agent-registry") -> dict:
    """Write the protocol block into the harness's instructions file, between markers:
    replaced when present, appended otherwise; the rest of the file is kept."""
    name = file_name or PROTOCOL_FILES[harness]
    path = Path(toplevel, name)
    block = f"{BLOCK_START}\n{protocol_text(branch)}\n{BLOCK_END}"
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    if BLOCK_START in old and BLOCK_END in old:
        head, rest = old.split(BLOCK_START, 1)
        new = head + block + rest.split(BLOCK_END, 1)[1]
    else:
        separator = "" if not old else "\n" if old.endswith("\n") else "\n\n"
        new = old + separator + block + "\n"
    changed = new != old
    if changed:
        path.write_text(new, encoding="utf-8")
    return {"harness": harness, "file": str(path), "changed": changed}


# -- the Claude Code hooks ------------------------------------------------------------

def _safe(claude_id: str) -> str:
    """Claude Code's session id (a UUID) as it may appear in a session id and a file
    name; anything else is replaced by a digest of it."""
    return claude_id if _SAFE_ID.fullmatch(claude_id) else hashlib.sha1(claude_id.encode()).hexdigest()[:16]


def _state_file(info: RepoInfo, claude_id: str) -> Path:
    return Path(info.common_dir, "agent-registry", "claude", _safe(claude_id))


def session_for(info: RepoInfo, claude_id: str) -> str:
    """Our session id for Claude Code's *claude_id*: remembered locally, so a resumed
    conversation whose session had ended gets a new id and keeps it."""
    try:
        return _state_file(info, claude_id).read_text().strip()
    except OSError:
        return f"claude-{_safe(claude_id)}"


def _remember(info: RepoInfo, claude_id: str, sid: str) -> None:
    path = _state_file(info, claude_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(sid + "\n")


def _event(raw: str) -> dict:
    try:
        event = json.loads(raw or "{}")
    except ValueError as exc:
        raise BadInput(f"hook input is not JSON: {exc}") from None
    if not isinstance(event, dict) or not event.get("session_id"):
        raise BadInput("hook input has no session_id")
    return event


def _repo_of(event: dict) -> RepoInfo:
    return discover(event.get("cwd") or os.environ.get("CLAUDE_PROJECT_DIR") or ".")


def agent_pid(text: str | None) -> int | None:
    """The pid the hook command passed (``--pid $PPID``); None when the shell left it
    unexpanded or empty, and the owner is then found as any other (an agent runtime)."""
    return int(text) if text and text.isdigit() and int(text) > 1 else None


@contextmanager
def _hook_registry(raw: str):
    """(the hook's event, its repository, the registry, the session id) for a hook
    that acts on its Claude Code session's registry, closed afterwards."""
    from ..sync import Registry
    event = _event(raw)
    info = _repo_of(event)
    with Registry.open(info.toplevel or info.git_dir) as registry:
        yield event, info, registry, session_for(info, event["session_id"])


def session_start(raw: str, env: dict[str, str], pid: int | None = None) -> dict:
    with _hook_registry(raw) as (event, info, registry, sid):
        model = str(event.get("model") or "")
        try:
            registry.register(sid, provider="Claude", ai_version=model,
                              working_on=f"Claude Code session ({event.get('source') or 'startup'})",
                              pid=pid, pid_from=PID_FROM)
        except Refused:  # this id has ended (a resumed conversation): a fresh one
            sid = f"{sid.split('+')[0]}+{int(registry.clock())}"
            registry.register(sid, provider="Claude", ai_version=model,
                              working_on="Claude Code session (resumed)", pid=pid,
                              pid_from=PID_FROM)
        _remember(info, event["session_id"], sid)
        others = [s for s in registry.sessions() if s.id != sid]
        from ..sync.rooms import refresh_messages
        refresh_messages(registry)  # register synced the registry branch, not the messages'
        news = _unseen_messages(registry, info, event["session_id"], sid)
    if env.get("CLAUDE_ENV_FILE"):
        with open(env["CLAUDE_ENV_FILE"], "a", encoding="utf-8") as f:
            f.write(f"export AGENT_REGISTRY_SESSION={sid}\n")
    lines = [f"agent-registry: you are session {sid} (exported as AGENT_REGISTRY_SESSION). "
             "Claim paths before editing them (agent-registry lock acquire PATH); an edit of "
             "a path another live session holds is denied."]
    for other in others[:10]:
        held = f"; holds {', '.join(other.locks[:5])}" if other.locks else ""
        lines.append(f"- {other.id} ({other.provider}) works on {other.working_on!r}{held}")
    return {"hookSpecificOutput": {"hookEventName": "SessionStart",
                                   "additionalContext": "\n".join(lines + news)}}


def user_prompt_submit(raw: str) -> dict | None:
    """The messages and handoffs that arrived for the session since it last heard,
    as context for the agent's next turn; None when there are none."""
    from ..sync.rooms import refresh
    with _hook_registry(raw) as (event, info, registry, sid):
        refresh(registry)
        news = _unseen_messages(registry, info, event["session_id"], sid)
    if not news:
        return None
    return {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit",
                                   "additionalContext": "\n".join(news)}}


def _unseen_messages(registry, info: RepoInfo, claude_id: str, sid: str) -> list[str]:
    """What waits for *sid* that this conversation was not told yet (the ids told are
    kept beside its session id)."""
    from .messages import unseen
    state = _state_file(info, claude_id)
    return unseen(registry, sid, state.with_name(state.name + ".shown"))


def pre_tool_use(raw: str, *, auto_claim: bool = False, pid: int | None = None) -> dict | None:
    """The documented deny decision when another live session holds the file; None
    (no decision: Claude Code's normal permission flow goes on) otherwise."""
    event = _event(raw)
    tool_input = event.get("tool_input") or {}
    target = tool_input.get("file_path") or tool_input.get("notebook_path")
    if not target:
        return None
    info = _repo_of(event)
    from ..branch.paths import normalize
    try:
        path = normalize(target, toplevel=info.toplevel,
                         prefix=info.prefix if not os.path.isabs(target) else "")
    except BadInput:
        return None  # outside this repository: not ours to guard
    sid = session_for(info, event["session_id"])
    from ..enforce.guard import UNREADABLE, Guard, describe
    guard = Guard(info)
    try:
        # the edit is made by this Claude session, whatever the env of the hook says
        report = guard.check([path], committer=sid)
    finally:
        guard.close()
    if report.unreadable:  # a registry that exists but cannot be read: fail closed
        return _deny(f"agent-registry: cannot tell whether {path} is locked: "
                     f"{report.mode[len(UNREADABLE):]}. Do not edit it until the registry "
                     "branch is repaired (git fsck; agent-registry sync).")
    conflicts = report.conflicts
    if not conflicts and auto_claim:
        try:
            conflicts = _claim(info, sid, path, pid)
        except Unconfirmed:
            pass  # claimed in this clone; the remote confirms it at the next sync
        except (RegistryError, OSError) as exc:  # the claim was not made: fail closed
            why = (os_failure(exc) if isinstance(exc, OSError) else exc).message
            return _deny(f"agent-registry: could not claim {path} before the edit: {why}. "
                         f"Do not edit it until `agent-registry lock acquire {path}` works.")
    if not conflicts:
        return None
    reasons = "; ".join(describe(c) for c in conflicts)
    holders = sorted({c.owner for c in conflicts})
    owners = ", ".join(holders)
    ask = " or ".join(f"agent-registry send --to {h} 'TEXT'" for h in holders)
    return _deny(f"agent-registry: {path} is locked by {owners}, another live session "
                 f"({reasons}). Do not edit it: work on something else, ask {owners} "
                 f"({ask}; the answer comes to your inbox), or ask the user to coordinate.")


def _deny(reason: str) -> dict:
    """Claude Code's documented PreToolUse deny decision."""
    return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                   "permissionDecisionReason": reason}}


def _claim(info: RepoInfo, sid: str, path: str, pid: int | None) -> list:
    """Claim *path* for *sid*; the conflicts when someone was faster."""
    from ..enforce.guard import Conflict
    from ..branch.paths import literal
    from ..sync import Registry
    # the file being edited is a name, never a pattern (a new `a[1].py` is not a glob)
    target = literal(path)
    with Registry.open(info.toplevel or info.git_dir) as registry:
        try:
            registry.claim(sid, [target])
        except NotFound:  # SessionStart did not run (hooks installed mid-session)
            registry.register(sid, provider="Claude", working_on="Claude Code session",
                              pid=pid, pid_from=PID_FROM)
            registry.claim(sid, [target])
        except Refused as exc:
            return [Conflict(c["path"], c["target"], c["owner"], c.get("working_on", ""),
                             c.get("since", ""), c.get("mode", ""), "")
                    for c in exc.details.get("conflicts", [])] or \
                   [Conflict(path, path, "another session", "", "", "", "")]
    return []


def stop(raw: str) -> None:
    """End of a turn: renew the session's heartbeat so its locks stay fresh."""
    from ..sync.rooms import mirror
    with _hook_registry(raw) as (_, _, registry, sid):
        try:
            registry.heartbeat(sid)
        except (NotFound, Refused):
            return  # not registered here, or already ended: nothing to keep alive
        mirror(registry, sid, "heartbeat")


def session_end(raw: str) -> dict:
    from ..sync.rooms import mirror
    with _hook_registry(raw) as (_, _, registry, sid):
        try:
            result = registry.finish(sid)
        except NotFound:
            return {}
        mirror(registry, sid, "finish")
        return result


def run_claude_hook(name: str, raw: str, *, auto_claim: bool = False,
                    env: dict[str, str] | None = None, pid: int | None = None) -> dict | None:
    """Run Claude Code hook *name* on its JSON input; the JSON to print, if any.  *pid*
    is Claude Code's own process, when the hook command passed it."""
    env = dict(os.environ) if env is None else env
    if name == "session-start":
        return session_start(raw, env, pid)
    if name == "pre-tool-use":
        return pre_tool_use(raw, auto_claim=auto_claim, pid=pid)
    if name == "user-prompt-submit":
        return user_prompt_submit(raw)
    if name == "stop":
        stop(raw)
        return None
    if name == "session-end":
        session_end(raw)
        return None
    raise BadInput(f"unknown Claude Code hook {name!r}")

