"""Lock shards (layout format 3, docs/shards.md) with real clones of a real bare remote:
claims of unrelated paths write only their own shard, conflicting claims recorded in
different places (a file, its directory, a broad directory, globs) still have exactly one
winner, the guard of another clone reads the shards, a kill -9 leaves every ref valid,
and the holders' heartbeats decide staleness in a shard.  Registries converted here start
as one branch built through the core (helpers.single_branch), as older versions left
them: no command writes that layout any more."""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest

from helpers import CLI, FakeClock, git, make_repo, single_branch
from test_sync import Team, _race

from agent_registry import Registry
from agent_registry.branch import shards as S

COUNT = 8
BRANCH = "agent-registry"


def remote_refs(team: Team) -> dict[str, str]:
    out = git(team.bare, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads/")
    return dict(line.split() for line in out.splitlines())


def sharded_team(tmp_path: Path, n: int) -> tuple[Team, list]:
    """A remote whose single-branch registry was converted to COUNT shards, and *n* clones
    each with a registered session s<i> (registered before the conversion by the first
    clones, through the core on the single branch; after it by the rest, through the
    CLI: both must work)."""
    team = Team(tmp_path)
    clones = [team.clone(f"c{i}") for i in range(n)]
    for i, clone in enumerate(clones[: max(1, n // 2)]):
        with single_branch(clone.cwd) as old:
            if i < n // 2:
                old.register(f"s{i}", provider="Codex")
    proc = clones[0]("shard", "--count", str(COUNT))
    assert proc.returncode == 0, proc.stderr
    for i, clone in enumerate(clones[n // 2:], start=n // 2):
        assert clone("register", f"s{i}", "--provider", "Codex").returncode == 0
    return team, clones


def fresh_locks(team: Team) -> list[dict]:
    """Every live lock, as a clone made now reads it from the remote."""
    name = f"fresh-{random.random()}"
    reader = team.clone(name)
    proc = reader("--json", "lock", "list")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["locks"]


def test_a_file_claim_writes_its_one_shard_and_another_clone_is_refused(tmp_path):
    team, (a, b) = sharded_team(tmp_path, 2)
    before = remote_refs(team)
    assert a("lock", "acquire", "src/auth/token.py", "--session", "s0").returncode == 0
    after = remote_refs(team)
    moved = sorted(ref for ref in after if after[ref] != before.get(ref))
    shard = S.lock_shards("src/auth/token.py", COUNT)[0]
    assert moved == [S.shard_ref(BRANCH, shard)]  # not the main branch, not another shard
    proc = b("lock", "acquire", "src/auth/token.py", "--session", "s1")
    assert proc.returncode == 1 and "locked by s0" in proc.stderr
    proc = b("--json", "lock", "check", "src/auth/")
    assert json.loads(proc.stdout)["paths"][0]["owner"] == "s0"
    # a directory claim finds the file lock below it in its shard
    proc = b("lock", "acquire", "src/", "--session", "s1")
    assert proc.returncode == 1 and "via src/auth/token.py" in proc.stderr
    assert [(l["path"], l["owner"]) for l in fresh_locks(team)] == [("src/auth/token.py", "s0")]
    assert a("finish", "s0").returncode == 0
    assert fresh_locks(team) == []
    assert b("lock", "acquire", "src/", "--session", "s1").returncode == 0


# every target covers src/auth/x.py; their records live in one shard (the keyed ones) or
# in all of them (the broad ones): each pair must still meet on a common ref
CONTENDERS = ["src/auth/x.py", "src/auth/", "src/", "**/*.py", "src/auth/*.py", "src/*"]


@pytest.mark.parametrize("rounds", [1, pytest.param(3, marks=pytest.mark.slow)])
def test_conflicting_claims_recorded_in_different_shards_have_one_winner(tmp_path, rounds):
    team, clones = sharded_team(tmp_path, len(CONTENDERS))
    for round_ in range(rounds):
        targets = CONTENDERS[round_:] + CONTENDERS[:round_]
        results = _race(clones, lambda i: f"exec {CLI} lock acquire '{targets[i]}' --session s{i}")
        winners = [i for i, p in enumerate(results) if p.returncode == 0]
        assert len(winners) == 1, [(targets[i], p.returncode, p.stderr) for i, p in enumerate(results)]
        for i, proc in enumerate(results):
            if i not in winners:
                assert proc.returncode == 1, proc.stderr
        winner = winners[0]
        # nothing a loser took in a shard before being refused is left behind
        assert [(l["path"], l["owner"]) for l in fresh_locks(team)] == \
            [(targets[winner], f"s{winner}")]
        proc = clones[winner]("lock", "release", targets[winner], "--session", f"s{winner}")
        assert proc.returncode == 0, proc.stderr
    assert fresh_locks(team) == []


def test_clones_claiming_distinct_paths_all_land_without_moving_the_main_branch(tmp_path):
    team, clones = sharded_team(tmp_path, 6)
    main = remote_refs(team)[f"refs/heads/{BRANCH}"]

    def claims(i: int) -> str:
        paths = " ".join(f"pkg{i}/mod{k}/file.py" for k in range(4))
        return f"for p in {paths}; do {CLI} lock acquire $p --session s{i} || exit $?; done"
    results = _race(clones, claims)
    assert all(p.returncode == 0 for p in results), [p.stderr for p in results if p.returncode]
    assert remote_refs(team)[f"refs/heads/{BRANCH}"] == main
    held = sorted((l["path"], l["owner"]) for l in fresh_locks(team))
    assert held == sorted((f"pkg{i}/mod{k}/file.py", f"s{i}") for i in range(6) for k in range(4))


def test_the_guard_of_a_clone_that_only_fetched_reads_the_shards(tmp_path):
    team, (a, b) = sharded_team(tmp_path, 2)
    agent = subprocess.Popen(["sleep", "600"])
    try:
        assert a("register", "holder", "--provider", "Kimi", "--working-on", "tokens",
                 "--pid", str(agent.pid)).returncode == 0
        assert a("lock", "acquire", "src/auth/token.py", "--session", "holder").returncode == 0
        assert b("hooks", "install").returncode == 0
        git(b.cwd, "fetch", "-q", "origin")  # a plain fetch: b's own registry branch is old
        for path in ("src/auth/token.py", "docs/notes.md"):
            (b.cwd / path).parent.mkdir(parents=True, exist_ok=True)
            (b.cwd / path).write_text("changed\n")
        git(b.cwd, "add", "src/auth/token.py")
        proc = subprocess.run(["git", "commit", "-q", "-m", "touch"], cwd=b.cwd,
                              capture_output=True, text=True)
        assert proc.returncode == 1, proc.stderr
        assert "holder" in proc.stderr and "tokens" in proc.stderr
        git(b.cwd, "reset", "-q")
        git(b.cwd, "add", "docs/notes.md")
        proc = subprocess.run(["git", "commit", "-q", "-m", "docs"], cwd=b.cwd,
                              capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
    finally:
        agent.kill()
        agent.wait()


def test_a_pending_single_branch_claim_is_refused_once_the_remote_is_sharded(tmp_path):
    from agent_registry.errors import Unconfirmed
    team = Team(tmp_path)
    a, b = team.clone("a"), team.clone("b")
    with single_branch(a.cwd) as old:  # the single branch of an older version
        old.register("s0", provider="Codex")
    with single_branch(b.cwd) as old:
        old.register("s1", provider="Codex")
        away = team.bare.with_name("away.git")
        team.bare.rename(away)
        with pytest.raises(Unconfirmed):  # committed here, not confirmed
            old.claim("s1", ["src/auth/x.py"])
        away.rename(team.bare)
    assert a("shard", "--count", str(COUNT)).returncode == 0
    proc = b("sync")
    assert proc.returncode == 1 and "split into lock shards" in proc.stdout + proc.stderr
    assert fresh_locks(team) == []  # refused, not applied where no one reads
    assert b("lock", "acquire", "src/auth/x.py", "--session", "s1").returncode == 0
    assert [(l["path"], l["owner"]) for l in fresh_locks(team)] == [("src/auth/x.py", "s1")]


def kill_mid_writes(repo: Path, scripts: list[str], seed: int, check) -> None:
    """Run each shell *script* in *repo* and kill -9 its process group at a random
    instant; after each, git fsck is clean and *check()* holds."""
    rng = random.Random(seed)
    for script in scripts:
        proc = subprocess.Popen(["bash", "-c", script], cwd=repo, start_new_session=True)
        time.sleep(rng.uniform(0.2, 1.5))
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        assert subprocess.run(["git", "fsck", "--no-dangling"], cwd=repo,
                              capture_output=True).returncode == 0
        check()


def test_kill_9_mid_claim_leaves_every_ref_valid(tmp_path):
    repo = make_repo(tmp_path / "repo")
    run = lambda *args: subprocess.run([CLI, *args], cwd=repo, capture_output=True, text=True)
    assert run("init", "--shards", "4").returncode == 0
    assert run("register", "k1", "--provider", "Codex").returncode == 0

    def lists() -> None:
        proc = run("--json", "lock", "list")
        assert proc.returncode == 0 and "unreadable" not in proc.stderr, proc.stderr
    kill_mid_writes(repo, ["; ".join(f"{CLI} lock acquire d{round_}/k{k}/f.py src/ --session k1"
                                     f" && {CLI} lock release src/ --session k1"
                                     for k in range(20)) for round_ in range(8)], 7, lists)
    # the registry still works: every shard takes a claim (src/ is in all of them)
    proc = run("lock", "acquire", "src/", "--session", "k1")
    assert proc.returncode == 0, proc.stderr
    for index in range(4):
        ref = S.shard_ref(BRANCH, index)
        assert git(repo, "cat-file", "-t", ref).strip() == "commit"


def sharded_registry(tmp_path: Path, clock: FakeClock, *sids: str) -> Registry:
    """A registry without a remote in 4 lock shards (made as `init --shards 4` makes it),
    sessions *sids* registered."""
    registry = Registry.open(str(make_repo(tmp_path / "repo")), clock=clock)
    registry.init(4)
    for sid in sids:
        registry.register(sid, provider="Codex")
    return registry


def test_a_holder_heartbeat_on_the_main_branch_keeps_its_shard_lock(tmp_path):
    clock = FakeClock(1_800_000_000)
    with sharded_registry(tmp_path, clock, "old", "new") as registry:
        registry.claim("old", ["src/auth/x.py"])
        clock.advance(500)
        registry.heartbeat("old")  # writes this clone's ref only, not the shard
        clock.advance(200)  # 700 s after the claim, 200 s after the heartbeat
        refused = _refusal(lambda: registry.claim("new", ["src/auth/x.py"]))
        assert "locked by old" in refused
        clock.advance(700)
        result = registry.claim("new", ["src/auth/x.py"])
        assert result["locks"][0]["status"] == "taken-over"
        assert [l["owner"] for l in registry.locks()] == ["new"]
        assert registry.session("old").locks == []  # its held list in the shard was updated


def _refusal(action) -> str:
    from agent_registry.errors import Refused
    try:
        action()
    except Refused as exc:
        return exc.message
    raise AssertionError("not refused")


def test_cleanup_spares_a_session_its_shard_claims_keep_alive(tmp_path):
    clock = FakeClock(1_800_000_000)
    with sharded_registry(tmp_path, clock, "busy", "idle") as registry:
        registry.claim("idle", ["docs/guide/a.md"])
        clock.advance(500)
        registry.claim("busy", ["src/auth/x.py"], ttl=3000)  # renews busy on its shard only
        clock.advance(500)  # 1,000 s since either wrote the main branch
        stopped = [s["session"] for s in registry.cleanup(by="test")["stopped"]]
        assert stopped == ["idle"]
        assert registry.session("busy").live
        assert [l["owner"] for l in registry.locks()] == ["busy"]


def test_a_clone_that_never_saw_the_conversion_claims_on_the_shard(tmp_path):
    team = Team(tmp_path)
    a, b = team.clone("a"), team.clone("b")
    with single_branch(b.cwd) as old:  # the single branch of an older version
        old.register("s1", provider="Codex")
    assert a("shard", "--count", str(COUNT)).returncode == 0  # b has not fetched since
    proc = b("lock", "acquire", "src/auth/x.py", "--session", "s1")
    assert proc.returncode == 0, proc.stderr
    fence = [p for p in S.fence_files(0) if p.startswith("locks/")]
    assert git(team.bare, "ls-tree", "-r", "--name-only", BRANCH, "locks/").split() == fence
    assert [(l["path"], l["owner"]) for l in fresh_locks(team)] == [("src/auth/x.py", "s1")]


def test_a_missing_shard_ref_refuses_rather_than_reading_no_locks(tmp_path):
    repo = make_repo(tmp_path / "repo")
    run = lambda *args: subprocess.run([CLI, *args], cwd=repo, capture_output=True, text=True)
    assert run("init", "--shards", "4").returncode == 0
    assert run("register", "k1", "--provider", "Codex").returncode == 0
    target = "src/auth/x.py"
    assert run("lock", "acquire", target, "--session", "k1").returncode == 0
    git(repo, "update-ref", "-d", S.shard_ref(BRANCH, S.lock_shards(target, 4)[0]))
    proc = run("lock", "check", target)
    assert proc.returncode != 0 and "missing" in proc.stderr and "agent-registry sync" in proc.stderr
    (repo / "src" / "auth").mkdir(parents=True, exist_ok=True)
    (repo / target).write_text("x\n")
    git(repo, "add", target)
    assert run("hooks", "install").returncode == 0
    proc = subprocess.run(["git", "commit", "-q", "-m", "x"], cwd=repo, capture_output=True, text=True)
    assert proc.returncode == 1 and "missing" in proc.stderr


def test_end_releases_the_shard_locks_like_finish(tmp_path):
    repo = make_repo(tmp_path / "repo")
    run = lambda *args: subprocess.run([CLI, *args], cwd=repo, capture_output=True, text=True)
    assert run("init", "--shards", "4").returncode == 0
    assert run("register", "e1", "--provider", "Codex").returncode == 0
    assert run("register", "e2", "--provider", "Codex").returncode == 0
    assert run("lock", "acquire", "src/auth/x.py", "docs/", "--session", "e1").returncode == 0
    proc = run("--json", "end", "e1", "--router", "auth tokens", "--what", "done")
    assert proc.returncode == 0, proc.stderr
    assert sorted(json.loads(proc.stdout)["released"]) == ["docs/", "src/auth/x.py"]
    proc = run("--json", "lock", "check", "src/auth/x.py", "docs/a.md")
    assert [p["state"] for p in json.loads(proc.stdout)["paths"]] == ["free", "free"]


def test_a_registry_sharded_before_it_had_a_remote_pushes_its_shards_with_it(tmp_path):
    repo = make_repo(tmp_path / "repo")
    run = lambda *args: subprocess.run([CLI, *args], cwd=repo, capture_output=True, text=True)
    assert run("init", "--shards", "4").returncode == 0
    assert run("register", "r1", "--provider", "Codex").returncode == 0
    assert run("lock", "acquire", "src/auth/x.py", "--session", "r1").returncode == 0
    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    proc = run("init", "--remote", str(bare))
    assert proc.returncode == 0, proc.stderr
    heads = git(bare, "for-each-ref", "--format=%(refname)", "refs/heads/").split()
    assert [S.shard_ref(BRANCH, i) for i in range(4)] == [h for h in heads if "-shards/" in h]
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(bare), str(other))
    proc = subprocess.run([CLI, "--json", "lock", "check", "src/auth/x.py"], cwd=other,
                          capture_output=True, text=True)
    assert json.loads(proc.stdout)["paths"][0]["owner"] == "r1", proc.stderr


@pytest.mark.parametrize("rounds", [1, pytest.param(3, marks=pytest.mark.slow)])
def test_claims_racing_the_conversion_all_land_in_the_shards(tmp_path, rounds):
    for round_ in range(rounds):
        # each claim is its clone's first write on the single branch: it converts by
        # itself, racing `shard` and the other claims (all asking for COUNT shards)
        team = Team(tmp_path / f"round{round_}")
        clones = [team.clone(f"c{i}") for i in range(4)]
        for i, clone in enumerate(clones):
            with single_branch(clone.cwd) as old:
                if i:
                    old.register(f"s{i}", provider="Codex")
            git(clone.cwd, "config", "agent-registry.shards", str(COUNT))
        results = _race(clones, lambda i: f"exec {CLI} shard --count {COUNT}" if i == 0 else
                        f"exec {CLI} lock acquire src/m{i}/x.py docs/d{i}/ --session s{i}")
        assert [p.returncode for p in results] == [0, 0, 0, 0], [p.stderr for p in results]
        added = git(team.bare, "log", "--format=%H", "--diff-filter=A", BRANCH, "--",
                    S.LAYOUT).split()
        assert len(added) == 1, round_  # one conversion landed
        assert json.loads(git(team.bare, "show", f"{BRANCH}:{S.LAYOUT}"))["shards"] == COUNT
        fence = [p for p in S.fence_files(0) if p.startswith("locks/")]
        assert git(team.bare, "ls-tree", "-r", "--name-only", BRANCH, "locks/").split() == fence
        held = sorted((l["path"], l["owner"]) for l in fresh_locks(team))
        assert held == sorted((p, f"s{i}") for i in range(1, 4)
                              for p in (f"src/m{i}/x.py", f"docs/d{i}/")), round_


def test_an_offline_claim_over_two_shards_commits_both_and_sync_confirms_them(tmp_path):
    team, (a, b) = sharded_team(tmp_path, 2)
    targets = ["src/auth/y.py", "docs/guide/intro.md"]
    assert len({S.lock_shards(t, COUNT)[0] for t in targets}) == 2
    away = team.bare.with_name("away.git")
    team.bare.rename(away)
    proc = a("--json", "lock", "acquire", *targets, "--session", "s0")
    assert proc.returncode == 3, proc.stderr
    assert sorted(l["path"] for l in json.loads(proc.stdout)["error"]["locks"]) == sorted(targets)
    away.rename(team.bare)
    proc = a("sync")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted((l["path"], l["owner"]) for l in fresh_locks(team)) == \
        sorted((t, "s0") for t in targets)


@pytest.mark.slow
def test_twelve_clones_claiming_in_one_shard_all_land_once_with_help(tmp_path):
    """Every claim in one key, so one shard takes them all: the contention of the single
    branch, on a shard, where helping (per shard) must bound it and lose nothing."""
    team, clones = sharded_team(tmp_path, 12)

    def claims(i: int) -> str:
        paths = " ".join(f"src/hot/c{i}-{k}.py" for k in range(6))
        return f"for p in {paths}; do {CLI} lock acquire $p --session s{i} || exit $?; done"
    results = _race(clones, claims)
    assert all(p.returncode == 0 for p in results), [p.stderr for p in results if p.returncode]
    for clone in clones:
        assert clone("sync").returncode == 0
    held = sorted((l["path"], l["owner"]) for l in fresh_locks(team))
    assert held == sorted((f"src/hot/c{i}-{k}.py", f"s{i}") for i in range(12) for k in range(6))
    shard = S.shard_ref(BRANCH, S.lock_shards("src/hot/x.py", COUNT)[0])
    log = git(team.bare, "log", "--format=%B", shard)
    assert "Registry-Helped: " in log  # the losers were carried on their shard


def test_a_holder_this_clone_thinks_stale_is_judged_on_the_remote_main_branch(tmp_path):
    """A claim that meets another session's lock fetches before it decides, even when its
    own copy says the holder is stale: the holder's heartbeats go to the main branch, which
    a push to the shard would never check.  (A claim meeting no lock may be committed
    first and pushed: the shard's compare-and-swap is all it depends on.)"""
    team, (a, b) = sharded_team(tmp_path, 2)
    target = "src/auth/x.py"
    assert a("lock", "acquire", target, "--ttl", "10", "--session", "s0").returncode == 0
    assert b("sync").returncode == 0  # b's copy: s0's heartbeat as of now
    beating = subprocess.Popen(
        ["bash", "-c", f"while :; do {CLI} lock heartbeat --session s0; sleep 0.5; done"],
        cwd=a.cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        time.sleep(12)  # past the TTL by b's copy, never by the remote's
        proc = b("lock", "acquire", target, "--session", "s1")
        assert proc.returncode == 1 and "locked by s0" in proc.stderr, proc.stderr
    finally:
        os.killpg(beating.pid, signal.SIGKILL)
        beating.wait()
    # a claim meeting no lock still lands, and one meeting its own session's renews
    assert b("lock", "acquire", "src/other/y.py", "--session", "s1").returncode == 0
    assert b("lock", "acquire", "src/other/y.py", "--session", "s1").returncode == 0
    assert sorted((l["path"], l["owner"]) for l in fresh_locks(team)) == \
        [("src/auth/x.py", "s0"), ("src/other/y.py", "s1")]


def test_a_heartbeat_naming_paths_checks_them_against_the_shards(tmp_path):
    clock = FakeClock(1_800_000_000)
    with sharded_registry(tmp_path, clock, "hb") as registry:
        registry.claim("hb", ["src/auth/x.py", "docs/"])
        assert registry.heartbeat("hb", ["src/auth/x.py", "docs/guide.md"])["locks"] == 2
        from agent_registry.errors import NotFound
        try:
            registry.heartbeat("hb", ["src/other/y.py"])
        except NotFound as exc:
            assert "holds no lock on src/other/y.py" in exc.message
        else:
            raise AssertionError("a heartbeat of a path not held went through")
