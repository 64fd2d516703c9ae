"""A claim through a remote fetches first only when this clone's view of the branch it
writes is older than sync/remote.py's FRESH (issue 26 item 2): on one lock shard as on
sixteen, where one fetch brings every shard.  Counted by the remote's
``upload-pack`` runs (a real one, behind a script that notes each run), with FRESH
pinned so that no clock decides; the compare-and-swap of the push still decides a claim
that another clone's push made wrong meanwhile."""
from __future__ import annotations

import json
import random

import pytest

from agent_registry.errors import Refused
from agent_registry.sync import Registry
from agent_registry.sync import remote as R
from helpers import git
from test_sync import Team


@pytest.fixture(autouse=True)
def fresh_for_an_hour(monkeypatch):
    monkeypatch.setattr(R, "FRESH", 3600.0)


def counted_clone(team: Team, name: str, shards: int):
    """A clone of *team*'s remote whose fetches run the remote's upload-pack through a
    script that notes each run; its registry in *shards* lock shards (1: every claim on
one ref, as the single branch of earlier versions had them)."""
    runner = team.clone(name)
    log = team.root / f"{name}.fetches"
    script = team.root / f"{name}-upload-pack"
    script.write_text(f'#!/bin/sh\necho run >> "{log}"\nexec git-upload-pack "$@"\n')
    script.chmod(0o755)
    git(runner.cwd, "config", "remote.origin.uploadpack", str(script))
    proc = runner("init", "--shards", str(shards))
    assert proc.returncode == 0, proc.stderr
    return runner, lambda: len(log.read_text().split()) if log.exists() else 0


def warm_pair(team: Team, shards: int):
    """Clones a (session s1, holding src/warm.py, its fetches counted) and b (session s2,
    which claimed src/auth.py after a's claim): (a, a's fetch count, b)."""
    a, fetches = counted_clone(team, "a", shards)
    b, _ = counted_clone(team, "b", shards)
    assert a("register", "s1", "--provider", "Codex").returncode == 0
    assert b("register", "s2", "--provider", "Codex").returncode == 0
    assert a("lock", "acquire", "src/warm.py", "--session", "s1").returncode == 0
    assert b("lock", "acquire", "src/auth.py", "--session", "s2").returncode == 0
    return a, fetches, b


def remote_locks(team: Team) -> list[tuple[str, str]]:
    reader = team.clone(f"reader-{random.random()}")
    proc = reader("--json", "lock", "list")
    assert proc.returncode == 0, proc.stderr
    return sorted((lock["path"], lock["owner"]) for lock in json.loads(proc.stdout)["locks"])


@pytest.mark.parametrize("shards", [1, 16])
def test_claims_back_to_back_make_no_fetch_after_a_fresh_one(tmp_path, shards):
    team = Team(tmp_path)
    a, fetches = counted_clone(team, "a", shards)
    assert a("register", "s1", "--provider", "Codex").returncode == 0
    paths = [f"src/p{i}/f.py" for i in range(6)]  # six keys: several shards
    with Registry.open(str(a.cwd)) as registry:  # register fetched the registry branch,
        before = fetches()  # which brings the shards
        for path in paths:
            registry.claim("s1", [path])
    assert fetches() == before  # before: one fetch per claim (one per new shard)
    if shards > 1:  # the six claims wrote several shards, each without a fetch of its own
        from agent_registry.branch.shards import lock_shards
        assert len({s for p in paths for s in lock_shards(p, shards, None)}) > 1
    assert remote_locks(team) == sorted((p, "s1") for p in paths)


def test_a_claim_decided_before_a_fetch_is_refused_when_the_remote_moved(tmp_path):
    """Clone a decides its claim on its own copy; b took the path meanwhile: a's push is
    rejected, a fetches, replays, and the claim is refused."""
    team = Team(tmp_path)
    a, fetches, _ = warm_pair(team, 16)
    before = fetches()
    with Registry.open(str(a.cwd)) as registry, pytest.raises(Refused) as refused:
        registry.claim("s1", ["src/auth.py"])
    assert "s2" in refused.value.message
    assert fetches() == before + 1  # after the rejected push, not before the claim
    assert remote_locks(team) == [("src/auth.py", "s2"), ("src/warm.py", "s1")]


