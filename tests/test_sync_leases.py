"""A push carries what this clone last saw on the remote (sync/leases.py): a ref deleted
there since is never made anew by a write that did not fetch first, and no lock shard or
clone ref is made on a remote without the registry branch.  Real bare remotes, real
clones, the real CLI; no clock is faked: a clone's fetch marks are set as a fetch of a
moment ago sets them (within FRESH, when a claim decides without fetching)."""
from __future__ import annotations

import glob
import os
import subprocess
import time

import pytest

from helpers import CLI, git, make_repo
from test_sync import BRANCH, Team, lock_owner_on_remote
from test_sync_registry_deleted import registry_heads, two_clones


def fetched(run, ago: float = 0.0) -> None:
    """This clone's fetch marks say it fetched *ago* seconds ago."""
    at = time.time() - ago
    for path in glob.glob(str(run.cwd / ".git" / "agent-registry" / "fetched" / "*")):
        if not path.endswith(".failed"):
            os.utime(path, (at, at))


def one_line(proc) -> str:
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


@pytest.mark.parametrize("ago", [0.0, 60.0], ids=["within FRESH", "fetching first"])
def test_a_claim_never_makes_anew_a_shard_of_a_registry_deleted_on_the_remote(tmp_path, ago):
    team = Team(tmp_path)
    a, b = two_clones(team)
    assert b("lock", "acquire", "src/b.py", "--session", "b1").returncode == 0  # b wrote it
    assert a("uninstall", "--branches", "--remote", "--yes",
             check_untouched=False).returncode == 0
    assert registry_heads(team) == {}
    fetched(b, ago)
    # a renewal in the shard b wrote, and a claim in one b only ever fetched
    claim = b("lock", "acquire", "src/b.py", "src/c.py", "--session", "b1")
    assert claim.returncode == 1, claim.stdout
    line = one_line(claim)
    assert "agent-registry was deleted on origin" in line
    assert "`agent-registry uninstall --branches --yes`" in line
    assert registry_heads(team) == {}
    assert b("sync").returncode == 1
    assert registry_heads(team) == {}


