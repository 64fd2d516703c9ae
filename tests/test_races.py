"""Real processes racing through the installed CLI, and processes killed mid-claim.

Racers start together: each process first announces itself (a file in ``ready/``) and
waits for a ``go`` file; only when every racer is waiting is ``go`` created, and each
then execs ``agent-registry``.  So the races are real, not sequential.

The normal suite runs one to three rounds of each race (the 64 and 32 racers one: each
round is a race of that many processes); the ``slow`` variants run many more.
"""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent_registry import Registry
from agent_registry.branch.shards import lock_shards
from helpers import CLI, WAITER, read_lock, registry_ops, registry_refs

BRANCH = "agent-registry"


def race(repo: Path, commands: list[list[str]], workdir: Path) -> list[subprocess.CompletedProcess]:
    """Run every command as its own process, all released at once; their results."""
    workdir.mkdir(parents=True)
    go = workdir / "go"
    procs = []
    for i, args in enumerate(commands):
        procs.append(subprocess.Popen(
            [sys.executable, "-c", WAITER, str(workdir / f"ready-{i}"), str(go), CLI, *args],
            cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    for _ in range(30_000):  # a watchdog (~300 s): a broken racer fails the test, not hangs it
        if sum(1 for p in workdir.iterdir() if p.name.startswith("ready-")) == len(commands):
            break
        assert all(p.poll() is None for p in procs), "a racer died before the start"
        time.sleep(0.01)
    else:
        pytest.fail("racers never got ready")
    go.touch()
    results = []
    for proc, args in zip(procs, commands):
        out, err = proc.communicate(timeout=600)
        results.append(subprocess.CompletedProcess(args, proc.returncode, out, err))
    return results


def register_many(repo: Path, prefix: str, count: int, pid: int | None = None) -> list[str]:
    sids = [f"{prefix}-{i}" for i in range(count)]
    with Registry.open(str(repo)) as registry:
        for sid in sids:
            registry.register(sid, provider="Kimi", working_on=f"racing as {sid}",
                              pid=pid or os.getpid())
    return sids


def branch_state(repo: Path) -> tuple[dict[str, dict], dict[str, list[str]]]:
    """Every lock record (target -> record) and every live session's held targets, as
    the library reads them: the main branch with every lock shard overlaid.  Each shard
    is also checked on its own: its records are of targets it records, each found where
    a lookup of its target looks, each holder's held list there names it, and each
    target a held list there names has a record there holding that session."""
    locks: dict[str, dict] = {}
    with Registry.open(str(repo)) as registry:
        view = registry.view()
        count = len(view.shards)
        assert count == 16  # the layout init makes
        for index, shard in enumerate(view.shards):
            here = {lock.path: lock for lock in shard.records() + shard.pattern_locks()}
            for path, lock in here.items():
                record = json.loads(lock.to_bytes())
                assert index in lock_shards(path, count), (path, index)
                assert shard.lock(path) == lock, path  # stored under its target's name
                assert locks.setdefault(path, record) == record, (path, index)  # shards agree
                for holder in lock.holders:
                    found = shard.held(holder.session)
                    assert found and path in found[0], (path, holder, index)
            for session in shard.live_sessions():
                for path in shard.held(session.id)[0]:
                    assert path in here and here[path].holder(session.id), (session.id, path)
        held = {session.id: session.locks for session in view.live_sessions()}
        assert not view.warnings, view.warnings  # nothing unreadable on the way
    return locks, held


def assert_consistent(repo: Path) -> dict[str, dict]:
    """No half-written lock: every record parses, its holders are live sessions that
    list it, and every path a session lists has a record naming that session."""
    locks, held = branch_state(repo)
    for path, record in locks.items():
        assert record["holders"], f"empty lock record for {path}"
        for holder in record["holders"]:
            assert path in held.get(holder["session"], []), (path, holder, held)
    for sid, paths in held.items():
        for path in paths:
            assert sid in [h["session"] for h in locks[path]["holders"]], (sid, path)
    return locks


def holders(repo: Path, path: str) -> list[str]:
    record = read_lock(repo, path)
    assert record is not None, f"no lock on {path}"
    return [h["session"] for h in record["holders"]]


# -- races ----------------------------------------------------------------------------

def one_path_race(repo: Path, tmp_path: Path, rounds: int, racers: int) -> None:
    sids = register_many(repo, "racer", racers)
    for n in range(rounds):
        path = f"src/contended-{n}.py"
        results = race(repo, [["lock", "acquire", path, "--session", sid] for sid in sids],
                       tmp_path / f"round-{n}")
        winners = [sid for sid, r in zip(sids, results) if r.returncode == 0]
        assert len(winners) == 1, [(r.returncode, r.stderr) for r in results]
        winner = winners[0]
        for sid, result in zip(sids, results):
            if sid != winner:
                assert result.returncode == 1, result.stderr
                assert f"{path} is locked by {winner}" in result.stderr
        assert holders(repo, path) == [winner]
    assert_consistent(repo)


@pytest.mark.parametrize("rounds", [1, pytest.param(15, marks=pytest.mark.slow)])
def test_64_processes_claim_one_path(repo, tmp_path, rounds):
    one_path_race(repo, tmp_path, rounds=rounds, racers=64)


def register_race(repo: Path, tmp_path: Path, rounds: int, racers: int) -> None:
    for n in range(rounds):
        sids = [f"reg{n}-{i}" for i in range(racers)]
        results = race(repo, [["register", sid, "--provider", "Kimi", "--working-on", sid]
                              for sid in sids], tmp_path / f"round-{n}")
        assert [r.returncode for r in results] == [0] * racers, [r.stderr for r in results]
        with Registry.open(str(repo)) as registry:
            live = {s.id for s in registry.sessions()}
        assert set(sids) <= live
    # each register committed once (the audit log), and the registry the first racers
    # made at once in a repository without one was made once, as init makes it
    registered = [op["session"] for op, _ in registry_ops(repo, "register")]
    assert sorted(registered) == sorted(f"reg{n}-{i}" for n in range(rounds) for i in range(racers))
    assert len(registry_ops(repo, "init")) == 1
    assert len(registry_refs(repo)) == 17


@pytest.mark.parametrize("rounds", [1, pytest.param(15, marks=pytest.mark.slow)])
def test_32_processes_register_at_once(repo, tmp_path, rounds):
    register_race(repo, tmp_path, rounds=rounds, racers=32)


def distinct_paths_race(repo: Path, tmp_path: Path, rounds: int, racers: int) -> None:
    sids = register_many(repo, "racer", racers)
    for n in range(rounds):
        paths = [f"src/r{n}/own-{i}.py" for i in range(racers)]
        results = race(repo, [["lock", "acquire", p, "--session", sid] for sid, p in zip(sids, paths)],
                       tmp_path / f"round-{n}")
        assert [r.returncode for r in results] == [0] * racers, [r.stderr for r in results]
        for sid, path in zip(sids, paths):
            assert holders(repo, path) == [sid]
    locks = assert_consistent(repo)
    assert len(locks) == rounds * racers


@pytest.mark.parametrize("rounds", [3, pytest.param(15, marks=pytest.mark.slow)])
def test_16_processes_claim_distinct_paths(repo, tmp_path, rounds):
    distinct_paths_race(repo, tmp_path, rounds=rounds, racers=16)


def stale_takeover_race(repo: Path, tmp_path: Path, rounds: int, racers: int) -> None:
    """The predecessor elected two owners in ~2 of 10 such races: a takeover must decide
    and write inside one critical section."""
    sids = register_many(repo, "racer", racers)
    for n in range(rounds):
        path = "src/auth.py"
        agent = subprocess.Popen(["sleep", "300"])
        (gone,) = register_many(repo, f"gone{n}", 1, pid=agent.pid)
        with Registry.open(str(repo)) as registry:
            if n:  # the previous round's winner lets go, so the dead agent can take it
                previous = holders(repo, path)[0]
                registry.release(previous, [path])
            registry.claim(gone, [path])
        agent.kill()
        agent.wait()
        results = race(repo, [["lock", "acquire", path, "--session", sid] for sid in sids],
                       tmp_path / f"round-{n}")
        winners = [(sid, r) for sid, r in zip(sids, results) if r.returncode == 0]
        assert len(winners) == 1, [(r.returncode, r.stdout, r.stderr) for r in results]
        winner, result = winners[0]
        assert result.stdout == f"taken-over: {path}\n"
        for sid, other in zip(sids, results):
            if sid != winner:
                assert other.returncode == 1 and f"locked by {winner}" in other.stderr, other.stderr
        assert holders(repo, path) == [winner]
        assert path not in branch_state(repo)[1][gone]
        with Registry.open(str(repo)) as registry:
            assert registry.session(gone).locks == []
    assert_consistent(repo)


@pytest.mark.parametrize("rounds", [3, pytest.param(20, marks=pytest.mark.slow)])
def test_racing_to_take_over_a_stale_lock(repo, tmp_path, rounds):
    stale_takeover_race(repo, tmp_path, rounds=rounds, racers=12)


# -- crashes --------------------------------------------------------------------------

def kill_while_claiming(repo: Path, iterations: int, seed: int) -> None:
    """SIGKILL a claiming process (and the git processes it started) at a random
    instant, again and again; after each, the next command must work."""
    rng = random.Random(seed)
    (victim, survivor) = register_many(repo, "crash", 2)
    killed_early = 0
    for n in range(iterations):
        proc = subprocess.Popen([CLI, "lock", "acquire", f"src/c{n}/a.py", f"src/c{n}/b.py",
                                 f"src/c{n}/dir/", "--session", victim], cwd=repo,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        time.sleep(rng.uniform(0.0, 0.4))
        try:
            os.killpg(proc.pid, signal.SIGKILL)
            killed_early += proc.poll() is None
        except ProcessLookupError:
            pass
        proc.wait()
        after = subprocess.run([CLI, "lock", "acquire", f"src/next-{n}.py", "--session", survivor],
                               cwd=repo, capture_output=True, text=True, timeout=120)
        assert after.returncode == 0, after.stderr
        targets = [f"src/c{n}/{p}" for p in ("a.py", "b.py", "dir/")]
        claimed = [holders(repo, t) if _exists(repo, t) else [] for t in targets]
        assert claimed in ([[]] * 3, [[victim]] * 3), claimed  # all or nothing
    fsck = subprocess.run(["git", "fsck", "--strict", "--no-progress", *registry_refs(repo)],
                          cwd=repo, capture_output=True, text=True)
    assert fsck.returncode == 0 and "error" not in fsck.stderr, fsck.stderr
    assert_consistent(repo)
    assert killed_early, "no process was killed mid-flight: the test tested nothing"


def _exists(repo: Path, target: str) -> bool:
    return read_lock(repo, target) is not None


@pytest.mark.parametrize("iterations, seed", [(12, 1), pytest.param(150, 2, marks=pytest.mark.slow)])
def test_kill_9_while_claiming(repo, tmp_path, iterations, seed):
    kill_while_claiming(repo, iterations=iterations, seed=seed)
