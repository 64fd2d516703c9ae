"""Installing OpenCode: a plugin ``.opencode/plugin/agent-registry.js`` (the edit gate),
the protocol in AGENTS.md, the skill in ``.agents/skills/agent-registry/``, with ``--mcp``
the server in ``opencode.json`` (``mcp``).

OpenCode has no command hooks; it loads every JS file in ``.opencode/plugin/`` as a
plugin.  Ours (``templates/harness/opencode-plugin.js``, with this installation's
executable written in) runs ``<exe> harness hook opencode pre-tool-use`` from
``tool.execute.before`` with ``{tool, args, sessionID, cwd, project}`` on stdin and throws
when the answer denies, when the hook exits 2, or when it cannot run (unless
``AGENT_REGISTRY_ALLOW=1``).  The session starts at the first event naming it (a run
resumed with ``-s ID`` fires no ``session.created``), bound to the OpenCode process
(``--pid`` of the plugin's own process); ``session.idle`` renews it (and wakes it, with
``--wake``); it ends when OpenCode disposes of its plugins or exits (``opencode run`` fires
no ``session.deleted``).  What the hooks answer reaches the model in the system prompt of
its next request (``experimental.chat.system.transform``, which also asks what arrived).
The repository is the plugin file's own.  Tested with the real ``opencode`` (npm
``opencode-ai``) in tests/e2e/test_harness_cli.py.
"""
from __future__ import annotations

import json
import re

from ..store.shipped import read_text
from .files import Plan

NAME = "opencode"
HOOK_FILE = ".opencode/plugin/agent-registry.js"
_EXE = re.compile(r"^const EXE = (.*);$", re.M)
_STOP = re.compile(r"^const STOP_ARGS = (.*);$", re.M)
_GATE = re.compile(r"^const GATE_ARGS = (.*);$", re.M)


def plugin_text(options) -> str:
    text = read_text("templates", "harness/opencode-plugin.js")
    gate = (["--auto-claim"] if options.auto_claim else []) + \
        (["--deny-overlap"] if getattr(options, "deny_overlap", False) else [])
    start = ["--no-memory"] if getattr(options, "no_memory", False) else []
    stop = (["--wake", str(options.wake)] if options.wake else []) + \
        (["--hold", str(options.hold)] if getattr(options, "hold", None) else [])
    return text.replace("__EXE__", json.dumps(options.exe)) \
        .replace("__GATE_ARGS__", json.dumps(gate)).replace("__STOP_ARGS__", json.dumps(stop)) \
        .replace("__START_ARGS__", json.dumps(start))


def plan(toplevel: str, options, file_name: str | None = None) -> Plan:
    from .install import add_mcp, add_texts
    plan = Plan(NAME, toplevel)
    plan.edit(HOOK_FILE, lambda old, path: plugin_text(options))
    add_texts(plan, NAME)
    if options.mcp:
        add_mcp(plan, NAME)
    return plan


def installed_commands(toplevel: str) -> list[str]:
    """The plugin's hook commands (the gate, and the end of a turn), as command lines:
    status and doctor read its executable and options from them."""
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
    gate = _GATE.search(text)
    try:
        gate_args = json.loads(gate.group(1)) if gate else []
    except ValueError:
        gate_args = []
    claim = "".join(f" {w}" for w in gate_args if w in ("--auto-claim", "--deny-overlap"))
    memory = " --no-memory" if '["--no-memory"]' in text else ""
    head = " ".join(shlex.quote(w) for w in exe) + f" harness hook {NAME}"
    stop = _STOP.search(text)
    try:
        stop_args = json.loads(stop.group(1)) if stop else []
    except ValueError:
        stop_args = []
    tail = "".join(f" {shlex.quote(str(w))}" for w in stop_args if isinstance(w, (str, int)))
    return [f"{head} session-start{memory}", f"{head} pre-tool-use{claim}", f"{head} stop{tail}"]
