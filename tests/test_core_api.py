"""The core through the Python API: sessions, locks, staleness, the commit log.

Every test runs against a real repository (the ``repo`` fixture) with an injected clock,
so staleness is tested by moving time, not by sleeping.  Real processes (``sleep``)
stand in for agents whose liveness matters.
"""
from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path

import pytest

from agent_registry import Registry
from agent_registry.errors import BadInput, NotFound, Refused
from agent_registry.core.registry import PAGE_REFRESH
from agent_registry.branch.paths import record_name
from agent_registry.store.procinfo import start_time
from agent_registry.branch.records import dump_session, iso, load_session
from agent_registry.branch.trailers import parse_op
from agent_registry.branch.render import cell
from agent_registry.branch.view import done_path, live_path
from helpers import git, put_on_ref, read_diary, read_lock, registry_log, registry_ops, \
    registry_refs, shard_refs_of

BRANCH = "agent-registry"
ME = os.getpid()  # the owner process of sessions whose liveness must not matter


# -- helpers: read and hand-edit the branch with git itself ---------------------------

def tip(repo: Path) -> dict[str, str]:
    """The tip of every registry branch (the main branch, its lock shards, the clone
    refs): what "nothing was written" compares."""
    return registry_refs(repo)


def branch_file(repo: Path, path: str) -> str | None:
    proc = subprocess.run(["git", "show", f"{BRANCH}:{path}"], cwd=repo, capture_output=True,
                          text=True)
    return proc.stdout if proc.returncode == 0 else None


def commit_count(repo: Path) -> int:
    return int(git(repo, "rev-list", "--count", BRANCH).strip())


def put_on_branch(repo: Path, files: dict[str, bytes | None], message: str = "hand edit") -> None:
    """Commit *files* onto the registry branch by hand, as a person or another tool would."""
    put_on_ref(repo, f"refs/heads/{BRANCH}", files, message)


def edit_session(repo: Path, sid: str, **changes) -> None:
    raw = branch_file(repo, live_path(sid)).encode()
    session = load_session(raw)
    for key, value in changes.items():
        setattr(session, key, value)
    put_on_branch(repo, {live_path(sid): dump_session(session)})


def lock_state(registry, repo: Path) -> tuple:
    """What a refused claim leaves as it was: the main branch, and every lock and what
    each session holds, as the readers list them.  (A claim refused in one lock shard
    releases what it took in the shards before it, so those shards may have moved.)"""
    return (tip(repo)[f"refs/heads/{BRANCH}"], registry.locks(),
            {s.id: s.locks for s in registry.sessions()})


def lock_record(repo: Path, target: str) -> dict | None:
    """The lock on *target* as the library reads it (every shard overlaid)."""
    return read_lock(repo, target)


def shard_record(repo: Path, target: str) -> bytes | None:
    """The stored record of *target* in the (first) lock shard recording it."""
    proc = subprocess.run(["git", "show", f"{shard_refs_of(repo, target)[0]}:{record_name(target)}"],
                          cwd=repo, capture_output=True)
    return proc.stdout if proc.returncode == 0 else None


def start_sleeper() -> subprocess.Popen:
    """A real process to stand for an agent.  A thread reaps it as soon as it dies, as
    an agent's parent would, so a killed sleeper never lingers as a zombie."""
    proc = subprocess.Popen(["sleep", "300"])
    threading.Thread(target=proc.wait, daemon=True).start()
    return proc


@pytest.fixture
def sleeper():
    proc = start_sleeper()
    yield proc
    proc.kill()


def reg(registry, sid: str, **kw):
    kw.setdefault("provider", "Kimi")
    kw.setdefault("pid", ME)
    return registry.register(sid, **kw)


# -- sessions -------------------------------------------------------------------------

def test_register_records_who_where_and_when(registry, repo, clock):
    session = reg(registry, "kimi-1", ai_version="2.7", working_on="auth refactor",
                  space=["src/auth.py"], todo_present=["split", "test"])
    assert session.status == "OnWorking"
    assert (session.provider, session.ai_version, session.working_on) == ("Kimi", "2.7", "auth refactor")
    assert session.project == str(repo.resolve())
    assert session.repo == "repo" and session.git_branch == "main"
    assert session.pid == ME and session.pid_start == start_time(ME)
    assert session.registered_at == session.heartbeat_at == iso(clock())
    assert session.space == ["src/auth.py"] and session.todo_present == ["split", "test"]
    with Registry.open(str(repo), clock=clock) as reader:  # what another process reads back
        assert reader.session("kimi-1").to_dict() == session.to_dict()
    op, message = registry_ops(repo, "register")[0]
    assert op["session"] == "kimi-1"
    assert message.startswith("register kimi-1 (Kimi): auth refactor")


