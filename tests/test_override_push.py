"""A commit let through with AGENT_REGISTRY_ALLOW=1 is not refused again at push (issue
36, smaller items): its override record names the commit by its tree and parent, and the
pre-push guard lets it through on that record; a commit nobody overrode still is refused.
Real commits through the installed hooks, a real push to a bare remote."""
from __future__ import annotations

from helpers import git
from test_guard import agents, commit, edit, head, hold, push  # noqa: F401 (a fixture)


def remote_main(repo) -> str:
    return git(repo, "ls-remote", "origin", "refs/heads/main").split()[0]


def test_a_commit_overridden_at_commit_is_pushed_without_a_second_override(pushing, agents):
    hold(pushing, "kimi-1", ["src/auth.py"], agents())
    edit(pushing, "src/auth.py")
    proc = commit(pushing, "-m", "deliberate", env={"AGENT_REGISTRY_ALLOW": "1"})
    assert proc.returncode == 0 and "recorded" in proc.stderr
    edit(pushing, "README.md")
    assert commit(pushing, "-m", "fine").returncode == 0
    proc = push(pushing)
    assert proc.returncode == 0, proc.stderr
    assert "src/auth.py: let through at its commit with AGENT_REGISTRY_ALLOW=1" in proc.stderr
    assert remote_main(pushing) == head(pushing)
    # a commit nobody overrode, beside one that was, is still refused
    edit(pushing, "src/auth.py", "once more\n")
    assert commit(pushing, "-m", "deliberate", env={"AGENT_REGISTRY_ALLOW": "1"}).returncode == 0
    edit(pushing, "src/auth.py", "again\n")
    assert commit(pushing, "--no-verify", "-m", "sneaky").returncode == 0
    sneaky = head(pushing)
    proc = push(pushing)
    assert proc.returncode == 1, proc.stderr
    assert f"commit {sneaky[:12]} touches src/auth.py" in proc.stderr
    # an amend of the overridden commit is another commit: refused too
    git(pushing, "reset", "-q", "--hard", "HEAD~1")
    edit(pushing, "src/auth.py", "amended\n")
    assert commit(pushing, "--no-verify", "--amend", "-m", "amended").returncode == 0
    proc = push(pushing)
    assert proc.returncode == 1 and "push refused" in proc.stderr
