"""The remote says no (issue 36, item 5): `agent-registry server install` puts a
pre-receive hook in the bare repository the clones push to; a push to a code branch that
changes a path another live session holds is refused there, whatever the pushing clone's
hooks did (`git push --no-verify`).  A real bare repository, real clones, real pushes;
the hook runs with a python3 that has no package installed (the base interpreter, with
site-packages out of reach), as on a server."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import CLI, Runner, git
from test_sync import Team


def ok(proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert proc.returncode == 0, proc.stderr
    return proc


@pytest.fixture
def server_path(tmp_path) -> dict[str, str]:
    """An environment whose python3 is the base interpreter (not this venv's, which has
    agent-registry installed) and whose PATH has git and nothing of ours: what the hook
    finds on a server."""
    bin_dir = tmp_path / "server-bin"
    bin_dir.mkdir()
    base = getattr(sys, "_base_executable", None) or sys.executable
    (bin_dir / "python3").symlink_to(os.path.realpath(base))
    git_bin = os.path.dirname(subprocess.run(["sh", "-c", "command -v git"], capture_output=True,
                                             text=True).stdout.strip())
    return {"PATH": f"{bin_dir}{os.pathsep}{git_bin}{os.pathsep}/usr/bin{os.pathsep}/bin"}


@pytest.fixture
def team(tmp_path) -> Team:
    """A bare remote with the server hook; clone a holds src/auth.py as session a1."""
    team = Team(tmp_path)
    ok(subprocess.run([CLI, "server", "install", str(team.bare)], capture_output=True,
                      text=True, cwd=tmp_path))
    a = team.clone("a")
    ok(a("init", "--hooks"))  # the registry's own pushes pass the hook
    ok(a("register", "a1", "--provider", "Claude", "--working-on", "auth"))
    ok(a("lock", "acquire", "src/auth.py", "--session", "a1"))
    team.b = team.clone("b")
    git(team.b.cwd, "checkout", "-q", "main")
    return team


def change(clone: Path, path: str, text: str, message: str) -> str:
    file = clone / path
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(text)
    git(clone, "add", path)
    git(clone, "commit", "-q", "--no-verify", "-m", message)
    return git(clone, "rev-parse", "HEAD").strip()


def push(clone: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "push", "--no-verify", *args], cwd=clone, capture_output=True,
                          text=True, env={**os.environ, **env})


def remote_main(team: Team) -> str:
    return git(team.bare, "rev-parse", "refs/heads/main").strip()


def test_a_push_over_a_held_path_is_refused_naming_path_holder_and_how_to_reach_them(
        team, server_path):
    before = remote_main(team)
    change(team.b.cwd, "src/auth.py", "auth = 2\n", "b changes auth")
    proc = push(team.b.cwd, server_path, "origin", "HEAD:main")
    assert proc.returncode != 0
    assert "pre-receive hook declined" in proc.stderr
    assert "src/auth.py: locked by a1" in proc.stderr
    assert 'working on "auth"' in proc.stderr
    assert "agent-registry send --to a1 'please release src/auth.py'" in proc.stderr
    assert "-o agent-registry.allow=" in proc.stderr
    assert remote_main(team) == before
    # a path nobody holds goes through, from the same clone
    git(team.b.cwd, "reset", "-q", "--hard", "origin/main")
    pushed = change(team.b.cwd, "docs/free.md", "free\n", "b changes a free path")
    ok(push(team.b.cwd, server_path, "origin", "HEAD:main"))
    assert remote_main(team) == pushed


def test_the_override_is_a_push_option_and_is_recorded_on_the_server(team, server_path):
    pushed = change(team.b.cwd, "src/auth.py", "auth = 2\n", "b changes auth")
    proc = ok(push(team.b.cwd, server_path, "-o", "agent-registry.allow=hotfix, a1 agreed",
                   "origin", "HEAD:main"))
    assert "allowed over src/auth.py: locked by a1" in proc.stderr
    assert remote_main(team) == pushed
    status = json.loads(ok(subprocess.run([CLI, "--json", "server", "status", str(team.bare)],
                                          capture_output=True, text=True)).stdout)
    assert status["state"] == "installed"
    [entry] = status["overrides"]
    assert entry["reason"] == "hotfix, a1 agreed"
    assert entry["ref"] == "refs/heads/main" and entry["new"] == pushed
    assert [c["owner"] for c in entry["conflicts"]] == ["a1"]
    assert list(entry["changed_by"]) == ["src/auth.py"]


def test_an_override_names_the_hooks_account_when_nothing_names_the_pusher(team, server_path):
    """A reviewer's finding: with $USER unset (a service's hook) the override was recorded
    with an empty user, and `server status` said `by ?`."""
    import pwd
    change(team.b.cwd, "src/auth.py", "auth = 2\n", "b changes auth")
    env = {k: v for k, v in os.environ.items()
           if k not in ("USER", "GL_USERNAME", "GL_USER", "GITEA_PUSHER_NAME", "REMOTE_USER")}
    ok(subprocess.run(["git", "push", "--no-verify", "-o", "agent-registry.allow=hotfix",
                       "origin", "HEAD:main"], cwd=team.b.cwd, capture_output=True, text=True,
                      env={**env, **server_path}))
    account = pwd.getpwuid(os.getuid()).pw_name
    status = ok(subprocess.run([CLI, "--json", "server", "status", str(team.bare)],
                               capture_output=True, text=True))
    assert [o["user"] for o in json.loads(status.stdout)["overrides"]] == [account]
    text = ok(subprocess.run([CLI, "server", "status", str(team.bare)], capture_output=True,
                             text=True)).stdout
    assert f"refs/heads/main by {account}: hotfix" in text


def test_the_holder_pushes_what_it_holds(team, server_path):
    """The session a push names, and the session working on the pushed branch, change
    what they hold: another session's push of the same branch is still refused."""
    change(team.b.cwd, "src/auth.py", "auth = 2\n", "a1's change")
    ok(push(team.b.cwd, server_path, "-o", "agent-registry.session=a1", "origin", "HEAD:main"))
    proc = push(team.b.cwd, server_path, "-o", "agent-registry.session=b1", "origin",
                "HEAD:refs/heads/other")
    assert proc.returncode == 0  # a new branch of commits the server has: nothing new
    change(team.b.cwd, "src/auth.py", "auth = 3\n", "b1's change")
    proc = push(team.b.cwd, server_path, "-o", "agent-registry.session=b1", "origin", "HEAD:main")
    assert "src/auth.py: locked by a1" in proc.stderr and proc.returncode != 0
    # a session on branch feat holds src/feat.py: its branch takes changes of it
    a = Runner(team.root / "a")
    git(a.cwd, "checkout", "-q", "-b", "feat")
    ok(a("register", "f1", "--provider", "Claude"))
    ok(a("lock", "acquire", "src/feat.py", "--session", "f1"))
    git(team.b.cwd, "reset", "-q", "--hard", "origin/main")
    change(team.b.cwd, "src/feat.py", "feat\n", "feat work")
    ok(push(team.b.cwd, server_path, "origin", "HEAD:refs/heads/feat"))
    proc = push(team.b.cwd, server_path, "origin", "HEAD:main")
    assert "src/feat.py: locked by f1" in proc.stderr and proc.returncode != 0


