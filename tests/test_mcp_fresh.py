"""A long-lived MCP server keeps what it parsed (commits by name, session files by their
bytes) across calls: every answer must still follow what other processes moved in
between (issue 35 item 4).  Real processes: the installed CLI and a second server."""
from __future__ import annotations

import os

import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed")
from test_mcp import call, held_by, register, server, talk  # noqa: E402

ROUNDS = 3


def test_every_answer_follows_refs_other_processes_moved_between_calls(repo, run):
    assert run("register", "kimi-7", "--provider", "Kimi", "--pid", str(os.getpid())
               ).returncode == 0

    async def script(session):
        sid = await register(session, session_id="claude-fresh")
        rounds = []
        for n in range(ROUNDS):  # the same shard each round, read warm by every call
            path = f"src/moved-{n}.py"
            before = await call(session, "lock_check", paths=[path], session_id=sid)
            assert run("lock", "acquire", path, "--session", "kimi-7").returncode == 0
            checked = await call(session, "lock_check", paths=[path], session_id=sid)
            refused = await call(session, "lock_acquire", paths=[path])
            assert run("lock", "release", path, "--session", "kimi-7").returncode == 0
            taken = await call(session, "lock_acquire", paths=[path])
            rounds.append((before, checked, refused, taken))
        async with server(repo) as other:  # another server moves the ref between calls
            await call(session, "lock_check", paths=["src/other.py"], session_id=sid)
            claimed = await call(other, "lock_acquire", paths=["src/other.py"],
                                 session_id="kimi-7")
            after = await call(session, "lock_check", paths=["src/other.py"], session_id=sid)
            mine = await call(session, "lock_acquire", paths=["src/other.py"])
        return rounds, claimed, after, mine
    rounds, claimed, after, mine = talk(repo, script)
    for n, (before, checked, refused, taken) in enumerate(rounds):
        assert before[2]["paths"][0]["state"] == "free", n
        assert checked[2]["paths"][0]["state"] == "locked" and \
            checked[2]["paths"][0]["owner"] == "kimi-7", (n, checked[1])
        assert refused[0] and "locked by kimi-7" in refused[1], (n, refused[1])
        assert not taken[0] and taken[2]["locks"][0]["status"] == "acquired", (n, taken[1])
        assert held_by(repo, f"src/moved-{n}.py") == ["claude-fresh"]
    assert not claimed[0], claimed[1]
    assert after[2]["paths"][0]["owner"] == "kimi-7" and not after[2]["free_to_edit"]
    assert mine[0] and "locked by kimi-7" in mine[1]
    assert held_by(repo, "src/other.py") == ["kimi-7"]
