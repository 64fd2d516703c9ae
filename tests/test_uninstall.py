"""A clean exit (issue 24, item 4): `agent-registry uninstall` takes the hooks and harness
integrations away (and with --branches the registry's branches, here and on the remote,
after a confirmation); hooks left by a package that is gone refuse a commit in one line
naming the ways out; a command whose extra is missing says which to install, in one line;
`doctor` checks that what is installed can import what it needs.  Real repositories,
real git commits and pushes, the real CLI."""
from __future__ import annotations

import json
import os
import re
import pty
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from helpers import CLI, ROOT, git

BLOCKER = '''
import importlib.util, os, sys
BLOCKED = {n for n in os.environ.get("TEST_BLOCK_IMPORTS", "").split(",") if n}
class Hidden:  # as if those distributions were not installed
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
if BLOCKED:
    sys.meta_path.insert(0, Hidden())
    _find_spec = importlib.util.find_spec
    importlib.util.find_spec = lambda name, package=None: None if \\
        name.split(".")[0] in BLOCKED else _find_spec(name, package)
'''


def no_pythonpath() -> dict:
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def registry_refs(repo: Path) -> list[str]:
    return sorted(r for r in git(repo, "for-each-ref", "--format=%(refname)").split()
                  if "agent-registry" in r)


def remote_heads(repo: Path) -> list[str]:
    return sorted(line.split("\t")[1] for line in
                  git(repo, "ls-remote", "--heads", "origin").splitlines())


@pytest.fixture
def blocker(tmp_path) -> str:
    """A PYTHONPATH whose sitecustomize hides $TEST_BLOCK_IMPORTS (before any PYTHONPATH
    already set)."""
    folder = tmp_path / "blocker"
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(BLOCKER)
    return os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")]))


# -- uninstall ------------------------------------------------------------------------------

def test_uninstall_takes_hooks_and_harnesses_away_and_keeps_the_branches(repo, run):
    theirs = repo / ".git" / "hooks" / "pre-commit"
    theirs.write_text("#!/bin/sh\necho the team lint\n")
    theirs.chmod(0o755)
    agents_md = repo / "AGENTS.md"
    agents_md.write_text("# Our agents\n")
    git(repo, "add", "AGENTS.md")
    git(repo, "commit", "-q", "-m", "agents")
    assert run("init", "--hooks").returncode == 0
    assert run("harness", "install", "claude", "--mcp", check_untouched=False).returncode == 0
    assert run("harness", "install", "codex", check_untouched=False).returncode == 0
    assert (repo / ".mcp.json").exists() and (repo / ".claude").exists()
    before = registry_refs(repo)
    proc = run("--json", "uninstall", check_untouched=False)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert {h["hook"]: h["state"] for h in result["hooks"]["hooks"]}["pre-commit"] == \
        "removed, chained hook restored"
    assert sorted(h["harness"] for h in result["harnesses"]["harnesses"]) == ["claude", "codex"]
    assert theirs.read_text() == "#!/bin/sh\necho the team lint\n"
    hooks = sorted(p.name for p in (repo / ".git" / "hooks").iterdir()
                   if not p.name.endswith(".sample"))
    assert hooks == ["pre-commit"]
    assert not (repo / ".mcp.json").exists() and not (repo / ".claude").exists()
    assert not (repo / ".codex").exists() and agents_md.read_text() == "# Our agents\n"
    assert git(repo, "status", "--porcelain") == ""
    assert registry_refs(repo) == before and "refs/heads/agent-registry" in before
    (repo / "README.md").write_text("after\n")
    committed = subprocess.run(["git", "commit", "-qam", "after"], cwd=repo,
                               capture_output=True, text=True)
    assert committed.returncode == 0 and "the team lint" in committed.stderr
    again = run("uninstall", check_untouched=False)
    assert again.returncode == 0 and "git hooks: none installed" in again.stdout
    assert "harnesses: none installed" in again.stdout


