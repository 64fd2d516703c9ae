"""Fixtures shared by every test: a hermetic environment and real git repositories.

Like git-revise's ``hermetic_seal``: HOME, XDG dirs and git config are isolated, the git
identity and dates are pinned, and nothing from the developer's environment (an
AGENT_REGISTRY_SESSION, a global hooksPath, a commit template) can leak into a test.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CLI = shutil.which("agent-registry", path=str(Path(sys.executable).parent)) or "agent-registry"


class FakeClock:
    """An injectable clock: tests of staleness move time instead of sleeping."""

    def __init__(self, start: float = 1_790_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture(autouse=True)
def hermetic_seal(tmp_path_factory, monkeypatch):
    home = tmp_path_factory.mktemp("home")
    gitconfig = home / ".gitconfig"
    gitconfig.write_text("[user]\n\tname = Test User\n\temail = test@example.com\n"
                         "[init]\n\tdefaultBranch = main\n[advice]\n\tdetachedHead = false\n"
                         "[protocol \"file\"]\n\tallow = always\n")
    for name in list(os.environ):
        if name.startswith(("GIT_", "AGENT_REGISTRY_")):
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(gitconfig))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_AUTHOR_DATE", "2026-01-01T00:00:00Z")
    monkeypatch.setenv("GIT_COMMITTER_DATE", "2026-01-01T00:00:00Z")
    monkeypatch.setenv("TZ", "UTC")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    yield


def git(repo: Path | str, *args: str, check: bool = True) -> str:
    proc = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True)
    if check and proc.returncode:
        raise AssertionError(f"git {' '.join(args)}: {proc.stderr}")
    return proc.stdout


def make_repo(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q")
    (path / "README.md").write_text("project\n")
    (path / "src").mkdir()
    (path / "src" / "auth.py").write_text("auth = 1\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    return path


@pytest.fixture
def repo(tmp_path) -> Path:
    """A repository with one commit on main and a small tree (README.md, src/auth.py)."""
    return make_repo(tmp_path / "repo")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def registry(repo, clock):
    from agent_registry import Registry
    with Registry.open(str(repo), clock=clock) as reg:
        yield reg


def user_state(repo: Path) -> tuple[str, str, str]:
    """What registry code must never change: working tree + index status, HEAD, index."""
    status = git(repo, "status", "--porcelain=v1", "--untracked-files=all", "--ignored")
    head = git(repo, "rev-parse", "--symbolic-full-name", "HEAD", check=False) + \
        git(repo, "rev-parse", "HEAD", check=False)
    index = Path(git(repo, "rev-parse", "--git-path", "index").strip())
    index_path = index if index.is_absolute() else Path(repo) / index
    return status, head, index_path.read_bytes().hex() if index_path.exists() else ""


class Runner:
    """Runs the installed ``agent-registry`` command as a one-shot process, the way
    agents do, and checks that it left the working tree, index and HEAD alone."""

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd

    def __call__(self, *args: str, cwd: Path | None = None, env: dict | None = None,
                 input: str | None = None, check_untouched: bool = True) -> subprocess.CompletedProcess:
        where = cwd or self.cwd
        before = user_state(where) if check_untouched else None
        proc = subprocess.run([CLI, *args], cwd=where, capture_output=True, text=True,
                              env={**os.environ, **(env or {})}, input=input, timeout=120)
        if check_untouched:
            assert user_state(where) == before, f"agent-registry {args} touched the user's tree"
        return proc


@pytest.fixture
def run(repo) -> Runner:
    return Runner(repo)