def test_register_refuses_bad_ids_and_text_before_writing(registry, repo):
    registry.init()
    before = tip(repo)
    for bad in ("../../evil", "", "a/b", "-x", "a b", "x" * 200):
        with pytest.raises(BadInput):
            reg(registry, bad)
    with pytest.raises(BadInput):
        reg(registry, "ok-1", working_on="line\x07bell")
    with pytest.raises(BadInput):
        reg(registry, "ok-1", provider="")
    assert tip(repo) == before


def test_update_finish_and_the_ended_session(registry, repo, clock):
    reg(registry, "s1", working_on="a")
    clock.advance(60)
    session = registry.update("s1", working_on="b", todo_past="x, y", todo_future=["z"],
                              issues="#12")
    assert (session.working_on, session.todo_past, session.todo_future, session.issues) == \
        ("b", ["x", "y"], ["z"], "#12")
    assert session.heartbeat_at == iso(clock())
    with pytest.raises(BadInput):
        registry.update("s1", status="Sleeping")
    with pytest.raises(BadInput):
        registry.update("s1")
    registry.handoff("s1", "docs/handoff-s1.md")
    clock.advance(60)
    result = registry.finish("s1")
    assert result["session"]["status"] == "Finished"
    assert result["session"]["finished_at"] == iso(clock())
    assert branch_file(repo, live_path("s1")) is None
    assert load_session(branch_file(repo, done_path("s1")).encode()).handoff == "docs/handoff-s1.md"
    assert registry.session("s1").status == "Finished"
    assert [s.id for s in registry.sessions()] == []
    assert [s.id for s in registry.sessions(include_ended=True)] == ["s1"]
    again = registry.finish("s1")
    assert again["already"] is True
    with pytest.raises(Refused):
        registry.update("s1", working_on="c")
    with pytest.raises(Refused):
        reg(registry, "s1")
    with pytest.raises(NotFound):
        registry.finish("nobody")
    with pytest.raises(NotFound):
        registry.session("nobody")


def test_update_with_an_ending_status_releases_locks(registry, repo):
    reg(registry, "s1")
    registry.claim("s1", ["src/auth.py"])
    result = registry.update("s1", status="Stop")
    assert result.status == "Stop"
    assert registry.check(["src/auth.py"])[0]["state"] == "free"
    assert lock_record(repo, "src/auth.py") is None


def test_context_log_appends_to_the_diary(registry, repo, clock):
    reg(registry, "s1", working_on="auth")
    registry.context_log("s1", "first step")
    clock.advance(5)
    registry.context_log("s1", "second\nline")
    diary = registry.diary("s1")["diary"]
    assert diary == read_diary(repo, "s1")  # another process reads the same diary
    assert diary.startswith("# Diary of s1")
    assert f"- {iso(clock() - 5)} first step\n" in diary
    assert f"- {iso(clock())} second\n  line\n" in diary
    with pytest.raises(BadInput):
        registry.context_log("s1", "   ")
    with pytest.raises(NotFound):
        registry.context_log("ghost", "x")


# -- claims: files, directories, globs --------------------------------------------------

@pytest.mark.parametrize("held, wanted", [
    ("src/auth/", "src/auth/login.py"),
    ("src/auth/login.py", "src/auth/"),
    ("src/", "src/auth/"),
    ("src/**/*.py", "src/auth.py"),
    ("src/auth.py", "src/**/*.py"),
    ("src/**/*.py", "src/auth/deep/x.py"),
    ("src/*.py", "src/auth.py"),
    ("src/**/*.py", "src/auth/"),
    ("src/auth/", "src/**/*.py"),
    ("src/a*.py", "src/*.py"),
])
def test_overlapping_claims_conflict_both_ways(registry, repo, held, wanted):
    reg(registry, "a")
    reg(registry, "b")
    registry.claim("a", [held])
    before = lock_state(registry, repo)
    with pytest.raises(Refused) as refused:
        registry.claim("b", [wanted])
    assert "a" == refused.value.details["conflicts"][0]["owner"]
    assert lock_state(registry, repo) == before and before[2]["b"] == []
    assert registry.check([wanted], sid="b")[0]["state"] == "locked"


@pytest.mark.parametrize("held, wanted", [
    ("src/auth/", "src/authx.py"),
    ("src/auth/", "src/auth.py"),
    ("src/*.py", "src/auth/login.py"),
    ("src/**/*.py", "docs/"),
    ("src/**/*.py", "src/auth.md"),
    ("docs/a.md", "docs/b.md"),
])
def test_disjoint_claims_coexist(registry, held, wanted):
    reg(registry, "a")
    reg(registry, "b")
    registry.claim("a", [held])
    assert registry.claim("b", [wanted])["locks"][0]["status"] == "acquired"


