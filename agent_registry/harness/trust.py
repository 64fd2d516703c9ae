"""Whether a harness will run what we installed, and ``--trust``: the step a person takes.

- Claude Code starts a project's ``.mcp.json`` server only once approved; the answer is
  kept in ``.claude/settings.local.json`` (``enabledMcpjsonServers``; an
  ``enableAllProjectMcpServers`` in the committed settings is ignored).  ``--trust`` adds
  our server there (a file of the repository: recorded, and restored by uninstall).
- Codex loads a project's ``.codex/`` (hooks, MCP) only for a trusted project:
  ``[projects."<path>"] trust_level = "trusted"`` in ``$CODEX_HOME/config.toml`` (default
  ``~/.codex``), and runs each project hook only once trusted in ``/hooks``.
- Gemini CLI reads ``.gemini/settings.json`` only in a trusted folder (folder trust is
  on by default): ``{"<path>": "TRUST_FOLDER"}`` in ``~/.gemini/trustedFolders.json``
  (``$GEMINI_CLI_TRUSTED_FOLDERS_PATH``; ``$GEMINI_CLI_HOME`` for ``~``).
- Qwen Code and Copilot CLI read a project's hooks only in a trusted folder (Qwen: when
  folder trust is on): :mod:`homefolders`, where they keep it.

Trust granted in the home directory is a person's, shared by every project: uninstall
leaves it.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

from ..errors import BadInput, os_failure
from . import mcp
from .homefolders import (copilot_config, copilot_config_text, copilot_trusted,
                          folder_rules_trust, qwen_folders, qwen_trusted)
from .homefolders import read_object as _json

# -- where each harness keeps it ----------------------------------------------------------


def codex_config() -> Path:
    return Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex", "config.toml")


def gemini_home() -> Path:
    return Path(os.environ.get("GEMINI_CLI_HOME") or Path.home(), ".gemini")


def gemini_folders() -> Path:
    return Path(os.environ.get("GEMINI_CLI_TRUSTED_FOLDERS_PATH")
                or gemini_home() / "trustedFolders.json")


CLAUDE_LOCAL = ".claude/settings.local.json"


def _toml(path: Path) -> dict:
    try:
        import tomllib
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, ImportError):
        return {}


# -- the state -------------------------------------------------------------------------------

def claude_approved(toplevel: str) -> bool:
    local = _json(Path(toplevel, CLAUDE_LOCAL))
    enabled = local.get("enabledMcpjsonServers")
    return local.get("enableAllProjectMcpServers") is True or (
        isinstance(enabled, list) and mcp.SERVER in enabled)


def codex_trusted(toplevel: str) -> bool:
    projects = _toml(codex_config()).get("projects")
    entry = projects.get(toplevel) if isinstance(projects, dict) else None
    return isinstance(entry, dict) and entry.get("trust_level") == "trusted"


_SNAKE = {"SessionStart": "session_start", "PreToolUse": "pre_tool_use",
          "PostToolUse": "post_tool_use", "UserPromptSubmit": "user_prompt_submit",
          "Stop": "stop", "SessionEnd": "session_end"}


def codex_hook_hashes(toplevel: str) -> dict[str, str]:
    """Each of our hooks in ``.codex/hooks.json`` as Codex names and hashes it: key
    ``<abs path>:<snake event>:<group index>:<handler index>``, hash ``sha256:`` of the
    canonical JSON of ``{"event_name", "hooks": [{"type", "command", "timeout", "async"}],
    "matcher"?}`` (the timeout as Codex applies it; found with Codex's own ``hooks/list``)."""
    import hashlib
    from .command import is_ours
    path = Path(toplevel, ".codex", "hooks.json")
    hooks = _json(path).get("hooks")
    out = {}
    for event, groups in (hooks.items() if isinstance(hooks, dict) else []):
        for g, group in enumerate(groups if isinstance(groups, list) else []):
            handlers = group.get("hooks") if isinstance(group, dict) else None
            for h, handler in enumerate(handlers if isinstance(handlers, list) else []):
                if not (isinstance(handler, dict) and is_ours(handler.get("command"), "codex")):
                    continue
                snake = _SNAKE.get(event, event)
                # the hash has the timeout Codex applies: 600 s, but for SessionEnd 1 s by
                # default and 3 s at most (found with hooks/list; another value is "modified")
                timeout = handler.get("timeout", 1 if snake == "session_end" else 600)
                if snake == "session_end":
                    timeout = min(timeout, 3)
                ident: dict = {"event_name": snake, "hooks": [{
                    "type": "command", "command": handler["command"],
                    "timeout": timeout, "async": False}]}
                if handler.get("statusMessage") is not None:
                    ident["hooks"][0]["statusMessage"] = handler["statusMessage"]
                if group.get("matcher") is not None:
                    ident["matcher"] = group["matcher"]
                canonical = json.dumps(ident, sort_keys=True, separators=(",", ":"),
                                       ensure_ascii=False)
                key = f"{path}:{_SNAKE.get(event, event)}:{g}:{h}"
                out[key] = "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()
    return out


def codex_untrusted_hooks(toplevel: str) -> list[str]:
    """The keys of our Codex hooks whose trusted hash is missing or no longer matches
    (Codex skips them)."""
    state = (_toml(codex_config()).get("hooks") or {}).get("state") or {}
    return [key for key, digest in codex_hook_hashes(toplevel).items()
            if not isinstance(state.get(key), dict) or state[key].get("trusted_hash") != digest]


def gemini_trusted(toplevel: str) -> bool:
    settings = _json(gemini_home() / "settings.json")
    folder_trust = ((settings.get("security") or {}).get("folderTrust") or {}) \
        if isinstance(settings.get("security"), dict) else {}
    if isinstance(folder_trust, dict) and folder_trust.get("enabled") is False:
        return True  # the person turned folder trust off: every folder is read
    return folder_rules_trust(toplevel, _json(gemini_folders()))


STEPS = {
    "claude": "approve the agent-registry MCP server when Claude Code asks (or: "
              "agent-registry harness install claude --trust)",
    "codex": "trust the project when Codex asks and the agent-registry hooks in /hooks "
             "(or: agent-registry harness install codex --trust)",
    "gemini": "trust this folder when Gemini CLI asks (or: agent-registry harness install "
              "gemini --trust)",
    "cursor": "enable the agent-registry MCP server in Cursor Settings > MCP",
    "copilot": "trust this folder when Copilot CLI asks, remembering it (untrusted, it runs "
               "no hooks at all), or: agent-registry harness install copilot --trust",
    "qwen": "trust this folder in Qwen Code (/trust), or: agent-registry harness install "
            "qwen --trust",
}


def state(toplevel: str, harness: str, status: dict) -> tuple[bool | None, str | None]:
    """(trusted: True, False, or None when there is nothing to grant; the step left)."""
    if not status.get("installed"):
        return None, None
    if harness == "claude":
        if status.get("mcp") in (None, "absent"):
            return None, None
        ok = claude_approved(toplevel)
    elif harness == "codex":
        ok = codex_trusted(toplevel)
        if ok and codex_untrusted_hooks(toplevel):
            return False, ("trust the agent-registry hooks in Codex's /hooks (new or changed "
                           "since trusted: Codex skips them), or: agent-registry harness "
                           "install codex --trust")
    elif harness == "gemini":
        ok = gemini_trusted(toplevel)
    elif harness == "copilot":
        ok = copilot_trusted(toplevel)
    elif harness == "qwen":
        ok = qwen_trusted(toplevel)
    elif harness == "cursor" and status.get("mcp") not in (None, "absent"):
        return None, STEPS["cursor"]
    else:
        return None, None
    return ok, None if ok else STEPS[harness]


# -- granting it ------------------------------------------------------------------------------

def _write(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.agent-registry-tmp")
        tmp.write_text(text, encoding="utf-8")
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o7777)
        os.replace(tmp, path)
    except OSError as exc:
        raise os_failure(exc, str(path)) from None


def claude_local_text(old: str, path) -> str | None:
    """``.claude/settings.local.json`` with our server in ``enabledMcpjsonServers``."""
    from .hookfiles import dump, load_object
    data = load_object(old, path)
    enabled = data.setdefault("enabledMcpjsonServers", [])
    if not isinstance(enabled, list):
        raise BadInput(f"{path}: enabledMcpjsonServers is not a list; nothing changed")
    if mcp.SERVER in enabled:
        return None
    enabled.append(mcp.SERVER)
    return dump(data)


def codex_config_text(old: str, toplevel: str) -> str | None:
    """Codex's user config.toml with the project trusted and each of our hooks' hash
    trusted, the rest kept as written; None when it says so already."""
    new = _toml_set(old, f"projects.{json.dumps(toplevel)}", "trust_level", '"trusted"')
    for key, digest in codex_hook_hashes(toplevel).items():
        new = _toml_set(new if new is not None else old, f"hooks.state.{json.dumps(key)}",
                        "trusted_hash", json.dumps(digest)) or new
    return new


def _toml_set(old: str, table: str, key: str, value: str) -> str | None:
    """*old* with ``key = value`` in ``[table]`` (a line replaced, inserted, or the table
    appended); None when it holds that line already."""
    header = f"[{table}]"
    lines = old.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.strip() == header), None)
    line = f"{key} = {value}\n"
    if start is None:
        separator = "" if not old else "\n" if old.endswith("\n") else "\n\n"
        return old + separator + header + "\n" + line
    end = next((i for i in range(start + 1, len(lines))
                if re.match(r"^\s*\[", lines[i])), len(lines))
    for i in range(start + 1, end):
        if re.match(rf"^\s*{key}\s*=", lines[i]):
            if lines[i].split("#")[0].strip() == line.strip():
                return None
            lines[i] = line
            return "".join(lines)
    lines.insert(start + 1, line)
    return "".join(lines)


