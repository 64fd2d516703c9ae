"""Staleness: a damaged first-seen file never crashes a lock check."""
from __future__ import annotations

import pytest

from helpers import FakeClock


@pytest.mark.parametrize("damaged", ['[1, 2]', '{"far-1": {"at": 5, "seen": null}}',
                                     '{"far-1": {"at": 1}}', 'not json'])
def test_a_damaged_first_seen_file_counts_from_now_and_is_rewritten(repo, clock, monkeypatch,
                                                                     damaged):
    """A crash mid-write or a hand edit of heartbeats-seen.json: the heartbeat from a
    clock ahead counts from now (its lock held), never a traceback, and the file heals."""
    from agent_registry import Registry
    monkeypatch.setenv("AGENT_REGISTRY_PID", "none")
    ahead = FakeClock(clock.now + 3600)  # another machine, its clock an hour ahead
    with Registry.open(str(repo), clock=ahead, host="far-host") as far:
        far.register("far-1", provider="Kimi")
        far.claim("far-1", ["src/auth.py"])
    with Registry.open(str(repo), clock=clock) as near:
        with open(near.seen.path, "w", encoding="utf-8") as f:
            f.write(damaged)
        assert near.check(["src/auth.py"])[0]["state"] == "locked"
        clock.advance(700)  # past TTL and skew margin since the (re)recorded sighting
        state = near.check(["src/auth.py"])[0]
        assert state["state"] == "stale" and "in the future" in state["stale_reason"]
