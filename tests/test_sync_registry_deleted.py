"""A registry deleted on the remote: what a clone may make anew there, and the ways out.

A clone that lacks lock shards its layout names (only the clone that ran `init`, or
claimed there, has a shard's local branch) must not push the registry branch again on
a remote that lost them too: that published a registry no clone could read (each reads
the shards its layout names as missing), and `sync` fixed nothing.  Real bare remotes,
real clones, the real CLI.
"""
from __future__ import annotations

import json

import pytest

from helpers import Runner, git, single_branch
from test_sync import BRANCH, Team, lock_owner_on_remote, sessions_on_remote


def registry_heads(team: Team) -> dict[str, str]:
    """The remote's registry refs (the branch, its shards, clone refs, intents): ref ->
    commit."""
    out = git(team.bare, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads/")
    return {ref: tip for ref, tip in (line.split() for line in out.splitlines())
            if ref[len("refs/heads/"):].startswith(BRANCH)}


def shard_heads(team: Team) -> list[str]:
    return sorted(ref for ref in registry_heads(team) if f"{BRANCH}-shards/" in ref
                  and "-intents/" not in ref)


def delete_on_remote(team: Team, *, shards_only: bool = False) -> None:
    """Delete the registry's refs on the bare remote, as a forge's "delete branch" does
    (all of them; or only the lock shards, which leaves the registry branch half-made,
    as an older version made it anew)."""
    for ref in registry_heads(team):
        if not shards_only or f"{BRANCH}-shards/" in ref:
            git(team.bare, "update-ref", "-d", ref)


def two_clones(team: Team) -> tuple[Runner, Runner]:
    """Clone a ran `init` (it has every shard's branch) and registered a1; clone b only
    registered b1 (the shards are its remote-tracking refs alone), and fetches before
    every read."""
    a, b = team.clone("a"), team.clone("b")
    assert a("init").returncode == 0
    assert a("register", "a1", "--provider", "Kimi").returncode == 0
    assert a("lock", "acquire", "src/auth.py", "--session", "a1").returncode == 0
    assert b("register", "b1", "--provider", "Claude").returncode == 0
    git(b.cwd, "config", "agent-registry.readFreshness", "0")
    assert not git(b.cwd, "for-each-ref", f"refs/heads/{BRANCH}-shards/")
    return a, b


def status(run: Runner) -> dict:
    proc = run("--json", "status")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.parametrize("way_out", ["leave", "start anew"])
def test_a_registry_uninstalled_on_the_remote_is_not_made_anew_without_its_shards(
        tmp_path, way_out):
    team = Team(tmp_path)
    a, b = two_clones(team)
    left = a("uninstall", "--branches", "--remote", "--yes", check_untouched=False)
    assert left.returncode == 0, left.stderr
    assert registry_heads(team) == {}

    register = b("register", "b2", "--provider", "Claude")
    assert register.returncode == 1, register.stdout
    [line] = register.stderr.strip().splitlines()
    assert "agent-registry was deleted on origin" in line and "shards/00" in line
    assert "`agent-registry uninstall --branches --yes`" in line
    assert "`agent-registry init`" in line
    assert registry_heads(team) == {}  # nothing of the remote changed
    for command in ("status", "sync"):  # neither says "run sync" alone, nor pushes
        proc = b(command)
        assert proc.returncode == 1, (command, proc.stdout)
        assert "uninstall --branches --yes" in proc.stderr, (command, proc.stderr)
        assert registry_heads(team) == {}
    fresh = team.clone("fresh")  # reads the remote as it is: no registry, no error
    assert status(fresh)["sessions"] == []

    assert b("uninstall", "--branches", "--yes", check_untouched=False).returncode == 0
    assert not git(b.cwd, "for-each-ref", f"refs/heads/{BRANCH}", f"refs/remotes/origin/{BRANCH}")
    if way_out == "leave":
        assert registry_heads(team) == {}
        assert status(b)["sessions"] == []
        return
    made = b("init")
    assert made.returncode == 0, made.stderr
    assert len(shard_heads(team)) == 16 and f"refs/heads/{BRANCH}" in registry_heads(team)
    assert b("register", "b3", "--provider", "Claude").returncode == 0
    assert b("lock", "acquire", "src/auth.py", "--session", "b3").returncode == 0
    late = team.clone("late")  # every clone reads it: a fresh one, and the one that left
    assert [s["id"] for s in status(late)["sessions"]] == ["b3"]
    assert late("register", "l1", "--provider", "Codex").returncode == 0
    assert late("lock", "acquire", "src/auth.py", "--session", "l1").returncode == 1
    assert a("register", "a2", "--provider", "Kimi").returncode == 0
    assert lock_owner_on_remote(team, "src/auth.py") == ["b3"]
    assert sessions_on_remote(team) == ["a2", "b3", "l1"]


def test_a_registry_deleted_by_mistake_is_put_back_by_the_clone_that_has_its_shards(tmp_path):
    team = Team(tmp_path)
    a, b = two_clones(team)
    before = set(registry_heads(team))
    delete_on_remote(team)  # a forge's "delete branch" on each of them
    refused = b("register", "b2", "--provider", "Claude")
    assert refused.returncode == 1 and "deleted on origin" in refused.stderr, refused.stderr
    assert "in a clone that has them" in refused.stderr
    assert registry_heads(team) == {}

    synced = a("sync")  # the clone that ran init has every shard: all of it goes back
    assert synced.returncode == 0, synced.stderr
    assert set(registry_heads(team)) >= {r for r in before if "-clones/" not in r}
    assert lock_owner_on_remote(team, "src/auth.py") == ["a1"]
    assert b("register", "b2", "--provider", "Claude").returncode == 0
    fresh = team.clone("fresh")
    check = fresh("--json", "lock", "check", "src/auth.py")
    assert json.loads(check.stdout)["paths"][0]["owner"] == "a1", check.stderr
    assert sessions_on_remote(team) == ["a1", "b1", "b2"]


@pytest.mark.parametrize("shards", ["16", "1"])
def test_a_registry_branch_deleted_alone_is_made_anew_by_a_clone_without_shards(
        tmp_path, shards):
    team = Team(tmp_path)
    a, b = team.clone("a"), team.clone("b")
    assert a("init", "--shards", shards).returncode == 0
    assert a("register", "a1", "--provider", "Kimi").returncode == 0
    assert a("lock", "acquire", "src/auth.py", "--session", "a1").returncode == 0
    assert b("register", "b1", "--provider", "Claude").returncode == 0
    git(team.bare, "update-ref", "-d", f"refs/heads/{BRANCH}")  # its shards stay
    assert b("register", "b2", "--provider", "Claude").returncode == 0
    assert b("lock", "acquire", "src/auth.py", "--session", "b2").returncode == 1
    fresh = team.clone("fresh")
    check = fresh("--json", "lock", "check", "src/auth.py")
    assert json.loads(check.stdout)["paths"][0]["owner"] == "a1", check.stderr
    assert "b2" in sessions_on_remote(team)


def test_a_half_made_remote_says_the_way_out_and_it_works(tmp_path):
    team = Team(tmp_path)
    a, b = two_clones(team)
    # the registry branch without its shards, as an older version made it anew
    delete_on_remote(team, shards_only=True)
    fresh = team.clone("fresh")
    for command in ("status", "sync"):
        proc = fresh(command)
        assert proc.returncode == 1, (command, proc.stdout)
        [line] = proc.stderr.strip().splitlines()
        assert "shards/00 is missing here, and origin did not have it" in line, line
        assert "`agent-registry uninstall --branches --remote --yes` in one clone" in line
    assert fresh("uninstall", "--branches", "--remote", "--yes",
                 check_untouched=False).returncode == 0
    assert fresh("init").returncode == 0
    assert len(shard_heads(team)) == 16
    assert fresh("register", "f1", "--provider", "Codex").returncode == 0
    assert fresh("lock", "acquire", "src/auth.py", "--session", "f1").returncode == 0
    # the other clones take the new registry up (their live sessions re-applied, as
    # on a remote that went back in time); their old claims do not come back over f1's
    for run in (b, a):
        assert run("register", f"{run.cwd.name}2", "--provider", "Claude").returncode == 0
        assert run("lock", "check", "src/auth.py").returncode == 1
    assert lock_owner_on_remote(team, "src/auth.py") == ["f1"]
    assert status(team.clone("late"))["sessions"]


def test_a_single_branch_registry_deleted_on_the_remote_is_made_anew(tmp_path):
    """The layout before lock shards (format 1, one branch: no face writes it any more,
    the core still does) names no part a clone could lack: made anew without loss."""
    team = Team(tmp_path)
    a = team.clone("a")
    with single_branch(a.cwd) as old:
        assert old.remote == "origin"
        old.register("a1", provider="Kimi")
        git(team.bare, "update-ref", "-d", f"refs/heads/{BRANCH}")
        old.register("a2", provider="Kimi")
    assert git(team.bare, "ls-tree", "--name-only", f"refs/heads/{BRANCH}", "layout.json") == ""
    assert sessions_on_remote(team) == ["a1", "a2"]


def test_sync_says_it_made_the_branch_anew_not_that_there_was_nothing_to_push(tmp_path):
    team = Team(tmp_path)
    a = team.clone("a")
    assert a("init").returncode == 0
    assert a("register", "a1", "--provider", "Kimi").returncode == 0
    git(team.bare, "update-ref", "-d", f"refs/heads/{BRANCH}")  # its shards stay
    synced = a("sync")
    assert synced.returncode == 0, synced.stderr
    assert "nothing to push" not in synced.stdout, synced.stdout
    assert "made the branch anew on origin" in synced.stdout, synced.stdout
    assert f"refs/heads/{BRANCH}" in registry_heads(team)
    again = a("--json", "sync")
    assert json.loads(again.stdout)["made"] is False
    assert "up to date with origin: nothing to push" in a("sync").stdout
