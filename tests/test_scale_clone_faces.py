"""The commands that go over every branch of the registry cover this clone's own ref
(layout format 3, docs/shards.md), where its sessions' heartbeats and diary lines are
committed: `sync` pushes it when it holds commits the remote lacks (a heartbeat or a diary
line made offline), `status`, `doctor` and the dashboard say so, `gc` squashes it (and
no other clone's), and `watch`, the dashboard's live updates and the session timeline
follow the clone refs.

Real clones of a real bare remote, the real CLI in subprocesses, a dashboard served by
the real CLI; every registry is made as `agent-registry init --shards 4` makes it."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from helpers import FakeClock, Runner, git
from test_dashboard_support import agents  # noqa: F401  (fixture)
from test_scale_faces import offline, ok, sharded

from agent_registry import Registry
from agent_registry.branch.clones import beat_path, clone_branch

BRANCH = "agent-registry"


def own_branch(clone: Runner) -> str:
    """The branch clone *clone* writes its heartbeats and diary lines on."""
    name = (Path(clone.cwd) / ".git" / "agent-registry" / "clone").read_text().strip()
    return clone_branch(BRANCH, name)


def remote_tip(bare: Path, branch: str) -> str | None:
    out = git(bare, "for-each-ref", "--format=%(objectname)", f"refs/heads/{branch}").strip()
    return out or None


def diary_lines(clone: Runner, sid: str) -> list[str]:
    shown = ok(clone("context", "show", sid)).stdout
    return [line.split("Z ", 1)[1] for line in shown.splitlines() if line.startswith("- 20")]


def heartbeat_of(clone: Runner, sid: str) -> str:
    sessions = json.loads(ok(clone("--json", "status")).stdout)["sessions"]
    return next(s["heartbeat_at"] for s in sessions if s["id"] == sid)


def beat_on_remote(bare: Path, branch: str, sid: str) -> str:
    return json.loads(git(bare, "show", f"refs/heads/{branch}:{beat_path(sid)}"))["heartbeat_at"]


# -- sync and status ----------------------------------------------------------------------

def test_an_offline_heartbeat_and_diary_line_are_pushed_by_sync(tmp_path):
    team, (a,) = sharded(tmp_path, "a")
    ok(a("context", "log", "a1", "online"))  # names the clone and pushes its ref
    branch = own_branch(a)
    pushed = remote_tip(team.bare, branch)
    assert pushed

    def offline_writes():
        beat = a("lock", "heartbeat", "--session", "a1")
        line = a("context", "log", "a1", "made offline")
        return beat, line
    beat, line = offline(team, offline_writes)
    assert beat.returncode == 0 and "not pushed to origin" in beat.stderr, beat.stderr
    assert line.returncode == 0 and "not pushed to origin" in line.stderr, line.stderr
    assert remote_tip(team.bare, branch) == pushed  # committed here only
    doc = json.loads(ok(a("--json", "status")).stdout)
    assert doc["sync"]["clone"] == {"branch": branch, "ahead": 2, "behind": 0}
    assert "clone ref ahead 2" in ok(a("status")).stdout

    report = json.loads(ok(a("--json", "sync")).stdout)
    part = report["clone"]
    assert part["branch"] == branch and part["pushed"] and part["pending"] == 2, part
    assert part["refused"] == [] and part["error"] is None
    assert report["shards"] == []  # the clone ref is not a shard
    assert remote_tip(team.bare, branch) == git(a.cwd, "rev-parse", f"refs/heads/{branch}").strip()
    assert json.loads(ok(a("--json", "status")).stdout)["sync"]["clone"]["ahead"] == 0
    assert "clone ref ahead" not in ok(a("status")).stdout
    # a fresh clone reads the line and the heartbeat
    fresh = team.clone("fresh")
    assert diary_lines(fresh, "a1") == ["online", "made offline"]
    assert heartbeat_of(fresh, "a1") == beat_on_remote(team.bare, branch, "a1")
    # nothing left to push: the clone ref is not synced again
    assert json.loads(ok(a("--json", "sync")).stdout)["clone"] is None
    # the text says it too
    assert offline(team, lambda: a("context", "log", "a1", "again")).returncode == 0
    text = ok(a("sync")).stdout
    assert f"clone ref {branch}: pushed 1 operation(s) to origin" in text
    assert diary_lines(team.clone("fresh2"), "a1")[-1] == "again"


def test_doctor_and_the_dashboard_count_the_clone_ref_and_push_it(tmp_path):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from agent_registry.dashboard.app import create_app
    team, (a,) = sharded(tmp_path, "a")
    ok(a("lock", "heartbeat", "--session", "a1"))
    branch = own_branch(a)
    assert offline(team, lambda: a("context", "log", "a1", "offline")).returncode == 0
    sync = next(c for c in json.loads(a("--json", "doctor").stdout)["checks"]
                if c["name"] == "sync")
    assert sync["status"] == "warn" and sync["fixable"], sync
    assert "clone ref ahead 1" in sync["verdict"], sync
    fixed = json.loads(a("--json", "doctor", "--fix").stdout)
    assert "sync" in fixed["fixed"], fixed
    sync = next(c for c in fixed["checks"] if c["name"] == "sync")
    assert sync["verdict"] == "origin reachable, 0 ahead, 0 behind, shards ahead 0 of 4", sync
    assert diary_lines(team.clone("fresh"), "a1") == ["offline"]
    # the dashboard: /api/sync says it, its sync button pushes it
    assert offline(team, lambda: a("context", "log", "a1", "offline 2")).returncode == 0
    app = create_app(str(a.cwd))
    with TestClient(app, base_url="http://127.0.0.1") as client:
        assert client.get("/api/sync").json()["clone"] == {"branch": branch, "ahead": 1,
                                                           "behind": 0}
        answer = client.post("/api/sync", headers={"X-Agent-Registry-Token": app.state.post_token})
        assert answer.status_code == 200, answer.text
        assert answer.json()["clone"]["branch"] == branch and answer.json()["clone"]["pushed"]
        assert client.get("/api/sync").json()["clone"]["ahead"] == 0
    assert diary_lines(team.clone("fresh2"), "a1") == ["offline", "offline 2"]


# -- gc -----------------------------------------------------------------------------------

def test_gc_squashes_this_clones_ref_and_not_the_others(tmp_path):
    team, (a, b) = sharded(tmp_path, "a", "b")
    for i in range(3):
        ok(a("lock", "heartbeat", "--session", "a1"))
        ok(a("context", "log", "a1", f"line {i}"))
    ok(b("context", "log", "b1", "from b"))
    mine, theirs = own_branch(a), own_branch(b)
    theirs_before = remote_tip(team.bare, theirs)
    # the last line is made offline: gc pushes it before it rewrites
    assert offline(team, lambda: a("context", "log", "a1", "last, offline")).returncode == 0
    beat = json.loads(git(a.cwd, "show", f"refs/heads/{mine}:{beat_path('a1')}"))["heartbeat_at"]
    count = int(git(a.cwd, "rev-list", "--count", f"refs/heads/{mine}"))
    assert count == 7
    tree = git(a.cwd, "rev-parse", f"refs/heads/{mine}^{{tree}}").strip()
    result = json.loads(ok(a("--json", "gc", "--yes", "--keep-days", "0")).stdout)
    assert result["clone"]["branch"] == mine, result
    assert result["clone"]["squashed"] == count and result["clone"]["kept"] == 0
    for repo in (a.cwd, team.bare):  # one commit, the same state, pushed
        assert git(repo, "rev-list", "--count", f"refs/heads/{mine}").strip() == "1"
        assert git(repo, "rev-parse", f"refs/heads/{mine}^{{tree}}").strip() == tree
    assert remote_tip(team.bare, theirs) == theirs_before  # b's ref is b's to squash
    fresh = team.clone("fresh")
    assert diary_lines(fresh, "a1") == ["line 0", "line 1", "line 2", "last, offline"]
    assert heartbeat_of(fresh, "a1") == beat
    assert diary_lines(fresh, "b1") == ["from b"]
    # writes go on on the rewritten ref; the text names it
    ok(a("context", "log", "a1", "after gc"))
    assert git(team.bare, "rev-list", "--count", f"refs/heads/{mine}").strip() == "2"
    text = ok(a("gc", "--yes", "--keep-days", "30")).stdout
    assert f"clone ref {mine}: squashed 0 commit(s), kept 2" in text
    assert diary_lines(team.clone("fresh2"), "a1")[-1] == "after gc"


# -- watch --------------------------------------------------------------------------------

def test_watch_takes_a_heartbeat_or_a_diary_line_on_a_clone_ref_as_activity(tmp_path):
    """Sessions last heard of on the main branch three hours ago: one that heartbeats
    now and one that logs a diary line now (each on its clone's ref only) are not told
    idle; one that did nothing since is."""
    pytest.importorskip("apprise")
    from test_watch import Receiver, title, watch

    team, (agent, watcher) = sharded(tmp_path, "agent", "watcher")
    receiver = Receiver()
    try:
        assert json.loads(ok(watch(watcher, receiver)).stdout)["cold_start"]
        with Registry.open(str(agent.cwd), clock=FakeClock(time.time() - 3 * 3600)) as old:
            for sid in ("s-beats", "s-writes", "s-quiet"):
                old.register(sid, provider="Codex", working_on="auth")
        main = remote_tip(team.bare, BRANCH)
        ok(agent("lock", "heartbeat", "--session", "s-beats"))
        ok(agent("context", "log", "s-writes", "still at it"))
        # the clone ref took both; the main branch moved at most to render its page again
        from test_scale_clones import rendered_again_only
        assert rendered_again_only(team.bare, main, remote_tip(team.bare, BRANCH))
        passed = json.loads(ok(watch(watcher, receiver, "--idle-minutes", "60")).stdout)
        keys = sorted(e["key"] for e in passed["events"])
        assert [k.split("/")[1] for k in keys if k.startswith("idle/")] == ["s-quiet"], keys
        assert title("s-beats", "idle") not in receiver.accepted()
        assert title("s-writes", "idle") not in receiver.accepted()
        state = json.loads((watcher.cwd / ".git" / "agent-registry" / "watch.json").read_text())
        tip = git(watcher.cwd, "rev-parse", f"refs/remotes/origin/{own_branch(agent)}").strip()
        assert tip in state["shard_heads"]
    finally:
        receiver.close()


# -- the dashboard: live updates and the timeline -------------------------------------------

def test_a_diary_line_and_a_heartbeat_on_the_clone_ref_reach_the_timeline_and_the_stream(
        agents, repo):
    """In format 3 a diary line and a heartbeat move only the clone's ref: the session's
    timeline lists them, and the event stream says which session's diary or record
    changed, as it did when they moved the main branch."""
    import httpx
    from test_dashboard_support import served

    from test_scale_dashboard import Events, base, sharded_repo, stream, tip

    sharded_repo(agents, "kimi-1")
    agents.cli("context", "log", "kimi-1", "first line")
    agents.cli("lock", "heartbeat", "--session", "kimi-1")
    main = tip(repo, BRANCH)
    with served(repo) as info:
        timeline = httpx.get(base(info) + "/api/sessions/kimi-1/timeline").json()
        kinds = [event["kind"] for event in timeline["events"]]
        assert kinds == ["registered", "diary", "heartbeat"], timeline["events"]
        marks = [mark["kind"] for mark in timeline["lanes"][0]["marks"]]
        assert marks == ["diary", "heartbeat"]
        with stream(info) as response:
            events = Events(response)
            assert events.next(time.monotonic() + 60)[0] == "hello"
            agents.cli("context", "log", "kimi-1", "second line")
            change = events.change_with("contexts")
            assert change["sessions"] == ["kimi-1"], change
            # heartbeat_at counts whole seconds: a beat in the same second as the
            # session's last renewal changes no file, and the stream rightly says nothing
            time.sleep(1.1)
            agents.cli("lock", "heartbeat", "--session", "kimi-1")
            change = events.change_with("sessions")
            assert change["sessions"] == ["kimi-1"], change
        from test_scale_clones import rendered_again_only  # the clone ref took the writes
        assert rendered_again_only(repo, main, tip(repo, BRANCH))
        diary = httpx.get(base(info) + "/api/sessions/kimi-1").json()
        assert "second line" in json.dumps(diary)


def test_a_clone_ref_deleted_on_the_remote_is_pushed_again_and_said(tmp_path):
    """A forge's "delete branch" on a clone ref: sync pushes it again (fresh clones would
    lose that clone's diary lines and messages), and status says it is unpushed first."""
    team, (a,) = sharded(tmp_path, "a")
    ok(a("context", "log", "a1", "kept"))
    branch = own_branch(a)
    assert remote_tip(team.bare, branch)
    git(team.bare, "update-ref", "-d", f"refs/heads/{branch}")
    ok(a("sync"))  # the sync that meets the deletion: it must not say all is pushed
    assert remote_tip(team.bare, branch), "the deleted clone ref was not pushed again"
    assert diary_lines(team.clone("fresh"), "a1") == ["kept"]
    git(team.bare, "update-ref", "-d", f"refs/heads/{branch}")
    git(a.cwd, "config", "agent-registry.readFreshness", "0")  # status fetches first
    assert json.loads(ok(a("--json", "status")).stdout)["sync"]["clone"]["ahead"] >= 1
    assert "clone ref ahead" in ok(a("status")).stdout
    report = json.loads(ok(a("--json", "sync")).stdout)
    assert report["clone"] and report["clone"]["pushed"], report
    assert remote_tip(team.bare, branch)
