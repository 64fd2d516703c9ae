"""Sync: a remote wiped while a write's push races is handled like one wiped before the
write: kept locally, unconfirmed, the reason recorded.  The write is one of the main
branch, which holds the sessions the guard against mass deletion counts (a claim writes
its lock shard alone: tests/test_sync.py has one land beside a wiped main branch)."""
from __future__ import annotations

import json
import subprocess

from helpers import git
from test_sync import BRANCH, Team, remote_registry


def _wiped_commit(bare) -> str:
    blob = subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=bare, input="x\n",
                          capture_output=True, text=True).stdout.strip()
    tree = subprocess.run(["git", "mktree"], cwd=bare, input=f"100644 blob {blob}\tREADME.md\n",
                          capture_output=True, text=True).stdout.strip()
    return git(bare, "commit-tree", tree, "-m", "wipe").strip()


def test_a_remote_wiped_during_the_push_race_leaves_the_write_unconfirmed(tmp_path):
    team = Team(tmp_path)
    a = team.clone("a")
    for i in range(6):
        a("register", f"s{i}", "--provider", "Kimi", "--working-on", f"task {i}")
    wiped = _wiped_commit(team.bare)
    # the next push loses a race: just before it lands, someone replaces the branch with
    # an almost empty one (outside receive-pack's quarantine, as another pusher would)
    hook = team.bare / "hooks" / "pre-receive"
    marker = tmp_path / "wiped-once"
    hook.write_text(
        "#!/bin/sh\ncat >/dev/null\n"
        f"[ -e '{marker}' ] && exit 0\ntouch '{marker}'\n"
        "env -u GIT_QUARANTINE_PATH -u GIT_OBJECT_DIRECTORY -u GIT_ALTERNATE_OBJECT_DIRECTORIES "
        f"git update-ref refs/heads/{BRANCH} {wiped}\n")
    hook.chmod(0o755)
    update = a("update", "s0", "--working-on", "task 0, still")
    assert marker.exists()
    assert update.returncode == 0, update.stderr  # done here: the session works in this clone
    assert "not adopted" in update.stderr and "not pushed" in update.stderr, update.stderr
    assert team.remote_tip() == wiped  # nothing pushed over the wiped remote
    with remote_registry(team) as reg:
        assert reg.sessions() == []
    status = a("--json", "status")
    assert "not adopted" in a("status").stdout  # the sync line says why
    here = {s["id"]: s["working_on"] for s in json.loads(status.stdout)["sessions"]}
    assert here == {f"s{i}": f"task {i}" for i in range(6)} | {"s0": "task 0, still"}