def test_a_fetch_mark_from_the_future_vouches_for_nothing(tmp_path):
    """A clock stepped back leaves the last fetch's mark dated ahead: the claim fetches."""
    import os
    import time

    from agent_registry.store import freshness
    team = Team(tmp_path)
    a, fetches = counted_clone(team, "a", 16)
    assert a("register", "s1", "--provider", "Codex").returncode == 0
    with Registry.open(str(a.cwd)) as registry:
        marks = os.path.dirname(freshness.mark_path(registry.repo.info.common_dir, "x"))
        ahead = time.time() + 86400
        for root, _, files in os.walk(marks):
            for name in files:
                os.utime(os.path.join(root, name), (ahead, ahead))
        before = fetches()
        registry.claim("s1", ["src/a.py"])
    assert fetches() == before + 1


@pytest.mark.parametrize("shards", [1, 16])
def test_a_claim_that_lost_one_push_lands_and_its_attempts_are_kept(tmp_path, shards):
    """Decided before a fetch while b pushed another claim: a's first push is rejected,
    the second lands, and the clone's sync state says two attempts (what bench/scale_bench.py
    reads as pushes per confirmed claim), in the same write as the confirmed tip."""
    team = Team(tmp_path)
    a, _, _ = warm_pair(team, shards)
    other = on_shard_of("src/auth.py", shards)  # on the shard b's claim moved
    with Registry.open(str(a.cwd)) as registry:
        registry.claim("s1", [other])
        state = json.loads(open(registry.repo.state_path("sync.json")).read())
        landed = registry.repo.read_ref(f"refs/remotes/origin/{registry.branch}-shards/00")
    assert state["last_push_attempts"] == 2
    assert state["last_error"] is None
    if shards == 1:  # the one shard's confirmed tip is the tip that landed
        shard = f"refs/remotes/origin/{registry.branch}-shards/00"
        assert landed in state["confirmed"].values(), (shard, state["confirmed"])


def on_shard_of(path: str, shards: int = 16) -> str:
    """A file path whose key is in *path*'s lock shard."""
    from agent_registry.branch.shards import lock_shards
    home = lock_shards(path, shards, None)
    return next(p for i in range(1000) if lock_shards(p := f"src/o{i}.py", shards, None) == home)


def test_a_claim_that_lost_a_push_traces_each_phase(tmp_path, monkeypatch):
    """a decides a claim on its own copy of a shard that b moved meanwhile: its push is
    lost, it fetches, replays and pushes again, and lands.  With
    AGENT_REGISTRY_SYNC_TRACE the process writes each phase with its outcome, in order
    (what bench/scale_bench.py --trace breaks the slowest claims down by)."""
    from agent_registry.sync import trace
    team = Team(tmp_path)
    a, _, _ = warm_pair(team, 16)
    log = tmp_path / "a.trace"
    monkeypatch.setattr(trace, "PATH", str(log))
    with Registry.open(str(a.cwd)) as registry:
        registry.claim("s1", [on_shard_of("src/auth.py")])
    assert remote_locks(team) == sorted([("src/auth.py", "s2"), ("src/warm.py", "s1"),
                                         (on_shard_of("src/auth.py"), "s1")])
    phases = [line.split("\t")[2:] for line in log.read_text().splitlines()]
    assert [p for p, _ in phases if p in ("push", "fetch", "sleep")] == \
        ["push", "sleep", "fetch", "push"]
    assert [d for p, d in phases if p == "push"] == ["lost", "ok"]
    assert phases[0] == ["begin", "claim"] and phases[-1][0] == "end"
    assert "flock" in [p for p, _ in phases]
