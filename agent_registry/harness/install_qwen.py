"""Installing Qwen Code: hooks in ``.qwen/settings.json``, the protocol in QWEN.md, the
skill in ``.agents/skills/agent-registry/``, with ``--mcp`` the server in the same
settings file (``"trust": true``, as Gemini CLI's).

Qwen Code (a fork of Gemini CLI) groups hooks as Claude Code does, with Claude Code's
event names: SessionStart, PreToolUse (the gate: ``write_file``, ``edit``,
``notebook_edit`` and the shell tool ``run_shell_command``), PostToolUse and
PostToolUseFailure (the backstop, on the same tools), UserPromptSubmit, Stop,
SessionEnd.  The end of a turn passes ``--pid $PPID`` too: a headless run (``qwen -p``)
fires no SessionEnd, and its process's command line tells the Stop hook that this turn
is its last (harness/qwen.py).  A project's hooks load only in a trusted folder when the
person turned folder trust on (it is off by default).
"""
from __future__ import annotations

from . import hookfiles
from .files import Plan

NAME = "qwen"
HOOK_FILE = ".qwen/settings.json"
GATE_TOOLS = "write_file|edit|notebook_edit|run_shell_command"
# Qwen runs a hook through bash, a child of its long-lived node process: $PPID
EVENTS = {"SessionStart": ("session-start", None, True),
          "PreToolUse": ("pre-tool-use", GATE_TOOLS, True),
          # the backstop: what a tool call changed of the held files, put back and told
          "PostToolUse": ("post-tool-use", GATE_TOOLS, False),
          "PostToolUseFailure": ("post-tool-use", GATE_TOOLS, False),
          "UserPromptSubmit": ("user-prompt-submit", None, False),
          "Stop": ("stop", None, True),
          "SessionEnd": ("session-end", None, False)}


def plan(toplevel: str, options, file_name: str | None = None) -> Plan:
    from .install import hooks_plan
    return hooks_plan(NAME, toplevel, options, HOOK_FILE, hookfiles.merge_grouped,
                      hookfiles.grouped(NAME, EVENTS, options))


def installed_commands(toplevel: str) -> list[str]:
    return hookfiles.installed_commands(toplevel, HOOK_FILE, NAME)
