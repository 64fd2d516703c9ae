"""The MCP server makes the object files of its next claims between calls, so a claim
makes no file (store/spares.py, issue 35 item 4); a ``git prune`` that removes them
meanwhile changes nothing a claim does, and the server leaves none behind.  Real
processes: the installed CLI's server, the SDK's client, git."""
from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed")
from agent_registry.mcp.server import SPARES  # noqa: E402
from test_mcp import call, held_by, register, talk  # noqa: E402

WAIT = 20.0  # seconds the server gets to make its spare files (a loaded machine)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True,
                          text=True).stdout


def tips(repo: Path) -> dict[str, str]:
    lines = git(repo, "for-each-ref", "--format=%(refname) %(objectname)",
                "refs/heads/").splitlines()
    return dict(line.split() for line in lines)


def spare_files(repo: Path) -> dict[int, str]:
    """inode -> name of the temporary object files in the repository's object folder."""
    objects = repo / ".git" / "objects"
    return {(objects / name).stat().st_ino: name for name in os.listdir(objects)
            if name.startswith("tmp_obj_")}


async def spares_made(repo: Path) -> dict[int, str]:
    import anyio
    deadline = time.monotonic() + WAIT
    while len(found := spare_files(repo)) < SPARES and time.monotonic() < deadline:
        await anyio.sleep(0.05)
    return found


def test_a_claim_fills_files_made_before_it_and_survives_git_prune(repo):
    async def script(session):
        sid = await register(session, session_id="claude-spares")
        assert not (await call(session, "lock_acquire", paths=["src/first.py"]))[0]
        made = await spares_made(repo)  # between calls, as the client reads the answer
        before = tips(repo)
        claimed = await call(session, "lock_acquire", paths=["src/second.py"])
        moved = {ref: oid for ref, oid in tips(repo).items() if before.get(ref) != oid}
        git(repo, "prune", "--expire=now")  # removes temporary files, the spares too
        assert not spare_files(repo)
        after_prune = await call(session, "lock_acquire", paths=["src/third.py"])
        checked = await call(session, "lock_check", paths=["src/third.py"], session_id=sid)
        return made, claimed, moved, after_prune, checked
    made, claimed, moved, after_prune, checked = talk(repo, script)
    assert made, "the server made no object file ahead of its calls"
    assert not claimed[0], claimed[1]
    (tip,) = moved.values()  # the claim's commit is in a file the server made before it
    commit = repo / ".git" / "objects" / tip[:2] / tip[2:]
    assert commit.stat().st_ino in made
    assert git(repo, "cat-file", "-t", tip).strip() == "commit"
    assert not after_prune[0], after_prune[1]
    assert checked[2]["paths"][0]["state"] == "locked-by-me"
    assert held_by(repo, "src/third.py") == ["claude-spares"]
    git(repo, "fsck", "--no-dangling")  # every object of every claim whole
    assert not spare_files(repo), "the server left its spare files behind"
