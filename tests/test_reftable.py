"""Issue 34 §2 (and issue 32 §5): a repository whose refs are not files.  With git's
reftable format (git >= 2.45: `git init --ref-format=reftable`, or `git refs migrate`
of an existing one), there is no ref file to read: every command, the guard and the
harness's edit gate read and write the registry's refs through git, in the layout `init`
makes.  Debian 12's git is 2.39: these tests run a newer one named by
$AGENT_REGISTRY_TEST_NEW_GIT (`.ci/newgit DIR` unpacks Debian 13's), put first on PATH
for them alone, and skip saying so when there is none."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from helpers import git, make_repo
from test_guard import agents, commit, edit, head  # noqa: F401  (agents: a fixture)
from test_harness_hooks import edit as tool_edit
from test_harness_hooks import hook, verdict

NEW_GIT = os.environ.get("AGENT_REGISTRY_TEST_NEW_GIT", "")
SESSION = "AGENT_REGISTRY_SESSION"
HELD = "src/auth.py"


def _version(git_path: str) -> tuple[int, ...]:
    try:
        out = subprocess.run([git_path, "version"], capture_output=True, text=True).stdout
    except OSError:
        return ()
    match = re.search(r"(\d+)\.(\d+)", out)
    return tuple(int(n) for n in match.groups()) if match else ()


VERSION = _version(NEW_GIT) if NEW_GIT else ()
pytestmark = pytest.mark.skipif(
    VERSION < (2, 46),
    reason=f"needs git >= 2.46 (reftable, `git refs migrate`) named by "
           f"AGENT_REGISTRY_TEST_NEW_GIT: {'unset' if not NEW_GIT else f'{NEW_GIT} is {VERSION}'}"
           f" (`.ci/newgit DIR` unpacks Debian 13's git beside the system's)")


@pytest.fixture(autouse=True)
def new_git_first(monkeypatch):
    """The newer git first on PATH, for every process these tests start; the default
    layout (16 lock shards, clone refs)."""
    monkeypatch.setenv("PATH", f"{os.path.dirname(NEW_GIT)}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("AGENT_REGISTRY_SHARDS", raising=False)


def reftable_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "--ref-format=reftable")
    (path / "src").mkdir()
    (path / "src" / "auth.py").write_text("auth = 1\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    return path


def held_by_kimi_1(repo: Path, run, agents) -> None:
    """`init --hooks`, kimi-1 and kimi-2 registered, kimi-1 holding src/auth.py."""
    assert run("init", "--hooks", cwd=repo).returncode == 0
    for sid in ("kimi-1", "kimi-2"):
        proc = run("register", sid, "--provider", "Kimi", "--pid", str(agents()), cwd=repo)
        assert proc.returncode == 0, proc.stderr
    proc = run("lock", "acquire", HELD, cwd=repo, env={SESSION: "kimi-1"})
    assert proc.returncode == 0, proc.stderr


def held_everywhere(repo: Path, run) -> None:
    """`lock check`, a claim by kimi-2, `status`, the pre-commit guard and Claude Code's
    edit gate all see kimi-1's lock."""
    check = run("lock", "check", HELD, cwd=repo, env={SESSION: "kimi-2"})
    assert check.returncode == 1 and check.stdout.startswith("locked: src/auth.py by kimi-1"), \
        (check.stdout, check.stderr)
    taken = run("lock", "acquire", HELD, cwd=repo, env={SESSION: "kimi-2"})
    assert taken.returncode == 1 and "kimi-1" in taken.stderr, (taken.stdout, taken.stderr)
    status = run("--json", "status", cwd=repo)
    assert {s["id"] for s in json.loads(status.stdout)["sessions"]} >= {"kimi-1", "kimi-2"}
    before = head(repo)
    edit(repo, HELD, "mine now\n")
    refused = commit(repo, "-m", "edit a held file")
    assert refused.returncode != 0 and "locked by kimi-1" in refused.stderr, refused.stderr
    assert head(repo) == before
    git(repo, "reset", "-q", "--hard")
    reason = verdict("claude", hook(repo, "claude", "pre-tool-use",
                                    tool_edit("claude", repo, HELD)))
    assert reason is not None and "kimi-1" in reason, reason


def test_a_new_reftable_repository(tmp_path, run, agents):
    repo = reftable_repo(tmp_path / "rt")
    assert git(repo, "rev-parse", "--show-ref-format").strip() == "reftable"
    held_by_kimi_1(repo, run, agents)
    assert git(repo, "for-each-ref", "refs/heads/agent-registry-shards/").count("\n") == 16
    held_everywhere(repo, run)
    released = run("lock", "release", HELD, cwd=repo, env={SESSION: "kimi-1"})
    assert released.returncode == 0, released.stderr
    check = run("lock", "check", HELD, cwd=repo, env={SESSION: "kimi-2"})
    assert check.returncode == 0 and check.stdout.startswith("free"), check.stdout
    doctor = json.loads(run("--json", "doctor", cwd=repo).stdout)
    verdicts = {c["name"]: c for c in doctor["checks"]}
    assert "ref format reftable" in verdicts["git"]["verdict"]
    assert verdicts["branch"]["status"] == "ok", verdicts["branch"]


def test_a_repository_migrated_to_reftable(tmp_path, run, agents):
    repo = make_repo(tmp_path / "migrated")
    held_by_kimi_1(repo, run, agents)
    git(repo, "pack-refs", "--all")
    if VERSION < (2, 48):  # which first migrates reflogs: before it, they must go
        shutil.rmtree(repo / ".git" / "logs")
    git(repo, "refs", "migrate", "--ref-format=reftable")
    assert git(repo, "rev-parse", "--show-ref-format").strip() == "reftable"
    assert not (repo / ".git" / "packed-refs").exists()
    held_everywhere(repo, run)


def test_a_reftable_clone_of_a_shared_remote(tmp_path, run, agents):
    """Another clone (files) pushes the registry; a reftable clone syncs and sees it."""
    first = make_repo(tmp_path / "first")
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(first, "remote", "add", "origin", str(remote))
    git(first, "push", "-q", "origin", "main")
    held_by_kimi_1(first, run, agents)
    assert run("sync", cwd=first).returncode == 0
    second = tmp_path / "second"
    git(tmp_path, "clone", "-q", "--ref-format=reftable", str(remote), str(second))
    assert run("sync", cwd=second).returncode == 0
    assert run("hooks", "install", cwd=second).returncode == 0
    check = run("lock", "check", HELD, cwd=second)
    assert check.returncode == 1 and check.stdout.startswith("locked: src/auth.py by kimi-1"), \
        (check.stdout, check.stderr)
    edit(second, HELD, "mine now\n")
    refused = commit(second, "-m", "edit a held file")
    assert refused.returncode != 0 and "locked by kimi-1" in refused.stderr, refused.stderr