def test_paths_are_normalized_and_bad_ones_refused(registry, repo):
    reg(registry, "a")
    result = registry.claim("a", ["./src/../src/auth.py", "src", str(repo / "README.md")])
    assert [l["path"] for l in result["locks"]] == ["src/auth.py", "src/", "README.md"]
    before = tip(repo)
    for bad in ("../x", "/etc/passwd", "src/a\x01.py", "src/a\0.py", "", ".git/config", "."):
        with pytest.raises(BadInput):
            registry.claim("a", [bad])
    assert tip(repo) == before


def test_shared_locks_coexist_and_exclude_writers(registry):
    for sid in ("r1", "r2", "w"):
        reg(registry, sid)
    registry.claim("r1", ["docs/"], shared=True)
    assert registry.claim("r2", ["docs/"], shared=True)["locks"][0]["status"] == "acquired"
    with pytest.raises(Refused):
        registry.claim("w", ["docs/"])
    with pytest.raises(Refused):
        registry.claim("w", ["docs/api.md"])
    registry.release("r1", ["docs/"])
    registry.release("r2", ["docs/"])
    registry.claim("w", ["docs/"])
    with pytest.raises(Refused):
        registry.claim("r1", ["docs/"], shared=True)


def test_multi_path_claim_is_all_or_nothing(registry, repo):
    reg(registry, "a")
    reg(registry, "b")
    registry.claim("a", ["src/b.py"])
    before = lock_state(registry, repo)
    with pytest.raises(Refused) as refused:
        registry.claim("b", ["src/a.py", "src/b.py", "src/c.py"])
    assert "src/b.py is locked by a" in refused.value.message
    assert lock_state(registry, repo) == before
    assert [c["state"] for c in registry.check(["src/a.py", "src/b.py", "src/c.py"], sid="b")] == \
        ["free", "locked", "free"]
    assert registry.session("b").locks == []


def test_reclaim_renews_and_keeps_the_generation(registry, repo, clock):
    reg(registry, "a")
    first = registry.claim("a", ["src/auth.py"])["locks"][0]
    clock.advance(100)
    second = registry.claim("a", ["src/auth.py"])["locks"][0]
    assert (first["status"], second["status"]) == ("acquired", "renewed")
    assert second["generation"] == first["generation"]
    record = lock_record(repo, "src/auth.py")
    assert record["holders"] == [{"session": "a", "generation": first["generation"],
                                  "acquired_at": iso(clock()), "ttl": 600}]
    assert registry.session("a").locks == ["src/auth.py"]
    assert registry.check(["src/auth.py"], sid="a")[0]["state"] == "locked-by-me"


def test_release_by_a_non_owner_is_refused(registry, repo):
    reg(registry, "a")
    reg(registry, "b")
    registry.claim("a", ["src/auth.py"])
    before = tip(repo)
    with pytest.raises(Refused) as refused:
        registry.release("b", ["src/auth.py"])
    assert refused.value.details["owners"] == ["a"]
    assert tip(repo) == before
    assert registry.release("a", ["src/auth.py"])["locks"] == [{"path": "src/auth.py",
                                                                 "status": "released"}]
    assert lock_record(repo, "src/auth.py") is None
    assert registry.release("a", ["src/auth.py"])["locks"][0]["status"] == "not-locked"


def test_claims_need_a_live_session(registry):
    with pytest.raises(NotFound):
        registry.claim("ghost", ["src/auth.py"])
    reg(registry, "a")
    registry.finish("a")
    with pytest.raises(Refused):
        registry.claim("a", ["src/auth.py"])


# -- staleness ------------------------------------------------------------------------

def test_stale_by_ttl_and_taken_over(registry, clock):
    reg(registry, "a")
    reg(registry, "b")
    registry.claim("a", ["src/auth.py"], ttl=60)
    clock.advance(59)
    with pytest.raises(Refused):
        registry.claim("b", ["src/auth.py"])
    clock.advance(2)
    state = registry.check(["src/auth.py"])[0]
    assert state["state"] == "stale" and "no heartbeat" in state["stale_reason"]
    result = registry.claim("b", ["src/auth.py"])["locks"][0]
    assert result["status"] == "taken-over" and result["previous"] == ["a"]
    assert registry.session("a").locks == []
    assert registry.session("b").locks == ["src/auth.py"]


def test_stale_when_the_session_ended(registry, repo):
    reg(registry, "a")
    reg(registry, "b")
    registry.claim("a", ["src/auth.py"])
    # an ended session whose lock record survived (e.g. written by an older version):
    # put back by hand in the lock shard recording it
    record = shard_record(repo, "src/auth.py")
    registry.finish("a")
    assert lock_record(repo, "src/auth.py") is None
    put_on_ref(repo, shard_refs_of(repo, "src/auth.py")[0], {record_name("src/auth.py"): record})
    assert lock_record(repo, "src/auth.py")["holders"][0]["session"] == "a"
    assert registry.check(["src/auth.py"])[0]["stale_reason"] == "its session ended (Finished)"
    assert registry.claim("b", ["src/auth.py"])["locks"][0]["status"] == "taken-over"


