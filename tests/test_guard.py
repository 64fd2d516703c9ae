"""The guard, through real `git commit`/`git push` runs with the installed hooks."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import CLI, FakeClock, git, put_on_ref, registry_ops, shard_refs_of


@pytest.fixture
def agents():
    """Start long-lived stand-in agent processes (not ancestors of any git command):
    ``sleep 600``, or the long-lived *command* given (a harness's command line)."""
    started: list[subprocess.Popen] = []

    def start(*command: str) -> int:
        proc = subprocess.Popen(list(command) or ["sleep", "600"])
        started.append(proc)
        return proc.pid

    yield start
    for proc in started:
        proc.kill()
        proc.wait()


def open_registry(repo: Path, clock=time.time):
    from agent_registry import Registry
    return Registry.open(str(repo), clock=clock)


def hold(repo: Path, sid: str, paths: list[str], pid: int, working_on: str = "auth refactor",
         clock=time.time) -> None:
    with open_registry(repo, clock) as registry:
        registry.register(sid, provider="Kimi", working_on=working_on, pid=pid)
        registry.claim(sid, paths)


def commit(repo: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "commit", "-q", *args], cwd=repo, capture_output=True,
                          text=True, env={**os.environ, **(env or {})})


def head(repo: Path) -> str:
    return git(repo, "rev-parse", "HEAD").strip()


def edit(repo: Path, path: str, text: str = "changed\n") -> None:
    (repo / path).parent.mkdir(parents=True, exist_ok=True)
    (repo / path).write_text(text)
    git(repo, "add", "-A")


def test_commit_of_a_path_held_by_another_session_is_refused(guarded, agents):
    hold(guarded, "kimi-1", ["src/auth.py"], agents())
    before = head(guarded)
    edit(guarded, "src/auth.py")
    proc = commit(guarded, "-m", "touch auth")
    assert proc.returncode == 1
    assert head(guarded) == before
    line = next(l for l in proc.stderr.splitlines() if l.strip().startswith("src/auth.py"))
    assert "kimi-1" in line and "auth refactor" in line and "since 20" in line
    assert "a person" in proc.stderr
    assert "AGENT_REGISTRY_ALLOW=1" in proc.stderr and "--no-verify" in proc.stderr


def test_own_lock_passes_by_env_and_by_process_ancestry(guarded, agents):
    hold(guarded, "kimi-1", ["src/auth.py"], agents())
    edit(guarded, "src/auth.py")
    assert commit(guarded, "-m", "mine", env={"AGENT_REGISTRY_SESSION": "kimi-1"}).returncode == 0
    # a session whose process is an ancestor of the hook (this test runs git) is the committer
    hold(guarded, "me-1", ["README.md"], os.getpid())
    edit(guarded, "README.md")
    proc = commit(guarded, "-m", "readme")
    assert proc.returncode == 0, proc.stderr
    # and another session's env id does not unlock a path held by kimi-1
    edit(guarded, "src/auth.py", "again\n")
    proc = commit(guarded, "-m", "not mine", env={"AGENT_REGISTRY_SESSION": "me-1"})
    assert proc.returncode == 1 and "committing as me-1" in proc.stderr


def test_an_agent_started_by_another_commits_as_itself_not_as_its_parent(guarded):
    """Both sessions' processes are ancestors of the hook when one agent runs another
    (Claude Code running `codex exec`): the committer is the nearer one, so the inner
    agent's commit of a file the outer one holds is refused, naming the outer; the
    outer's own commit of it passes."""
    script = f"""
        {CLI} register outer --provider claude --pid $$ >/dev/null &&
        {CLI} lock acquire --session outer src/auth.py >/dev/null &&
        bash -c '
            {CLI} register inner --provider codex --pid $$ >/dev/null &&
            echo inner >> src/auth.py && git commit -qam "inner commits outer file"
            echo "inner rc=$?"' &&
        echo outer >> src/auth.py && git commit -qam "outer commits its own"
        echo "outer rc=$?"
    """
    proc = subprocess.run(["bash", "-c", script], cwd=guarded, capture_output=True, text=True)
    assert "inner rc=1" in proc.stdout and "outer rc=0" in proc.stdout, proc.stdout + proc.stderr
    assert "src/auth.py" in proc.stderr and "outer" in proc.stderr
    assert git(guarded, "log", "-1", "--format=%s").strip() == "outer commits its own"


def test_unrelated_paths_pass(guarded, agents):
    hold(guarded, "kimi-1", ["src/auth.py", "docs/"], agents())
    edit(guarded, "README.md")
    edit(guarded, "src/other.py")
    proc = commit(guarded, "-m", "unrelated")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""