def test_claims_racing_in_many_processes_never_make_a_deleted_registry_anew(tmp_path):
    """Four claims of one clone at once, each deciding within FRESH on shards another
    clone deleted: none lands, none makes a ref there."""
    team = Team(tmp_path)
    a, b = two_clones(team)
    paths = ["src/b.py", "src/c.py", "docs/d.md", "e.txt"]
    assert b("lock", "acquire", paths[0], "--session", "b1").returncode == 0
    assert a("uninstall", "--branches", "--remote", "--yes",
             check_untouched=False).returncode == 0
    fetched(b)
    procs = [subprocess.Popen([CLI, "lock", "acquire", path, "--session", "b1"], cwd=b.cwd,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for path in paths]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 1, err
        assert "was deleted on origin" in err, err
    assert registry_heads(team) == {}


def test_a_claim_within_fresh_on_a_shard_deleted_alone_fetches_before_pushing(tmp_path):
    """The lease fails, the fetch says the shard is gone: decided as a claim that
    fetched first decides it (a shard this clone never wrote is not made anew)."""
    from agent_registry.branch.shards import lock_shards, shard_branch
    team = Team(tmp_path)
    a, b = two_clones(team)
    shard = shard_branch(BRANCH, lock_shards("src/c.py", 16, None)[0])
    assert b("lock", "check", "src/c.py").returncode == 0  # fetched: b saw the shard
    git(team.bare, "update-ref", "-d", f"refs/heads/{shard}")  # a forge's "delete branch"
    fetched(b)
    claim = b("lock", "acquire", "src/c.py", "--session", "b1")
    assert claim.returncode == 1 and "gone from origin" in claim.stderr, claim.stderr
    assert git(team.bare, "for-each-ref", f"refs/heads/{shard}") == ""
    assert a("sync").returncode == 0  # the clone that wrote it pushes it back
    assert b("lock", "acquire", "src/c.py", "--session", "b1").returncode == 0


def test_a_claim_within_fresh_still_lands_and_races_as_before(tmp_path):
    """The lease is no cost to the common case: a claim decided within FRESH lands,
    and one built on a tip the remote moved past loses the race and lands after it."""
    team = Team(tmp_path)
    a, b = two_clones(team)
    assert b("lock", "acquire", "src/b.py", "--session", "b1").returncode == 0
    assert a("lock", "acquire", "src/b2.py", "--session", "a1").returncode == 0
    fetched(b)  # b has not seen a's claim: its push is rejected, replayed, pushed
    assert b("lock", "acquire", "src/b3.py", "--session", "b1").returncode == 0
    owners = [lock_owner_on_remote(team, p) for p in ("src/b.py", "src/b2.py", "src/b3.py")]
    assert owners == [["b1"], ["a1"], ["b1"]]


def clone_heads(team: Team) -> list[str]:
    return [ref for ref in registry_heads(team) if f"{BRANCH}-clones/" in ref]


def test_a_heartbeat_makes_no_clone_ref_on_a_remote_whose_registry_was_deleted(tmp_path):
    team = Team(tmp_path)
    a, b = two_clones(team)
    assert a("uninstall", "--branches", "--remote", "--yes",
             check_untouched=False).returncode == 0
    for ago in (60.0, 0.0):  # fetching first, and within FRESH of that fetch
        fetched(b, ago)
        beat = b("lock", "heartbeat", "--session", "b1")
        assert beat.returncode == 1, beat.stdout
        assert "`agent-registry uninstall --branches --yes`" in one_line(beat)
        assert registry_heads(team) == {}


def made_before_its_remote(tmp_path, name: str = "repo"):
    """A registry made (`init`, a session) before its repository had a remote; then
    `git remote add origin` of an empty bare one: (runner, bare)."""
    from helpers import Runner
    repo = make_repo(tmp_path / name)
    bare = tmp_path / "remote.git"
    if not bare.exists():
        git(tmp_path, "init", "-q", "--bare", str(bare))
    run = Runner(repo)
    assert run("init").returncode == 0
    assert run("register", f"{name}-1", "--provider", "Kimi").returncode == 0
    git(repo, "remote", "add", "origin", str(bare))
    return run, bare


def remote_parts(bare) -> list[str]:
    names = git(bare, "for-each-ref", "--format=%(refname)", "refs/heads/").split()
    return sorted(n[len("refs/heads/"):].split("/")[0] for n in names)


@pytest.mark.parametrize("write", ["claim", "heartbeat", "register"])
def test_a_registry_made_before_its_remote_goes_there_whole_on_its_first_write(tmp_path,
                                                                              write):
    """Whichever write first meets the remote without the registry pushes the registry
    branch and all its lock shards in one atomic push (sync/leases.py first_push): never
    the one ref alone (a shard or a clone ref with no registry, a registry branch naming
    shards the remote lacks), and never a refusal of a registry no one else has."""
    run, bare = made_before_its_remote(tmp_path)
    args = {"claim": ("lock", "acquire", "src/auth.py", "--session", "repo-1"),
            "heartbeat": ("lock", "heartbeat", "--session", "repo-1"),
            "register": ("register", "second", "--provider", "Kimi")}[write]
    proc = run(*args)
    assert proc.returncode == 0, proc.stderr
    parts = remote_parts(bare)
    assert parts.count(BRANCH) == 1 and parts.count(f"{BRANCH}-shards") == 16, parts
    assert parts.count(f"{BRANCH}-clones") == (1 if write == "heartbeat" else 0), parts
    fresh = Team.__new__(Team)  # a clone of that remote, as a teammate makes one
    fresh.root, fresh.bare, fresh.url = tmp_path, bare, str(bare)
    other = fresh.clone("teammate")
    sessions = other("--json", "status")
    assert sessions.returncode == 0, sessions.stderr
    if write == "claim":
        held = other("lock", "check", "src/auth.py")
        assert held.returncode == 1 and "repo-1" in held.stdout, held.stdout


def test_two_registries_made_apart_racing_onto_one_remote_both_land(tmp_path):
    """Two repositories, each with a registry of its own, get one empty remote and claim
    at once: exactly one registry is the remote's; the other clone's claim loses the
    atomic create, fetches it and lands on it."""
    a, bare = made_before_its_remote(tmp_path, "a")
    b, _ = made_before_its_remote(tmp_path, "b")
    procs = [subprocess.Popen([CLI, "lock", "acquire", path, "--session", sid], cwd=run.cwd,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              stdin=subprocess.DEVNULL)
             for run, path, sid in ((a, "src/a.py", "a-1"), (b, "src/b.py", "b-1"))]
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    assert remote_parts(bare).count(f"{BRANCH}-shards") == 16
    roots = git(bare, "rev-list", "--max-parents=0", f"refs/heads/{BRANCH}").split()
    assert len(roots) == 1, roots  # one registry there, not two side by side
    for run in (a, b):
        for path, holder in (("src/a.py", "a-1"), ("src/b.py", "b-1")):
            check = run("sync"), run("lock", "check", path)
            assert check[1].returncode == 1 and holder in check[1].stdout, (path, check)


def test_a_claim_refused_after_it_was_committed_here_never_lands_later(tmp_path):
    """Decided within FRESH, the claim is committed on this clone's shard before its push
    meets the shard deleted there: refused (exit 1), it is taken out again, so the `sync`
    its refusal advises (which pushes the shard back) does not put it on the remote."""
    from agent_registry.branch.shards import lock_shards, shard_branch
    team = Team(tmp_path)
    a, b = two_clones(team)
    shard = shard_branch(BRANCH, lock_shards("src/b.py", 16, None)[0])
    assert shard == shard_branch(BRANCH, lock_shards("src/b.py/x", 16, None)[0])
    assert b("lock", "acquire", "src/b.py", "--session", "b1").returncode == 0
    git(team.bare, "update-ref", "-d", f"refs/heads/{shard}")
    fetched(b)
    claim = b("lock", "acquire", "src/b.py/x", "--session", "b1")
    assert claim.returncode == 1 and "gone from origin" in one_line(claim), claim.stderr
    synced = b("sync")
    assert synced.returncode == 0, synced.stderr
    assert f"refs/heads/{shard}" in registry_heads(team)  # pushed back, with b's claim
    assert lock_owner_on_remote(team, "src/b.py") == ["b1"]
    assert lock_owner_on_remote(team, "src/b.py/x") == []  # the refused one is not


@pytest.mark.parametrize("pruned_by", ["a refused claim", "git fetch --prune"])
def test_a_claim_after_the_refused_one_still_does_not_make_the_deleted_shard_anew(
        tmp_path, pruned_by):
    """The first claim's fetch (or the user's `git fetch --prune`) drops the shard's
    tracking ref: the next claim, which finds no tracking ref to have seen it by, is
    refused alike (it was on the remote when this clone last synced it); `sync` in
    this clone pushes it back, and claims land again."""
    from agent_registry.branch.shards import lock_shards, shard_branch
    team = Team(tmp_path)
    a, b = two_clones(team)
    shard = shard_branch(BRANCH, lock_shards("src/b.py", 16, None)[0])
    assert b("lock", "acquire", "src/b.py", "--session", "b1").returncode == 0
    git(team.bare, "update-ref", "-d", f"refs/heads/{shard}")
    if pruned_by == "git fetch --prune":
        git(b.cwd, "fetch", "-q", "--prune", "origin")
    else:
        assert b("lock", "acquire", "src/b.py/x", "--session", "b1").returncode == 1
    claim = b("lock", "acquire", "src/b.py/y", "--session", "b1")
    assert claim.returncode == 1 and "gone from origin" in one_line(claim), claim.stderr
    assert f"refs/heads/{shard}" not in registry_heads(team)
    assert b("sync").returncode == 0
    assert b("lock", "acquire", "src/b.py/y", "--session", "b1").returncode == 0
    assert lock_owner_on_remote(team, "src/b.py") == ["b1"]
    assert lock_owner_on_remote(team, "src/b.py/y") == ["b1"]
