"""Whether the edit gate a harness has installed will run at all, and the one command that
makes it run again.

A gate that will not run lets every edit through and says nothing: ``harness status`` and
``doctor`` fail on it (install.status puts ``gate`` and ``gate_fix`` in each harness's
state).  The cases: the executable the hooks run is gone; Codex does not trust the project,
or its gate hook is new or changed since it was trusted; Gemini CLI, Copilot CLI or Qwen
Code do not trust the folder (they read no project hooks there); Aider's git pre-commit
hook, its only gate, is missing.  The fix is the install again with the options the hooks
were written with, and ``--trust`` where trust is missing.
"""
from __future__ import annotations

from .trust import codex_trusted, codex_untrusted_hooks

# the harnesses that read a project's hooks only once it is trusted (Claude Code needs no trust
# for hooks; Cursor's and OpenCode's run as written; Aider's gate is the git pre-commit hook)
HOOKS_NEED_TRUST = ("codex", "gemini", "copilot", "qwen")


def gate(toplevel: str, harness: str, status: dict) -> str | None:
    """Why the installed edit gate of *harness* will not run, in a few words; None when it
    runs (or the harness has none installed).  A gate that will not run lets every edit
    through in silence: ``harness status`` and ``doctor`` fail on it."""
    if not status.get("installed"):
        return None
    gone = [e["path"] for e in status.get("executable") or [] if not e["ok"]]
    if gone:
        return f"the executable its hooks run is gone ({gone[0]})"
    if harness == "aider":
        hook = status.get("git_hooks")
        return None if hook in ("installed", "stale") else \
            f"the git pre-commit hook, Aider's only gate, is {hook or 'not installed'}"
    if harness not in HOOKS_NEED_TRUST or status.get("hooks") in (None, "absent"):
        return None
    if harness == "codex":
        if not codex_trusted(toplevel):
            return "Codex loads no hooks of an untrusted project"
        if any(":pre_tool_use:" in key for key in codex_untrusted_hooks(toplevel)):
            return ("Codex skips the edit gate: it is new or changed since it was trusted "
                    "(silently, in codex exec)")
        return None
    if status.get("trusted") is False:
        return f"{harness} reads no hooks of an untrusted folder"
    return None


def reinstall_command(harness: str, options, *, trust: bool) -> str:
    """The one command that writes *harness*'s integration again as it was installed
    (*options*: those its installed hooks were written with), with ``--trust`` when
    *trust*."""
    words = ["agent-registry", "harness", "install", harness]
    if options.mcp:
        words.append("--mcp")
    if options.auto_claim:
        words.append("--auto-claim")
    if getattr(options, "deny_overlap", False):
        words.append("--deny-overlap")
    if getattr(options, "no_memory", False):
        words.append("--no-memory")
    if options.wake:
        words += ["--wake", str(options.wake)]
    if getattr(options, "hold", None):
        words += ["--hold", str(options.hold)]
    if trust:
        words.append("--trust")
    return " ".join(words)


def gate_fix(harness: str, options, why: str | None) -> str | None:
    """The one command that makes the gate run again (None: nothing to fix)."""
    if why is None:
        return None
    needs_trust = harness in HOOKS_NEED_TRUST and "executable" not in why
    return reinstall_command(harness, options, trust=needs_trust)
