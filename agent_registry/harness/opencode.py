"""Installing OpenCode: a plugin ``.opencode/plugin/agent-registry.js`` (the edit gate),
the protocol in AGENTS.md, the skill in ``.agents/skills/agent-registry/``, with ``--mcp``
the server in ``opencode.json`` (``mcp``).

OpenCode has no command hooks; it loads every JS file in ``.opencode/plugin/`` as a
plugin.  Ours (``templates/harness/opencode-plugin.js``, with this installation's
executable written in) runs ``<exe> harness hook opencode pre-tool-use`` from
``tool.execute.before`` with ``{tool, args, sessionID, cwd}`` on stdin and throws when the
answer denies, when the hook exits 2, or when it cannot run (unless
``AGENT_REGISTRY_ALLOW=1``); session created, idle and deleted events start, heartbeat
and end the session.  OpenCode cannot run here: the plugin is checked with ``node
--check`` and the config against OpenCode's documented schema.
"""
from __future__ import annotations

import json
import re

from ..store.shipped import read_text
from .files import Plan

NAME = "opencode"
HOOK_FILE = ".opencode/plugin/agent-registry.js"
_EXE = re.compile(r"^const EXE = (.*);$", re.M)


def plugin_text(options) -> str:
    text = read_text("templates", "harness/opencode-plugin.js")
    gate = ["--auto-claim"] if options.auto_claim else []
    return text.replace("__EXE__", json.dumps(options.exe)) \
        .replace("__GATE_ARGS__", json.dumps(gate))


def plan(toplevel: str, options, file_name: str | None = None) -> Plan:
    from .install import add_mcp, add_texts
    plan = Plan(NAME, toplevel)
    plan.edit(HOOK_FILE, lambda old, path: plugin_text(options))
    add_texts(plan, NAME)
    if options.mcp:
        add_mcp(plan, NAME)
    return plan


def installed_commands(toplevel: str) -> list[str]:
    """The plugin's hook command, as a command line (status and doctor read its
    executable and options from it)."""
    from pathlib import Path
    try:
        text = Path(toplevel, HOOK_FILE).read_text(encoding="utf-8")
    except OSError:
        return []
    match = _EXE.search(text)
    try:
        exe = json.loads(match.group(1)) if match else None
    except ValueError:
        exe = None
    if not exe:
        return []
    import shlex
    claim = " --auto-claim" if '["--auto-claim"]' in text else ""
    return [" ".join(shlex.quote(w) for w in exe) + f" harness hook {NAME} pre-tool-use{claim}"]
