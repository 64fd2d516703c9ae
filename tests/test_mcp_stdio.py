"""The MCP server's wire read and written on its event loop (agent_registry/mcp/stdio.py),
driven by the SDK's own stdio client as in tests/test_mcp.py."""
from __future__ import annotations

import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed")
from test_mcp import call, register, talk  # noqa: E402


def test_a_request_and_an_answer_longer_than_a_pipe_buffer_go_through(repo):
    """One JSON-RPC line of over 64 KiB each way (asyncio reads 64 KiB lines by
    default): a lock_check of 800 paths, every one answered."""
    paths = [f"src/generated/module_{i:05d}/{'x' * 100}.py" for i in range(800)]

    async def script(session):
        sid = await register(session, session_id="claude-long")
        await call(session, "lock_acquire", paths=[paths[-1]])
        return await call(session, "lock_check", paths=paths, session_id=sid)
    error, text, result = talk(repo, script)
    assert not error, text[:300]
    assert [r["path"] for r in result["paths"]] == paths
    assert {r["state"] for r in result["paths"][:-1]} == {"free"}
    assert result["paths"][-1]["state"] == "locked-by-me"
