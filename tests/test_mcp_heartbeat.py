"""The MCP server's heartbeat thread has a registry of its own: a heartbeat waiting on a
slow remote never holds the mutex the tools share (it did, so every tool call of the
agent waited for the network behind it).  A real server, the SDK's client, and a remote
that accepts connections and never answers, which counts how many are open at once."""
from __future__ import annotations

import anyio
import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed")

from helpers import wait_for  # noqa: E402
from test_mcp import call, server  # noqa: E402
from test_sync import Team  # noqa: E402
from test_sync_failclosed import silent_origin  # noqa: E402


def test_a_heartbeat_stuck_on_the_remote_does_not_hold_the_tools(tmp_path):
    team = Team(tmp_path)
    a = team.clone("a")
    with silent_origin(a, 6) as silent:
        async def script():
            async with server(a.cwd, "--heartbeat", "1") as session:
                error, text, _ = await call(session, "register", provider="Claude",
                                            session_id="claude-1")
                assert not error, text  # committed here; the remote never answered
                assert silent.most_open == 1
                # the heartbeat thread renews claude-1 and waits on the remote
                wait_for(lambda: silent.open == 1, "the heartbeat to reach the remote")
                error, text, result = await call(session, "lock_acquire", paths=["src/a.py"],
                                                 session_id="claude-1")
                assert not error, text
                assert result["locks"][0]["status"] == "acquired"
        anyio.run(script)
    # the claim went to the remote while the heartbeat was still waiting there
    assert silent.most_open == 2
