"""A pull request's check (issue 36, item 5): `agent-registry ci install github|gitlab`
writes a workflow that fetches the registry refs and runs `agent-registry guard --range`.
The test reads the written YAML, takes the commands the workflow runs, and runs them in a
fresh clone of a real remote after real pushes, with the variables the forge would set."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from helpers import CLI, Runner, git
from test_sync import Team


def ok(proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert proc.returncode == 0, proc.stderr
    return proc


@pytest.fixture
def team(tmp_path) -> Team:
    """Clone a holds src/auth.py as a1 (working on branch main); clone b pushed branch
    `feat`, whose commit changes src/auth.py, and branch `free`, which changes another
    path.  Clone b's hooks are not installed: only the check can say no."""
    team = Team(tmp_path)
    a = team.clone("a")
    ok(a("init", "--hooks"))
    ok(a("register", "a1", "--provider", "Claude", "--working-on", "auth"))
    ok(a("lock", "acquire", "src/auth.py", "--session", "a1"))
    b = team.clone("b")
    for branch, path in (("feat", "src/auth.py"), ("free", "docs/free.md")):
        git(b.cwd, "checkout", "-q", "-b", branch, "origin/main")
        (b.cwd / path).parent.mkdir(exist_ok=True)
        (b.cwd / path).write_text(f"{branch}\n")
        git(b.cwd, "add", path)
        git(b.cwd, "-c", "user.name=Bea", "commit", "-q", "-m", f"{branch} work")
        git(b.cwd, "push", "-q", "origin", branch)
    return team


def checkout(team: Team, name: str) -> Path:
    """What the forge's checkout makes: a full clone of the project (no registry refs)."""
    path = team.root / name
    git(team.root, "clone", "-q", "--no-checkout", str(team.bare), str(path))
    return path


def run_script(lines: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """The workflow's commands, as its runner's shell runs them (stop at the first failure);
    `pip install` is left out: this test's agent-registry is installed already."""
    script = "\n".join(line for line in lines if not line.startswith("pip install"))
    path = os.path.dirname(CLI) + os.pathsep + os.environ["PATH"]
    return subprocess.run(["sh", "-e", "-c", script], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, **env, "PATH": path})


def sha(team: Team, ref: str) -> str:
    return git(team.bare, "rev-parse", ref).strip()


def test_the_github_workflow_fails_a_pull_request_over_a_held_path(team):
    b = Runner(team.root / "b")
    result = json.loads(ok(b("--json", "ci", "install", "github", check_untouched=False)).stdout)
    workflow = YAML(typ="safe").load(Path(result["path"]).read_text())
    [step] = [s for s in workflow["jobs"]["locks"]["steps"] if "guard --range" in s.get("run", "")]
    assert set(step["env"]) == {"BASE", "HEAD", "BRANCH"}
    where = checkout(team, "runner")
    # the values of github.event.pull_request.base.sha / head.sha / github.head_ref
    proc = run_script(step["run"].splitlines(), where,
                      {"BASE": sha(team, "main"), "HEAD": sha(team, "feat"), "BRANCH": "feat"})
    assert proc.returncode == 1, proc.stderr
    assert "src/auth.py: locked by a1" in proc.stderr
    assert "changed by commit" in proc.stderr and "by Bea <" in proc.stderr
    assert "agent-registry send --to a1" in proc.stderr
    proc = run_script(step["run"].splitlines(), where,
                      {"BASE": sha(team, "main"), "HEAD": sha(team, "free"), "BRANCH": "free"})
    assert proc.returncode == 0, proc.stderr
    assert "none locked by another live session" in proc.stdout


def test_the_gitlab_job_fails_a_merge_request_over_a_held_path(team):
    b = Runner(team.root / "b")
    result = json.loads(ok(b("--json", "ci", "install", "gitlab", check_untouched=False)).stdout)
    assert YAML(typ="safe").load((team.root / "b" / ".gitlab-ci.yml").read_text()) == {
        "include": [{"local": ".gitlab/agent-registry.yml"}]}
    job = YAML(typ="safe").load(Path(result["path"]).read_text())["agent-registry"]
    where = checkout(team, "runner")
    variables = {"CI_MERGE_REQUEST_DIFF_BASE_SHA": sha(team, "main"),
                 "CI_COMMIT_SHA": sha(team, "feat"),
                 "CI_MERGE_REQUEST_SOURCE_BRANCH_NAME": "feat"}
    proc = run_script(job["script"], where, variables)
    assert proc.returncode == 1, proc.stderr
    assert "src/auth.py: locked by a1" in proc.stderr
    # the holder's own branch: a session working on `feat` changes what it holds
    a = Runner(team.root / "a")
    git(a.cwd, "checkout", "-q", "-b", "mine")
    ok(a("register", "m1", "--provider", "Claude"))
    ok(a("lock", "acquire", "docs/free.md", "--session", "m1"))
    variables.update(CI_COMMIT_SHA=sha(team, "free"), CI_MERGE_REQUEST_SOURCE_BRANCH_NAME="mine")
    ok(run_script(job["script"], where, variables))
    variables["CI_MERGE_REQUEST_SOURCE_BRANCH_NAME"] = "free"
    proc = run_script(job["script"], where, variables)
    assert proc.returncode == 1 and "docs/free.md: locked by m1" in proc.stderr


def test_ci_install_keeps_a_workflow_that_is_not_ours(tmp_path):
    team = Team(tmp_path)
    b = team.clone("b")
    theirs = team.root / "b" / ".github" / "workflows" / "agent-registry.yml"
    theirs.parent.mkdir(parents=True)
    theirs.write_text("name: theirs\n")
    proc = b("ci", "install", "github", check_untouched=False)
    assert proc.returncode == 1 and "is not ours" in proc.stderr
    assert theirs.read_text() == "name: theirs\n"
    assert b("ci", "install", "jenkins").returncode == 2


def test_guard_range_refuses_bad_input_in_one_line(tmp_path):
    team = Team(tmp_path)
    b = team.clone("b")
    for args, said in ((["--range", "HEAD"], "expected BASE..HEAD"),
                       (["--range", "nope..HEAD"], "'nope' is not a commit"),
                       (["--branch", "x"], "go with --range")):
        proc = b("guard", *args)
        assert proc.returncode == 2 and said in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1
