"""A registry kept open (the MCP server, the dashboard) moves its refs through kept
``git update-ref --stdin`` processes (store/refupdates.py): one per reflog reason,
not one per write, and still a compare-and-swap."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from agent_registry import Registry
from agent_registry.store.git import CasFailed
from helpers import CLI, git


@pytest.fixture
def logged_git(tmp_path, monkeypatch) -> Path:
    """Every git process started from here on is logged, one line of its arguments."""
    log = tmp_path / "git.log"
    wrapper = tmp_path / "bin" / "git"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\necho "$*" >> "{log}"\nexec "{shutil.which("git")}" "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{wrapper.parent}{os.pathsep}{os.environ['PATH']}")
    return log


def started(log: Path, program: str) -> list[str]:
    return [line for line in log.read_text().splitlines() if line.split()[:1] == [program]] \
        if log.exists() else []


def test_claims_of_a_kept_registry_start_one_update_ref(repo, logged_git):
    with Registry.open(str(repo)) as registry:
        registry.register("s1", provider="Kimi", pid=os.getpid())
        for i in range(6):  # over many shards: one process for every ref
            assert registry.claim("s1", [f"src/m{i}/f.py"])["locks"][0]["status"] == "acquired"
        registry.release("s1", ["src/m0/f.py"])
    updates = started(logged_git, "update-ref")
    # one per reflog reason, whatever the number of writes; none for the claims once the
    # process moves the refs itself (store/looseref.py: the config a second old, which a
    # slow machine reaches before the first claim)
    claims = [line for line in updates if "agent-registry: claim" in line]
    assert len(claims) <= 1 and len(set(updates)) == len(updates), updates
    out = subprocess.run([CLI, "lock", "check", "src/m1/f.py", "src/m0/f.py",
                          "--json"], cwd=repo, capture_output=True, text=True)
    assert [p["state"] for p in json.loads(out.stdout)["paths"]] == \
        ["locked", "free"]


def test_the_kept_update_ref_is_a_compare_and_swap(repo, logged_git):
    """A swap from the wrong tip fails, as the one-shot update-ref did, and the next one
    goes through; git's reflog names the reason."""
    first = git(repo, "commit-tree", "-m", "a", git(repo, "write-tree").strip()).strip()
    second = git(repo, "commit-tree", "-m", "b", "-p", first,
                 git(repo, "write-tree").strip()).strip()
    ref = "refs/heads/cas-test"
    with Registry.open(str(repo)) as registry:
        store = registry.repo
        store.update_ref(ref, first, None, "agent-registry: test")
        with pytest.raises(CasFailed):
            store.update_ref(ref, second, None, "agent-registry: test")  # it exists
        with pytest.raises(CasFailed):
            store.update_ref(ref, second, second, "agent-registry: test")  # not at second
        assert store.read_ref(ref) == first
        for new, old in ((second, first), (first, second), (second, first), (first, second)):
            store.update_ref(ref, new, old, "agent-registry: test")
        assert store.read_ref(ref) == first
    assert git(repo, "rev-parse", ref).strip() == first
    assert git(repo, "reflog", "show", "--format=%gs", ref).split("\n")[0] == "agent-registry: test"
    # seven swaps: each refusal ends the kept process and asks the one-shot update-ref
    # why (2 x 2), then one kept process serves the rest
    assert len(started(logged_git, "update-ref")) == 5
