"""`make demo`'s light install (demo/install.py): the dependencies by pip, the checkout
linked under the name setuptools' compat editable install gives it (so a later `pip
install -e .` replaces it), console scripts that run from a venv whose path has spaces."""
from __future__ import annotations

import subprocess
import sys

import pytest

from helpers import ROOT


@pytest.mark.slow  # pip resolves and installs click, ruamel.yaml and Whoosh: ~10 s
def test_the_demo_install_links_the_checkout_into_a_fresh_venv(tmp_path):
    venv = tmp_path / "a venv, with spaces"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    proc = subprocess.run([sys.executable, str(ROOT / "demo" / "install.py"), str(venv)],
                          capture_output=True, text=True)
    if proc.returncode == 3:
        pytest.skip(f"pip could not install the dependencies here: {proc.stderr[-300:]}")
    assert proc.returncode == 0, proc.stderr
    site = next(venv.glob("lib/python*/site-packages"))
    [link] = site.glob("__editable__.agent_registry-*.pth")
    assert link.read_text() == f"{ROOT}\n"
    for name in ("click", "ruamel", "whoosh"):
        assert any(site.glob(f"{name}*")), name
    version = subprocess.run([str(venv / "bin" / "agent-registry"), "--help"],
                             capture_output=True, text=True)
    assert version.returncode == 0 and "Usage: agent-registry" in version.stdout, version.stderr
    guard = subprocess.run([str(venv / "bin" / "agent-registry-guard"), "--help"],
                           capture_output=True, text=True, cwd=tmp_path)
    assert "Traceback" not in guard.stderr, guard.stderr
