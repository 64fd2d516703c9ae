"""Installing Aider: ``.aider.conf.yml`` with ``git-commit-verify: true`` and AGENTS.md in
``read``, and the protocol in AGENTS.md.

Aider has no hooks of ours and no MCP: it cannot be stopped before an edit.  What holds it
is the git guard: Aider commits with ``--no-verify`` unless ``git-commit-verify`` is on,
which would skip the pre-commit hook; with it on, a commit touching a path another
session holds is refused.  ``read`` makes it load AGENTS.md (the protocol) as a read-only
file in every chat.  The YAML is merged round-trip (comments and order kept); a file that
already says so is left byte for byte.
"""
from __future__ import annotations

import io
from pathlib import Path

from ..errors import BadInput
from .files import Plan

NAME = "aider"
CONFIG = ".aider.conf.yml"
PROTOCOL = "AGENTS.md"


def _yaml():
    from ruamel.yaml import YAML
    yaml = YAML()  # round-trip: keeps comments, order and quoting
    yaml.preserve_quotes = True
    return yaml


def merge_config(old: str, path) -> str | None:
    """*old* with ``git-commit-verify: true`` and AGENTS.md in ``read``; None when it
    already says so."""
    yaml = _yaml()
    try:
        data = yaml.load(old) if old.strip() else None
    except Exception as exc:  # ruamel raises many types for bad YAML
        raise BadInput(f"{path} is not valid YAML ({str(exc).splitlines()[0]}); "
                       "nothing changed") from None
    if data is None:
        from ruamel.yaml.comments import CommentedMap
        data = CommentedMap()
    if not hasattr(data, "get") or not hasattr(data, "insert"):
        raise BadInput(f"{path} is not a YAML mapping; nothing changed")
    changed = False
    if data.get("git-commit-verify") is not True:
        data["git-commit-verify"] = True
        changed = True
    read = data.get("read")
    if read is None:
        data["read"] = [PROTOCOL]
        changed = True
    elif isinstance(read, str):
        if read != PROTOCOL:
            data["read"] = [read, PROTOCOL]
            changed = True
    elif isinstance(read, list):
        if PROTOCOL not in read:
            read.append(PROTOCOL)
            changed = True
    else:
        raise BadInput(f"{path}: read is neither a file name nor a list; nothing changed")
    if not changed:
        return None
    out = io.StringIO()
    yaml.dump(data, out)
    return out.getvalue()


def plan(toplevel: str, options, file_name: str | None = None) -> Plan:
    from .install import add_texts
    plan = Plan(NAME, toplevel)
    plan.edit(CONFIG, merge_config)
    add_texts(plan, NAME)
    if options.mcp:  # with --all: named alone, --mcp is refused before this
        plan.notes.append("Aider has no MCP client: --mcp does nothing for it")
    return plan


def extra_state(toplevel: str) -> dict:
    """``config``: whether .aider.conf.yml turns commit verification on and reads the
    protocol (``current``), is there without it (``stale``) or is absent."""
    path = Path(toplevel, CONFIG)
    try:
        old = path.read_text(encoding="utf-8")
    except OSError:
        return {"config": "absent"}
    try:
        return {"config": "current" if merge_config(old, path) is None else "stale"}
    except BadInput:
        return {"config": "stale"}
