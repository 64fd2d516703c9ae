"""Fixtures shared by every test: a hermetic environment and real git repositories.

Like git-revise's ``hermetic_seal``: HOME, XDG dirs and git config are isolated, the git
identity and dates are pinned, and nothing from the developer's environment (an
AGENT_REGISTRY_SESSION, a global hooksPath, a commit template) can leak into a test.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from helpers import FakeClock, Runner, git, make_repo


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
    # registries made by a test are made as `init` makes them, in the one layout users get
    # (16 lock shards with clone refs): the AGENT_REGISTRY_* variables were cleared above
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    # the thousands of agent-registry processes the suite starts read cached bytecode as
    # on a user's machine; a shell that forbids writing it (PYTHONDONTWRITEBYTECODE) made
    # each one compile the package again: ~55 ms of CPU per process, a quarter of a claim
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    yield


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


@pytest.fixture
def run(repo) -> Runner:
    return Runner(repo)


@pytest.fixture
def guarded(repo, run):
    """*repo* with the registry branch and the git hooks installed."""
    assert run("init", "--hooks").returncode == 0
    return repo


@pytest.fixture
def pushing(guarded, tmp_path):
    """*guarded*, with main pushed to a bare remote ``origin``."""
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(guarded, "remote", "add", "origin", str(remote))
    git(guarded, "push", "-q", "origin", "main")
    return guarded