def test_an_unreadable_registry_ref_refuses_the_push(team, server_path):
    change(team.b.cwd, "docs/free.md", "free\n", "a free path")
    # the registry branch names an object the server does not have
    git(team.bare, "update-ref", "-d", "refs/heads/agent-registry")
    (team.bare / "refs" / "heads" / "agent-registry").write_text("1" * 40 + "\n")
    proc = push(team.b.cwd, server_path, "origin", "HEAD:main")
    assert proc.returncode != 0
    assert "refused" in proc.stderr and "unreadable" in proc.stderr
    assert "agent-registry.allow" in proc.stderr


def test_an_existing_pre_receive_hook_runs_first_and_comes_back(tmp_path, server_path):
    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    theirs = bare / "hooks" / "pre-receive"
    seen = tmp_path / "seen"
    theirs.write_text(f"#!/bin/sh\ncat > '{seen}'\nexit ${{THEIRS_EXIT:-0}}\n")
    theirs.chmod(0o755)
    original = theirs.read_bytes()
    result = json.loads(ok(subprocess.run([CLI, "--json", "server", "install", str(bare)],
                                          capture_output=True, text=True)).stdout)
    assert result["state"] == "installed, chaining the existing hook"
    assert git(bare, "config", "receive.advertisePushOptions").strip() == "true"
    seed = tmp_path / "seed"
    git(tmp_path, "init", "-q", str(seed))
    change(seed, "README.md", "x\n", "first")
    proc = push(seed, {**server_path, "THEIRS_EXIT": "3"}, str(bare), "HEAD:main")
    assert proc.returncode != 0 and "refs/heads/main" in seen.read_text()
    ok(push(seed, server_path, str(bare), "HEAD:main"))
    ok(subprocess.run([CLI, "server", "uninstall", str(bare)], capture_output=True, text=True))
    assert theirs.read_bytes() == original


def test_server_install_wants_a_bare_repository(tmp_path):
    clone = tmp_path / "work"
    git(tmp_path, "init", "-q", str(clone))
    proc = subprocess.run([CLI, "server", "install", str(clone)], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "is not a bare repository" in proc.stderr
    assert not (clone / ".git" / "hooks" / "pre-receive").exists()
