"""Folder trust that Qwen Code and Copilot CLI keep in the person's home (the trust step
of :mod:`trust` for them; Gemini CLI's trustedFolders.json has Qwen's format).

- Qwen Code reads a project's ``.qwen/settings.json`` hooks only in a trusted folder when
  folder trust is on; it is off by default (``security.folderTrust.enabled`` in
  ``~/.qwen/settings.json``).  The rules are Gemini CLI's, ``{"<path>": "TRUST_FOLDER" |
  "TRUST_PARENT" | "DO_NOT_TRUST"}`` in ``~/.qwen/trustedFolders.json``
  (``$QWEN_CODE_TRUSTED_FOLDERS_PATH``; ``$QWEN_HOME`` for ``~/.qwen``), the longest
  matching rule deciding.
- Copilot CLI loads a repository's hooks (``.github/hooks/``) and ``.mcp.json`` only in a
  trusted folder, and runs without them, silently, in any other (``-p`` too): the folder
  or one above it in ``trustedFolders`` of ``~/.copilot/config.json`` (``$COPILOT_HOME``),
  a JSON object after ``//`` comment lines Copilot writes itself, which are kept.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from ..errors import BadInput
from .hookfiles import load_object


def qwen_home() -> Path:
    return Path(os.environ.get("QWEN_HOME") or Path.home() / ".qwen")


def qwen_folders() -> Path:
    return Path(os.environ.get("QWEN_CODE_TRUSTED_FOLDERS_PATH")
                or qwen_home() / "trustedFolders.json")


def copilot_config() -> Path:
    return Path(os.environ.get("COPILOT_HOME") or Path.home() / ".copilot", "config.json")


def read_object(path: Path) -> dict:
    """A JSON object file's data; {} when it is missing, unreadable or no object."""
    try:
        data = json.loads(path.read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def folder_rules_trust(toplevel: str, rules: dict) -> bool:
    """Whether the longest rule of a trustedFolders.json (Gemini CLI's and Qwen Code's
    format) that covers *toplevel* trusts it."""
    best, verdict = -1, False
    for rule, level in rules.items():
        where = os.path.dirname(rule) if level == "TRUST_PARENT" else rule
        if (toplevel == where or toplevel.startswith(where.rstrip("/") + "/")) \
                and len(where) > best:
            best, verdict = len(where), level in ("TRUST_FOLDER", "TRUST_PARENT")
    return verdict


def qwen_trusted(toplevel: str) -> bool:
    security = read_object(qwen_home() / "settings.json").get("security")
    folder_trust = security.get("folderTrust") if isinstance(security, dict) else None
    if not (isinstance(folder_trust, dict) and folder_trust.get("enabled") is True):
        return True  # folder trust is off (Qwen Code's default): every folder is read
    return folder_rules_trust(toplevel, read_object(qwen_folders()))


def _jsonc(text: str, path) -> tuple[str, dict]:
    """(the ``//`` comment lines heading *text*, the JSON object after them)."""
    lines = text.splitlines(keepends=True)
    n = next((i for i, line in enumerate(lines) if line.strip()
              and not line.lstrip().startswith("//")), len(lines))
    return "".join(lines[:n]), load_object("".join(lines[n:]), path)


def _listed(folders, toplevel: str) -> bool:
    """Whether a folder of the list *folders* is *toplevel* or above it."""
    return isinstance(folders, list) and any(
        isinstance(f, str) and (toplevel == f.rstrip("/") or toplevel.startswith(
            f.rstrip("/") + "/")) for f in folders)


def copilot_trusted(toplevel: str) -> bool:
    path = copilot_config()
    try:
        folders = _jsonc(path.read_text(encoding="utf-8"), path)[1].get("trustedFolders")
    except (OSError, ValueError, BadInput):
        return False
    return _listed(folders, toplevel)


def copilot_config_text(old: str, path, toplevel: str) -> str | None:
    """Copilot's config.json with *toplevel* in ``trustedFolders`` (its comment lines and
    other keys kept), or None when a folder there covers it already."""
    head, data = _jsonc(old, path)
    folders = data.setdefault("trustedFolders", [])
    if not isinstance(folders, list):
        raise BadInput(f"{path}: trustedFolders is not a list; nothing changed")
    if _listed(folders, toplevel):
        return None
    folders.append(toplevel)
    return head + json.dumps(data, indent=2) + "\n"
