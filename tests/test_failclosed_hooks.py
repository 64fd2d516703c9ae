"""Hooks fail closed (issue 9): the Claude Code PreToolUse hook fails closed on a registry branch
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


def test_pre_commit_refuses_when_the_staged_paths_cannot_be_read(repo, run):
    """It let the commit through ("commit not checked") when `git diff --cached` failed."""
    import os
    import subprocess
    import sys
    assert run("init").returncode == 0
    bad = repo.parent / "corrupt.index"
    bad.write_bytes(b"not an index")
    env = {**os.environ, "GIT_INDEX_FILE": str(bad)}
    env.pop("AGENT_REGISTRY_ALLOW", None)
    guard = [sys.executable, "-m", "agent_registry.guard", "pre-commit"]
    proc = subprocess.run(guard, cwd=repo, env=env, capture_output=True, text=True)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "staged paths" in lines[0] and "AGENT_REGISTRY_ALLOW=1" in lines[0]
    proc = subprocess.run(guard, cwd=repo, env={**env, "AGENT_REGISTRY_ALLOW": "1"},
                          capture_output=True, text=True)
    assert proc.returncode == 0 and "allowed unchecked" in proc.stderr


def test_a_broken_remote_tracking_registry_branch_refuses(repo, run):
    """A fresh clone's registry is its remote-tracking branch: an empty ref file there
    is a broken registry, not none (it read as "guard off" and let the change through)."""
    import subprocess
    import sys
    from helpers import git
    assert run("init").returncode == 0
    git(repo, "update-ref", "-d", "refs/heads/agent-registry")
    git(repo, "remote", "add", "origin", str(repo.parent / "nowhere.git"))  # as git clone made
    tracking = repo / ".git" / "refs" / "remotes" / "origin" / "agent-registry"
    tracking.parent.mkdir(parents=True, exist_ok=True)
    tracking.write_text("")
    proc = subprocess.run([sys.executable, "-m", "agent_registry.guard", "check", "README.md"],
                          cwd=repo, capture_output=True, text=True)
    assert proc.returncode == 1 and "unreadable" in proc.stderr, proc.stderr


def test_harness_install_mcp_keeps_inline_tables_of_our_codex_entry(repo, run):
    """An `env = {...}` (or dotted `env.X`) a person put in our table was dropped on rewrite."""
    import pytest
    tomllib = pytest.importorskip("tomllib")
    config = repo / ".codex" / "config.toml"
    config.parent.mkdir()
    config.write_text('[mcp_servers.agent-registry]\ncommand = "/old/agent-registry"\n'
                      'args = ["mcp"]\nenv = { FOO = "bar", "A B" = 1 }\ntools.x = true\n'
                      '\n[other]\nk = 1\n')
    proc = run("harness", "install", "codex", "--mcp", check_untouched=False)
    assert proc.returncode == 0, proc.stderr
    data = tomllib.loads(config.read_text())
    entry = data["mcp_servers"]["agent-registry"]
    assert entry["env"] == {"FOO": "bar", "A B": 1} and entry["tools"] == {"x": True}
    assert entry["command"] != "/old/agent-registry" and data["other"] == {"k": 1}
    written = config.read_text()
    assert run("harness", "install", "codex", "--mcp", check_untouched=False).returncode == 0
    assert config.read_text() == written


def test_pre_push_refuses_in_one_line_when_it_cannot_list_what_is_pushed(repo, run):
    """A git failure while listing the pushed changes ended the hook in a traceback."""
    import os
    import subprocess
    import sys
    assert run("init").returncode == 0
    missing = "1" * 40
    stdin = f"refs/heads/main {missing} refs/heads/main {'0' * 40}\n"
    env = {k: v for k, v in os.environ.items() if k != "AGENT_REGISTRY_ALLOW"}
    guard = [sys.executable, "-m", "agent_registry.guard", "pre-push", "nowhere", "nowhere"]
    proc = subprocess.run(guard, cwd=repo, env=env, input=stdin, capture_output=True, text=True)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert "push refused: cannot list what the push changes" in last
    assert "AGENT_REGISTRY_ALLOW=1" in last


def test_a_repository_git_will_not_read_refuses_instead_of_guard_off(repo, run):
    """git refuses the repository (owned by another user: "dubious ownership"), so the
    guard cannot tell what a change touches: it refused nothing and said "guard off"."""
    import os
    import subprocess
    import sys
    assert run("init").returncode == 0
    subprocess.run(["chown", "-R", "12345:12345", str(repo)], check=True)
    env = {k: v for k, v in os.environ.items() if k != "AGENT_REGISTRY_ALLOW"}
    guard = [sys.executable, "-m", "agent_registry.guard", "check", "README.md"]
    proc = subprocess.run(guard, cwd=repo, capture_output=True, text=True, env=env)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.startswith("agent-registry: commit refused: cannot read the repository")
    assert "AGENT_REGISTRY_ALLOW=1 git commit" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    allowed = subprocess.run(guard, cwd=repo, capture_output=True, text=True,
                             env={**env, "AGENT_REGISTRY_ALLOW": "1"})
    assert allowed.returncode == 0 and "allowed unchecked" in allowed.stderr
    background = subprocess.run([sys.executable, "-m", "agent_registry.guard", "background-sync"],
                                cwd=repo, capture_output=True, text=True, env=env)
    assert background.returncode == 0  # not a gate
