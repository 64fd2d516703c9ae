from helpers import git


def test_register_claim_and_refuse(run, repo):
    assert run("register", "kimi-1", "Kimi", "2.7", "auth").returncode == 0
    assert run("register", "claude-1", "--provider", "Claude", "--working-on", "tests").returncode == 0
    assert run("lock", "acquire", "src/auth.py", "--session", "kimi-1").returncode == 0
    refused = run("lock", "acquire", "src/auth.py", "--session", "claude-1")
    assert refused.returncode == 1
    assert "kimi-1" in refused.stderr
    assert "claim src/auth.py by kimi-1" in git(repo, "log", "--format=%s", "agent-registry")
