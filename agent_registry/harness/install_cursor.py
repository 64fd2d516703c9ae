"""Installing Cursor: hooks in ``.cursor/hooks.json``, the protocol in AGENTS.md (which
Cursor's agent reads), the skill in ``.cursor/skills/agent-registry/``, with ``--mcp`` the
server in ``.cursor/mcp.json``.

Cursor's hooks file (documented at cursor.com/docs/agent/hooks): ``{"version": 1,
"hooks": {event: [{"command": …, "matcher"?: …}]}}``, events in camelCase; a command runs
with the event JSON on stdin, and for ``preToolUse`` answers ``{"permission": "deny",
"agent_message": …}`` (the adapter's business) or blocks with exit 2.  The gate has no
matcher: Cursor's tool names differ between versions, and the adapter lets through any
tool that writes nothing.  The shell gets a gate of its own, ``beforeShellExecution``
(``command`` and ``cwd`` at the top of its input, which the adapter reads).  The
backstop's check runs at ``postToolUse`` and ``postToolUseFailure`` (a failed, timed-out or
denied tool), which carry the ``tool_use_id`` of the call's ``preToolUse``, where its note
is taken; ``afterShellExecution`` (no call id) is not installed.  Both gate
entries say ``"failClosed": true``: Cursor lets a tool call through when its hook
crashes, times out or answers what it cannot parse, unless the entry says so.  Cursor
cannot run here: the files are checked against the documented schema, not against Cursor.
"""
from __future__ import annotations

from . import hookfiles
from .command import hook_command
from .files import Plan

NAME = "cursor"
HOOK_FILE = ".cursor/hooks.json"
EVENTS = {"sessionStart": "session-start", "preToolUse": "pre-tool-use",
          "beforeShellExecution": "pre-tool-use", "postToolUse": "post-tool-use",
          "postToolUseFailure": "post-tool-use",
          "beforeSubmitPrompt": "user-prompt-submit", "stop": "stop",
          "sessionEnd": "session-end"}


def _entry(command: str, ours: str) -> dict:
    """One handler; a gate's refuses the call when the hook itself fails."""
    return {"command": command, **({"failClosed": True} if ours == "pre-tool-use" else {})}


def handlers(options) -> dict[str, dict]:
    return {event: _entry(hook_command(NAME, ours, exe=options.exe,
                                       auto_claim=options.auto_claim,
                                       wake=options.wake, hold=options.hold,
                                       deny_overlap=options.deny_overlap,
                                       no_memory=options.no_memory), ours)
            for event, ours in EVENTS.items()}


def plan(toplevel: str, options, file_name: str | None = None) -> Plan:
    from .install import hooks_plan
    return hooks_plan(NAME, toplevel, options, HOOK_FILE, hookfiles.merge_flat,
                                handlers(options))


def installed_commands(toplevel: str) -> list[str]:
    return hookfiles.installed_commands(toplevel, HOOK_FILE, NAME)
