"""Every operation is applied once on the remote, whatever path it took there (issue 24,
item 0): a push made by another process of the same clone that has not yet recorded
its confirmed tip, and a push that landed after its client gave up, are in the fetched
history, and a replay must skip them.  Real clones of a real bare remote, real CLI
processes racing."""
from __future__ import annotations

import json
import subprocess
from collections import Counter

import pytest

from agent_registry.branch.shards import lock_shards, shard_branch
from helpers import CLI
from test_sync import (BRANCH, Team, diary_on_remote, lock_owner_on_remote, ops_on_remote,
                       remote_registry)

HOT = lock_shards("src/auth.py", 16, None)[0]  # one lock shard, whose ref every claim races for
ON_HOT = [p for i in range(2000) if tuple(lock_shards(p := f"src/h{i}.py", 16, None)) == (HOT,)]


def _append_racing(team: Team, clones, sid: str, per_process: int, processes: int,
                   what: str = "diary") -> int:
    """*processes* processes per clone, each making *per_process* writes one command at a
    time, all started together; how many exited 0.  *what*: diary lines appended to
    *sid* (each clone's processes race for its own clone ref), or claims by *sid* of
    distinct paths of one lock shard (every process of both clones races for its ref)."""
    go = team.root / "go"
    procs = []
    for c, clone in enumerate(clones):
        for p in range(processes):
            lines = " ".join(f"line-{c}-{p}-{k}" for k in range(per_process))
            if what == "diary":
                write = f'{CLI} context log {sid} "$t"'
            else:  # the path of the line: one of HOT's, by its place
                lines = " ".join(ON_HOT[(c * processes + p) * per_process + k]
                                 for k in range(per_process))
                write = f'{CLI} lock acquire "$t" --session {sid}{c}'
            script = (f'while [ ! -e "{go}" ]; do sleep 0.005; done; ok=0; '
                      f'for t in {lines}; do {write} && ok=$((ok+1)); '
                      f'done; echo $ok')
            procs.append(subprocess.Popen(["bash", "-c", script], cwd=clone.cwd, text=True,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    go.touch()
    done, said = 0, []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        done += int(out.split()[-1])
        said.append(err)
    team.said = said  # what the writes said on stderr: the test shows it when one failed
    return done


@pytest.mark.parametrize("rounds", [1, pytest.param(6, marks=pytest.mark.slow)])
def test_diary_lines_from_many_processes_of_two_clones_land_once(tmp_path, rounds):
    for r in range(rounds):
        team = Team(tmp_path / f"r{r}")
        a, b = team.clone("a"), team.clone("b")
        assert a("register", "s1", "--provider", "Kimi", "--working-on", "diary").returncode == 0
        assert b("sync").returncode == 0
        appended = _append_racing(team, [a, b], "s1", per_process=3, processes=4)
        assert appended == 24
        for clone in (a, b):
            assert clone("sync").returncode == 0
        diary = diary_on_remote(team, "s1")  # as its readers merge the clone refs' copies
        lines = Counter(word for word in diary.split() if word.startswith("line-"))
        assert sorted(lines) == sorted(f"line-{c}-{p}-{k}" for c in range(2) for p in range(4)
                                       for k in range(3)), diary
        assert set(lines.values()) == {1}, {k: v for k, v in lines.items() if v > 1}
        twice = {i: n for i, n in ops_on_remote(team, "context-log").items() if n > 1}
        assert not twice, f"operations applied more than once: {twice}"


@pytest.mark.parametrize("rounds", [1, pytest.param(6, marks=pytest.mark.slow)])
def test_claims_from_many_processes_of_two_clones_on_one_shard_land_once(tmp_path, rounds):
    """The race of the test above on a ref both clones write: 24 claims of distinct
    paths, all recorded on one lock shard, by four processes of each clone."""
    for r in range(rounds):
        team = Team(tmp_path / f"r{r}")
        a, b = team.clone("a"), team.clone("b")
        assert a("register", "s0", "--provider", "Kimi", "--working-on", "claims").returncode == 0
        assert b("register", "s1", "--provider", "Kimi", "--working-on", "claims").returncode == 0
        claimed = _append_racing(team, [a, b], "s", per_process=3, processes=4, what="claims")
        assert claimed == 24, "\n".join(e for e in team.said if e)
        for clone in (a, b):
            assert clone("sync").returncode == 0
        with remote_registry(team) as reg:
            locks = {lock["path"]: lock["owner"] for lock in reg.locks()}
        assert locks == {ON_HOT[i]: f"s{i // 12}" for i in range(24)}
        twice = {i: n for i, n in ops_on_remote(team, "claim").items() if n > 1}
        assert not twice, f"operations applied more than once: {twice}"


def test_a_push_that_landed_after_a_timeout_is_not_replayed(tmp_path):
    """The claim's push lands but its client gives up (the server's post-receive hook
    outlives the network timeout); a person force-releases the path from another clone;
    the next sync of the first clone must not bring the claim back."""
    team = Team(tmp_path)
    a, b = team.clone("a"), team.clone("b")
    assert a("register", "a1", "--provider", "Kimi", "--working-on", "auth").returncode == 0
    hook = team.bare / "hooks" / "post-receive"
    hook.write_text("#!/bin/sh\nsleep 4\n")
    hook.chmod(0o755)
    a.cwd.joinpath(".git", "config").open("a").write("[agent-registry]\n\tnetworkTimeout = 1\n")
    slow = a("lock", "acquire", "src/auth.py", "--session", "a1")
    assert slow.returncode == 3, slow.stderr  # the client gave up: not confirmed, it says
    hook.unlink()
    assert lock_owner_on_remote(team, "src/auth.py") == ["a1"]  # ... yet it landed
    freed = b("lock", "force-release", "src/auth.py", "--force", "--reason", "a1 is gone")
    assert freed.returncode == 0, freed.stderr
    assert lock_owner_on_remote(team, "src/auth.py") == []
    synced = a("--json", "sync")
    assert synced.returncode == 0, synced.stderr
    assert lock_owner_on_remote(team, "src/auth.py") == [], "the force-release did not stand"
    assert set(ops_on_remote(team, "claim").values()) == {1}
    check = json.loads(a("--json", "lock", "check", "src/auth.py", "--session", "a1").stdout)
    assert check["paths"][0]["state"] == "free"


@pytest.mark.parametrize("how", ["landed-after-its-base", "rebuilt-over-its-base"])
def test_an_intent_whose_operation_is_on_the_remote_already_is_not_applied_again(tmp_path, how):
    """Clone a publishes an intent on a lock shard carrying a claim that a push of
    another of its processes landed meanwhile: after the intent's base (the push raced
    the intent), or as the base itself, the intent carrying a copy a third process
    rebuilt on the older remote tip (a rebase that helped another clone's intent anew).
    Clone b, helping on the remote tip, must skip it: the claim is on the remote once.
    (Both were seen in the racing test above, about one run in ten under load, before
    helpers looked back to where the intent forked from its base.)"""
    from agent_registry.core.sharded import shards_of
    from agent_registry.sync import Registry
    from agent_registry.sync.remote import publish_intent
    from agent_registry.sync.state import confirm
    team = Team(tmp_path)
    a, b = team.clone("a"), team.clone("b")
    assert a("register", "s1", "--provider", "Kimi", "--working-on", "claims").returncode == 0
    assert b("register", "s2", "--provider", "Kimi", "--working-on", "claims").returncode == 0
    assert a("lock", "acquire", ON_HOT[0], "--session", "s1").returncode == 0  # a's shard tip
    assert b("sync").returncode == 0
    hot = f"refs/heads/{shard_branch(BRANCH, HOT)}"
    with Registry.open(str(a.cwd)) as main:
        registry = shards_of(main)[HOT]
        start = registry.repo.read_ref(registry.ref)
        assert start == subprocess.run(["git", "rev-parse", hot], cwd=team.bare, text=True,
                                       capture_output=True, check=True).stdout.strip()
        path = ON_HOT[1]
        op = registry.new_op("claim", session="s1", paths=[path], ttl=600, mode="exclusive",
                             generations={path: "0123456789abcdef"})
        landed, _ = registry.build(start, op)
        if how == "landed-after-its-base":  # the intent is based on start and carries it
            registry.repo.update_ref(registry.ref, landed, start, "test: the claim")
            assert publish_intent(registry)
        else:  # the intent is based on it and carries a copy made on start
            rebuilt, _ = registry.build(start, op, f"Replayed on {start[:12]}, first made "
                                                   f"as {landed[:12]}.")
            registry.repo.update_ref(registry.ref, rebuilt, start, "test: the rebuilt copy")
            confirm(registry, landed)
        subprocess.run(["git", "push", "-q", "origin", f"{landed}:{hot}"], cwd=a.cwd, check=True)
        if how == "rebuilt-over-its-base":
            assert publish_intent(registry)
    # b's next claim on the shard is rejected (the remote moved), fetches the intent,
    # helps it, and pushes the help with its own claim
    assert b("lock", "acquire", ON_HOT[2], "--session", "s2").returncode == 0
    assert a("sync").returncode == 0
    assert ops_on_remote(team, "claim")[op["id"]] == 1
    assert lock_owner_on_remote(team, path) == ["s1"]
    assert lock_owner_on_remote(team, ON_HOT[2]) == ["s2"]
