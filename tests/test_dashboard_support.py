"""Helpers for the dashboard tests (no tests here): agent processes, a dashboard served by
the real CLI on 127.0.0.1, and raw commits on the registry branch (what a hostile or
hand-editing peer could push)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
from contextlib import contextmanager
from pathlib import Path

import pytest

from helpers import CLI


class Agents:
    """Sessions registered by the CLI, each owned by a real `sleep` process, so killing
    a session never signals the test runner."""

    def __init__(self, repo: Path) -> None:
        self.repo = repo
        self.processes: dict[str, subprocess.Popen] = {}

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        proc = subprocess.run([CLI, *args], cwd=self.repo, capture_output=True, text=True,
                              timeout=60)
        if check and proc.returncode:
            raise AssertionError(f"agent-registry {args}: {proc.stderr}")
        return proc

    def register(self, sid: str, provider: str = "Kimi", working_on: str = "auth") -> int:
        sleeper = subprocess.Popen(["sleep", "600"])
        self.processes[sid] = sleeper
        self.cli("register", sid, "--provider", provider, "--ai-version", "2.7",
                 "--working-on", working_on, "--pid", str(sleeper.pid))
        return sleeper.pid

    def claim(self, sid: str, *paths: str) -> None:
        self.cli("lock", "acquire", *paths, "--session", sid)

    def die(self, sid: str) -> None:
        """The agent process dies without finishing: its locks go stale."""
        self.processes[sid].kill()
        self.processes[sid].wait()

    def alive(self, sid: str) -> bool:
        return self.processes[sid].poll() is None

    def close(self) -> None:
        for proc in self.processes.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.fixture
def agents(repo):
    team = Agents(repo)
    yield team
    team.close()


@contextmanager
def served(repo: Path, *args: str, env: dict | None = None):
    """``agent-registry --json dashboard --port 0`` in *repo*; yields its start JSON."""
    proc = subprocess.Popen([CLI, "--json", "dashboard", "--port", "0", *args], cwd=repo,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})})
    try:
        text = ""
        while True:
            line = proc.stdout.readline()
            if not line:
                raise AssertionError(f"dashboard exited: {proc.stderr.read()}")
            text += line
            if line.startswith("}"):
                break
        yield json.loads(text)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise AssertionError("the dashboard did not stop on SIGINT") from None


def commit_raw(repo: Path, files: dict[str, str], message: str,
               branch: str = "agent-registry") -> str:
    """Commit *files* on top of the registry branch with git's own plumbing and a
    private index, as a peer that bypasses agent-registry would."""
    index = repo / ".git" / "dashboard-test-index"
    env = {**os.environ, "GIT_INDEX_FILE": str(index)}

    def git(*args: str, data: str | None = None) -> str:
        return subprocess.run(["git", *args], cwd=repo, env=env, input=data, text=True,
                              capture_output=True, check=True).stdout.strip()

    ref = f"refs/heads/{branch}"
    tip = git("rev-parse", ref)
    git("read-tree", ref)
    for path, text in files.items():
        blob = git("hash-object", "-w", "--stdin", data=text)
        git("update-index", "--add", "--cacheinfo", f"100644,{blob},{path}")
    commit = git("commit-tree", git("write-tree"), "-p", tip, "-m", message)
    git("update-ref", ref, commit, tip)
    index.unlink()
    return commit
