"""Installing Gemini CLI: hooks in ``.gemini/settings.json``, the protocol in GEMINI.md,
the skill in ``.agents/skills/agent-registry/``, with ``--mcp`` the server in the same
settings file (``"trust": true``: ``gemini -p`` offers an untrusted server's tools to no
one).

Gemini's hooks (on by default) are grouped as Claude Code's; the events are SessionStart,
BeforeTool (the gate: ``write_file``, ``replace`` and the shell tool
``run_shell_command``), AfterTool (the backstop, same matcher), BeforeAgent (a prompt), AfterAgent (end of a turn) and
SessionEnd.  A deny is its own JSON on stdout (the adapter's business); exit 2 blocks.
Gemini reads a project's ``.gemini/settings.json`` only in a trusted folder.
"""
from __future__ import annotations

from . import hookfiles
from .files import Plan

NAME = "gemini"
HOOK_FILE = ".gemini/settings.json"
GATE_TOOLS = "write_file|replace|run_shell_command"
# Gemini runs a hook through bash -c, a child of its long-lived node process: $PPID
EVENTS = {"SessionStart": ("session-start", None, True),
          "BeforeTool": ("pre-tool-use", GATE_TOOLS, True),
          "AfterTool": ("post-tool-use", GATE_TOOLS, False),
          "BeforeAgent": ("user-prompt-submit", None, False),
          "AfterAgent": ("stop", None, False),
          "SessionEnd": ("session-end", None, False)}


def groups(options) -> dict[str, dict]:
    return hookfiles.grouped(NAME, EVENTS, options)


def plan(toplevel: str, options, file_name: str | None = None) -> Plan:
    from .install import hooks_plan
    return hooks_plan(NAME, toplevel, options, HOOK_FILE, hookfiles.merge_grouped,
                                groups(options))


def installed_commands(toplevel: str) -> list[str]:
    return hookfiles.installed_commands(toplevel, HOOK_FILE, NAME)
