"""The guard and the registry judge a lock by one rule (issue 10): the guard finds covering
locks with View.covering and ages a heartbeat dated in the future from this clone's first
sight of it, as `lock check` does.  Real hooks, a real `git commit`."""
from __future__ import annotations

import json
import time

from helpers import FakeClock, git
from test_guard import commit, edit


def test_a_future_heartbeat_long_seen_is_stale_for_check_and_guard(guarded, run, monkeypatch):
    from agent_registry import Registry
    monkeypatch.setenv("AGENT_REGISTRY_PID", "none")
    ahead = FakeClock(time.time() + 7200)  # a machine whose clock runs two hours ahead
    with Registry.open(str(guarded), clock=ahead, host="far-host") as far:
        far.register("far-1", provider="Kimi")
        far.claim("far-1", ["src/auth.py"])
        beat = far.session("far-1").heartbeat_ts()
        seen_file = far.seen.path
    # this clone first saw that heartbeat an hour ago and none since: past TTL and margin
    with open(seen_file, "w", encoding="utf-8") as f:
        json.dump({"far-1": {"at": beat, "seen": time.time() - 3600}}, f)

    check = json.loads(run("--json", "lock", "check", "src/auth.py").stdout)
    assert check["paths"][0]["state"] == "stale", check

    edit(guarded, "src/auth.py")
    proc = commit(guarded, "-m", "the holder's clock runs ahead and it went quiet")
    assert proc.returncode == 0, proc.stderr
    assert git(guarded, "log", "-1", "--format=%s").strip().startswith("the holder")


def test_a_future_heartbeat_just_seen_still_holds_for_both(guarded, run, monkeypatch):
    from agent_registry import Registry
    monkeypatch.setenv("AGENT_REGISTRY_PID", "none")
    ahead = FakeClock(time.time() + 7200)
    with Registry.open(str(guarded), clock=ahead, host="far-host") as far:
        far.register("far-1", provider="Kimi")
        far.claim("far-1", ["src/"])
    check = json.loads(run("--json", "lock", "check", "src/auth.py").stdout)
    assert check["paths"][0]["state"] == "locked", check
    edit(guarded, "src/auth.py")
    proc = commit(guarded, "-m", "refused")
    assert proc.returncode == 1 and "far-1" in proc.stderr