def test_stale_locks_never_block(guarded, agents):
    dead = subprocess.Popen(["sleep", "600"])
    hold(guarded, "gone-1", ["src/auth.py"], dead.pid)
    dead.kill()
    dead.wait()
    # a live process, but its heartbeat is long past the TTL
    hold(guarded, "old-1", ["README.md"], agents(), clock=FakeClock(time.time() - 3600))
    with open_registry(guarded) as registry:
        registry.register("done-1", provider="Codex", pid=agents())
        registry.claim("done-1", ["src/x.py"])
        registry.finish("done-1")
    edit(guarded, "src/auth.py")
    edit(guarded, "README.md")
    edit(guarded, "src/x.py")
    proc = commit(guarded, "-m", "over stale locks")
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("target", ["src/", "src/**/*.py", "*.py"])
def test_directory_and_glob_locks_cover_staged_files(guarded, agents, target):
    hold(guarded, "kimi-1", [target], agents())
    edit(guarded, "src/deep/inner.py" if target != "*.py" else "setup.py")
    proc = commit(guarded, "-m", "covered")
    assert proc.returncode == 1
    assert f"via {target}" in proc.stderr


def test_renames_count_on_both_sides_and_deletions_count(guarded, agents):
    hold(guarded, "kimi-1", ["src/auth.py"], agents())
    git(guarded, "mv", "src/auth.py", "src/login.py")
    proc = commit(guarded, "-m", "rename away")
    assert proc.returncode == 1 and "src/auth.py: locked by kimi-1" in proc.stderr
    git(guarded, "reset", "-q", "--hard")
    git(guarded, "mv", "README.md", "src/auth.py", "-f")
    proc = commit(guarded, "-m", "rename onto")
    assert proc.returncode == 1 and "src/auth.py: locked by kimi-1" in proc.stderr
    git(guarded, "reset", "-q", "--hard")
    git(guarded, "rm", "-q", "src/auth.py")
    proc = commit(guarded, "-m", "delete")
    assert proc.returncode == 1 and "src/auth.py" in proc.stderr


def test_commit_with_explicit_paths_uses_the_temporary_index(guarded, agents):
    """`git commit FILE` commits through a temporary index (GIT_INDEX_FILE)."""
    hold(guarded, "kimi-1", ["src/auth.py"], agents())
    (guarded / "src" / "auth.py").write_text("unstaged edit\n")
    proc = commit(guarded, "-m", "only this file", "src/auth.py")
    assert proc.returncode == 1 and "kimi-1" in proc.stderr
    proc = commit(guarded, "-am", "all tracked")
    assert proc.returncode == 1


def test_override_is_let_through_and_recorded(guarded, agents):
    hold(guarded, "kimi-1", ["src/auth.py"], agents())
    edit(guarded, "src/auth.py")
    proc = commit(guarded, "-m", "deliberate", env={"AGENT_REGISTRY_ALLOW": "1"})
    assert proc.returncode == 0, proc.stderr
    assert "recorded" in proc.stderr
    [(_, message)] = registry_ops(guarded, "override")  # the audit log: one override
    assert message.startswith("override src/auth.py by a person (held by kimi-1) on commit")
    assert "Registry-Op: override" in message
    assert "Registry-Path: src/auth.py" in message
    assert "Registry-By: a person" in message
    data = json.loads(message.split("Registry-Data: ", 1)[1])
    assert data["owners"] == {"src/auth.py": ["kimi-1"]}
    files = git(guarded, "ls-tree", "-r", "--name-only", "agent-registry", "overrides/")
    assert len(files.split()) == 1


def test_without_a_registry_branch_the_guard_says_it_is_not_checking(repo, run):
    assert run("hooks", "install").returncode == 0
    edit(repo, "src/auth.py")
    proc = commit(repo, "-m", "no registry")
    assert proc.returncode == 0
    assert "no registry branch" in proc.stderr and "not checked" in proc.stderr
    status = json.loads(run("--json", "hooks", "status").stdout)
    assert status["mode"].startswith("off: no registry branch")


def test_unreadable_lock_record_is_reported_and_locks_elsewhere_still_hold(guarded, agents):
    hold(guarded, "kimi-1", ["src/auth.py"], agents())
    from agent_registry.branch.paths import record_name
    # a record broken by hand in the lock shard that records README.md
    put_on_ref(guarded, shard_refs_of(guarded, "README.md")[0],
               {record_name("README.md"): b"{not json"}, "break a record")
    edit(guarded, "README.md")
    edit(guarded, "src/auth.py")
    proc = commit(guarded, "-m", "both")
    assert proc.returncode == 1
    assert f"{record_name('README.md')} is unreadable" in proc.stderr
    assert "src/auth.py: locked by kimi-1" in proc.stderr


