"""Installing Claude Code: hooks in ``.claude/settings.json``, the protocol in CLAUDE.md,
the skill in ``.claude/skills/agent-registry/``, with ``--mcp`` the server in ``.mcp.json``.

Claude Code runs each hook command through sh, a child of its own process, so ``$PPID``
is Claude Code itself: the session start and the gate pass it (``--pid $PPID``).  The
gate's matcher covers the edit tools and ``Bash`` (whose writes the adapter parses); the
backstop's after-tool hook (PostToolUse, and PostToolUseFailure for a call that failed)
has the same matcher.
"""
from __future__ import annotations

from . import hookfiles
from .files import Plan

NAME = "claude"
HOOK_FILE = ".claude/settings.json"
GATE_TOOLS = "Edit|Write|MultiEdit|NotebookEdit|Bash"
# Claude Code's event -> (our event, matcher, pass its pid)
EVENTS = {"SessionStart": ("session-start", None, True),
          "PreToolUse": ("pre-tool-use", GATE_TOOLS, True),
          "PostToolUse": ("post-tool-use", GATE_TOOLS, False),
          "PostToolUseFailure": ("post-tool-use", GATE_TOOLS, False),
          "UserPromptSubmit": ("user-prompt-submit", None, False),
          "Stop": ("stop", None, False),
          "SessionEnd": ("session-end", None, False)}


def groups(options) -> dict[str, dict]:
    return hookfiles.grouped(NAME, EVENTS, options)


def plan(toplevel: str, options, file_name: str | None = None) -> Plan:
    from .install import hooks_plan
    return hooks_plan(NAME, toplevel, options, HOOK_FILE, hookfiles.merge_grouped,
                                groups(options))


def installed_commands(toplevel: str) -> list[str]:
    return hookfiles.installed_commands(toplevel, HOOK_FILE, NAME)
