"""A remote whose git server does not accept atomic pushes (``receive.advertiseAtomic
false``), and what `sync` says of a branch it made there.  A registry made here in lock
shards goes to its remote whole, in one ``git push --atomic`` (sync/leases.py): such a
remote is refused in one line that names the cause and the way out, before anything is
committed; a clone ref it cannot create stays in this clone, and says why.  `sync` says
it *created* a branch the remote never had, and *made anew* only one this clone had
seen there.  Real bare remotes, real clones, the real CLI."""
from __future__ import annotations

import json
import re
import subprocess

from helpers import CLI, git
from test_sync import BRANCH, Team
from test_sync_leases import made_before_its_remote, one_line, remote_parts


def no_atomic(bare, refuse: bool = True) -> None:
    git(bare, "config", "receive.advertiseAtomic", "false" if refuse else "true")


def test_the_first_publish_to_a_remote_without_atomic_pushes_is_refused_in_one_line(
        tmp_path):
    run, bare = made_before_its_remote(tmp_path)
    no_atomic(bare)
    for args in (("lock", "acquire", "src/auth.py", "--session", "repo-1"),
                 ("lock", "heartbeat", "--session", "repo-1"), ("sync",)):
        proc = run(*args)
        assert proc.returncode == 1, (args, proc.stdout, proc.stderr)
        line = one_line(proc)
        assert "origin does not accept atomic pushes" in line, line
        assert "receive.advertiseAtomic true" in line and "agent-registry.remote" in line
        assert remote_parts(bare) == [], remote_parts(bare)
    # refused before it was committed here: no claim this clone alone would hold
    check = run("lock", "check", "src/auth.py")
    assert check.returncode == 0 and "free" in check.stdout, check.stdout
    # the remote lets them in: the next write publishes the registry whole
    no_atomic(bare, refuse=False)
    claim = run("lock", "acquire", "src/auth.py", "--session", "repo-1")
    assert claim.returncode == 0, claim.stderr
    parts = remote_parts(bare)
    assert parts.count(BRANCH) == 1 and parts.count(f"{BRANCH}-shards") == 16, parts


def test_a_clone_ref_a_remote_without_atomic_pushes_cannot_create_says_why(tmp_path):
    """A registry already on the remote: claims (plain pushes) land; the heartbeat that
    would create this clone's ref stays here, and says why in words, not "unreachable";
    once the remote takes atomic pushes, `sync` says it created the clone ref there."""
    team = Team(tmp_path)
    a = team.clone("a")
    assert a("init").returncode == 0
    no_atomic(team.bare)
    b = team.clone("b")
    assert b("register", "b1", "--provider", "Kimi").returncode == 0
    assert b("lock", "acquire", "src/b.py", "--session", "b1").returncode == 0
    beat = b("lock", "heartbeat", "--session", "b1")
    assert beat.returncode == 0, beat.stderr
    assert "origin does not accept atomic pushes" in beat.stderr, beat.stderr
    assert "unreachable" not in beat.stderr, beat.stderr
    synced = b("sync")
    assert synced.returncode == 3, synced.stdout
    assert "does not accept atomic pushes" in synced.stdout + synced.stderr
    assert "unreachable" not in synced.stdout + synced.stderr
    no_atomic(team.bare, refuse=False)
    synced = b("sync")
    assert synced.returncode == 0, synced.stderr
    assert "clone ref" in synced.stdout and "created the branch on origin" in synced.stdout
    assert "made the branch anew" not in synced.stdout, synced.stdout
    assert remote_parts(team.bare).count(f"{BRANCH}-clones") == 1


def test_sync_says_it_created_a_registry_the_remote_never_had(tmp_path):
    run, bare = made_before_its_remote(tmp_path)
    synced = run("sync")
    assert synced.returncode == 0, synced.stderr
    assert "created the branch on origin" in synced.stdout, synced.stdout
    assert "made the branch anew" not in synced.stdout, synced.stdout
    assert remote_parts(bare).count(f"{BRANCH}-shards") == 16
    again = json.loads(run("--json", "sync").stdout)
    assert (again["made"], again["created"]) == (False, False)


