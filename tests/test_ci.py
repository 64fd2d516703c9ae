"""A pull request's check (issue 36, item 5): `agent-registry ci install github|gitlab`
writes a workflow that fetches the registry refs and runs `agent-registry guard --range`.
The test reads the written YAML, takes the commands the workflow runs, and runs them in a
fresh clone of a real remote after real pushes, with the variables the forge would set."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from helpers import CLI, ROOT, Runner, git
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


# -- where the workflow installs agent-registry from -------------------------------------

def install_step(forge: str, workflow: Path) -> tuple[str, dict[str, str]]:
    """The workflow's install of agent-registry: its script and the variables it gets."""
    data = YAML(typ="safe").load(workflow.read_text())
    if forge == "github":
        [step] = [s for s in data["jobs"]["locks"]["steps"]
                  if "AGENT_REGISTRY_SOURCE" in s.get("env", {})]
        return step["run"], dict(step["env"])
    job = data["agent-registry"]
    lines = [line for line in job["script"] if "guard --range" not in line
             and not line.startswith("git fetch")]
    return "\n".join(lines), {k: str(v) for k, v in job["variables"].items()}


def run_install(forge: str, workflow: Path, tmp_path: Path) -> tuple[subprocess.CompletedProcess,
                                                                     list[str] | None]:
    """Run the install step with a `pip` that only records its arguments."""
    script, variables = install_step(forge, workflow)
    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir(exist_ok=True)
    said = tmp_path / "pip-args"
    said.unlink(missing_ok=True)
    (bin_dir / "pip").write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" > '{said}'\n")
    (bin_dir / "pip").chmod(0o755)
    proc = subprocess.run(["sh", "-e", "-c", script], cwd=tmp_path, capture_output=True,
                          text=True, env={**os.environ, **variables,
                                          "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"})
    return proc, said.read_text().splitlines() if said.exists() else None


@pytest.mark.parametrize("forge", ["github", "gitlab"])
def test_the_workflow_installs_from_the_source_named_never_from_an_index_by_name(
        tmp_path, forge):
    """The workflow pip-installed `agent-registry==0.3.0`, which is not on PyPI.  Without
    a source this install can name (here: an editable install from a folder, which no
    runner has), the check refuses until one is set; `--source` sets it, and a second run
    keeps it and says `unchanged` (it said `updated`, rewriting the same bytes)."""
    team = Team(tmp_path)
    b = team.clone("b")
    result = json.loads(ok(b("--json", "ci", "install", forge, check_untouched=False)).stdout)
    workflow = Path(result["path"])
    text = workflow.read_text()
    assert "agent-registry==" not in text and 'pip install "agent-registry' not in text
    assert result["state"] == "written" and result.get("source") is None
    assert f"agent-registry ci install {forge} --source REQUIREMENT" in result["next"]
    refused, pip_ran = run_install(forge, workflow, tmp_path)
    assert refused.returncode == 1 and pip_ran is None, refused.stderr
    assert len(refused.stderr.splitlines()) == 1 and "not on PyPI" in refused.stderr
    assert f"agent-registry ci install {forge} --source REQUIREMENT" in refused.stderr
    again = b("ci", "install", forge, check_untouched=False)
    assert again.returncode == 0 and f"{workflow}: unchanged" in again.stdout
    # a source named: the step installs exactly that, and it stays on later runs
    source = "agent-registry @ git+https://git.example/team/agent-registry@v0.3.0"
    named = json.loads(ok(b("--json", "ci", "install", forge, "--source", source,
                            check_untouched=False)).stdout)
    assert named["state"] == "updated" and named["source"] == source
    assert named["next"] == "" or "--source" not in named["next"]
    done, pip_ran = run_install(forge, workflow, tmp_path)
    assert done.returncode == 0 and pip_ran == ["install", source], done.stderr
    before = workflow.stat().st_mtime_ns, workflow.read_bytes()
    kept = json.loads(ok(b("--json", "ci", "install", forge, check_untouched=False)).stdout)
    assert kept["state"] == "unchanged" and kept["source"] == source
    assert (workflow.stat().st_mtime_ns, workflow.read_bytes()) == before
    bad = b("ci", "install", forge, "--source", "x$HOME", check_untouched=False)
    assert bad.returncode == 2 and len(bad.stderr.splitlines()) == 1
    assert workflow.read_bytes() == before[1]


def test_the_default_source_is_the_git_url_this_copy_was_installed_from(tmp_path):
    """A copy pip installed from a git URL (its direct_url.json names the URL and the
    commit: PEP 610) writes that URL at that commit into the workflow, and names it for a
    missing extra, where it named `agent-registry[mcp]`, a PyPI name.  A copy installed
    from a file of this machine (a wheel, a folder) is no runner's: the source is left
    unset then."""
    from test_wheel import build_wheel
    wheel = build_wheel(tmp_path / "wheel")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    done = subprocess.run([sys.executable, "-m", "pip", "--python", python, "install", "-q",
                           "--no-index", "--no-deps", str(wheel)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          capture_output=True, text=True, check=True).stdout.strip()
    # the dependencies, from the test environment, after the venv's own (a path line: its
    # .pth files, the editable install of agent_registry among them, are not read)
    Path(site, "zz_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    where = subprocess.run([python, "-c", "import agent_registry; print(agent_registry.__file__)"],
                           cwd=tmp_path, capture_output=True, text=True, env=env,
                           check=True).stdout
    assert where.startswith(site), where
    b = Team(tmp_path / "team").clone("b")

    def ci_install(forge: str) -> dict:
        proc = subprocess.run([python, "-m", "agent_registry", "--json", "ci", "install", forge],
                              cwd=b.cwd, capture_output=True, text=True, env=env)
        return json.loads(ok(proc).stdout)

    assert ci_install("github").get("source") is None  # a wheel of this machine
    # what pip records for `pip install git+https://git.example/team/agent-registry@v0.3.0`
    [record] = Path(site).glob("agent_registry-*.dist-info/direct_url.json")
    commit = "0123456789abcdef0123456789abcdef01234567"
    record.write_text(json.dumps({"url": "https://git.example/team/agent-registry",
                                  "vcs_info": {"vcs": "git", "commit_id": commit,
                                               "requested_revision": "v0.3.0"}}))
    url = f"git+https://git.example/team/agent-registry@{commit}"
    assert ci_install("gitlab").get("source") == url
    filled = ci_install("github")  # left unset before: filled in now
    assert filled["source"] == url and filled["state"] == "updated"
    lacking = subprocess.run(
        [python, "-m", "agent_registry", "mcp"], cwd=b.cwd, capture_output=True, text=True,
        stdin=subprocess.DEVNULL, timeout=120,
        env={**env, "PYTHONPATH": str(blocker_folder(tmp_path)), "TEST_BLOCK_IMPORTS": "mcp"})
    assert lacking.returncode == 1, lacking.stderr
    assert f"pip install 'agent-registry[mcp] @ {url}'" in lacking.stderr, lacking.stderr


def blocker_folder(tmp_path: Path) -> Path:
    """A folder whose sitecustomize hides $TEST_BLOCK_IMPORTS (tests/test_uninstall.py)."""
    from test_uninstall import BLOCKER
    folder = tmp_path / "blocker"
    folder.mkdir(exist_ok=True)
    (folder / "sitecustomize.py").write_text(BLOCKER)
    return folder
