"""The hook launcher (harness/launch.py) started as every installed hook command starts it,
``PYTHON -I -S launch.py``, by real interpreters: the package's dependencies are found
where ``site`` would have found them, no further (issue 35)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from agent_registry.harness.command import LAUNCHER

BASE = getattr(sys, "_base_executable", sys.executable)  # the interpreter venvs are made of


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

