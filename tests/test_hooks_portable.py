"""The git hooks are POSIX sh: they run under dash, busybox sh and bash --posix (as Git
for Windows' MSYS bash runs them), with an interpreter whose path has spaces and shell
metacharacters, through real `git commit`, `git push` and `git checkout`."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from helpers import ROOT, git, make_repo
from test_guard import agents, commit, edit, hold  # noqa: F401  (fixture)

from agent_registry.enforce.hooks import HOOK_NAMES, hook_text

# each shell as a #! line names it (the installed hooks' first line is swapped for it)
SHELLS = {"dash": ("dash",), "busybox": ("busybox", "sh"), "bash --posix": ("bash", "--posix")}


def shells() -> dict[str, list[str]]:
    """The shells here, by name, as #! lines; dash and bash at least (a Debian base)."""
    found = {name: [shutil.which(words[0]), *words[1:]] for name, words in SHELLS.items()
             if shutil.which(words[0])}
    assert "dash" in found and "bash --posix" in found, found
    return found


@pytest.fixture(scope="module")
def spaced_python(tmp_path_factory) -> str:
    """A venv interpreter under a folder named with a space, a quote, `&`, `(`, `$`,
    that imports this checkout's agent_registry and its dependencies."""
    folder = tmp_path_factory.mktemp("hooks") / "my venv's dir & (x) $HOME"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    python = folder / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          capture_output=True, text=True, check=True).stdout.strip()
    ours = sysconfig.get_path("purelib")  # the test interpreter's, with the editable install
    Path(site, "zz_agent_registry_test.pth").write_text(
        f"import site; site.addsitedir({ours!r})\n")
    return str(python)


def run_by(hooks: Path, shell: list[str], names=HOOK_NAMES) -> None:
    """The hooks *names* in *hooks* run by *shell*: their #! line swapped."""
    for name in names:
        text = (hooks / name).read_text(encoding="utf-8")
        (hooks / name).write_text(f"#!{' '.join(shell)}\n" + text.split("\n", 1)[1],
                                  encoding="utf-8")


def test_the_shipped_hooks_parse_as_posix_sh_with_lf_endings():
    for name in HOOK_NAMES:
        data = (ROOT / "hooks" / name).read_bytes()
        assert data.startswith(b"#!/bin/sh\n") and b"\r" not in data, name
        for shell, line in shells().items():
            proc = subprocess.run([*line, "-n", str(ROOT / "hooks" / name)],
                                  capture_output=True, text=True)
            assert proc.returncode == 0, (name, shell, proc.stderr)
    checker = shutil.which("checkbashisms")
    if checker:  # Debian's devscripts: not required
        proc = subprocess.run([checker, "-p", *[str(ROOT / "hooks" / n) for n in HOOK_NAMES]],
                              capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout + proc.stderr


def test_commit_push_and_checkout_through_each_shell(tmp_path, agents, spaced_python):
    repo = make_repo(tmp_path / "repo")
    proc = subprocess.run([spaced_python, "-m", "agent_registry", "init", "--hooks"], cwd=repo,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    hooks = repo / ".git" / "hooks"
    assert (hooks / "pre-commit").read_text(encoding="utf-8").startswith("#!/bin/sh\n")
    status = json.loads(subprocess.run([spaced_python, "-m", "agent_registry", "--json",
                                        "hooks", "status"], cwd=repo, capture_output=True,
                                       text=True).stdout)
    assert {h["state"] for h in status["hooks"]} == {"installed"}, status
    assert status["mode"] == "enforcing"
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(repo, "remote", "add", "origin", str(remote))
    seen = tmp_path / "chained-saw"
    chained = hooks / "pre-push.agent-registry-chained"
    chained.write_text(f"#!/bin/sh\ncat > '{seen}'\n")
    chained.chmod(0o755)
    branch = git(repo, "branch", "--show-current").strip()

    def push() -> subprocess.CompletedProcess:
        return subprocess.run(["git", "push", "-q", "origin", branch], cwd=repo,
                              capture_output=True, text=True)

    held = False
    for n, (shell, line) in enumerate(shells().items()):
        run_by(hooks, line)
        # the push guard reads the refs on stdin and hands the chained hook the same lines
        edit(repo, "README.md", f"{shell}\n")
        assert commit(repo, "-m", f"free path, {shell}").returncode == 0, shell
        pushed = push()
        assert pushed.returncode == 0, (shell, pushed.stderr)
        lines = seen.read_text().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"refs/heads/{branch} "), (shell, lines)
        # a push with nothing to send: git gives no line, and neither does the hook
        assert push().returncode == 0 and seen.read_text() == "", shell
        if not held:
            hold(repo, "kimi-1", ["src/auth.py"], agents())
            held = True
        # a commit of a held path is refused by the guard the spaced interpreter runs
        edit(repo, "src/auth.py", f"{shell}\n")
        refused = commit(repo, "-m", "touch auth")
        assert refused.returncode == 1 and "kimi-1" in refused.stderr, (shell, refused.stderr)
        # and so is its push, made past the commit hook
        assert commit(repo, "--no-verify", "-m", f"sneaked, {shell}").returncode == 0
        refused = push()
        assert refused.returncode == 1 and "kimi-1" in refused.stderr, (shell, refused.stderr)
        git(repo, "reset", "-q", "--hard", "HEAD~1")
        # post-checkout starts its background sync and returns at once, exit 0
        switched = subprocess.run(["git", "checkout", "-q", "-b", f"other-{n}"], cwd=repo,
                                  capture_output=True, text=True)
        assert switched.returncode == 0, (shell, switched.stderr)
        branch = f"other-{n}"


def test_a_gone_interpreter_refuses_and_says_so(tmp_path):
    repo = make_repo(tmp_path / "repo")
    gone = str(tmp_path / "gone venv & (y)" / "bin" / "python")
    hooks = repo / ".git" / "hooks"
    hooks.mkdir(exist_ok=True)
    (hooks / "pre-commit").write_text(hook_text("pre-commit", python=gone))
    (hooks / "pre-commit").chmod(0o755)
    # no agent-registry-guard on PATH either: nothing can check the commit, so it is
    # refused in one line saying why (it passed before)
    env = {"PATH": os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep)
                                   if not shutil.which("agent-registry-guard", path=p))}
    for shell, line in shells().items():
        run_by(hooks, line, names=("pre-commit",))
        edit(repo, "README.md", f"{shell}\n")
        proc = commit(repo, "-m", "unchecked", env=env)
        assert proc.returncode == 1, (shell, proc.stderr)
        assert len(proc.stderr.splitlines()) == 1, (shell, proc.stderr)
        assert f"commit refused: {gone}, the Python these hooks were installed with, is " \
            "gone" in proc.stderr, shell


def test_a_windows_interpreter_is_written_with_forward_slashes():
    python = r"C:\Users\Ann O'Neil\venv & co\Scripts\python.exe"
    text = hook_text("pre-commit", python=python, windows=True)
    assignment = next(l for l in text.splitlines() if l.startswith("AGENT_REGISTRY_PYTHON="))
    echoed = subprocess.run(["sh", "-c", assignment + '\nprintf %s "$AGENT_REGISTRY_PYTHON"'],
                            capture_output=True, text=True, check=True).stdout
    assert echoed == "C:/Users/Ann O'Neil/venv & co/Scripts/python.exe"
    # POSIX paths keep their backslashes (a legal file-name character there)
    assert "a\\b" in hook_text("pre-commit", python="/opt/a\\b/python", windows=False)
