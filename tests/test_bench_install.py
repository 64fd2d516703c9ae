"""bench/install.py: the benchmarks measure the package as users install it (issue 35).

A wheel of the checkout in a venv of its own, its dependencies with it, imported from that
venv and not from the checkout; made again only when a file the wheel is built from
changes.  Slow: it builds a wheel and installs it (pip's cache makes it seconds)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import install  # noqa: E402


def copy_sources(to: Path) -> Path:
    for name in install.COPIED:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, to / name, ignore=install.SKIPPED)
        else:
            to.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, to / name)
    return to


def test_the_key_follows_the_packages_files_and_nothing_else(tmp_path):
    """An edit to a module or a template makes a new install; the README (only the
    wheel's description) and compiled bytecode do not."""
    src = copy_sources(tmp_path / "src")
    key = install.source_key(src)
    (src / "README.md").write_text("changed\n")
    (src / "agent_registry" / "__pycache__").mkdir(exist_ok=True)
    (src / "agent_registry" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0")
    assert install.source_key(src) == key
    with open(src / "agent_registry" / "core" / "locks.py", "a") as module:
        module.write("\n")
    edited = install.source_key(src)
    assert edited != key
    (src / "templates" / "new.md").write_text("a template\n")
    assert install.source_key(src) not in (key, edited)


@pytest.mark.slow
def test_the_plain_install_imports_the_wheel_and_runs_and_is_reused(tmp_path, monkeypatch):
    """The venv's console script runs from site-packages with its dependencies, never the
    checkout; asked again with the same sources, the same venv comes back untouched."""
    monkeypatch.setattr(install, "HOME", tmp_path / "installs")
    tool = install.plain_install(quiet=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    where = subprocess.run([tool.python, "-c", "import agent_registry, click, ruamel.yaml, "
                            "whoosh; print(agent_registry.__file__)"], cwd=tmp_path, env=env,
                           capture_output=True, text=True)
    assert where.returncode == 0, where.stderr
    assert "site-packages" in where.stdout and str(ROOT) not in where.stdout, where.stdout
    version = subprocess.run([tool.cli, "--version"], cwd=tmp_path, env=env,
                             capture_output=True, text=True)
    assert version.returncode == 0 and "0." in version.stdout, version.stderr
    stamp = Path(tool.bindir).parent / ".complete"
    before = stamp.stat().st_mtime_ns
    again = install.plain_install(quiet=True)
    assert again == tool and stamp.stat().st_mtime_ns == before
