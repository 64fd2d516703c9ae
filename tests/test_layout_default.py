"""The layout a new registry gets (issue 26): lock shards with clone refs, layout format 3,
16 shards, whether `init` or the first write makes it, locally and through a remote.
Since issue 32 it is the only layout a command writes: `init --shards 0` (or git config
agent-registry.shards 0), which kept the single branch, is bad input, and an existing
single-branch registry is converted by its first write (docs/shards.md, "What a new
registry gets"; the conversion itself: tests/test_scale_convert.py).

Real repositories, real processes, real bare remotes."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from helpers import Runner, git, make_repo, single_branch

from agent_registry.branch.paths import record_name

BRANCH = "agent-registry"
DEFAULT = {"format": 3, "shards": 16}
ONE = {"format": 1, "shards": 0}


@pytest.fixture(autouse=True)
def the_default(monkeypatch):
    monkeypatch.delenv("AGENT_REGISTRY_SHARDS", raising=False)
    monkeypatch.setenv("AGENT_REGISTRY_PID", "none")


def ok(proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert proc.returncode == 0, proc.stderr
    return proc


def shard_refs(where: Path, prefix: str = "refs/heads/") -> list[str]:
    out = git(where, "for-each-ref", "--format=%(refname)", f"{prefix}{BRANCH}-shards/")
    return out.split()


def layout_json(where: Path, rev: str = BRANCH) -> dict | None:
    proc = subprocess.run(["git", "show", f"{rev}:layout.json"], cwd=where,
                          capture_output=True, text=True)
    return json.loads(proc.stdout) if proc.returncode == 0 else None


def test_init_makes_lock_shards_with_clone_refs(repo):
    run = Runner(repo)
    made = json.loads(ok(run("--json", "init")).stdout)
    assert (made["created"], made["layout"]) == (True, DEFAULT)
    assert len(shard_refs(repo)) == 16
    assert layout_json(repo)["format"] == 3 and layout_json(repo)["shards"] == 16
    again = json.loads(ok(run("--json", "init")).stdout)
    assert (again["created"], again["layout"]) == (False, DEFAULT)
    # it works as a converted registry does: a claim lands on its shard, not the main branch
    ok(run("register", "s1", "--provider", "t", "--working-on", "auth"))
    ok(run("register", "s2", "--provider", "t", "--working-on", "other"))
    ok(run("lock", "acquire", "src/auth.py", "--session", "s1"))
    assert run("lock", "acquire", "src/auth.py", "--session", "s2").returncode == 1
    assert run("lock", "check", "src/auth.py").returncode == 1
    record = record_name("src/auth.py")
    assert record not in git(repo, "ls-tree", "-r", "--name-only", BRANCH).split()
    assert any(record in git(repo, "ls-tree", "-r", "--name-only", shard).split()
               for shard in shard_refs(repo))
    ok(run("context", "log", "s1", "a diary line"))
    assert git(repo, "for-each-ref", f"refs/heads/{BRANCH}-clones/")  # the clone's own ref
    status = ok(run("status"))
    assert "layout: 16 lock shards with clone refs, layout format 3" in status.stdout
    assert json.loads(ok(run("--json", "status")).stdout)["layout"] == DEFAULT


def test_the_first_write_makes_the_default_and_zero_shards_is_refused(tmp_path):
    """Rewritten for issue 32: `init --shards 0` and `git config agent-registry.shards 0`
    used to make (and keep) the single branch.  Now 0 is bad input (exit 2, one line
    saying one branch is no longer a layout, nothing made); counts are 1 to 64."""
    first = make_repo(tmp_path / "first")
    ok(Runner(first)("register", "s1", "--provider", "t", "--working-on", "w"))
    assert len(shard_refs(first)) == 16 and layout_json(first)["format"] == 3

    one = make_repo(tmp_path / "one")
    proc = Runner(one)("--json", "init", "--shards", "0")
    assert proc.returncode == 2, proc.stderr
    assert json.loads(proc.stdout)["error"]["code"] == 2
    assert len(proc.stderr.strip().splitlines()) <= 1
    text = Runner(one)("init", "--shards", "0")
    assert text.returncode == 2 and len(text.stderr.strip().splitlines()) == 1
    assert "no longer a layout" in text.stderr
    assert git(one, "for-each-ref", f"refs/heads/{BRANCH}*") == ""

    configured = make_repo(tmp_path / "configured")
    git(configured, "config", "agent-registry.shards", "0")
    proc = Runner(configured)("register", "s1", "--provider", "t", "--working-on", "w")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "agent-registry.shards" in proc.stderr and "no longer a layout" in proc.stderr
    assert git(configured, "for-each-ref", f"refs/heads/{BRANCH}*") == ""

    for count in ("1", "4", "64"):
        made = make_repo(tmp_path / f"n{count}")
        assert json.loads(ok(Runner(made)("--json", "init", "--shards", count)).stdout)[
            "layout"] == {"format": 3, "shards": int(count)}
        assert len(shard_refs(made)) == int(count)

    git(configured, "config", "agent-registry.shards", "4")  # the count of a new registry
    ok(Runner(configured)("register", "s1", "--provider", "t", "--working-on", "w"))
    assert len(shard_refs(configured)) == 4

    bad = make_repo(tmp_path / "bad")
    proc = Runner(bad)("init", "--shards", "65")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert git(bad, "for-each-ref", f"refs/heads/{BRANCH}*") == ""


def with_remote(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A bare remote, a repository `a` pushing to it (no registry yet), and where the
    caller clones `b`."""
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    a = make_repo(tmp_path / "a")
    git(a, "remote", "add", "origin", str(remote))
    git(a, "push", "-q", "origin", "main")
    return remote, a, tmp_path / "b"