def gemini_folders_text(old: str, path, toplevel: str) -> str | None:
    from .hookfiles import load_object
    data = load_object(old, path)
    if data.get(toplevel) == "TRUST_FOLDER":
        return None
    data[toplevel] = "TRUST_FOLDER"
    return json.dumps(data, indent=2) + "\n"


def grant(toplevel: str, common_dir: str, harness: str) -> list[str]:
    """Take the trust step for *harness*; the files written."""
    from .files import Plan, apply, read_text
    if harness == "claude":
        plan = Plan("claude", toplevel)
        plan.edit(CLAUDE_LOCAL, claude_local_text)
        from .unmerge import unmerge
        return [str(Path(toplevel, rel)) for rel in apply(plan, common_dir, unmerge("claude"))]
    if harness == "codex":
        path = codex_config()
        old = read_text(path)
        new = codex_config_text(old, toplevel)
        if new is not None:
            import tomllib
            try:
                tomllib.loads(old)
            except ValueError as exc:
                raise BadInput(f"{path} is not valid TOML ({exc}); nothing changed") from None
            try:  # our line edits must leave it valid (a table defined another way)
                tomllib.loads(new)
            except ValueError:
                raise BadInput(f"{path}: cannot add the trust entries to it as written; "
                               "trust the project and hooks in Codex (/hooks) instead; "
                               "nothing changed") from None
    elif harness == "gemini":
        path = gemini_folders()
        new = gemini_folders_text(read_text(path), path, toplevel)
    elif harness == "qwen":
        path = qwen_folders()
        new = gemini_folders_text(read_text(path), path, toplevel)
    elif harness == "copilot":
        path = copilot_config()
        new = copilot_config_text(read_text(path), path, toplevel)
    else:
        return []
    if new is None:
        return []
    _write(path, new)
    return [str(path)]
