"""Sync: a remote wiped while a claim's push races is handled like one
wiped before the claim: kept locally, unconfirmed (exit 3), the reason recorded."""
from __future__ import annotations

import subprocess

from helpers import git
from test_sync import BRANCH, Team


def _wiped_commit(bare) -> str:
    blob = subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=bare, input="x\n",
                          capture_output=True, text=True).stdout.strip()
    tree = subprocess.run(["git", "mktree"], cwd=bare, input=f"100644 blob {blob}\tREADME.md\n",
                          capture_output=True, text=True).stdout.strip()
    return git(bare, "commit-tree", tree, "-m", "wipe").strip()


def test_a_remote_wiped_during_the_push_race_leaves_the_claim_unconfirmed(tmp_path):
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
    claim = a("lock", "acquire", "src/auth.py", "--session", "s0")
    assert marker.exists()
    assert claim.returncode == 3, claim.stderr
    assert "not adopted" in claim.stderr and "not confirmed" in claim.stderr
    assert team.remote_tip() == wiped  # nothing pushed over the wiped remote
    assert "not adopted" in a("status").stdout  # the sync line says why