def test_stale_when_the_process_died(registry, sleeper):
    reg(registry, "a", pid=sleeper.pid)
    reg(registry, "b")
    registry.claim("a", ["src/auth.py"])
    with pytest.raises(Refused):
        registry.claim("b", ["src/auth.py"])
    sleeper.kill()
    sleeper.wait()
    state = registry.check(["src/auth.py"])[0]
    assert state["state"] == "stale" and f"process {sleeper.pid}" in state["stale_reason"]
    assert registry.claim("b", ["src/auth.py"])["locks"][0]["status"] == "taken-over"


def test_stale_when_the_pid_was_reused(registry, repo, sleeper):
    reg(registry, "a", pid=sleeper.pid)
    reg(registry, "b")
    registry.claim("a", ["src/auth.py"])
    # the pid runs, but it is not the process that registered: its start time differs
    edit_session(repo, "a", pid_start=start_time(sleeper.pid) - 1)
    assert sleeper.poll() is None
    state = registry.check(["src/auth.py"])[0]
    assert state["state"] == "stale" and "is gone" in state["stale_reason"]
    assert registry.claim("b", ["src/auth.py"])["locks"][0]["status"] == "taken-over"


def test_a_zombie_process_counts_as_dead(registry, repo):
    # an agent that exited but was not yet reaped by its parent is gone all the same
    child = subprocess.Popen(["true"])
    try:
        for _ in range(200):
            with open(f"/proc/{child.pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    break
            threading.Event().wait(0.01)
        reg(registry, "a", pid=child.pid)
        reg(registry, "b")
        registry.claim("a", ["src/auth.py"])
        assert registry.check(["src/auth.py"])[0]["state"] == "stale"
    finally:
        child.wait()


def test_clock_skew_margin_for_sessions_of_another_host(repo, clock, registry):
    with Registry.open(str(repo), clock=clock, host="far-away") as remote:
        reg(remote, "far")
        remote.claim("far", ["src/auth.py"], ttl=60)
    reg(registry, "near")
    clock.advance(60 + 20)  # past the TTL by the other machine's clock, within the margin
    assert registry.check(["src/auth.py"])[0]["state"] == "locked"
    with pytest.raises(Refused):
        registry.claim("near", ["src/auth.py"])
    clock.advance(15)  # now past TTL + 30 s by its stamp, but first seen so just now:
    with pytest.raises(Refused, match="the clock of far-away may be behind"):
        registry.claim("near", ["src/auth.py"])  # (its clock may be behind ours)
    clock.advance(91)  # watched here past TTL + 30 s
    assert registry.claim("near", ["src/auth.py"])["locks"][0]["status"] == "taken-over"


def test_no_margin_for_sessions_of_this_host(repo, clock, registry):
    reg(registry, "a")
    reg(registry, "b")
    registry.claim("a", ["src/auth.py"], ttl=60)
    clock.advance(61)
    assert registry.claim("b", ["src/auth.py"])["locks"][0]["status"] == "taken-over"


def test_pid_of_another_host_is_not_judged_here(repo, clock, registry, sleeper):
    # a session of another host whose pid happens to be dead here stays live
    with Registry.open(str(repo), clock=clock, host="far-away") as remote:
        reg(remote, "far", pid=sleeper.pid)
        remote.claim("far", ["src/auth.py"])
    sleeper.kill()
    sleeper.wait()
    assert registry.check(["src/auth.py"])[0]["state"] == "locked"


def test_heartbeat_renews_every_lock_in_one_commit(registry, repo, clock):
    reg(registry, "a")
    reg(registry, "b")
    paths = [f"src/m{i}.py" for i in range(20)]
    registry.claim("a", paths, ttl=600)
    clock.advance(500)
    before, beats = tip(repo), len(registry_ops(repo, "heartbeat"))
    result = registry.heartbeat("a")
    assert result == {"session": "a", "heartbeat_at": iso(clock()), "locks": 20}
    assert registry.session("a").heartbeat_at == iso(clock())
    # one commit renews the 20 locks, and no lock record is written again: no lock shard
    # moved (the main branch only had its minute-old page rendered again)
    assert len(registry_ops(repo, "heartbeat")) == beats + 1
    after = tip(repo)
    assert {ref: sha for ref, sha in after.items() if "-shards/" in ref} == \
        {ref: sha for ref, sha in before.items() if "-shards/" in ref}
    assert sorted(op["op"] for op, _ in registry_ops(repo) if op["at"] == clock()) == \
        ["heartbeat", "refresh-page"]
    clock.advance(500)  # 1000 s after the claim, 500 s after the heartbeat
    assert {c["state"] for c in registry.check(paths)} == {"locked"}
    with pytest.raises(Refused):
        registry.claim("b", ["src/m7.py"])
    clock.advance(101)
    assert {c["state"] for c in registry.check(paths)} == {"stale"}


def test_a_heartbeat_leaves_a_recent_page_as_it_was(registry, repo, clock):
    """registry.md is rendered again by a heartbeat only when the page is PAGE_REFRESH
    seconds old: the beats in between change the session file alone (issue 26)."""
    reg(registry, "a")
    registry.claim("a", ["src/a.py"])
    main = f"refs/heads/{BRANCH}"
    page, main_tip = git(repo, "rev-parse", f"{BRANCH}:registry.md"), tip(repo)[main]
    for _ in range(3):
        clock.advance(PAGE_REFRESH / 4)
        registry.heartbeat("a")
        assert registry.session("a").heartbeat_at == iso(clock())  # the beat counts
        assert tip(repo)[main] == main_tip  # and the page on the main branch was left alone
        assert git(repo, "rev-parse", f"{BRANCH}:registry.md") == page
    clock.advance(PAGE_REFRESH / 2)  # the page is now more than PAGE_REFRESH old
    registry.heartbeat("a")
    assert registry.session("a").heartbeat_at == iso(clock())
    assert git(repo, "rev-parse", f"{BRANCH}:registry.md") != page
    text = git(repo, "show", f"{BRANCH}:registry.md")
    # rendered now, with the beat just made (0 s before the page) and the lock claimed
    assert f'generated_at: "{iso(clock())}"' in text and "held_locks: 1" in text
    assert f"| a | Kimi | {cell(registry.host)} |  | 0s ago | 1 |" in text


def test_heartbeat_loop_stops_when_the_session_ends(registry):
    reg(registry, "a")
    beats = []

    def sleep(_seconds):
        beats.append(1)
        if len(beats) == 3:
            registry.finish("a")

    assert registry.heartbeat_loop("a", 1, sleep=sleep) == "session a is Finished"
    assert len(beats) == 3


def test_heartbeat_loop_stops_when_the_session_ends_before_its_beat(registry, monkeypatch):
    """A reviewer's finding: a session finished between the loop's liveness check and
    its heartbeat made the loop fail (`session a has ended`, exit 1) instead of stop."""
    reg(registry, "a")
    checked = registry.session

    def check_then_finish(sid: str):
        found = checked(sid)
        if found.live:  # the race, made certain: it ends right after the check
            registry.finish(sid)
        return found
    monkeypatch.setattr(registry, "session", check_then_finish)
    assert registry.heartbeat_loop("a", 1, sleep=lambda s: None) == "session a is Finished"


def test_heartbeat_loop_stops_when_the_process_dies(registry, sleeper):
    reg(registry, "a", pid=sleeper.pid)
    sleeper.kill()
    sleeper.wait()
    assert "is gone" in registry.heartbeat_loop("a", 1, sleep=lambda s: None)


# -- force-release, cleanup, kill -----------------------------------------------------

def test_force_release_needs_force_for_a_fresh_lock(registry, repo, clock):
    reg(registry, "a")
    registry.claim("a", ["src/auth.py"])
    before = tip(repo)
    with pytest.raises(Refused) as refused:
        registry.force_release("src/auth.py", reason="stuck", by="alice")
    assert "--force" in refused.value.message
    assert tip(repo) == before
    with pytest.raises(BadInput):
        registry.force_release("src/auth.py", reason="  ", by="alice", force=True)
    with pytest.raises(NotFound):
        registry.force_release("src/free.py", reason="x", by="alice", force=True)
    with pytest.raises(BadInput):
        registry.force_release("src/auth.py", reason="two\nlines", by="alice", force=True)
    result = registry.force_release("src/auth.py", reason="agent hung  for hours", by="alice",
                                    force=True)
    assert result == {"path": "src/auth.py", "previous": ["a"], "was_fresh": True,
                      "by": "alice", "reason": "agent hung  for hours"}
    assert lock_record(repo, "src/auth.py") is None
    assert registry.session("a").locks == []
    [(_, message)] = registry_ops(repo, "force-release")  # the audit log: one commit
    assert message.startswith("force-release src/auth.py (held by a) by alice")
    assert "Registry-By: alice" in message and "Registry-Reason: agent hung for hours" in message
    op = parse_op(message)
    assert (op["op"], op["path"], op["by"], op["force"], op["reason"]) == \
        ("force-release", "src/auth.py", "alice", True, "agent hung  for hours")


def test_force_release_of_a_stale_lock_needs_no_force(registry, clock):
    reg(registry, "a")
    registry.claim("a", ["src/auth.py"], ttl=10)
    clock.advance(11)
    assert registry.force_release("src/auth.py", reason="stale", by="bob")["was_fresh"] is False


def test_cleanup_stops_zombies_and_frees_their_locks(registry, repo, clock, sleeper):
    reg(registry, "dead", pid=sleeper.pid)
    reg(registry, "idle")
    reg(registry, "busy")
    registry.claim("dead", ["src/a.py", "src/b/"])
    registry.claim("idle", ["src/c.py"], ttl=100)
    registry.claim("busy", ["src/d.py"], ttl=100)
    sleeper.kill()
    sleeper.wait()
    clock.advance(90)
    registry.heartbeat("busy")
    clock.advance(20)
    result = registry.cleanup()
    stopped = {s["session"]: s for s in result["stopped"]}
    assert set(stopped) == {"dead", "idle"}
    assert sorted(stopped["dead"]["released"]) == ["src/a.py", "src/b/"]
    assert stopped["idle"]["released"] == ["src/c.py"]
    assert registry.session("dead").status == "Stop"
    assert registry.session("busy").status == "OnWorking"
    for path in ("src/a.py", "src/b/", "src/c.py"):
        assert lock_record(repo, path) is None
    assert lock_record(repo, "src/d.py")["holders"][0]["session"] == "busy"
    assert [l["path"] for l in registry.locks()] == ["src/d.py"]
    assert len(registry_ops(repo, "cleanup")) == 1
    before = tip(repo)
    assert registry.cleanup() == {"stopped": []}
    assert tip(repo) == before  # nothing to do, nothing committed


def test_kill_terminates_a_local_process(registry, repo, sleeper):
    reg(registry, "a", pid=sleeper.pid)
    registry.claim("a", ["src/auth.py"])
    result = registry.kill("a")
    assert result["signal"] == "SIGTERM"
    assert result["session"]["status"] == "Killed" and result["released"] == ["src/auth.py"]
    sleeper.wait(timeout=10)
    assert sleeper.returncode == -15
    assert lock_record(repo, "src/auth.py") is None
    assert registry.session("a").status == "Killed"
    with pytest.raises(Refused):
        registry.kill("a")


def test_kill_never_signals_a_reused_pid(registry, repo, sleeper):
    reg(registry, "a", pid=sleeper.pid)
    edit_session(repo, "a", pid_start=start_time(sleeper.pid) + 1)
    result = registry.kill("a")
    assert result["signal"] is None and result["session"]["status"] == "Killed"
    assert sleeper.poll() is None


def test_kill_of_another_host_session_is_a_logical_stop(repo, clock, registry, sleeper):
    with Registry.open(str(repo), clock=clock, host="far-away") as remote:
        reg(remote, "far", pid=sleeper.pid)
    result = registry.kill("far")
    assert result["signal"] is None and result["session"]["status"] == "Killed"
    assert sleeper.poll() is None


# -- files on the branch --------------------------------------------------------------

def test_hand_edited_session_keeps_its_comments(registry, repo, clock):
    registry.init()
    text = (
        "# Pinned by hand: this session is the release manager\n"
        "id: hand-1\n"
        "provider: Kimi   # the provider\n"
        f"status: OnWorking\nhost: {registry.host}\npid: {ME}\npid_start: {start_time(ME)}\n"
        f"registered_at: '{iso(clock())}'\nheartbeat_at: '{iso(clock())}'\n"
        "working_on: release 1.0\n"
        "locks: []\n"
        "owner_note: keep this key\n"
    )
    put_on_branch(repo, {live_path("hand-1"): text.encode()})
    registry.claim("hand-1", ["src/auth.py"])
    session = registry.session("hand-1")
    assert session.locks == ["src/auth.py"] and session.extra == {"owner_note": "keep this key"}
    # a change of the session rewrites its file (on the main branch; its locks are on
    # the lock shards): the hand edit's comments and keys stay
    registry.update("hand-1", working_on="release 1.1")
    after = branch_file(repo, live_path("hand-1"))
    assert "# Pinned by hand: this session is the release manager" in after
    assert "# the provider" in after
    assert "owner_note: keep this key" in after
    assert load_session(after.encode()).working_on == "release 1.1"
    session = registry.session("hand-1")
    assert session.locks == ["src/auth.py"] and session.extra == {"owner_note": "keep this key"}
    registry.release("hand-1", ["src/auth.py"])
    assert registry.session("hand-1").locks == []
    registry.update("hand-1", working_on="release 1.2")
    assert "# the provider" in branch_file(repo, live_path("hand-1"))


def test_a_corrupt_lock_record_is_reported_and_the_rest_works(registry, repo):
    reg(registry, "a")
    reg(registry, "b")
    registry.claim("a", ["src/ok.py"])
    # a record damaged by hand in the lock shard that records src/auth.py
    put_on_ref(repo, shard_refs_of(repo, "src/auth.py")[0], {record_name("src/auth.py"): b"{not json"})
    state = registry.check(["src/auth.py", "src/ok.py"], sid="b")
    assert [s["state"] for s in state] == ["free", "locked"]
    assert any(record_name("src/auth.py") in w for w in registry.warnings)
    with pytest.raises(Refused):
        registry.claim("b", ["src/ok.py"])
    registry.claim("b", ["src/auth.py"])  # the broken record is replaced
    assert lock_record(repo, "src/auth.py")["holders"][0]["session"] == "b"


def test_a_corrupt_session_file_is_reported_and_the_rest_works(registry, repo):
    reg(registry, "a")
    registry.claim("a", ["src/auth.py"])
    put_on_branch(repo, {live_path("broken"): b"id: [unclosed\n  - : :\n"})
    assert [s.id for s in registry.sessions()] == ["a"]
    assert any(live_path("broken") in w for w in registry.warnings)
    reg(registry, "b")
    registry.claim("b", ["src/other.py"])
    with pytest.raises(Refused):
        registry.claim("b", ["src/auth.py"])
    with pytest.raises(Exception) as failed:
        registry.claim("broken", ["src/x.py"])
    assert live_path("broken") in str(failed.value)


def test_a_lock_held_by_an_unreadable_session_stays_held(registry, repo):
    reg(registry, "a")
    reg(registry, "b")
    registry.claim("a", ["src/auth.py"])
    put_on_branch(repo, {live_path("a"): b"id: [unclosed\n"})
    with pytest.raises(Refused):
        registry.claim("b", ["src/auth.py"])


def test_registry_md_escapes_pipes_newlines_and_html(registry, repo, clock):
    reg(registry, "a", working_on="fix a|b <script>alert(1)</script> & more")
    registry.claim("a", ["src/auth.py"])
    md = branch_file(repo, "registry.md")
    assert "<script>" not in md
    assert "fix a\\|b &lt;script&gt;alert(1)&lt;/script&gt; &amp; more" in md
    # a newline can only arrive by a hand edit: it must not break the table row
    edit_session(repo, "a", working_on="first line\nsecond | line")
    clock.advance(PAGE_REFRESH)  # a write on the clone ref renders a page a minute old
    registry.context_log("a", "renders the page")
    md = branch_file(repo, "registry.md")
    assert "| first line<br>second \\| line |" in md
    assert not any(line.startswith("second") for line in md.splitlines())
    assert cell("a|b\r\n<i>") == "a\\|b<br>&lt;i&gt;"


def test_registry_md_frontmatter_and_tables(registry, repo, clock):
    reg(registry, "a", working_on="auth | login")
    registry.claim("a", ["src/auth.py", "docs/"])
    reg(registry, "b")
    registry.finish("b")
    md = branch_file(repo, "registry.md")
    front = md.split("---\n")[1]
    meta = {k: json.loads(v) for k, v in (line.split(": ", 1) for line in front.splitlines())}
    assert meta == {"generated_at": iso(clock()), "live_sessions": 1, "stale_sessions": 0,
                    "held_locks": 2, "ttl": 600, "clock_skew_margin": 30,
                    "last_operation": "finish b, releasing 0 lock(s)", "lock_shards": 16}
    assert "| src/auth.py | a | auth \\| login | 0s ago | held |" in md
    assert "| auth \\| login |" in md
    assert "| b | Kimi |" in md.split("## Recently ended")[1]


def test_every_commit_carries_registry_md_readme_and_its_operation(registry, repo, clock):
    reg(registry, "a")
    reg(registry, "b")
    registry.claim("a", ["src/auth.py"])
    registry.claim("b", ["docs/"], shared=True)
    clock.advance(PAGE_REFRESH)  # a heartbeat renders a page this old (earlier: it keeps it)
    registry.heartbeat("a")
    registry.context_log("a", "note")
    registry.release("a", ["src/auth.py"])
    clock.advance(1000)
    registry.cleanup()
    # every commit of every registry branch (the main one, the lock shards, the clone ref)
    ids: dict[str, set[str]] = {}
    for commit, message in registry_log(repo):
        names = git(repo, "ls-tree", "--name-only", commit).split()
        assert "registry.md" in names and "README.md" in names
        op = parse_op(message)
        # what init made (its root, the layout, each shard's root), each operation, the
        # main page rendered again, and the shard locks of the sessions cleanup stopped
        assert op["op"] in {"init", "convert", "register", "claim", "heartbeat", "context-log",
                            "release", "cleanup", "refresh-page", "force-release"}
        ids.setdefault(op["op"], set()).add(op["id"])
        subject = message.split("\n")[0]
        md = git(repo, "show", f"{commit}:registry.md")
        assert f"last_operation: {json.dumps(subject)}" in md
    # each operation once, on each ref it writes once
    assert {kind: len(found) for kind, found in ids.items()
            if kind in {"register", "claim", "heartbeat", "context-log", "release", "cleanup"}} == \
        {"register": 2, "claim": 2, "heartbeat": 1, "context-log": 1, "release": 1, "cleanup": 1}
    for ref in registry_refs(repo):
        on_ref = [parse_op(m)["id"] for _, m in registry_log(repo, refs=[ref])]
        assert len(on_ref) == len(set(on_ref)), ref
    readme = branch_file(repo, "README.md")
    assert f"`git log {BRANCH}`" in readme


def test_claim_trailers_record_paths_and_generations(registry, repo):
    reg(registry, "a")
    # two files of one key (src/auth): one lock shard records both, in one commit
    paths = ["src/auth/a.py", "src/auth/b.py"]
    result = registry.claim("a", paths, ttl=120)
    [(_, message)] = registry_ops(repo, "claim")
    assert message.split("\n")[0] == "claim src/auth/a.py and 1 more by a"
    generations = {l["path"]: l["generation"] for l in result["locks"]}
    for path, generation in generations.items():
        assert f"Registry-Generation: {generation} {path}" in message
        assert f"Registry-Path: {path}" in message
    op = parse_op(message)
    assert (op["op"], op["session"], op["paths"], op["ttl"], op["generations"]) == \
        ("claim", "a", paths, 120, generations)


def test_finish_releases_every_lock_then_ends_the_session_in_one_commit(registry, repo):
    """In lock shards a finish releases the session's locks in the shards recording them
    (one operation id over them), then ends the session in one commit of the main branch."""
    reg(registry, "a")
    targets = ["src/a.py", "src/b/", "src/**/*.md"]
    registry.claim("a", targets)
    before = commit_count(repo)
    result = registry.finish("a")
    assert sorted(result["released"]) == ["src/**/*.md", "src/a.py", "src/b/"]
    assert commit_count(repo) == before + 1
    releases = registry_ops(repo, "release")
    assert len({op["id"] for op, _ in releases}) == 1
    assert {p for op, _ in releases for p in op["paths"]} == set(targets)
    # each target released in every shard recording it: a glob of no key in all 16
    assert len(releases) == len({ref for t in targets for ref in shard_refs_of(repo, t)}) == 16
    assert registry.locks() == []
    assert [c["state"] for c in registry.check(targets)] == ["free"] * 3
    assert registry.session("a").status == "Finished"
    [(_, message)] = registry_ops(repo, "finish")
    assert message.split("\n")[0] == "finish a, releasing 3 lock(s)"


def test_locks_lists_held_locks_with_state(registry, clock):
    reg(registry, "a")
    registry.claim("a", ["src/b.py", "src/a.py"], ttl=50)
    clock.advance(60)
    listed = registry.locks()
    assert [l["path"] for l in listed] == ["src/a.py", "src/b.py"]
    assert listed[0]["owner"] == "a" and listed[0]["age_seconds"] == 60 and listed[0]["ttl"] == 50
    assert "no heartbeat" in listed[0]["stale_reason"]


def test_init_is_idempotent_and_leaves_the_user_alone(registry, repo):
    head = git(repo, "rev-parse", "HEAD")
    status = git(repo, "status", "--porcelain", "--ignored")
    assert registry.init() == {"branch": BRANCH, "created": True}
    made = tip(repo)
    assert registry.init() == {"branch": BRANCH, "created": False}
    assert tip(repo) == made  # the second init writes nothing
    # the layout init makes: the main branch and its 16 lock shards
    assert sorted(made) == sorted([f"refs/heads/{BRANCH}"] +
                                  [f"refs/heads/{BRANCH}-shards/{i:02d}" for i in range(16)])
    assert git(repo, "rev-parse", "HEAD") == head
    assert git(repo, "status", "--porcelain", "--ignored") == status
    # orphan branches: no history shared with the code
    for ref in made:
        assert git(repo, "merge-base", "HEAD", ref, check=False) == ""


def test_a_ref_lock_left_by_a_killed_git_is_cleared(registry, repo):
    """kill -9 while `git update-ref` holds `<ref>.lock` leaves the file behind; a fresh
    one is waited for (someone is writing: the claim goes through once its writer is
    done), an old one is taken for abandoned."""
    import os
    import threading
    import time as _time
    registry.register("s1", provider="Kimi", working_on="auth", pid=os.getpid())
    common = Path(git(repo, "rev-parse", "--git-common-dir").strip())
    common = common if common.is_absolute() else repo / common

    def ref_lock(path: str) -> Path:  # the lock file of the shard ref a claim of *path* writes
        [ref] = shard_refs_of(repo, path)
        return common / f"{ref}.lock"

    lock = ref_lock("src/fresh.py")
    lock.write_text("")
    writer_done = threading.Timer(0.5, lock.unlink)  # the live writer finishes
    writer_done.start()
    assert registry.claim("s1", ["src/fresh.py"])["locks"][0]["status"] == "acquired"
    writer_done.join()
    lock = ref_lock("src/auth.py")
    lock.write_text("")
    old = _time.time() - 60
    os.utime(lock, (old, old))
    assert registry.claim("s1", ["src/auth.py"])["locks"][0]["status"] == "acquired"
    assert not lock.exists()
    assert {l["path"] for l in registry.locks()} == {"src/fresh.py", "src/auth.py"}
