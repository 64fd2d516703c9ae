"""`status` reads the registry once per command (issue 35: "from the views already read,
once per command").  A view is a snapshot of the tips; status used to open one for its
sessions, another for the reasons of their locks and, when a session was past the
default TTL, a third for the TTLs of its locks: at 10,000 locks each reads every lock
record again (bench/run.py's locks-10k: status 18x the small state)."""
from __future__ import annotations

import subprocess

from helpers import Runner

from agent_registry import Registry
from agent_registry.branch.records import DEFAULT_TTL


def test_status_opens_one_view_for_sessions_reasons_and_zombies(repo, clock, monkeypatch):
    assert Runner(repo)("init").returncode == 0
    owner = subprocess.Popen(["sleep", "60"])
    with Registry.open(str(repo), clock=clock) as registry:
        registry.register("s1", provider="test", pid=owner.pid)
        owner.kill()  # s1's process is gone: a zombie once past the TTL of its locks
        owner.wait()
        registry.register("s2", provider="test")
        registry.claim("s1", ["src/a.py"], reason="fixing the login")
        registry.claim("s2", ["src/b.py"], ttl=3 * DEFAULT_TTL)
        clock.advance(DEFAULT_TTL + 60)  # s1 past the default TTL: judged by its locks
        opened = []
        view = registry.view
        monkeypatch.setattr(registry, "view", lambda: opened.append(1) or view())
        status = registry.status()
    assert [r["reason"] for r in status["reasons"]] == ["fixing the login"]
    assert {s["id"] for s in status["sessions"]} == {"s1", "s2"}
    assert len(opened) == 1, f"status opened {len(opened)} views"


def test_status_reads_each_lock_of_its_sessions_once(repo, clock, monkeypatch):
    """The reasons of the locks and the TTLs a zombie is judged by come from the same
    records: each is read and parsed once (at 10,000 locks, 10,000 records, not 20,000)."""
    from agent_registry.branch.view import View
    assert Runner(repo)("init").returncode == 0
    owner = subprocess.Popen(["sleep", "60"])
    with Registry.open(str(repo), clock=clock) as registry:
        registry.register("s1", provider="test", pid=owner.pid)
        owner.kill()
        owner.wait()
        registry.claim("s1", ["src/a.py", "src/c.py"], reason="fixing the login")
        clock.advance(DEFAULT_TTL + 60)
        read = []
        lock = View.lock
        monkeypatch.setattr(View, "lock", lambda view, target: read.append(target) or
                            lock(view, target))
        status = registry.status()
    assert status["sessions"][0]["zombie"]  # judged by the TTLs of its locks
    assert sorted(r["path"] for r in status["reasons"]) == ["src/a.py", "src/c.py"]
    assert sorted(read) == ["src/a.py", "src/c.py"], read
