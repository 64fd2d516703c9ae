"""Installing Codex: hooks in ``.codex/hooks.json``, the protocol in AGENTS.md, the skill
in ``.agents/skills/agent-registry/``, with ``--mcp`` the server in ``.codex/config.toml``.

Codex (≥ 0.124) discovers project hooks in ``<repo>/.codex/hooks.json`` (or inline
``[hooks]`` tables of ``.codex/config.toml``; one form per layer, else it warns), in the
grouped shape Claude Code uses; the file's root takes only ``description`` and ``hooks``.
It loads the project layer only once the project is trusted, and runs a project hook only
once that exact hook is trusted (a ``trusted_hash`` under ``[hooks.state]`` of the user's
config.toml; an untrusted hook is skipped silently in ``codex exec``).  The gate covers
``apply_patch`` (its patch envelope names the files) and the shell tool; PostToolUse, the
backstop's after-tool hook, has the same matcher.  Codex runs a
hook through ``bash -c`` as a child of its own binary, so ``$PPID`` is Codex.

Codex's workspace-write sandbox makes ``.git`` read-only: registry writes from its shell
fail, which is why the protocol sends it to the MCP tools and why ``--mcp`` matters here.
"""
from __future__ import annotations

from . import hookfiles
from .files import Plan

NAME = "codex"
HOOK_FILE = ".codex/hooks.json"
# Codex's shell tool (exec_command) reaches hooks as tool_name "Bash"; "exec_command" and
# "shell" match nothing, "apply_patch" (and "Edit|Write") match the patch tool
GATE_TOOLS = "apply_patch|Edit|Write|Bash"
EVENTS = {"SessionStart": ("session-start", None, True),
          "PreToolUse": ("pre-tool-use", GATE_TOOLS, True),
          "PostToolUse": ("post-tool-use", GATE_TOOLS, False),
          "UserPromptSubmit": ("user-prompt-submit", None, False),
          "Stop": ("stop", None, False),
          "SessionEnd": ("session-end", None, False)}


# Codex gives a SessionEnd handler 1 s unless told (at most 3 s, clamped) and waits for it
# before it exits; finishing a session takes longer than 1 s on a busy machine
SESSION_END_TIMEOUT = 3


def groups(options) -> dict[str, dict]:
    out = hookfiles.grouped(NAME, EVENTS, options)
    out["SessionEnd"]["hooks"][0]["timeout"] = SESSION_END_TIMEOUT
    return out


def plan(toplevel: str, options, file_name: str | None = None) -> Plan:
    from .install import hooks_plan
    plan = hooks_plan(NAME, toplevel, options, HOOK_FILE, hookfiles.merge_grouped,
                                groups(options))
    if not options.mcp:
        plan.notes.append("Codex's sandbox makes .git read-only, so registry writes from "
                          "its shell fail: add --mcp to give it the MCP tools")
    return plan


def installed_commands(toplevel: str) -> list[str]:
    return hookfiles.installed_commands(toplevel, HOOK_FILE, NAME)
