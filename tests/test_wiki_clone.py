"""`wiki query` in a clone that never had the registry branch by name: a plain `git clone`
(only refs/remotes/origin/agent-registry exists), and a worktree of such a clone.  The
index must follow the same tip as `wiki show` (Registry.tip), not the local branch only."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import git
from test_wiki_support import fixture_files, put_files

QUESTION = "celery emails lost on worker restart"
ANSWER = "kimi-1751000029"


@pytest.fixture
def fresh_clone(registry, repo, tmp_path) -> Path:
    """A plain `git clone` of a bare remote that holds the wiki entries."""
    put_files(registry, fixture_files())
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(repo, "push", "-q", str(remote), "main", "agent-registry")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(remote), str(clone))
    assert git(clone, "for-each-ref", "--format=%(refname)", "refs/heads/agent-registry") == ""
    assert git(clone, "rev-parse", "origin/agent-registry").strip()
    return clone


def query(run, where: Path) -> dict:
    proc = run("--json", "wiki", "query", QUESTION, cwd=where)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_a_plain_clone_finds_the_entry(fresh_clone, run):
    answer = query(run, fresh_clone)
    assert answer["results"][0]["session_id"] == ANSWER
    # and the text output, which said "not found in past sessions"
    text = run("wiki", "query", QUESTION, cwd=fresh_clone).stdout
    assert "not found" not in text and ANSWER in text
    # the clone never got a local registry branch from a read
    assert git(fresh_clone, "for-each-ref", "refs/heads/agent-registry") == ""


def test_a_worktree_of_a_plain_clone_finds_the_entry(fresh_clone, run, tmp_path):
    worktree = tmp_path / "wt"
    git(fresh_clone, "worktree", "add", "-q", "-b", "topic", str(worktree))
    assert query(run, worktree)["results"][0]["session_id"] == ANSWER
    # the index lives in the common dir: the main worktree uses it as it is
    again = query(run, fresh_clone)
    assert again["results"][0]["session_id"] == ANSWER


def test_a_clone_follows_what_it_fetches_later(fresh_clone, registry, repo, run):
    assert query(run, fresh_clone)["results"][0]["session_id"] == ANSWER
    newer = fixture_files()["wiki/kimi-1751000029.md"].replace("Celery", "Zanzibar")
    put_files(registry, {"wiki/later-1.md": newer})
    remote = str(fresh_clone.parent / "remote.git")
    git(repo, "push", "-q", remote, "agent-registry")
    git(fresh_clone, "fetch", "-q")
    proc = run("--json", "wiki", "query", "zanzibar", cwd=fresh_clone)
    answer = json.loads(proc.stdout)
    assert [r["session_id"] for r in answer["results"]] == ["later-1"]
