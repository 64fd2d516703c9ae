"""`hooks install/uninstall/status`: chaining, core.hooksPath, worktrees, pre-commit."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path


from helpers import CLI, ROOT, git, make_repo, wait_for
from test_guard import agents, commit, edit, head, hold  # noqa: F401  (fixture)

HOOKS = ("pre-commit", "pre-push", "post-merge", "post-checkout")


def installed(directory: Path) -> dict[str, str]:
    return {name: (directory / name).read_text() for name in HOOKS if (directory / name).exists()}


def test_install_status_uninstall(repo, run):
    status = json.loads(run("--json", "hooks", "status").stdout)
    assert status["mode"] == "off: the pre-commit hook is not installed"
    assert {h["state"] for h in status["hooks"]} == {"not installed"}
    result = run("--json", "init", "--hooks")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["hooks"]["hooks_dir"] == str(repo / ".git" / "hooks")
    for name in HOOKS:
        hook = repo / ".git" / "hooks" / name
        assert os.access(hook, os.X_OK)
        assert sys.executable in hook.read_text()
    status = json.loads(run("--json", "hooks", "status").stdout)
    assert status["mode"] == "enforcing" and status["push_guard"] is True
    assert {h["state"] for h in status["hooks"]} == {"installed"}
    text = run("hooks", "status").stdout
    assert "guard: enforcing" in text
    # installing again updates in place and chains nothing
    again = json.loads(run("--json", "hooks", "install").stdout)
    assert {h["state"] for h in again["hooks"]} == {"updated"}
    assert not list((repo / ".git" / "hooks").glob("*.agent-registry-chained"))
    git(repo, "config", "agent-registry.guardPush", "false")
    assert json.loads(run("--json", "hooks", "status").stdout)["push_guard"] is False
    assert run("hooks", "uninstall").returncode == 0
    assert installed(repo / ".git" / "hooks") == {}


def test_existing_hooks_still_run_and_are_restored_byte_for_byte(repo, run, agents):
    hooks = repo / ".git" / "hooks"
    marker = repo.parent / "ran"
    original = f"#!/bin/sh\n# the team's own hook\necho ran >> '{marker}'\nexit ${{FAIL:-0}}\n"
    (hooks / "pre-commit").write_text(original)
    (hooks / "pre-commit").chmod(0o750)
    (hooks / "post-checkout").symlink_to(hooks / "pre-commit")
    assert run("init", "--hooks").returncode == 0
    assert "agent-registry hook" in (hooks / "pre-commit").read_text()
    edit(repo, "README.md")
    assert commit(repo, "-m", "runs both").returncode == 0
    assert marker.read_text() == "ran\n"
    # the chained hook's refusal still refuses
    edit(repo, "README.md", "again\n")
    before = head(repo)
    proc = commit(repo, "-m", "chained fails", env={"FAIL": "3"})
    assert proc.returncode == 1 and head(repo) == before
    assert marker.read_text() == "ran\nran\n"
    # and ours still refuses after the chained one passed
    hold(repo, "kimi-1", ["README.md"], agents())
    proc = commit(repo, "-m", "locked")
    assert proc.returncode == 1 and "kimi-1" in proc.stderr
    assert marker.read_text() == "ran\nran\nran\n"
    result = json.loads(run("--json", "hooks", "uninstall").stdout)
    assert {h["hook"]: h["state"] for h in result["hooks"]}["pre-commit"] == \
        "removed, chained hook restored"
    assert (hooks / "pre-commit").read_text() == original
    assert oct((hooks / "pre-commit").stat().st_mode & 0o777) == oct(0o750)
    assert (hooks / "post-checkout").is_symlink()
    assert os.readlink(hooks / "post-checkout") == str(hooks / "pre-commit")
    assert not (hooks / "pre-push").exists()


def test_a_foreign_hook_is_never_overwritten(repo, run):
    hooks = repo / ".git" / "hooks"
    (hooks / "pre-push").write_text("#!/bin/sh\nexit 0\n")
    (hooks / "pre-push.agent-registry-chained").write_text("#!/bin/sh\nexit 0\n")
    proc = run("hooks", "install")
    assert proc.returncode == 1 and "already exists" in proc.stderr
    assert (hooks / "pre-push").read_text() == "#!/bin/sh\nexit 0\n"


def test_core_hooks_path_is_honoured(repo, run, agents):
    git(repo, "config", "core.hooksPath", ".githooks")
    # the user chose a hooks directory inside the working tree: installing writes there
    assert run("init", "--hooks", check_untouched=False).returncode == 0
    assert (repo / ".githooks" / "pre-commit").exists()
    assert not (repo / ".git" / "hooks" / "pre-commit").exists()
    hold(repo, "kimi-1", ["src/auth.py"], agents())
    edit(repo, "src/auth.py")
    proc = commit(repo, "-m", "via hooksPath")
    assert proc.returncode == 1 and "kimi-1" in proc.stderr
    status = json.loads(run("--json", "hooks", "status").stdout)
    assert status["hooks_dir"] == str(repo / ".githooks") and status["mode"] == "enforcing"


def test_linked_worktrees_share_the_hooks_and_the_locks(repo, run, agents, tmp_path):
    other = tmp_path / "wt"
    git(repo, "worktree", "add", "-q", "-b", "feature", str(other))
    assert run("init", "--hooks", cwd=other).returncode == 0
    assert (repo / ".git" / "hooks" / "pre-commit").exists()
    hold(repo, "kimi-1", ["src/auth.py"], agents())
    edit(other, "src/auth.py")
    proc = commit(other, "-m", "in the worktree")
    assert proc.returncode == 1 and "kimi-1" in proc.stderr
    edit(other, "README.md")
    git(other, "reset", "-q", "src/auth.py")
    assert commit(other, "-m", "fine").returncode == 0


def test_broken_interpreter_refuses_the_commit_not_lets_it_through(repo, run):
    """A hook whose Python is gone (and no agent-registry-guard on PATH) cannot check a
    commit: it refuses it in one line naming the ways out; it let it through before."""
    assert run("init", "--hooks").returncode == 0
    hook = repo / ".git" / "hooks" / "pre-commit"
    hook.write_text(hook.read_text().replace(sys.executable, "/nonexistent/python"))
    env = {"PATH": "/usr/bin:/bin"}  # no agent-registry-guard either
    edit(repo, "README.md")
    before = head(repo)
    proc = commit(repo, "-m", "unchecked", env=env)
    assert proc.returncode == 1 and head(repo) == before, proc.stderr
    assert len(proc.stderr.splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith("agent-registry: commit refused: /nonexistent/python, the "
                                  "Python these hooks were installed with, is gone")
    for way_out in ("agent-registry hooks install", "agent-registry hooks uninstall",
                    "AGENT_REGISTRY_ALLOW=1 git commit", "git commit --no-verify"):
        assert way_out in proc.stderr, way_out
    allowed = commit(repo, "-m", "allowed", env={**env, "AGENT_REGISTRY_ALLOW": "1"})
    assert allowed.returncode == 0 and "commit allowed unchecked" in allowed.stderr
    status = json.loads(run("--json", "hooks", "status", env=env).stdout)
    assert status["hooks"][0]["state"].startswith("broken (installed, but its Python "
                                                  "/nonexistent/python is gone")
    assert status["mode"].startswith("refusing: the pre-commit hook is installed but its "
                                     "Python /nonexistent/python is gone"), status["mode"]
    # an agent-registry-guard on PATH is run instead, and checks the commit
    guard = shutil.which("agent-registry-guard", path=str(Path(CLI).parent))
    assert guard, "the test install has no agent-registry-guard script"
    env = {"PATH": os.pathsep.join([str(Path(CLI).parent), "/usr/bin", "/bin"])}
    edit(repo, "README.md", "again\n")
    assert commit(repo, "-m", "checked by the guard on PATH", env=env).returncode == 0
    status = json.loads(run("--json", "hooks", "status", env=env).stdout)
    assert status["mode"] == f"enforcing (through {guard}: the pre-commit hook's Python " \
        "/nonexistent/python is gone; agent-registry hooks install)", status["mode"]


def test_post_merge_brings_the_registry_up_to_date_in_the_background(tmp_path, run, agents):
    from agent_registry import Registry
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    first = make_repo(tmp_path / "first")
    git(first, "remote", "add", "origin", str(remote))
    git(first, "push", "-q", "origin", "main")
    git(tmp_path, "clone", "-q", str(remote), str(tmp_path / "second"))
    second = tmp_path / "second"
    # `git pull` here fetches the project's branch alone, so what brings the registry's
    # branches (the main one, its lock shards, the clone refs) is the registry's own sync
    git(second, "config", "remote.origin.fetch", "+refs/heads/main:refs/remotes/origin/main")
    assert run("init", "--hooks", cwd=second).returncode == 0
    hold(first, "kimi-1", ["src/auth.py"], agents())  # pushed by the registry's own sync
    assert git(remote, "rev-parse", "-q", "--verify", "refs/heads/agent-registry", check=False)

    def locks() -> list[tuple[str, str]]:  # as the library reads this clone, nothing fetched
        with Registry.open(str(second)) as registry:
            return [(l["path"], l["owner"]) for l in registry.locks()]

    assert locks() == []
    (first / "README.md").write_text("new\n")
    git(first, "commit", "-qam", "upstream change")
    git(first, "push", "-q", "origin", "main")
    git(second, "pull", "-q", "--ff-only")
    wait_for(lambda: locks() == [("src/auth.py", "kimi-1")], "the background sync of post-merge")
    with Registry.open(str(second)) as registry:
        assert registry.session("kimi-1").locks == ["src/auth.py"]


def framework(repo: Path, tmp_path: Path, *hook_types: str) -> dict[str, str]:
    """Install the published hook with the real `pre-commit` tool, offline: the hook
    repository is a local clone holding this checkout's .pre-commit-hooks.yaml.  The
    environment to run git with is returned."""
    hook_repo = tmp_path / "hook-repo"
    hook_repo.mkdir()
    shutil.copy(ROOT / ".pre-commit-hooks.yaml", hook_repo / ".pre-commit-hooks.yaml")
    git(hook_repo, "init", "-q")
    git(hook_repo, "add", "-A")
    git(hook_repo, "commit", "-q", "-m", "hooks")
    rev = git(hook_repo, "rev-parse", "HEAD").strip()
    (repo / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {hook_repo}\n    rev: {rev}\n"
        "    hooks: [{id: agent-registry-guard-system}]\n")
    git(repo, "add", ".pre-commit-config.yaml")
    git(repo, "commit", "-q", "-m", "pre-commit config")
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ["PATH"],
           "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home")}
    types = [arg for t in hook_types for arg in ("-t", t)]
    subprocess.run([str(Path(bin_dir) / "pre-commit"), "install", *types], cwd=repo, env=env,
                   check=True, capture_output=True)
    from test_guard import open_registry
    with open_registry(repo) as registry:
        registry.init()
    return env


def git_with(env: dict[str, str], repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True,
                          timeout=300)


def test_pre_commit_framework_runs_the_published_hook(repo, agents, tmp_path):
    env = framework(repo, tmp_path, "pre-commit")
    hold(repo, "kimi-1", ["src/auth.py"], agents())
    edit(repo, "src/auth.py")
    proc = git_with(env, repo, "commit", "-q", "-m", "framework")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "kimi-1" in proc.stdout + proc.stderr
    git(repo, "reset", "-q", "--hard")
    edit(repo, "README.md")
    proc = git_with(env, repo, "commit", "-q", "-m", "framework ok")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_pre_commit_framework_guards_pushes_too(repo, agents, tmp_path):
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(repo, "remote", "add", "origin", str(remote))
    git(repo, "push", "-q", "origin", "main")
    env = framework(repo, tmp_path, "pre-commit")
    hold(repo, "kimi-1", ["src/auth.py"], agents())
    subprocess.run([str(Path(sys.executable).parent / "pre-commit"), "install", "-t", "pre-push"],
                   cwd=repo, env=env, check=True, capture_output=True)
    edit(repo, "src/auth.py")
    assert git_with(env, repo, "commit", "-q", "--no-verify", "-m", "sneaky").returncode == 0
    proc = git_with(env, repo, "push", "origin", "main")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "touches src/auth.py" in proc.stdout + proc.stderr
    assert git(remote, "rev-parse", "main").strip() != git(repo, "rev-parse", "main").strip()
    git(repo, "reset", "-q", "--hard", "HEAD~1")
    edit(repo, "README.md")
    assert git_with(env, repo, "commit", "-q", "-m", "fine").returncode == 0
    proc = git_with(env, repo, "push", "origin", "main")
    assert proc.returncode == 0, proc.stdout + proc.stderr
