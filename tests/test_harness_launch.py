"""The hook launcher (harness/launch.py) started as every installed hook command starts it,
``PYTHON -I -S launch.py``, by real interpreters: the package's dependencies are found
where ``site`` would have found them, no further; and Cursor's shell gate, its second
edit gate, runs through it like the others (issue 35)."""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent_registry.harness.command import LAUNCHER
from test_harness_install import PYTHON, cli, env, install  # noqa: F401 (env: a fixture)

BASE = getattr(sys, "_base_executable", sys.executable)  # the interpreter venvs are made of


def test_the_launcher_script_is_a_few_statements():
    """A script is compiled from its source at every start (only an imported module's
    bytecode is cached), and harness/launch.py starts every hook, before and after each
    tool call: it only puts the package's folder on sys.path and hands over to
    harness/launching.py (compiling what that module holds cost each hook ~0.5 ms,
    issue 35 item 2)."""
    tree = ast.parse(Path(LAUNCHER).read_text(encoding="utf-8"))
    code = [n for n in ast.walk(tree) if isinstance(
        n, (ast.FunctionDef, ast.ClassDef, ast.If, ast.For, ast.While, ast.Try))]
    assert code == [] and len(tree.body) <= 7, ast.dump(tree)[:500]


def usage_error(python: str, cwd: Path) -> subprocess.CompletedProcess:
    """A hook with an unknown event, started as installed: its usage error is click's."""
    return subprocess.run([python, "-I", "-S", LAUNCHER, "harness", "hook", "claude",
                           "no-such-event"], capture_output=True, text=True, timeout=120,
                          cwd=cwd)


def found_click(proc: subprocess.CompletedProcess) -> bool:
    assert "Traceback" not in proc.stderr or "No module named 'click'" in proc.stderr, \
        proc.stderr
    return proc.returncode == 2 and "no-such-event" in proc.stderr


@pytest.fixture(scope="module")
def base_click() -> None:
    """The base interpreter has click in its own site folders (not in any venv)."""
    where = subprocess.run([BASE, "-c", "import click, sys; print(click.__file__)"],
                           capture_output=True, text=True)
    if where.returncode != 0 or Path(where.stdout.strip()).is_relative_to(sys.prefix):
        pytest.skip(f"{BASE} has no click of its own outside a venv")


def test_a_dependency_in_the_base_interpreters_site_folder_is_found(base_click, tmp_path):
    """click only in the base interpreter's site-packages: a venv made with
    --system-site-packages, and the base interpreter itself (a --user or system install),
    find it as ``site`` would (before, the launcher added the venv's folder only, and the
    usage error was a ModuleNotFoundError); a venv made without it does not."""
    shared, alone = tmp_path / "shared", tmp_path / "alone"
    subprocess.run([BASE, "-m", "venv", "--without-pip", "--system-site-packages",
                    str(shared)], check=True)
    subprocess.run([BASE, "-m", "venv", "--without-pip", str(alone)], check=True)
    assert found_click(usage_error(str(shared / "bin" / "python"), tmp_path))
    assert found_click(usage_error(BASE, tmp_path))
    refused = usage_error(str(alone / "bin" / "python"), tmp_path)
    assert refused.returncode != 0 and "No module named 'click'" in refused.stderr


def test_cursors_shell_gate_starts_the_launcher_and_decides(repo, env, tmp_path):
    """Cursor's beforeShellExecution gate, run as installed: the launcher without site;
    a shell command writing a file another session holds is denied, a free one is let
    through, and with the launcher gone the command is blocked with the repair line."""
    install(repo, env, "cursor")
    entry = json.loads((repo / ".cursor/hooks.json").read_text())["hooks"][
        "beforeShellExecution"][-1]
    assert entry["failClosed"] is True
    command = entry["command"]
    assert f"{PYTHON} -I -S {LAUNCHER} harness hook cursor pre-tool-use" in command
    for args in (("register", "s2", "--provider", "Codex"),
                 ("lock", "acquire", "src/auth.py", "--session", "s2")):
        assert cli(repo, env, *args).returncode == 0
    clean = {k: v for k, v in os.environ.items() if k != "AGENT_REGISTRY_ALLOW"}

    def shell(line: str, gate: str = command) -> subprocess.CompletedProcess:
        event = {"conversation_id": "c1", "command": line, "cwd": str(repo),
                 "workspace_roots": [str(repo)], "hook_event_name": "beforeShellExecution"}
        return subprocess.run(["sh", "-c", gate], input=json.dumps(event), cwd=repo,
                              capture_output=True, text=True, env=clean, timeout=120)

    held = shell("echo x > src/auth.py")
    assert held.returncode == 0, held.stderr
    answer = json.loads(held.stdout)
    assert answer["permission"] == "deny" and "s2" in answer["agent_message"]
    free = shell("echo x > src/free.py")
    assert free.returncode == 0 and "deny" not in free.stdout, free.stderr
    gone = str(tmp_path / "old-site" / "agent_registry" / "harness" / "launch.py")
    blocked = shell("echo x > src/free.py", command.replace(LAUNCHER, gone))
    assert blocked.returncode == 2 and blocked.stderr.splitlines() == [
        f"agent-registry: the edit gate could not run ({PYTHON} {gone}, exit 1); "
        "repair: agent-registry harness install cursor, or AGENT_REGISTRY_ALLOW=1"]