def test_through_a_remote_one_atomic_push_and_the_next_clone_adopts(tmp_path):
    remote, a, b = with_remote(tmp_path)
    made = json.loads(ok(Runner(a)("--json", "init")).stdout)
    assert (made["created"], made["layout"]) == (True, DEFAULT)
    on_remote = git(remote, "for-each-ref", "--format=%(refname)", "refs/heads/").split()
    assert f"refs/heads/{BRANCH}" in on_remote and len(shard_refs(remote)) == 16
    assert git(remote, "rev-list", "--count", BRANCH).strip() == "2"  # init, then the layout

    git(tmp_path, "clone", "-q", str(remote), str(b))
    adopted = json.loads(ok(Runner(b)("--json", "init")).stdout)
    assert (adopted["created"], adopted["layout"]) == (False, DEFAULT)
    ok(Runner(a)("register", "s1", "--provider", "t", "--working-on", "w"))
    ok(Runner(a)("lock", "acquire", "src/auth.py", "--session", "s1"))
    ok(Runner(b)("register", "s2", "--provider", "t", "--working-on", "w"))
    assert Runner(b)("lock", "acquire", "src/auth.py", "--session", "s2").returncode == 1
    synced = json.loads(ok(Runner(b)("--json", "sync")).stdout)
    assert synced["layout"] == DEFAULT

    c = make_repo(tmp_path / "c")
    other = tmp_path / "other.git"
    git(tmp_path, "init", "-q", "--bare", str(other))
    ok(Runner(c)("init", "--remote", str(other)))
    assert len(shard_refs(other)) == 16 and layout_json(other)["format"] == 3


