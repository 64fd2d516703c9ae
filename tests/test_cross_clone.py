"""Acting across clones (issue 24, item 3): kill, finish, end, handoff and update fetch
what they act on before deciding, so they work from a clone that has not seen the
session; a lock whose session ended says so (not "not registered"); `status --remote`
reads a sharded registry.  Real clones of a real bare remote."""
from __future__ import annotations

import json
import subprocess

from helpers import CLI, FakeClock
from test_scale_shards import sharded_registry, sharded_team
from test_sync import Team


def ok(proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert proc.returncode == 0, proc.stderr
    return proc


def on_remote(team: Team, sid: str):
    """Session *sid* as the library reads it on the remote (live or ended)."""
    from test_sync import remote_registry
    with remote_registry(team) as reg:
        return reg.session(sid)


def test_kill_and_update_from_a_clone_that_never_saw_the_session(tmp_path):
    team = Team(tmp_path)
    a, b = team.clone("a"), team.clone("b")
    ok(b("register", "b1", "--provider", "Claude"))  # b has its own view of the registry
    ok(a("register", "a1", "--provider", "Kimi", "--working-on", "auth"))
    ok(a("register", "a2", "--provider", "Kimi", "--working-on", "ui"))
    ok(a("lock", "acquire", "src/auth.py", "--session", "a1"))
    killed = b("--json", "kill", "a1")
    assert killed.returncode == 0, killed.stderr  # before: "unknown session a1"
    assert json.loads(killed.stdout)["released"] == ["src/auth.py"]
    assert json.loads(killed.stdout)["session"]["status"] == "Killed"
    assert on_remote(team, "a1").status == "Killed"
    ok(b("update", "a2", "--working-on", "ui, then docs"))
    fresh = team.clone("fresh")
    assert json.loads(ok(fresh("--json", "show", "a2")).stdout)["sessions"][0][
        "working_on"] == "ui, then docs"
    check = fresh("--json", "lock", "check", "src/auth.py")
    assert json.loads(check.stdout)["paths"][0]["state"] == "free"


def test_end_and_handoff_from_a_clone_that_never_saw_the_session(tmp_path):
    team = Team(tmp_path)
    a, b = team.clone("a"), team.clone("b")
    ok(b("register", "b1", "--provider", "Claude"))
    ok(a("register", "a3", "--provider", "Kimi", "--working-on", "tokens"))
    ok(a("register", "a4", "--provider", "Kimi", "--space", "src/auth.py"))
    ended = b("--json", "end", "a3", "--router", "token refresh", "--what", "refreshed")
    assert ended.returncode == 0, ended.stderr  # before: "unknown session a3"
    assert on_remote(team, "a3").status == "Finished"
    fresh = team.clone("reader")  # its wiki entry, as a clone made now reads it
    entry = fresh("--json", "wiki", "show", "a3")
    assert entry.returncode == 0 and "token refresh" in entry.stdout, entry.stderr
    handed = b("--json", "handoff", "a4", "--text", "the auth work goes on from here")
    assert handed.returncode == 0, handed.stderr  # before: "unknown session a4"
    ok(a("register", "a5", "--provider", "Kimi", "--space", "src/auth.py"))
    inbox = json.loads(ok(a("--json", "inbox", "a5")).stdout)
    assert [m["body"] for m in inbox["messages"]] == ["the auth work goes on from here"]


def test_finish_in_the_shard_layout_releases_claims_this_clone_never_saw(tmp_path):
    team, (c0, c1) = sharded_team(tmp_path, 2)
    ok(c1("status"))  # c1's view of every shard is now older than what c0 claims next
    ok(c0("register", "s9", "--provider", "Codex", "--working-on", "tokens"))
    ok(c0("lock", "acquire", "src/auth/token.py", "docs/", "--session", "s9"))
    finished = c1("--json", "finish", "s9")
    assert finished.returncode == 0, finished.stderr
    # before: "released 0 lock(s)", and the claims stayed behind in the shards
    assert sorted(json.loads(finished.stdout)["released"]) == ["docs/", "src/auth/token.py"]
    fresh = team.clone("fresh")
    proc = fresh("--json", "lock", "check", "src/auth/token.py", "docs/a.md")
    assert [p["state"] for p in json.loads(proc.stdout)["paths"]] == ["free", "free"]
    assert json.loads(ok(fresh("--json", "lock", "list")).stdout)["locks"] == []


def test_kill_in_the_shard_layout_from_a_clone_that_never_saw_the_session(tmp_path):
    team, (c0, c1) = sharded_team(tmp_path, 2)
    ok(c1("status"))
    ok(c0("register", "s8", "--provider", "Codex"))
    ok(c0("lock", "acquire", "src/auth/token.py", "--session", "s8"))
    killed = c1("--json", "kill", "s8")
    assert killed.returncode == 0, killed.stderr
    assert json.loads(killed.stdout)["released"] == ["src/auth/token.py"]


def test_a_lock_left_by_an_ended_session_says_it_ended(tmp_path):
    clock = FakeClock(1_800_000_000)
    with sharded_registry(tmp_path, clock, "idle", "other") as registry:
        registry.claim("idle", ["src/auth/x.py"], shared=True)
        registry.claim("other", ["src/auth/x.py"], shared=True)
        clock.advance(2000)
        registry.heartbeat("other")  # keeps other's part fresh (a claim would take idle's)
        stopped = registry.cleanup(by="test")["stopped"]
        # cleanup ends idle; its part of the shared lock stays on the shard, stale: the
        # lock's other holder is fresh, so cleanup's free of it is refused
        assert [s["session"] for s in stopped] == ["idle"]
        assert stopped[0]["released"] == []
        view = registry.view()  # what `lock check` and `status` judge holders by
        [lock] = view.covering("src/auth/x.py")
        assert {h.session: registry.judge(view, h, clock()) for h in lock.holders} == \
            {"idle": "its session ended (Stop)", "other": None}
        assert [(l["owner"], l["stale_reason"]) for l in registry.locks()] == [("other", None)]
        # a holder no copy of the main branch knows is still "not registered"
        from agent_registry.branch.records import Holder
        from agent_registry.branch.staleness import stale_reason
        assert stale_reason(Holder("ghost", "g", "", 600), None, clock()) == \
            "its session is not registered"


def test_the_guard_says_a_lock_of_an_ended_session_ended(tmp_path):
    from agent_registry.enforce.guard import Guard
    from agent_registry.store.git import discover
    clock = FakeClock()
    import time
    clock.now = time.time() - 3000
    with sharded_registry(tmp_path, clock, "idle", "other") as registry:
        registry.claim("idle", ["src/auth/x.py"], shared=True)
        registry.claim("other", ["src/auth/x.py"], shared=True)
        clock.now = time.time()
        registry.heartbeat("other")
        # cleanup ends idle; its part of the shared lock stays (other's is fresh)
        assert [s["session"] for s in registry.cleanup(by="test")["stopped"]] == ["idle"]
        guard = Guard(discover(str(registry.repo.info.toplevel)))
        try:
            report = guard.check(["src/auth/x.py"], committer="other")
        finally:
            guard.close()
        assert not report.blocked
        assert [s["reason"] for s in report.stale] == ["its session ended (Stop)"]


def test_status_remote_reads_a_sharded_registry(tmp_path):
    team, (c0, c1) = sharded_team(tmp_path, 2)
    ok(c0("lock", "acquire", "src/auth/token.py", "--session", "s0"))
    ok(c1("lock", "heartbeat", "--session", "s1"))  # a beat on c1's clone ref
    elsewhere = tmp_path / "not-a-repo"
    elsewhere.mkdir()
    proc = subprocess.run([CLI, "--json", "status", "--remote", str(team.bare)], cwd=elsewhere,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr  # before: "agent-registry-shards/00 is missing"
    snap = json.loads(proc.stdout)
    assert sorted(s["id"] for s in snap["sessions"]) == ["s0", "s1"]
    assert [(l["path"], l["owner"]) for l in snap["locks"]] == [("src/auth/token.py", "s0")]
    text = subprocess.run([CLI, "status", "--remote", str(team.bare)], cwd=elsewhere,
                          capture_output=True, text=True)
    assert text.returncode == 0 and "src/auth/token.py" in text.stdout