def sharded_clone_with_everything(tmp_path) -> tuple[Path, Path]:
    """A clone of a bare remote holding every kind of registry ref the layout makes: the
    registry branch, lock shards, a clone ref (with a message: layout format 3 has no
    messages branch), intent refs (of the registry branch and of a shard); and a branch
    of the project whose name only starts like ours."""
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    repo = tmp_path / "a"
    git(tmp_path, "clone", "-q", str(remote), str(repo))
    (repo / "README.md").write_text("x\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "initial")
    git(repo, "push", "-q", "origin", "HEAD")
    from helpers import Runner
    run = Runner(repo)
    assert run("init", "--hooks").returncode == 0
    one = run("register", "--provider", "Kimi").stdout.strip()
    two = run("register", "--provider", "Claude").stdout.strip()
    assert run("send", "--from", one, "--to", two, "hello").returncode == 0
    assert run("lock", "acquire", "README.md", one).returncode == 0  # its shard
    assert run("context", "log", one, "a line").returncode == 0  # the clone ref
    assert run("sync").returncode == 0
    tip = git(repo, "rev-parse", "HEAD").strip()
    # refs no command makes here at once: an intent (published after three lost
    # pushes) of the registry branch and of a shard
    made = ("agent-registry-intents/clone-1", "agent-registry-shards/00-intents/clone-1",
            "agent-registry-notes")
    for ref in made:
        git(repo, "update-ref", f"refs/heads/{ref}", tip)
    git(repo, "push", "-q", "origin", *made)
    return repo, remote


def test_uninstall_branches_here_and_on_the_remote(tmp_path):
    from helpers import Runner
    repo, remote = sharded_clone_with_everything(tmp_path)
    run = Runner(repo)
    refs = registry_refs(repo)
    kinds = ["refs/heads/agent-registry", "refs/heads/agent-registry-shards/00",
             "refs/heads/agent-registry-clones/",
             "refs/heads/agent-registry-intents/clone-1",
             "refs/heads/agent-registry-shards/00-intents/clone-1",
             "refs/remotes/origin/agent-registry-shards/01",
             "refs/remotes/origin/agent-registry-clones/"]
    assert all(any(r.startswith(k) for r in refs) for k in kinds), refs
    on_remote = remote_heads(repo)
    assert len(on_remote) >= 21  # main, 16 shards, a clone ref, 2 intents, notes
    # no terminal, no --yes: one line, exit 2, nothing changed (the hooks stay too)
    refused = run("uninstall", "--branches", "--remote", input="y\n", check_untouched=False)
    assert refused.returncode == 2 and refused.stdout == ""
    assert len(refused.stderr.splitlines()) == 1 and "--yes" in refused.stderr
    assert registry_refs(repo) == refs and remote_heads(repo) == on_remote
    assert (repo / ".git" / "hooks" / "pre-commit").exists()
    assert run("uninstall", "--remote", check_untouched=False).returncode == 2
    state = repo / ".git" / "agent-registry"
    assert state.is_dir()
    proc = run("--json", "uninstall", "--branches", "--remote", "--yes", check_untouched=False)
    assert proc.returncode == 0, proc.stderr
    done = json.loads(proc.stdout)["branches"]
    assert sorted(done["local"]) == [r for r in refs if r != "refs/heads/agent-registry-notes"
                                     and r != "refs/remotes/origin/agent-registry-notes"]
    assert done["remote_name"] == "origin" and done["state"] == str(state)
    assert registry_refs(repo) == ["refs/heads/agent-registry-notes",
                                   "refs/remotes/origin/agent-registry-notes"]
    assert remote_heads(repo) == ["refs/heads/agent-registry-notes", "refs/heads/main"]
    assert not state.exists()
    assert not (repo / ".git" / "hooks" / "pre-commit").exists()
    assert git(repo, "status", "--porcelain") == "" and \
        git(repo, "rev-parse", "--abbrev-ref", "HEAD").strip() == "main"


def on_a_terminal(repo: Path, answer: str, *args: str) -> subprocess.CompletedProcess:
    """The CLI with a terminal as stdin (a pty), *answer* typed into it."""
    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen([CLI, *args], cwd=repo, stdin=follower, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        os.write(leader, answer.encode())
        out, err = proc.communicate(timeout=120)
    finally:
        os.close(leader)
        os.close(follower)
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


def test_uninstall_branches_asks_on_a_terminal(repo, run):
    assert run("init", "--hooks").returncode == 0
    assert run("register", "--provider", "Kimi").returncode == 0
    refs = registry_refs(repo)
    said_no = on_a_terminal(repo, "n\n", "uninstall", "--branches")
    # the registry branch and its 16 lock shards
    assert len(refs) == 17 and "refs/heads/agent-registry-shards/15" in refs, refs
    assert said_no.returncode == 1 and "Delete 17 ref(s) in this clone" in said_no.stderr
    assert all(f"  {ref}\n" in said_no.stderr for ref in refs), said_no.stderr
    assert said_no.stderr.strip().endswith("agent-registry: nothing changed")
    assert registry_refs(repo) == refs and (repo / ".git" / "hooks" / "pre-commit").exists()
    said_yes = on_a_terminal(repo, "y\n", "uninstall", "--branches")
    assert said_yes.returncode == 0, said_yes.stderr
    assert registry_refs(repo) == [] and not (repo / ".git" / "hooks" / "pre-commit").exists()


# -- hooks of a package that is gone -----------------------------------------------------------

def test_hooks_of_a_package_that_is_gone_refuse_in_one_line(repo, run, tmp_path):
    """Hooks installed by an interpreter that can no longer import agent_registry (as
    after `pip uninstall agent-registry`): a real commit, merge and push."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    installed = subprocess.run(
        [str(python), "-m", "agent_registry", "hooks", "install"], cwd=repo,
        capture_output=True, text=True,
        env={**no_pythonpath(),
             "PYTHONPATH": os.pathsep.join([str(ROOT), sysconfig.get_paths()["purelib"]])})
    assert installed.returncode == 0, installed.stderr
    hook = repo / ".git" / "hooks" / "pre-commit"
    assert f"AGENT_REGISTRY_PYTHON='{python}'" in hook.read_text()
    (repo / "README.md").write_text("changed\n")
    git(repo, "add", "README.md")
    refused = subprocess.run(["git", "commit", "-q", "-m", "x"], cwd=repo, capture_output=True,
                             text=True, env=no_pythonpath())
    assert refused.returncode == 1
    assert len(refused.stderr.splitlines()) == 1, refused.stderr
    line = refused.stderr
    assert line.startswith(f"agent-registry: commit refused: {python} cannot import "
                           "agent_registry (No module named 'agent_registry')")
    # reinstalled as README installs it, from a clone: the name is not on PyPI
    for way_out in (f"{python} -m pip install CLONE; it is not on PyPI",
                    "agent-registry hooks install", "agent-registry hooks uninstall",
                    "delete .git/hooks/pre-commit", "AGENT_REGISTRY_ALLOW=1 git commit",
                    "git commit --no-verify"):
        assert way_out in line, way_out
    assert "pip install agent-registry" not in line
    assert "Traceback" not in line and "module specification" not in line
    allowed = subprocess.run(["git", "commit", "-q", "-m", "x"], cwd=repo, capture_output=True,
                             text=True, env={**no_pythonpath(), "AGENT_REGISTRY_ALLOW": "1"})
    assert allowed.returncode == 0 and len(allowed.stderr.splitlines()) == 1
    assert "commit allowed unchecked" in allowed.stderr
    # a push runs the pre-push hook: refused the same way
    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    git(repo, "remote", "add", "origin", str(bare))
    pushed = subprocess.run(["git", "push", "-q", "origin", "HEAD"], cwd=repo,
                            capture_output=True, text=True, env=no_pythonpath())
    assert pushed.returncode != 0 and "push refused" in pushed.stderr
    assert "AGENT_REGISTRY_ALLOW=1 git push" in pushed.stderr and "Traceback" not in pushed.stderr
    # doctor, from a working install, names it; hooks install (its fix) repairs it.  Its
    # probe runs that Python as git would, with our environment: a PYTHONPATH (the tests
    # run against another checkout) would let it import the package, so not then
    if os.environ.get("PYTHONPATH"):
        return
    checked = json.loads(run("--json", "doctor").stdout)
    hooks = next(c for c in checked["checks"] if c["name"] == "hooks")
    assert hooks["status"] == "fail" and f"{python} cannot import agent_registry" in \
        hooks["verdict"] and hooks["fix"] == "agent-registry hooks install"



def without_guard_on_path() -> dict:
    """Our environment with no agent-registry-guard on PATH (the hooks' fallback)."""
    import shutil
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep)
                           if not shutil.which("agent-registry-guard", path=p))
    return {**no_pythonpath(), "PATH": path}


def test_hooks_whose_python_is_gone_refuse_every_commit_and_push(repo, run, tmp_path):
    """The venv that installed the hooks deleted (as `pipx uninstall` or `rm -rf venv`
    does): the guarding hooks refuse in one line, the chained hooks still run, the
    post-checkout hook stays quiet and git's checkout succeeds; `hooks status` and
    `doctor` from a working install say so, and `hooks install` there repairs it.
    Before, the commit went through with "commit not checked"."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    ran = tmp_path / "chained-ran"
    for name in ("pre-commit", "post-checkout"):  # a team's own hooks, chained by ours
        theirs = repo / ".git" / "hooks" / name
        theirs.write_text(f"#!/bin/sh\necho {name} >> '{ran}'\n")
        theirs.chmod(0o755)
    source = os.pathsep.join([str(ROOT), sysconfig.get_paths()["purelib"]])
    for args in (["init", "--hooks"], ["register", "kimi-1", "--provider", "Kimi"],
                 ["lock", "acquire", "src/auth.py", "--session", "kimi-1"]):
        done = subprocess.run([str(python), "-m", "agent_registry", *args], cwd=repo,
                              capture_output=True, text=True,
                              env={**no_pythonpath(), "PYTHONPATH": source})
        assert done.returncode == 0, (args, done.stderr)
    assert f"AGENT_REGISTRY_PYTHON='{python}'" in (repo / ".git/hooks/pre-commit").read_text()
    import shutil
    shutil.rmtree(venv)
    env = without_guard_on_path()
    before = git(repo, "rev-parse", "HEAD")
    for path in ("src/auth.py", "README.md"):  # held or not: nothing can tell, so refused
        (repo / path).write_text("changed\n")
        git(repo, "add", path)
        ran.unlink(missing_ok=True)
        refused = subprocess.run(["git", "commit", "-q", "-m", "x"], cwd=repo,
                                 capture_output=True, text=True, env=env)
        assert refused.returncode == 1, refused.stderr
        assert git(repo, "rev-parse", "HEAD") == before
        assert ran.read_text() == "pre-commit\n"  # the team's hook ran first, as before
        [line] = refused.stderr.splitlines()
        assert line.startswith(f"agent-registry: commit refused: {python}, the Python these "
                               "hooks were installed with, is gone"), line
        for way_out in ("agent-registry hooks install", "agent-registry hooks uninstall",
                        "delete .git/hooks/pre-commit", "AGENT_REGISTRY_ALLOW=1 git commit",
                        "git commit --no-verify"):
            assert way_out in line, way_out
    # a commit made past the hook is refused at its push, by the pre-push hook
    assert subprocess.run(["git", "commit", "-q", "--no-verify", "-m", "past it"], cwd=repo,
                          env=env).returncode == 0
    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    git(repo, "remote", "add", "origin", str(bare))
    pushed = subprocess.run(["git", "push", "-q", "origin", "HEAD:refs/heads/main"], cwd=repo,
                            capture_output=True, text=True, env=env)
    assert pushed.returncode == 1 and "agent-registry: push refused: " in pushed.stderr
    assert "AGENT_REGISTRY_ALLOW=1 git push" in pushed.stderr
    assert git(bare, "for-each-ref") == ""
    # the post-checkout hook only syncs: quiet, git's exit code is the chained hook's
    ran.unlink()
    switched = subprocess.run(["git", "checkout", "-q", "-b", "other"], cwd=repo,
                              capture_output=True, text=True, env=env)
    assert switched.returncode == 0 and switched.stderr == "", switched.stderr
    assert ran.read_text() == "post-checkout\n"
    # from a working install: the hooks are installed and their Python is gone
    status = json.loads(run("--json", "hooks", "status", env=env).stdout)
    assert {h["state"] for h in status["hooks"]} == {
        f"broken (installed, but its Python {python} is gone: run hooks install)"}
    assert status["mode"].startswith("refusing: the pre-commit hook is installed but its "
                                     f"Python {python} is gone"), status["mode"]
    checked = json.loads(run("--json", "doctor", env=env).stdout)
    hooks = next(c for c in checked["checks"] if c["name"] == "hooks")
    assert hooks["status"] == "fail" and "pointing at a Python that is gone" in \
        hooks["verdict"] and hooks["fix"] == "agent-registry hooks install"
    assert run("hooks", "install").returncode == 0
    git(repo, "reset", "-q", "--hard", before.strip())
    (repo / "README.md").write_text("fine\n")
    git(repo, "add", "README.md")
    assert subprocess.run(["git", "commit", "-q", "-m", "checked"], cwd=repo,
                          env=env).returncode == 0


# -- missing extras -----------------------------------------------------------------------------

@pytest.mark.parametrize("blocked,args,extra", [
    ("mcp", ["mcp"], "mcp"),
    ("anyio", ["mcp"], "mcp"),  # the MCP SDK's own dependency: a traceback before
    ("pydantic", ["mcp"], "mcp"),
    ("uvicorn", ["dashboard", "--port", "0"], "web"),
    ("fastapi", ["dashboard", "--port", "0"], "web"),
    ("apprise", ["watch", "--once"], "notify"),
], ids=lambda v: "-".join(v) if isinstance(v, list) else v)
def test_a_missing_extra_is_one_line_naming_it(repo, run, blocker, blocked, args, extra):
    assert run("register", "--provider", "Kimi").returncode == 0
    env = {"PYTHONPATH": blocker, "TEST_BLOCK_IMPORTS": blocked,
           "AGENT_REGISTRY_NOTIFY_URLS": "json://127.0.0.1:9"}
    proc = subprocess.run([CLI, *args], cwd=repo, capture_output=True, text=True,
                          env={**os.environ, **env}, stdin=subprocess.DEVNULL, timeout=120)
    assert proc.returncode == 1 and proc.stdout == ""
    assert len(proc.stderr.splitlines()) == 1, proc.stderr
    assert f"needs the {extra} extra: pip install '{ROOT}[{extra}]' ({blocked} is " \
        "not installed)" in proc.stderr
    as_json = subprocess.run([CLI, "--json", *args], cwd=repo, capture_output=True, text=True,
                             env={**os.environ, **env}, stdin=subprocess.DEVNULL, timeout=120)
    error = json.loads(as_json.stdout)["error"]
    assert error["extra"] == extra and error["missing"] == [blocked]


def test_doctor_checks_the_mcp_entries_have_the_mcp_extra(repo, run, blocker):
    assert run("init").returncode == 0
    assert run("harness", "install", "claude", "--mcp", check_untouched=False).returncode == 0
    healthy = json.loads(run("--json", "doctor").stdout)
    extras = next(c for c in healthy["checks"] if c["name"] == "extras")
    assert extras["status"] == "ok" and "mcp" in extras["verdict"]
    env = {"PYTHONPATH": blocker, "TEST_BLOCK_IMPORTS": "mcp"}
    lacking = json.loads(run("--json", "doctor", env=env).stdout)
    extras = next(c for c in lacking["checks"] if c["name"] == "extras")
    assert extras["status"] == "fail" and not lacking["healthy"]
    # Claude Code's .mcp.json, which Copilot CLI reads too (harness/mcp.py)
    assert re.search(r"the MCP entries \(claude(, copilot)?\)", extras["verdict"]), extras
    assert f"lacks the mcp extra (mcp not installed: pip install '{ROOT}[mcp]')" in \
        extras["verdict"]


def test_harness_install_mcp_says_when_the_server_it_writes_cannot_start(repo, run, blocker):
    assert run("init").returncode == 0
    fine = run("harness", "install", "claude", "--mcp", check_untouched=False)
    assert fine.returncode == 0 and "mcp extra" not in fine.stderr
    env = {"PYTHONPATH": blocker, "TEST_BLOCK_IMPORTS": "mcp"}
    lacking = run("harness", "install", "gemini", "--mcp", env=env, check_untouched=False)
    assert lacking.returncode == 0, lacking.stderr  # written: the extra can come after
    assert "the MCP entries written will not start" in lacking.stderr
    assert f"pip install '{ROOT}[mcp]'" in lacking.stderr
