"""Installing Aider: ``.aider.conf.yml`` with ``git-commit-verify: true`` and AGENTS.md in
``read``, the protocol in AGENTS.md, and the git hooks (as ``hooks install``).

Aider has no hooks of ours and no MCP: it cannot be stopped before an edit (``harness run
aider``, harness/aider_run.py, gives a run a session and the backstop after each edit).  What holds it
is the git guard at its commit: Aider commits with ``--no-verify`` unless
``git-commit-verify`` is on, which would skip the pre-commit hook; with it on, its
auto-commit of a path another session holds is refused (the edit stays in the working
tree, uncommitted, and Aider says the commit failed).  So install writes the git hooks too,
and refuses, before writing anything, when they cannot be installed (a foreign hook and a
``.agent-registry-chained`` one both there).  ``harness status`` says what enforces it:
the commit only.  ``harness uninstall aider`` leaves the git hooks (``hooks uninstall``
takes them out): they guard every commit, not Aider's alone.  ``read`` makes it load
AGENTS.md (the protocol) as a read-only file in every chat.  The YAML is merged round-trip
(comments and order kept); a file that already says so is left byte for byte.
"""
from __future__ import annotations

import io
import os
from pathlib import Path

from ..errors import BadInput, Refused
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
    plan.notes.append("Aider runs nothing of ours when it starts or ends: run it as "
                      "`agent-registry harness run aider -- ARGS` for a session of its own "
                      "and the backstop after each edit; a plain `aider` has no session, "
                      "and its commits count as a person's")
    return plan


ENFORCED_BY = ("the pre-commit guard at its commits; run through harness run aider: its "
               "session and the backstop after each edit (no edit gate)")


def _hooks(toplevel: str):
    from ..enforce import hooks
    from ..store.git import discover
    info = discover(toplevel)
    return hooks, info, hooks.hooks_dir(info)


def git_hooks_state(toplevel: str) -> str:
    """``installed`` (our pre-commit hook, its interpreter there), ``stale`` (ours, older
    text or another interpreter), ``broken`` (its interpreter gone) or ``not installed``."""
    hooks, info, where = _hooks(toplevel)
    target = where / "pre-commit"
    if not hooks.is_ours(target):
        return "not installed"
    python = hooks.installed_python(target)
    if python is not None and not os.access(python, os.X_OK):
        return "broken"
    try:
        current = target.read_text(encoding="utf-8") == hooks.hook_text("pre-commit")
    except OSError:
        return "broken"
    return "installed" if current else "stale"


def preflight(toplevel: str) -> None:
    """Refuse (before anything is written) when the git hooks cannot be installed."""
    hooks, info, where = _hooks(toplevel)
    for name in hooks.HOOK_NAMES:
        target, chained = where / name, where / (name + hooks.CHAINED_SUFFIX)
        if (target.exists() or target.is_symlink()) and not hooks.is_ours(target) and \
                (chained.exists() or chained.is_symlink()):
            raise Refused(f"Aider is held by the git pre-commit hook alone, and it cannot be "
                          f"installed: {target} is not ours and {chained.name} already "
                          "exists; move one of them away, then install again (nothing "
                          "changed)")
    if where.exists() and not os.access(where, os.W_OK):
        raise Refused(f"Aider is held by the git pre-commit hook alone, and {where} is not "
                      "writable (nothing changed)")


def after_install(toplevel: str) -> list[str]:
    """Install the git hooks unless ours are there and current; the notes to print."""
    hooks, info, where = _hooks(toplevel)
    if all(hooks.is_ours(where / n) and (where / n).read_text(encoding="utf-8")
           == hooks.hook_text(n) for n in hooks.HOOK_NAMES):
        return []
    result = hooks.install(info)
    chained = [h["hook"] for h in result["hooks"] if h["chained"]]
    return [f"installed the git hooks in {result['hooks_dir']}: Aider is held by the "
            "pre-commit guard at its commits (and, run through `harness run aider`, the "
            "backstop after each edit)" +
            (f" (chaining the existing {', '.join(chained)})" if chained else "")]


def extra_state(toplevel: str) -> dict:
    """``config``: whether .aider.conf.yml turns commit verification on and reads the
    protocol (``current``), is there without it (``stale``) or is absent; ``git_hooks``
    (:func:`git_hooks_state`); ``enforced_by``: what holds Aider."""
    out = {"git_hooks": git_hooks_state(toplevel), "enforced_by": ENFORCED_BY}
    path = Path(toplevel, CONFIG)
    try:
        old = path.read_text(encoding="utf-8")
    except OSError:
        return {"config": "absent", **out}
    try:
        return {"config": "current" if merge_config(old, path) is None else "stale", **out}
    except BadInput:
        return {"config": "stale", **out}
