"""Installing GitHub Copilot CLI: hooks in ``.github/hooks/agent-registry.json``, the
protocol in AGENTS.md, the skill in ``.claude/skills/agent-registry/`` (Copilot loads
Claude Code's skills), with ``--mcp`` the server in ``.mcp.json`` (Claude Code's file,
the same entry).

Copilot reads every ``.github/hooks/*.json`` (``{"version": 1, "hooks": {…}}``) and takes
Claude Code's format unchanged: PascalCase events, grouped with a matcher on Claude's tool
names, the payload and answers Claude's (harness/copilot.py).  So the events, matchers and
``--pid $PPID`` are Claude Code's (``$PPID`` is Copilot's own process).  It loads a
repository's hooks and MCP servers only in a trusted folder (``trustedFolders`` in
``~/.copilot/config.json``): an untrusted folder runs without them, silently, even
headless (``copilot -p``), which is why the trust step matters here.
"""
from __future__ import annotations

from . import hookfiles
from .files import Plan
from .install_claude import EVENTS

NAME = "copilot"
HOOK_FILE = ".github/hooks/agent-registry.json"


def merge(data: dict, wanted: dict[str, dict], harness: str, path) -> dict:
    """Claude Code's grouped hooks, in a file that says its format's ``version`` (1)."""
    data.setdefault("version", 1)
    return hookfiles.merge_grouped(data, wanted, harness, path)


def plan(toplevel: str, options, file_name: str | None = None) -> Plan:
    from .install import hooks_plan
    return hooks_plan(NAME, toplevel, options, HOOK_FILE, merge,
                      hookfiles.grouped(NAME, EVENTS, options))


def installed_commands(toplevel: str) -> list[str]:
    return hookfiles.installed_commands(toplevel, HOOK_FILE, NAME)
