"""Clocks that disagree (issue 34, item 3), with real processes on real clones of one bare
remote whose clocks really differ (faketime): a claim made seconds ago on a host 20 minutes
behind is not taken over by a clone on time, nor by one a day ahead, on the strength of
their clocks; the clone on time takes it only once it has itself watched the heartbeat go
unrenewed past the TTL."""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from helpers import CLI, git, make_repo

pytestmark = pytest.mark.skipif(shutil.which("faketime") is None,
                                reason="faketime is not installed (Debian package faketime)")


def agent(clone, host: str, offset: str | None):
    """Run the installed command in *clone* as a machine named *host* whose clock is
    *offset* from the real one (faketime's -f form), or on time."""
    def run(*args: str) -> subprocess.CompletedProcess:
        skew = ["faketime", "-f", offset] if offset else []
        return subprocess.run([*skew, CLI, *args], cwd=clone, capture_output=True, text=True,
                              timeout=120, env={**os.environ, "AGENT_REGISTRY_HOST": host,
                                                "AGENT_REGISTRY_PID": "none"})
    return run


def test_a_clock_behind_does_not_lose_a_fresh_lock(tmp_path):
    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    git(make_repo(tmp_path / "seed"), "push", "-q", str(bare), "main")
    clones = {}
    for name in ("slow", "fast", "ahead"):
        git(tmp_path, "clone", "-q", str(bare), str(tmp_path / name))
        clones[name] = tmp_path / name
    slow = agent(clones["slow"], "slow-host", "-20m")
    fast = agent(clones["fast"], "fast-host", None)
    ahead = agent(clones["ahead"], "ahead-host", "+1d")
    assert slow("register", "s-slow", "--provider", "Codex").returncode == 0
    assert slow("lock", "acquire", "src/auth.py", "--session", "s-slow").returncode == 0

    assert fast("register", "s-fast", "--provider", "Codex").returncode == 0
    taken = fast("lock", "acquire", "src/auth.py", "--session", "s-fast")
    assert taken.returncode == 1, taken.stdout  # not "taken-over: no heartbeat for 1201 s"
    [line] = taken.stderr.splitlines()
    assert "locked by s-slow" in line and "the clock of slow-host may be behind" in line
    assert "agent-registry lock force-release src/auth.py --force" in line
    assert fast("lock", "check", "src/auth.py").stdout.startswith("locked: src/auth.py by s-slow")
    assert fast("cleanup").returncode == 0  # nor is it a zombie there
    assert fast("lock", "check", "src/auth.py").stdout.startswith("locked: src/auth.py by s-slow")
    # the guard agrees: a commit of the held file through the installed hook is refused
    assert fast("init", "--hooks").returncode == 0
    (clones["fast"] / "src" / "auth.py").write_text("auth = 'fast'\n")
    git(clones["fast"], "add", "src/auth.py")
    refused = subprocess.run(["git", "commit", "-q", "-m", "over a slow clock"],
                             cwd=clones["fast"], capture_output=True, text=True,
                             env={**os.environ, "AGENT_REGISTRY_SESSION": "s-fast",
                                  "AGENT_REGISTRY_HOST": "fast-host"})
    assert refused.returncode != 0 and "s-slow" in refused.stderr, refused.stderr
    git(clones["fast"], "reset", "-q", "--hard")

    assert ahead("register", "s-ahead", "--provider", "Codex").returncode == 0
    far = ahead("lock", "acquire", "src/auth.py", "--session", "s-ahead")
    assert far.returncode == 1 and "locked by s-slow" in far.stderr, far.stdout

    # the holder renews its heartbeat: still held everywhere, a new stamp seen anew
    assert slow("lock", "heartbeat", "--session", "s-slow").returncode == 0
    assert fast("lock", "acquire", "src/auth.py", "--session", "s-fast").returncode == 1

    # once the clone on time has watched the stamp go unrenewed past TTL + margin, it is
    # stale there: a clock behind keeps no lock for ever either
    later = agent(clones["fast"], "fast-host", "+11m")
    took = later("lock", "acquire", "src/auth.py", "--session", "s-fast")
    assert took.returncode == 0 and "taken-over" in took.stdout, took.stderr
