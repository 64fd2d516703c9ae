"""Review of issue 9: the Claude Code PreToolUse hook fails closed on a registry branch
that exists but cannot be read, as the commit guard does."""
from __future__ import annotations

import json

from test_guard import agents, hold  # noqa: F401  (fixture)
from test_harness import fire, edit_event


def test_pre_tool_use_denies_when_the_registry_branch_is_unreadable(repo, run, agents):
    assert run("harness", "install", "claude", check_untouched=False).returncode == 0
    assert fire(repo, "SessionStart", {"source": "startup"}).returncode == 0
    hold(repo, "kimi-1", ["src/auth.py"], agents())
    ref = repo / ".git" / "refs" / "heads" / "agent-registry"
    ref.write_text("1" * 40 + "\n")  # the branch names a commit that is not there
    proc = fire(repo, "PreToolUse", edit_event("src/auth.py"))
    assert proc.returncode == 0, proc.stderr
    decision = json.loads(proc.stdout)["hookSpecificOutput"]
    assert decision["permissionDecision"] == "deny"
    assert "unreadable" in decision["permissionDecisionReason"]
