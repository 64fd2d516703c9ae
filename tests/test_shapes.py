"""Operations are checked against their shape before they are applied (core/shapes.py):
a command's own, and a replayed one read back from a commit's trailer, which a person or
a damaged clone may have written badly.  Real repositories and a real bare remote."""
from __future__ import annotations

import json
import subprocess

import pytest

from agent_registry.core.shapes import check
from agent_registry.errors import BadInput
from agent_registry.branch.shards import lock_shards
from helpers import CLI, git, registry_log, shard_refs_of


@pytest.mark.parametrize("op, complaint", [
    ({"op": "claim", "at": 1.0, "session": "s1", "paths": [], "mode": "exclusive", "ttl": 600,
      "generations": {}}, "'paths' must be a non-empty list of strings"),
    ({"op": "claim", "at": 1.0, "session": "s1", "paths": ["a"], "mode": "mine", "ttl": 600,
      "generations": {}}, "'mode' must be one of exclusive, shared"),
    ({"op": "claim", "at": 1.0, "session": "s1", "paths": ["a"], "mode": "shared", "ttl": True,
      "generations": {}}, "'ttl' must be a positive integer"),
    ({"op": "finish", "at": 1.0, "session": "s1", "status": "OnWorking"}, "'status' must be"),
    ({"op": "heartbeat", "at": "now", "session": "s1"}, "'at' must be a number"),
    ({"op": "release", "at": 1.0, "paths": ["a"]}, "'session' is missing"),
    ({"op": "context-log", "at": 1.0, "session": "s1", "text": "x", "by": 3}, "'by' must be"),
])
def test_a_malformed_operation_is_named_in_one_line(op, complaint):
    with pytest.raises(BadInput, match=complaint):
        check(op)


def test_well_formed_operations_pass():
    check({"op": "heartbeat", "at": 1, "session": "s1", "id": "ab"})
    check({"op": "heartbeat", "at": 1.5, "session": "s1", "paths": ["src/"]})
    check({"op": "some-future-op", "at": 1.0, "anything": [1, 2]})


def test_a_damaged_replayed_claim_is_refused_not_applied(repo, tmp_path, run):
    """A pending commit whose Registry-Data says `"paths": "src/a.py"` (a string, as a
    hand edit might): sync refuses it on replay, says why (exit 1, as for any refused
    operation), and pushes the rest with the refusal recorded."""
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(repo, "remote", "add", "origin", str(remote))
    assert run("register", "s1", "--provider", "Kimi").returncode == 0
    assert run("sync").returncode == 0
    # claims are decided on the lock shard recording their path (the layout init makes):
    # src/b.py and, later, the other clone's claim are on the shard of src/a.py
    [shard] = shard_refs_of(repo, "src/a.py")
    index = int(shard.rsplit("/", 1)[1])
    b, c = [path for path in (f"src/x{i}.py" for i in range(1000))
            if lock_shards(path, 16) == (index,)][:2]
    assert run("lock", "acquire", b, "--session", "s1").returncode == 0
    # a clone-local commit carrying a malformed claim, on top of the shard's confirmed tip
    tip = git(repo, "rev-parse", shard).strip()
    tree = git(repo, "rev-parse", f"{shard}^{{tree}}").strip()
    op = {"op": "claim", "at": 1.0, "id": "bad1", "session": "s1", "paths": "src/a.py",
          "mode": "exclusive", "ttl": 600, "generations": {}}
    message = f"claim src/a.py by s1\n\nRegistry-Op: claim\nRegistry-Data: {json.dumps(op)}\n"
    bad = subprocess.run(["git", "commit-tree", tree, "-p", tip, "-m", message], cwd=repo,
                         capture_output=True, text=True, check=True).stdout.strip()
    git(repo, "update-ref", shard, bad, tip)
    # the remote's shard moves on meanwhile, so the pending commits are replayed
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(remote), str(other))
    for args in (["register", "s2", "--provider", "Codex"], ["lock", "acquire", c, "--session", "s2"]):
        subprocess.run([CLI, *args], cwd=other, capture_output=True, text=True, check=True)
    proc = run("--json", "sync")
    assert proc.returncode == 1 and "1 operation(s) refused" in proc.stderr
    error = json.loads(proc.stdout)["error"]  # the main branch's, then each shard's
    refused = error["refused"] + [r for part in error["shards"] for r in part["refused"]]
    assert [part["branch"] for part in error["shards"] if part["refused"]] == \
        [shard.removeprefix("refs/heads/")]
    assert [r["reason"] for r in refused] == [
        "operation 'claim': field 'paths' must be a non-empty list of strings"]
    tracking = shard.replace("refs/heads/", "refs/remotes/origin/")
    log = [message.split("\n")[0] for _, message in registry_log(repo, refs=[tracking])]
    assert "claim src/a.py by s1: refused on replay" in log
    check_a = json.loads(run("--json", "lock", "check", "src/a.py").stdout)
    assert check_a["paths"][0]["state"] == "free"
    # the rest was pushed: s1's claim of b and s2's of c are both on the remote's shard
    listed = {(l["path"], l["owner"]) for l in json.loads(run("--json", "lock", "list").stdout)["locks"]}
    assert {(b, "s1"), (c, "s2")} <= listed