def test_guard_imports_only_the_standard_library(guarded, agents):
    hold(guarded, "kimi-1", ["src/auth.py"], agents())
    edit(guarded, "src/auth.py")
    code = ("import sys; from agent_registry.enforce import guard; rc = guard.main(['pre-commit']); "
            "heavy = [m for m in sys.modules if m.split('.')[0] in "
            "('click', 'ruamel', 'whoosh', 'langchain', 'langchain_openai', 'langchain_core', "
            "'fastapi', 'uvicorn', 'yaml')]; print(rc, heavy)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=guarded, capture_output=True, text=True)
    assert proc.stdout.strip() == "1 []", proc.stdout + proc.stderr
    assert "kimi-1" in proc.stderr


def test_guard_command_checks_paths_and_staged_files(guarded, agents, run):
    hold(guarded, "kimi-1", ["src/"], agents())
    proc = run("guard", "src/auth.py", "README.md")
    assert proc.returncode == 1 and "kimi-1" in proc.stderr
    data = json.loads(run("--json", "guard", "src/auth.py").stdout)["error"]
    assert data["blocked"] is True and data["committer"] == "a person"
    assert data["conflicts"][0]["owner"] == "kimi-1" and data["conflicts"][0]["target"] == "src/"
    ok = json.loads(run("--json", "guard", "README.md").stdout)
    assert ok["blocked"] is False and ok["conflicts"] == []
    assert run("guard", "--session", "x").returncode == 2
    assert run("guard", "../outside").returncode == 2
    edit(guarded, "src/auth.py")
    staged = run("--json", "guard", check_untouched=False)
    assert staged.returncode == 1 and json.loads(staged.stdout)["error"]["checked"] == ["src/auth.py"]


# -- pre-push -------------------------------------------------------------------------

def push(repo: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "push", "origin", "main"], cwd=repo, capture_output=True,
                          text=True, env={**os.environ, **(env or {})}, timeout=120)


def test_pre_push_refuses_commits_made_with_no_verify(pushing, agents):
    hold(pushing, "kimi-1", ["src/auth.py"], agents())
    edit(pushing, "src/auth.py")
    assert commit(pushing, "--no-verify", "-m", "sneaky").returncode == 0
    sneaky = head(pushing)
    edit(pushing, "README.md")
    assert commit(pushing, "-m", "fine").returncode == 0
    proc = push(pushing)
    assert proc.returncode == 1, proc.stderr
    assert "push refused" in proc.stderr
    assert f"commit {sneaky[:12]} touches src/auth.py" in proc.stderr
    assert "kimi-1" in proc.stderr
    assert git(pushing, "ls-remote", "origin", "refs/heads/main").split()[0] != head(pushing)
    # opting out, for all remotes or this one
    git(pushing, "config", "agent-registry.origin.guardPush", "false")
    proc = push(pushing)
    assert proc.returncode == 0, proc.stderr
    assert git(pushing, "ls-remote", "origin", "refs/heads/main").split()[0] == head(pushing)


def test_pre_push_lets_unrelated_commits_through(pushing, agents):
    hold(pushing, "kimi-1", ["src/auth.py"], agents())
    edit(pushing, "README.md")
    assert commit(pushing, "-m", "fine").returncode == 0
    proc = push(pushing)
    assert proc.returncode == 0, proc.stderr


def test_pre_push_without_a_working_sync_uses_local_state(pushing, agents, tmp_path):
    hold(pushing, "kimi-1", ["src/auth.py"], agents())
    git(pushing, "config", "agent-registry.remote", "nowhere")  # sync cannot work
    edit(pushing, "src/auth.py")
    assert commit(pushing, "--no-verify", "-m", "sneaky").returncode == 0
    proc = push(pushing)
    assert proc.returncode == 1
    assert "the guard uses local state" in proc.stderr


@pytest.mark.parametrize("scope", ["--local", "--global"])
def test_the_configured_registry_branch_is_guarded(repo, run, agents, scope):
    git(repo, "config", scope, "agent-registry.branch", "coordination")
    assert run("init", "--hooks").returncode == 0
    hold(repo, "kimi-1", ["src/auth.py"], agents())
    assert git(repo, "rev-parse", "-q", "--verify", "coordination", check=False)
    edit(repo, "src/auth.py")
    proc = commit(repo, "-m", "on the configured branch")
    assert proc.returncode == 1 and "kimi-1" in proc.stderr


def test_hook_layout_read_from_files_matches_git(repo, tmp_path):
    """Inside a pre-commit hook the guard reads the repository layout from the files
    instead of asking git; it must agree with git, in a clone and in a worktree."""
    out = tmp_path / "layouts"
    hook = repo / ".git" / "hooks" / "pre-commit"
    hook.write_text(f"#!/bin/sh\nexec '{sys.executable}' -c \"from agent_registry.enforce.guard import "
                    "hook_repo_info; from agent_registry.store.git import discover; "
                    f"print(hook_repo_info() == discover('.'), hook_repo_info() is not None)\" >> '{out}'\n")
    hook.chmod(0o755)
    other = tmp_path / "wt"
    git(repo, "worktree", "add", "-q", "-b", "feature", str(other))
    for where in (repo, other, repo / "src"):
        (where / "new.txt").write_text("x\n")
        git(where, "add", "new.txt")
        git(where, "commit", "-q", "-m", "layout")
    assert out.read_text() == "True True\n" * 3


def test_an_unreadable_registry_refuses_the_commit_and_names_the_override(guarded, agents):
    hold(guarded, "kimi-1", ["src/auth.py"], agents())
    # the branch points at an object this clone does not have (a broken clone)
    (guarded / ".git" / "refs" / "heads" / "agent-registry").write_text("1" * 40 + "\n")
    edit(guarded, "src/auth.py")
    proc = commit(guarded, "-m", "registry broken")
    assert proc.returncode == 1  # fail closed (issue 9)
    assert "is unreadable" in proc.stderr and "AGENT_REGISTRY_ALLOW=1" in proc.stderr