def test_an_existing_single_branch_registry_is_converted_by_its_first_write(tmp_path):
    """Rewritten for issue 32: an existing registry used to keep its layout.  Now `init`
    in a clone that has it says which layout it has until its first write (and writes
    nothing), and the first write of any clone converts it through the remote, once; the
    other clone adopts the conversion."""
    remote, a, b = with_remote(tmp_path)
    with single_branch(a) as old:  # as a version before the one layout left it
        old.register("s1", provider="t", working_on="w")
        old.claim("s1", ["src/auth.py"])
    assert layout_json(remote) is None and shard_refs(remote) == []
    local = make_repo(tmp_path / "local")
    single_branch(local).close()
    tip = git(local, "rev-parse", BRANCH)
    kept = json.loads(ok(Runner(local)("--json", "init")).stdout)
    assert (kept["created"], kept["layout"]) == (False, ONE)
    assert "one branch, layout format 1" in ok(Runner(local)("init")).stdout
    assert git(local, "rev-parse", BRANCH) == tip and shard_refs(local) == []  # nothing written
    git(tmp_path, "clone", "-q", str(remote), str(b))
    proc = ok(Runner(b)("register", "s2", "--provider", "t", "--working-on", "w"))
    assert "converted to 16 lock shards" in proc.stderr
    assert layout_json(remote)["format"] == 3 and len(shard_refs(remote)) == 16
    refused = Runner(b)("lock", "acquire", "src/auth.py", "--session", "s2")
    assert refused.returncode == 1 and "s1" in refused.stderr  # the lock moved with it
    again = ok(Runner(a)("lock", "acquire", "docs/a.md", "--session", "s1"))
    assert "converted" not in again.stderr  # adopted, not converted again
    added = git(remote, "log", "--format=%H", "--diff-filter=A", BRANCH, "--", "layout.json")
    assert len(added.split()) == 1
    assert json.loads(ok(Runner(a)("--json", "status")).stdout)["layout"] == DEFAULT


def test_an_unknown_session_is_told_the_live_ones_not_the_fence(repo):
    # heartbeats and diary lines go to the clone's own ref, whose view lists only the
    # sessions beating there: the error must still name the live sessions of the registry
    run = Runner(repo)
    ok(run("init"))
    ok(run("register", "kimi-1", "--provider", "Kimi", "--working-on", "auth"))
    for args in (["lock", "heartbeat", "--session", "kimi-2"],
                 ["context", "log", "kimi-2", "a line"]):
        proc = run(*args)
        assert proc.returncode != 0
        assert "unknown session kimi-2; did you mean kimi-1?" in proc.stderr, proc.stderr
        assert "format-2" not in proc.stderr


@pytest.mark.parametrize("made_by", ["init", "converted"])
def test_a_heartbeat_commit_counts_the_locks_the_shards_hold(repo, made_by):
    """The heartbeat's commit on the clone ref and its result name the locks the session
    holds in the shards, not the none its main-branch record lists (a registry made in
    lock shards, and a single-branch one converted by `agent-registry shard`)."""
    run = Runner(repo)
    if made_by == "init":
        ok(run("init"))
    else:
        single_branch(repo).close()
        ok(run("shard", "--count", "4"))
        assert layout_json(repo)["shards"] == 4
    ok(run("register", "s1", "--provider", "t"))
    ok(run("lock", "acquire", "src/auth.py", "docs/a.md", "--session", "s1"))
    result = json.loads(ok(run("--json", "lock", "heartbeat", "src/auth.py",
                               "--session", "s1")).stdout)
    assert result["locks"] == 2
    ref = git(repo, "for-each-ref", "--format=%(refname)", f"refs/heads/{BRANCH}-clones/").split()
    assert git(repo, "log", "-1", "--format=%s", *ref).strip() == "heartbeat s1 (2 lock(s))"


@pytest.mark.parametrize("ending", [["finish"], ["end", "--what", "done"]])
def test_ending_a_session_counts_the_locks_released_in_the_shards(repo, ending):
    """`finish` and `end` release the session's locks in the shards, then end it on the
    main branch, whose commit says how many were released."""
    run = Runner(repo)
    ok(run("init"))
    ok(run("register", "s1", "--provider", "t"))
    ok(run("lock", "acquire", "src/auth.py", "docs/a.md", "src/b.py", "--session", "s1"))
    result = json.loads(ok(run("--json", *ending, "s1")).stdout)
    assert sorted(result["released"]) == ["docs/a.md", "src/auth.py", "src/b.py"]
    subject = git(repo, "log", "-1", "--format=%s", BRANCH).strip()
    assert subject.endswith("releasing 3 lock(s)"), subject
