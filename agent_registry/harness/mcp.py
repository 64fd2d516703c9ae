"""``harness install <harness> --mcp``: write ``agent-registry mcp`` into the harness's
project-scoped MCP configuration.

- Claude Code: ``.mcp.json`` (project scope), ``{"mcpServers": {NAME: {"type": "stdio",
  "command", "args"}}}``;
- Gemini CLI: ``.gemini/settings.json``, the same ``mcpServers`` object, with ``"trust":
  true`` (``gemini -p`` offers a server's tools without asking only when trusted); Qwen
  Code the same in ``.qwen/settings.json``;
- Copilot CLI: Claude Code's ``.mcp.json``, the same entry;
- Cursor: ``.cursor/mcp.json``, ``mcpServers`` as Claude Code's, without ``type``;
- OpenCode: ``opencode.json``, ``{"mcp": {NAME: {"type": "local", "command": [argv],
  "enabled": true}}}``;
- Codex: ``.codex/config.toml``, a ``[mcp_servers.NAME]`` table (Codex reads a project's
  file only once the project is trusted).

Each file is merged: other servers and settings, and keys a person added to our entry
(``env``, timeouts …), are kept; a file already saying what we would write is not
touched, so a second run leaves it byte-identical.  The command written is this
installation's absolute ``agent-registry`` with ``-C <toplevel>``: a harness may start
servers from any directory and with a PATH that lacks the venv.  Absolute paths do not
survive moving the venv or the repository; running the install again rewrites them.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

from ..errors import BadInput
from .hookfiles import dump, load_object

SERVER = "agent-registry"
FILES = {"claude": ".mcp.json", "gemini": ".gemini/settings.json",
         "codex": ".codex/config.toml", "cursor": ".cursor/mcp.json",
         "opencode": "opencode.json", "copilot": ".mcp.json", "qwen": ".qwen/settings.json"}
_TABLE = re.compile(r'^\s*\[\s*mcp_servers\s*\.\s*(?:"agent-registry"|agent-registry)\s*\]'
                    r'\s*(#.*)?$')
_HEADER = re.compile(r"^\s*\[")
_KEY = {"opencode": "mcp"}  # the object holding the servers, when not "mcpServers"


def server_command(toplevel: str) -> list[str]:
    """How a harness starts this installation's server for the repository *toplevel*:
    the console script next to this interpreter (a venv's bin/), else the one on PATH,
    else ``python -m agent_registry`` of this interpreter; never resolved through
    symlinks (a venv's python is a link to the system one, which lacks our packages)."""
    script = shutil.which("agent-registry", path=os.path.dirname(sys.executable)) or \
        shutil.which("agent-registry")
    head = [os.path.abspath(script)] if script else [os.path.abspath(sys.executable), "-m",
                                                      "agent_registry"]
    return head + ["-C", toplevel, "mcp"]


def plan_mcp(toplevel: str, harness: str, command: list[str] | None = None):
    """Read and merge *harness*'s project MCP configuration now (bad input raises before
    anything is written); returns the function that writes it and says what it did."""
    command = command or server_command(toplevel)
    path = Path(toplevel, FILES[harness]) if harness in FILES else None
    new = merged_text(toplevel, harness, command)

    def write() -> dict:
        if new is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.agent-registry-tmp")
            tmp.write_text(new, encoding="utf-8")
            os.replace(tmp, path)
        return {"file": str(path), "server": SERVER, "command": command,
                "changed": new is not None}
    return write


def merged_text(toplevel: str, harness: str, command: list[str] | None = None) -> str | None:
    """The new text of *harness*'s MCP file with our server, or None when it already
    says so; bad input raises before anything is written."""
    if harness not in FILES:
        raise BadInput(f"--mcp: {harness} has no MCP configuration "
                       f"({', '.join(sorted(FILES))})")
    command = command or server_command(toplevel)
    path = Path(toplevel, FILES[harness])
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    return merge_into(old, path, harness, command)


def merge_into(old: str, path: Path, harness: str, command: list[str]) -> str | None:
    """*old* (the text of *harness*'s MCP file) with our server, or None when it says so."""
    merge = _merge_toml if harness == "codex" else _merge_json
    return merge(old, path, command, harness)


def state(toplevel: str, harness: str) -> str:
    """``absent`` (the file does not configure our server), ``current`` (it says what
    ``harness install --mcp`` would write now) or ``stale``, for ``doctor``."""
    path = Path(toplevel, FILES[harness])
    try:
        old = path.read_text(encoding="utf-8")
    except OSError:
        return "absent"
    if harness == "codex":
        present = any(_TABLE.match(line) for line in old.splitlines())
    else:
        try:
            servers = json.loads(old or "{}").get(_KEY.get(harness, "mcpServers"))
        except (ValueError, AttributeError):
            return "absent"
        present = isinstance(servers, dict) and SERVER in servers
    if not present:
        return "absent"
    merge = _merge_toml if harness == "codex" else _merge_json
    try:
        return "current" if merge(old, path, server_command(toplevel), harness) is None else "stale"
    except BadInput:
        return "stale"


def _merge_json(old: str, path: Path, command: list[str], harness: str) -> str | None:
    """The new text of a JSON settings file with our server in ``mcpServers``, or None
    when it already says so."""
    data = load_object(old, path)
    if harness == "opencode" and not data:  # a new file names its schema, as opencode's do
        data["$schema"] = "https://opencode.ai/config.json"
    key = _KEY.get(harness, "mcpServers")
    servers = data.setdefault(key, {})
    if not isinstance(servers, dict):
        raise BadInput(f"{path}: \"{key}\" is not an object; nothing changed")
    entry = servers.get(SERVER)
    if harness == "opencode":
        ours = {"type": "local", "command": command, "enabled": True}
    else:
        # Copilot CLI reads Claude Code's .mcp.json: the same entry, the same bytes
        ours = {"type": "stdio"} if harness in ("claude", "copilot") else {}
        ours.update(command=command[0], args=command[1:])
        if harness in ("gemini", "qwen"):
            ours["trust"] = True
    if isinstance(entry, dict) and all(entry.get(k) == v for k, v in ours.items()):
        return None
    servers[SERVER] = {**entry, **ours} if isinstance(entry, dict) else ours
    return dump(data)


def _merge_toml(old: str, path: Path, command: list[str], harness: str) -> str | None:
    """The new text of Codex's config.toml with our ``[mcp_servers.agent-registry]``
    table (its other keys kept), or None when it already says so.  The rest of the
    file is kept as written: only our table's own lines are replaced."""
    entry = _toml_servers(old, path).get(SERVER)
    if isinstance(entry, dict) and entry.get("command") == command[0] and \
            entry.get("args") == command[1:]:
        return None
    lines = old.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if _TABLE.match(line)), None)
    if entry is not None and start is None:
        raise BadInput(f"{path} defines mcp_servers.{SERVER} inline; edit it by hand "
                       f"(command = {_toml_value(command[0])}, args = "
                       f"{_toml_value(command[1:])}); nothing changed")
    if start is None:
        separator = "" if not old else "\n" if old.endswith("\n") else "\n\n"
        return old + separator + _table(command, {})
    end = next((i for i in range(start + 1, len(lines)) if _HEADER.match(lines[i])), len(lines))
    # the keys our table's own lines set (inline tables and dotted keys too); its
    # [mcp_servers.agent-registry.*] subtables are other lines, kept as written
    import tomllib  # present: _toml_servers needed it to find our table
    body = tomllib.loads("".join(lines[start + 1:end]))
    table = _table(command, {k: v for k, v in body.items() if k not in ("command", "args")})
    tail = "\n" if end < len(lines) else ""
    return "".join(lines[:start]) + table + tail + "".join(lines[end:]).lstrip("\n")


def _table(command: list[str], kept: dict) -> str:
    """Our ``[mcp_servers.agent-registry]`` table: the command, then the kept keys."""
    return f"[mcp_servers.{SERVER}]\n" + "".join(
        f"{_toml_key(key)} = {_toml_value(value)}\n"
        for key, value in {"command": command[0], "args": command[1:], **kept}.items())


def _toml_servers(text: str, path: Path) -> dict:
    if not text.strip():
        return {}
    try:
        import tomllib
    except ImportError:  # Python 3.10
        raise BadInput(f"merging into {path} needs Python 3.11 (tomllib); "
                       "nothing changed") from None
    try:
        servers = tomllib.loads(text).get("mcp_servers", {})
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"{path} is not valid TOML ({exc}); nothing changed") from None
    return servers if isinstance(servers, dict) else {}


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key, ensure_ascii=False)


def _toml_value(value) -> str:
    """A TOML literal for what our table holds: strings, numbers, booleans, lists,
    inline tables."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a JSON string is a TOML basic string
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):  # an inline table: env = { FOO = "bar" }
        return "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(v)}"
                                for k, v in value.items()) + " }"
    raise BadInput(f"cannot rewrite a TOML value of type {type(value).__name__}; edit it by hand")
