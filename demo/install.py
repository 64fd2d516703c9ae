"""The light install behind `make demo`: the package's dependencies into a venv, and the
checkout linked in the way setuptools' compat editable install links it.

Usage: python3 demo/install.py VENV (VENV made by `python3 -m venv --without-pip`).

Why not `pip install -e .`: its build step (a build environment with setuptools, then
three backend calls) costs about 6 of its 10 CPU-seconds, for two files: a .pth naming
the checkout and the console scripts.  Here pip (this interpreter's, through --python;
uv's when uv is on PATH) installs the dependencies listed in pyproject.toml, and this script writes those two files
under the names setuptools uses, so a later `pip install -e .` (make test) replaces them.
Exit 3 when this cannot be done (no tomllib before Python 3.11, a pip without --python):
the Makefile then runs the full `pip install -e .`.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main(venv: str) -> int:
    try:
        import tomllib
    except ImportError:
        return 3
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)["project"]
    python = os.path.abspath(os.path.join(venv, "bin", "python"))
    if "'" in python:
        return 3  # the console scripts' sh trampoline quotes it in '...'
    # uv, when there is one, installs in a fraction of pip's time; --no-compile: a module
    # is compiled when first imported, and most never are in a demo
    uv = shutil.which("uv")
    pip = [uv, "pip", "install", "-q", "--python", python] if uv else \
        [sys.executable, "-m", "pip", "--python", python, "install", "-q",
         "--disable-pip-version-check", "--no-compile"]
    if subprocess.run([*pip, *project["dependencies"]]).returncode != 0:
        return 3
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          capture_output=True, text=True, check=True).stdout.strip()
    name = project["name"].replace("-", "_")
    with open(os.path.join(site, f"__editable__.{name}-{project['version']}.pth"), "w") as f:
        f.write(ROOT + "\n")
    for script, target in project["scripts"].items():
        write_script(os.path.join(venv, "bin", script), python, target)
    return 0


def write_script(path: str, python: str, target: str) -> None:
    """A console script as pip writes one; the sh trampoline runs a venv whose path has
    spaces, which a #! line cannot name."""
    module, func = target.split(":")
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(f"#!/bin/sh\n'''exec' '{python}' \"$0\" \"$@\"\n' '''\n"
                f"import sys\nfrom {module} import {func}\nsys.exit({func}())\n")
    os.chmod(path, 0o755)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]) if len(sys.argv) == 2 else 2)
