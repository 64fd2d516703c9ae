"""Helping (sync/intents.py): a clone that keeps losing the push race publishes its pending
operations as an intent, and the clones that win carry them.  Real bare remotes, real
clones, real processes racing; never more than once, never lost."""
from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from helpers import git
from test_sync import BRANCH, Team
from test_sync_failclosed import sha256_team

PUBLISH = ("import sys; from agent_registry import Registry; "
           "from agent_registry.sync.remote import publish_intent; "
           "from agent_registry.sync.state import load_state; "
           "r = Registry.open(sys.argv[1]); publish_intent(r); "
           "print(load_state(r)['clone_id'])")


def ok(proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert proc.returncode == 0, (proc.args, proc.stdout, proc.stderr)
    return proc


def offline_ops(runner, *commands: tuple[str, ...]) -> None:
    """Commit *commands* in this clone only (as if every push had been lost), then turn
    sync back on: they are its pending operations."""
    git(runner.cwd, "config", "agent-registry.remote", "none")
    for command in commands:
        ok(runner(*command))
    git(runner.cwd, "config", "--unset", "agent-registry.remote")


def publish(runner) -> str:
    """Publish the clone's intent as publish() does after its third lost push; its id."""
    proc = subprocess.run([sys.executable, "-c", PUBLISH, str(runner.cwd)],
                          capture_output=True, text=True, check=True)
    return proc.stdout.strip()


def remote_log(team: Team) -> list[str]:
    return subprocess.run(["git", "log", "--format=%B%x00", BRANCH], cwd=team.bare,
                          capture_output=True, text=True, check=True).stdout.split("\0")


def op_count(team: Team, op_id: str) -> int:
    """Commits on the remote that applied operation *op_id* (not resolutions of it)."""
    return sum(1 for m in remote_log(team) if f'"id": "{op_id}"' in m.split("Registry-Data: ")[-1]
               and '"op": "resolved"' not in m.split("Registry-Data: ")[-1])


def intent_refs(team: Team) -> list[str]:
    return subprocess.run(["git", "for-each-ref", "--format=%(refname)",
                           f"refs/heads/{BRANCH}-intents/"], cwd=team.bare,
                          capture_output=True, text=True, check=True).stdout.split()


def pending_ids(runner) -> list[str]:
    proc = subprocess.run(["git", "log", "--format=%B%x00", BRANCH, "--not",
                           f"refs/remotes/origin/{BRANCH}"], cwd=runner.cwd,
                          capture_output=True, text=True, check=True)
    return [json.loads(m.split("Registry-Data: ")[-1].strip())["id"]
            for m in proc.stdout.split("\0") if "Registry-Data: " in m]


def holders(runner, path: str) -> list[str]:
    locks = json.loads(ok(runner("--json", "lock", "list")).stdout)["locks"]
    return [l["owner"] for l in locks if l["path"] == path]


@pytest.fixture
def team(tmp_path):
    return Team(tmp_path)


@pytest.fixture(params=["sha1", "sha256"])
def any_team(request, tmp_path):
    return Team(tmp_path) if request.param == "sha1" else sha256_team(tmp_path)


def test_a_winner_carries_the_published_operations_of_a_loser(any_team):
    team = any_team
    a, b = team.clone("a"), team.clone("b")
    ok(a("register", "kimi-1", "Kimi", "2.7", "auth"))
    ok(b("register", "codex-2", "Codex", "1", "docs"))
    offline_ops(a, ("lock", "acquire", "src/auth.py", "--session", "kimi-1"),
                ("context", "log", "kimi-1", "diary line once"))
    ids = pending_ids(a)
    assert len(ids) == 2
    clone = publish(a)
    # a sync with nothing of its own to push carries nothing to the remote, and what it
    # applied locally for a is not counted as its own unpushed work
    ok(b("sync"))
    assert team.remote_file(f"intents/{clone}.json") is None
    assert json.loads(ok(b("--json", "status")).stdout)["sync"]["ahead"] == 0
    ok(b("lock", "acquire", "docs/x.md", "--session", "codex-2"))
    # b's push carried a's operations, marked as helped, and the intent is settled
    for op_id in ids:
        assert op_count(team, op_id) == 1
    assert any(f"Registry-Helped: {clone} #1" in m for m in remote_log(team))
    record = json.loads(team.remote_file(f"intents/{clone}.json"))
    assert record["seq"] == 1 and record["handled"] == {i: "applied" for i in ids}
    # a learns it from its next sync: nothing left to push, nothing applied twice
    ok(a("sync"))
    assert pending_ids(a) == []
    for op_id in ids:
        assert op_count(team, op_id) == 1
    assert team.remote_file("contexts/kimi-1.md").count("diary line once") == 1
    assert holders(a, "src/auth.py") == ["kimi-1"]


def test_an_operation_a_helper_refuses_is_reported_to_its_clone(team):
    a, b, c = team.clone("a"), team.clone("b"), team.clone("c")
    ok(a("register", "kimi-1", "Kimi", "2.7", "auth"))
    ok(b("register", "codex-2", "Codex", "1", "auth too"))
    ok(c("register", "gem-3", "Gemini", "1", "docs"))
    ok(a("sync"))
    offline_ops(a, ("lock", "acquire", "src/auth.py", "--session", "kimi-1"))
    ok(b("lock", "acquire", "src/auth.py", "--session", "codex-2"))  # b wins first
    publish(a)
    ok(c("lock", "acquire", "docs/x.md", "--session", "gem-3"))
    out = a("--json", "sync")
    assert out.returncode == 1, out.stderr  # a pending operation was refused
    refused = json.loads(out.stdout)["error"]["refused"]
    assert [r["paths"] for r in refused] == [["src/auth.py"]]
    assert "refused when another clone applied it for this one" in refused[0]["reason"]
    assert "codex-2" in refused[0]["reason"]
    assert holders(c, "src/auth.py") == ["codex-2"]


@pytest.mark.parametrize("round_", range(4))
def test_racing_helpers_and_the_clone_itself_apply_an_intent_once(team, round_):
    """Two helpers and the helped clone push at the same instant: each operation lands
    exactly once, whoever wins (the intent record is written under the branch's CAS)."""
    a, b, c = team.clone("a"), team.clone("b"), team.clone("c")
    ok(a("register", "kimi-1", "Kimi", "2.7", "auth"))
    ok(b("register", "codex-2", "Codex", "1", "x"))
    ok(c("register", "gem-3", "Gemini", "1", "y"))
    offline_ops(a, *[("context", "log", "kimi-1", f"line {i}") for i in range(3)],
                ("lock", "acquire", "src/a.py", "--session", "kimi-1"))
    ids = pending_ids(a)
    publish(a)
    with ThreadPoolExecutor(3) as pool:
        runs = [pool.submit(b, "lock", "acquire", "b.py", "--session", "codex-2"),
                pool.submit(c, "context", "log", "gem-3", "c was here"),
                pool.submit(a, "sync")]
        for run in runs:
            ok(run.result())
    ok(a("sync"))
    for op_id in ids:
        assert op_count(team, op_id) == 1, op_id
    diary = team.remote_file("contexts/kimi-1.md")
    assert [diary.count(f"line {i}") for i in range(3)] == [1, 1, 1]
    assert pending_ids(a) == []


def test_operations_that_landed_without_their_record_are_not_applied_again(team):
    """Another process of the clone pushed its operations from a tip made before the
    intent (so without the record that settles it): a helper finds them in the history
    since the intent's base and applies none of them twice."""
    a, b = team.clone("a"), team.clone("b")
    ok(a("register", "kimi-1", "Kimi", "2.7", "auth"))
    ok(b("register", "codex-2", "Codex", "1", "x"))
    ok(a("sync"))
    offline_ops(a, ("context", "log", "kimi-1", "pushed by the other process"))
    ids = pending_ids(a)
    publish(a)
    git(a.cwd, "push", "-q", "origin", BRANCH)  # as a process whose tip predates the intent
    ok(b("context", "log", "codex-2", "b"))
    assert op_count(team, ids[0]) == 1
    assert team.remote_file("contexts/kimi-1.md").count("pushed by the other process") == 1


def test_an_intent_on_a_rewritten_history_is_left_to_its_clone(team):
    """A gc rewrite after the intent was published: its base is not in the new history,
    so no helper applies it (it could not tell what is new) and gc deletes its ref; the
    clone replays its own operations."""
    a, b = team.clone("a"), team.clone("b")
    ok(a("register", "kimi-1", "Kimi", "2.7", "auth"))
    ok(b("register", "codex-2", "Codex", "1", "x"))
    offline_ops(a, ("context", "log", "kimi-1", "only once"))
    publish(a)
    assert intent_refs(team)  # a's intent is out
    assert json.loads(ok(b("--json", "gc", "--keep-days", "0")).stdout)["pruned_intents"] == 1
    assert intent_refs(team) == []  # based on the replaced history: gc deleted it
    ok(b("context", "log", "codex-2", "after gc"))
    assert "only once" not in (team.remote_file("contexts/kimi-1.md") or "")
    ok(a("sync"))
    assert team.remote_file("contexts/kimi-1.md").count("only once") == 1


def test_a_remote_that_refuses_intent_refs_leaves_the_clone_on_its_own(team):
    """A forge that forbids new branches (a pre-receive hook here): publishing fails
    quietly and the clone pushes its operations itself, as before helping."""
    hook = team.bare / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\nwhile read old new ref; do case $ref in\n"
                    "  *-intents/*) echo \"no new branches\"; exit 1;;\nesac; done\nexit 0\n")
    hook.chmod(0o755)
    a, b = team.clone("a"), team.clone("b")
    ok(a("register", "kimi-1", "Kimi", "2.7", "auth"))
    offline_ops(a, ("context", "log", "kimi-1", "mine"))
    publish(a)
    assert intent_refs(team) == []
    ok(b("register", "codex-2", "Codex", "1", "x"))
    assert "mine" not in (team.remote_file("contexts/kimi-1.md") or "")
    ok(a("sync"))
    assert team.remote_file("contexts/kimi-1.md").count("mine") == 1