def test_two_syncs_racing_onto_one_empty_remote_one_created_it(tmp_path):
    """Two registries made apart, synced at once onto one empty remote: the winner says
    it created the branch; the loser, whose push lands on the winner's, says it pushed,
    never that it made the branch anew."""
    a, bare = made_before_its_remote(tmp_path, "a")
    b, _ = made_before_its_remote(tmp_path, "b")
    procs = [subprocess.Popen([CLI, "--json", "sync"], cwd=run.cwd, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
             for run in (a, b)]
    reports = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        reports.append(json.loads(out))
    assert sorted(r["created"] for r in reports) == [False, True], reports
    assert not any(r["made"] for r in reports), reports
    assert all(r["landed"] for r in reports), reports


def test_a_remote_without_atomic_pushes_keeps_one_branch_and_is_not_asked_again(tmp_path):
    """`init` through a remote that does not accept atomic pushes makes the registry one
    branch, which it pushes, and says why in words (not "could not be used"); the
    operations after it say the same and do not try the conversion again, each a fetch
    and an atomic push more (git's trace counts the pushes); `agent-registry shard`
    converts it once the remote accepts them."""
    team = Team(tmp_path)
    no_atomic(team.bare)
    a = team.clone("a")
    made = a("init")
    assert made.returncode == 0, made.stderr
    assert "does not accept atomic pushes" in made.stdout + made.stderr, made.stderr
    assert "could not be used" not in made.stdout + made.stderr, made.stderr
    assert git(team.bare, "rev-parse", "-q", "--verify", f"refs/heads/{BRANCH}").strip()
    assert a("register", "a1", "--provider", "Kimi").returncode == 0
    # the claim's own push alone: no conversion tried
    assert claims_pushing(a, "a1", tmp_path) == [1, 1]
    no_atomic(team.bare, refuse=False)
    converted = a("shard")
    assert converted.returncode == 0, converted.stdout + converted.stderr
    parts = remote_parts(team.bare)
    assert parts.count(f"{BRANCH}-shards") == 16, parts


def test_a_clone_finding_a_remote_without_atomic_pushes_tries_the_conversion_once(tmp_path):
    """A one-branch registry another clone made there: this clone's first operation tries
    to convert it, learns the remote does not accept atomic pushes, says so, and goes
    on; the next one does not try again."""
    team = Team(tmp_path)
    no_atomic(team.bare)
    assert team.clone("a")("init").returncode == 0
    b = team.clone("b")
    assert b("register", "b1", "--provider", "Kimi").returncode == 0
    assert claims_pushing(b, "b1", tmp_path)[1] == 1  # the claim's own push alone


def claims_pushing(run, sid: str, tmp_path) -> list[int]:
    """Two claims by *sid* on a one-branch registry whose remote does not accept atomic
    pushes: each says so, neither says it tries again; the `git push` processes of each
    (git's trace)."""
    pushes = []
    for n in range(2):
        trace = tmp_path / f"trace-{n}"
        claim = run("lock", "acquire", f"src/{n}.py", "--session", sid,
                    env={"GIT_TRACE": str(trace)})
        assert claim.returncode == 0, claim.stderr
        assert "does not accept atomic pushes" in claim.stderr, claim.stderr
        assert "the next operation tries again" not in claim.stderr, claim.stderr
        pushes.append(len(re.findall(r"built-in: git push\b", trace.read_text())))
    return pushes


def test_init_remote_url_without_atomic_pushes_says_it_made_one_branch(tmp_path):
    """`init --remote URL` (sync/setup.connect, which inits through a registry of its
    own) on a remote that does not accept atomic pushes: the one branch it makes and
    pushes is said, with why and `agent-registry shard`, as plain `init` says it."""
    from helpers import Runner, make_repo
    team = Team(tmp_path)
    no_atomic(team.bare)
    run = Runner(make_repo(tmp_path / "apart"))
    made = run("init", "--remote", str(team.bare))
    assert made.returncode == 0, made.stdout + made.stderr
    assert git(team.bare, "rev-parse", "-q", "--verify", f"refs/heads/{BRANCH}").strip()
    assert "does not accept atomic pushes" in made.stderr, made.stdout + made.stderr
    assert "agent-registry shard" in made.stderr, made.stderr


def test_doctor_says_a_registry_is_kept_one_branch_by_its_remote(tmp_path):
    """The one branch `init` made because the remote does not accept atomic pushes:
    `doctor` warns in its sync line, naming `agent-registry shard`, not "ok"."""
    team = Team(tmp_path)
    no_atomic(team.bare)
    a = team.clone("a")
    assert a("init").returncode == 0
    doctor = a("--json", "doctor")
    found = {f["name"]: f for f in json.loads(doctor.stdout)["checks"]}
    assert found["sync"]["status"] == "warn", found["sync"]
    assert "does not accept atomic pushes" in found["sync"]["verdict"], found["sync"]
    assert "agent-registry shard" in found["sync"]["fix"], found["sync"]


def test_a_format_2_registry_is_upgraded_on_a_remote_without_atomic_pushes(tmp_path):
    """The upgrade from lock shards of format 2 is one commit of the registry branch, a
    push of one ref, which needs no atomic push: a remote that takes none takes it, from
    the first write of a clone."""
    from test_scale_convert import fmt, ref, shared_format_2
    team, a, b = shared_format_2(tmp_path)
    no_atomic(team.bare)
    claim = b("lock", "acquire", "pkg/b/other.py", "--session", "bee-1")
    assert claim.returncode == 0, claim.stderr
    assert fmt(team.bare, ref(team.bare, BRANCH))["format"] == 3
    assert "does not accept atomic pushes" not in claim.stderr, claim.stderr
