import json

from helpers import registry_log


def test_register_claim_and_refuse(run, repo):
    assert run("register", "kimi-1", "Kimi", "2.7", "auth").returncode == 0
    assert run("register", "claude-1", "--provider", "Claude", "--working-on", "tests").returncode == 0
    assert run("lock", "acquire", "src/auth.py", "--session", "kimi-1").returncode == 0
    refused = run("lock", "acquire", "src/auth.py", "--session", "claude-1")
    assert refused.returncode == 1
    assert "kimi-1" in refused.stderr
    listed = json.loads(run("--json", "lock", "list").stdout)["locks"]
    assert [(l["path"], l["owner"]) for l in listed] == [("src/auth.py", "kimi-1")]
    checked = json.loads(run("--json", "lock", "check", "src/auth.py", "--session", "claude-1").stdout)
    assert (checked["paths"][0]["state"], checked["paths"][0]["owner"]) == ("locked", "kimi-1")
    # the audit log (the registry's branches) has the claim, and not the refused one
    subjects = [message.split("\n")[0] for _, message in registry_log(repo)]
    assert "claim src/auth.py by kimi-1" in subjects
    assert not any(s.startswith("claim src/auth.py by claude-1") for s in subjects)
