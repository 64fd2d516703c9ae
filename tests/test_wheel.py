"""The package as a user installs it: a wheel built from this checkout, installed into a
fresh virtual environment (no checkout on its path), must carry the hooks, templates and
dashboard files and work: a claim, a commit refused by the installed pre-commit hook,
``dashboard --help``.  Its metadata names the extras the README installs (``web`` and its
alias ``dashboard``, ``mcp``, ``notify``, ``llm``, ``all``) and the three platforms.

Slow (``make test-slow``): it builds a wheel and installs it with its dependencies."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from helpers import git, make_repo

pytestmark = pytest.mark.slow

# read before the hermetic seal moves HOME: pip's cache makes the installs quick
PIP_CACHE = os.environ.get("PIP_CACHE_DIR") or os.path.expanduser("~/.cache/pip")
SKIP = shutil.ignore_patterns(".git", ".venv*", "build", "dist", "*.egg-info", "__pycache__",
                              "node_modules", ".pytest_cache")


def source_root() -> Path:
    import agent_registry
    return Path(agent_registry.__file__).resolve().parents[1]


def build_wheel(tmp: Path) -> Path:
    """``python -m build --wheel`` (else ``pip wheel --no-deps``) of a copy of the
    checkout, so the build leaves nothing in the tree other tests read."""
    src = tmp / "src"
    shutil.copytree(source_root(), src, ignore=SKIP, symlinks=True)
    out = tmp / "dist"
    env = {**os.environ, "PIP_CACHE_DIR": PIP_CACHE}
    try:
        import build  # noqa: F401
        cmd = [sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(src)]
    except ImportError:
        cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(out), str(src)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # what every `pip install .` prints otherwise, and a build that fails once setuptools
    # drops what it deprecates (a license table: "by 2027-Feb-18")
    said = done.stdout + done.stderr
    assert "BuildBackendWarning" not in said and "SetuptoolsDeprecationWarning" not in said, \
        said[-3000:]
    wheels = list(out.glob("agent_registry-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    return build_wheel(tmp_path_factory.mktemp("wheel"))


def test_wheel_carries_the_shipped_files_and_metadata(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    root = source_root()
    for folder, inside in (("hooks", "agent_registry/hooks"),
                           ("templates", "agent_registry/templates"),
                           ("agent_registry/dashboard/static", "agent_registry/dashboard/static")):
        for path in (root / folder).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts:
                assert f"{inside}/{path.relative_to(root / folder).as_posix()}" in names
    meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
    text = zipfile.ZipFile(wheel).read(meta).decode()
    extras = {line.split(":", 1)[1].strip() for line in text.splitlines()
              if line.startswith("Provides-Extra:")}
    assert {"web", "dashboard", "mcp", "notify", "llm", "all"} <= extras
    for system in ("Operating System :: POSIX :: Linux", "Operating System :: MacOS",
                   "Operating System :: Microsoft :: Windows"):
        assert f"Classifier: {system}" in text
    # the alias brings what web brings, all brings every runtime extra
    requires = [line.split(":", 1)[1].strip() for line in text.splitlines()
                if line.startswith("Requires-Dist:")]
    def of(extra):
        return {r.split(";")[0].strip().split(">")[0].split("<")[0].split("=")[0]
                for r in requires if f'extra == "{extra}"' in r}
    assert of("dashboard") == of("web") and of("web")
    assert of("all") == of("web") | of("mcp") | of("notify") | of("llm")


def test_wheel_in_a_fresh_venv_claims_guards_and_serves_help(wheel, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    bindir = venv / ("Scripts" if os.name == "nt" else "bin")
    env = {**os.environ, "PIP_CACHE_DIR": PIP_CACHE,
           "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"}
    env.pop("PYTHONPATH", None)  # nothing of the checkout: only the installed wheel
    done = subprocess.run([str(bindir / "python"), "-m", "pip", "install", "-q", str(wheel)],
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    repo = make_repo(tmp_path / "repo")

    def ar(*args, check=True, extra=None):
        result = subprocess.run([str(bindir / "agent-registry"), *args], cwd=repo,
                                env={**env, **(extra or {})}, capture_output=True,
                                text=True, timeout=120)
        if check:
            assert result.returncode == 0, (args, result.stdout, result.stderr)
        return result

    where = subprocess.run([str(bindir / "python"), "-c",
                            "import agent_registry; print(agent_registry.__file__)"],
                           cwd=tmp_path, env=env, capture_output=True, text=True)
    assert Path(where.stdout.strip()).resolve().is_relative_to(venv.resolve())
    ar("init")
    sid = ar("register", "--provider", "Kimi", "--working-on", "auth").stdout.strip()
    assert ar("lock", "acquire", "src/auth.py", "--session", sid).stdout.strip() == \
        "acquired: src/auth.py"
    assert "registry.md" in git(repo, "ls-tree", "--name-only", "agent-registry")  # templates
    installed = ar("hooks", "install").stdout
    assert "pre-commit" in installed or "hooks" in installed
    hook = (repo / ".git" / "hooks" / "pre-commit").read_text()
    assert str(bindir / "python") in hook  # the hook runs the venv's Python
    # another session commits the held file: the installed hook refuses it
    (repo / "src" / "auth.py").write_text("auth = 2\n")
    git(repo, "add", "src/auth.py")
    commit_env = {k: v for k, v in env.items() if not k.startswith("AGENT_REGISTRY_")}
    refused = subprocess.run(["git", "commit", "-q", "-m", "edit auth"], cwd=repo,
                             env={**commit_env, "AGENT_REGISTRY_SESSION": "codex-1-aaaa"},
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode != 0, refused.stdout + refused.stderr
    assert sid in refused.stderr and "src/auth.py" in refused.stderr
    assert git(repo, "rev-list", "--count", "HEAD").strip() == "1"
    # the holder may commit it
    ok = subprocess.run(["git", "commit", "-q", "-m", "edit auth"], cwd=repo,
                        env={**commit_env, "AGENT_REGISTRY_SESSION": sid},
                        capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    helped = ar("dashboard", "--help").stdout
    assert "--port" in helped
    # the harness hooks start the venv's interpreter without site (-I -S) and the wheel's
    # launcher: the installed gate runs from the settings file as Claude Code runs it
    import json
    ar("harness", "install", "claude")
    hooks = json.loads((repo / ".claude" / "settings.json").read_text())["hooks"]
    gate = hooks["PreToolUse"][0]["hooks"][0]["command"]
    assert f"{bindir / 'python'} -I -S {venv}" in gate and "harness/launch.py" in gate
    event = {"session_id": "codex-native", "cwd": str(repo), "tool_name": "Write",
             "hook_event_name": "PreToolUse"}
    for path, denied in (("src/auth.py", True), ("src/free.py", False)):
        proc = subprocess.run(["sh", "-c", gate], cwd=repo, env=commit_env, text=True,
                              input=json.dumps({**event, "tool_input": {"file_path": path}}),
                              capture_output=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert ('"deny"' in proc.stdout and sid in proc.stdout) == denied, proc.stdout
    assert json.loads(ar("--json", "harness", "status").stdout)["harnesses"][0]["hooks"] \
        == "current"
