"""The MCP server's wire read and written on its event loop (agent_registry/mcp/stdio.py),
driven by the SDK's own stdio client as in tests/test_mcp.py."""
from __future__ import annotations

import json
import subprocess

import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed")
from helpers import CLI  # noqa: E402
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


def test_a_stdin_and_stdout_that_are_files_are_served_by_the_sdks_transport(repo, tmp_path):
    """asyncio has no transport for a regular file: requests read from a file, answers
    written to one (``agent-registry mcp < requests > answers``) go through the SDK's own
    transport, and the server stops at the end of the file.  Only the answer to
    ``initialize`` is asserted: the SDK's session answers it as it reads it, while a
    request still in flight when the input ends (a tools/list after it) is cancelled with the
    session, so whether it is answered is a race (it failed once in a full run)."""
    from mcp.types import LATEST_PROTOCOL_VERSION
    requests = tmp_path / "requests.jsonl"
    requests.write_text("".join(json.dumps(message) + "\n" for message in (
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": LATEST_PROTOCOL_VERSION, "capabilities": {},
                    "clientInfo": {"name": "a file", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"})))
    answers = tmp_path / "answers.jsonl"
    with open(requests) as stdin, open(answers, "w") as stdout:
        proc = subprocess.run([CLI, "-C", str(repo), "mcp"], stdin=stdin, stdout=stdout,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    by_id = {answer["id"]: answer for answer in map(json.loads, answers.read_text().splitlines())}
    assert by_id[1]["result"]["serverInfo"]["name"] == "agent-registry"