@pytest.mark.slow
def test_twelve_clones_logging_at_once_lose_nothing_and_double_nothing(tmp_path):
    """Twelve clones append diary lines (not idempotent: a double apply shows) as fast as
    they can through one remote: every line lands once, and helping did happen."""
    team = Team(tmp_path)
    clones = [team.clone(f"c{i}") for i in range(12)]
    for i, c in enumerate(clones):
        ok(c("register", f"s{i}", "Kimi", "1", "x"))

    def logs(i: int) -> None:
        for n in range(6):
            ok(clones[i]("context", "log", f"s{i}", f"s{i} line {n}"))

    with ThreadPoolExecutor(12) as pool:
        list(pool.map(logs, range(12)))
    for c in clones:
        ok(c("sync"))
    for i in range(12):
        diary = team.remote_file(f"contexts/s{i}.md")
        assert [diary.count(f"s{i} line {n}\n") for n in range(6)] == [1] * 6, diary
    assert any("Registry-Helped: " in m for m in remote_log(team))


def test_a_tip_that_already_helped_every_intent_is_kept_not_rebuilt(team):
    """A process of b helped a's intent on top of the remote tip and has not pushed yet;
    the next process of b meets the same remote tip: it keeps b's tip instead of helping
    again on a copy of it (which, once the first push lands, would leave b on a fork
    carrying its operations twice), and what is pushed then applies a's operations once."""
    from agent_registry import Registry
    from agent_registry.core.registry import file_lock
    from agent_registry.sync.remote import _rebase, fetch
    a, b = team.clone("a"), team.clone("b")
    ok(a("register", "kimi-1", "Kimi", "2.7", "auth"))
    ok(b("register", "codex-2", "Codex", "1", "docs"))
    offline_ops(a, ("context", "log", "kimi-1", "diary line once"))
    [op_id] = pending_ids(a)
    publish(a)
    with Registry.open(str(b.cwd)) as registry:
        remote = fetch(registry)
        with file_lock(registry.lock_file):
            helped = _rebase(registry, remote).tip
        assert helped != remote  # a's line applied, and its intent settled, on b's tip
        with file_lock(registry.lock_file):  # the next process, the same remote tip
            again = _rebase(registry, fetch(registry)).tip
        assert again == helped == registry.repo.read_ref(registry.ref)
    ok(b("context", "log", "codex-2", "b's own line"))
    assert op_count(team, op_id) == 1
    assert team.remote_file("contexts/kimi-1.md").count("diary line once") == 1
