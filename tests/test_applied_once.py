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

from helpers import CLI
from test_sync import BRANCH, Team, lock_owner_on_remote


def ops_on_remote(team: Team, kind: str) -> Counter:
    """How many commits of the remote branch record each operation id of *kind*."""
    log = subprocess.run(["git", "log", "--format=%B%x00", f"refs/heads/{BRANCH}"],
                         cwd=team.bare, capture_output=True, text=True, check=True).stdout
    found: Counter = Counter()
    for message in log.split("\0"):
        for line in message.splitlines():
            if line.startswith("Registry-Data: "):
                op = json.loads(line[len("Registry-Data: "):])
                if op.get("op") == kind:
                    found[op["id"]] += 1
    return found


def _append_racing(team: Team, clones, sid: str, per_process: int, processes: int) -> int:
    """*processes* processes per clone, each appending *per_process* diary lines to *sid*
    one command at a time, all started together; how many appends exited 0."""
    go = team.root / "go"
    procs = []
    for c, clone in enumerate(clones):
        for p in range(processes):
            lines = " ".join(f"line-{c}-{p}-{k}" for k in range(per_process))
            script = (f'while [ ! -e "{go}" ]; do sleep 0.005; done; ok=0; '
                      f'for t in {lines}; do {CLI} context log {sid} "$t" && ok=$((ok+1)); '
                      f'done; echo $ok')
            procs.append(subprocess.Popen(["bash", "-c", script], cwd=clone.cwd, text=True,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    go.touch()
    done = 0
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        done += int(out.split()[-1])
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
        diary = team.remote_file("contexts/s1.md") or ""
        lines = Counter(word for word in diary.split() if word.startswith("line-"))
        assert sorted(lines) == sorted(f"line-{c}-{p}-{k}" for c in range(2) for p in range(4)
                                       for k in range(3)), diary
        assert set(lines.values()) == {1}, {k: v for k, v in lines.items() if v > 1}
        twice = {i: n for i, n in ops_on_remote(team, "context-log").items() if n > 1}
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
    """Clone a publishes an intent carrying a diary line that a push of another of its
    processes landed meanwhile: after the intent's base (the push raced the intent), or
    as the base itself, the intent carrying a copy a third process rebuilt on the older
    remote tip (a rebase that helped another clone's intent anew). Clone b, helping on
    the remote tip, must skip it: the line is on the remote once. (Both were seen in the
    racing test above, about one run in ten under load, before helpers looked back to
    where the intent forked from its base.)"""
    from agent_registry.sync import Registry
    from agent_registry.sync.remote import publish_intent
    from agent_registry.sync.state import confirm
    team = Team(tmp_path)
    a, b = team.clone("a"), team.clone("b")
    assert a("register", "s1", "--provider", "Kimi", "--working-on", "diary").returncode == 0
    assert b("sync").returncode == 0
    with Registry.open(str(a.cwd)) as registry:
        start = registry.repo.read_ref(registry.ref)
        assert start == team.remote_tip()
        op = registry.new_op("context-log", session="s1", text="line-once")
        landed, _ = registry.build(start, op)
        if how == "landed-after-its-base":  # the intent is based on start and carries it
            registry.repo.update_ref(registry.ref, landed, start, "test: the line")
            assert publish_intent(registry)
        else:  # the intent is based on it and carries a copy made on start
            rebuilt, _ = registry.build(start, op, f"Replayed on {start[:12]}, first made "
                                                   f"as {landed[:12]}.")
            registry.repo.update_ref(registry.ref, rebuilt, start, "test: the rebuilt copy")
            confirm(registry, landed)
        subprocess.run(["git", "push", "-q", "origin", f"{landed}:refs/heads/{BRANCH}"],
                       cwd=a.cwd, check=True)
        if how == "rebuilt-over-its-base":
            assert publish_intent(registry)
    # b's next write fetches the intent, helps it, and pushes the help with its own line
    assert b("context", "log", "s1", "line-of-b").returncode == 0
    assert a("sync").returncode == 0
    diary = team.remote_file("contexts/s1.md") or ""
    assert diary.count("line-once") == 1, diary
    assert ops_on_remote(team, "context-log")[op["id"]] == 1
