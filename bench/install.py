#!/usr/bin/env python3
"""The package as users install it, for the benchmarks (issue 35).

``pip install .``, pipx and ``uv tool`` install a wheel: the package in a venv's
site-packages, compiled, its templates inside it, no checkout on the path.  The project's
own ``.venv`` holds an editable (compat) install of the checkout, which starts, imports and
finds its files differently; a figure measured there is not what a user gets.
``plain_install()`` builds a wheel of this checkout and installs it, with its dependencies
(from pip's warm cache), into a fresh venv under ``bench/results/plain-install/``, keyed by
a hash of the files the wheel is made of: a later call with the same sources reuses it, a
changed source builds a new one (and the older ones are removed).

In a benchmark::

    import install                                  # bench/ is on sys.path
    install.add_option(parser)                      # --checkout: the .venv instead
    tool = install.chosen(args)                     # an Install
    subprocess.run([tool.cli, "lock", "acquire", ...], env=env)    # the console script
    subprocess.run([tool.python, "-m", "agent_registry.guard", ...])

Keep the checkout off PYTHONPATH in what such a run gets (``tool.env(env)`` drops it),
or the checkout's modules shadow the installed ones.  From a shell::

    .venv/bin/python bench/install.py            # builds when needed; prints the venv's bin
"""
from __future__ import annotations

import argparse
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
HOME = ROOT / "bench" / "results" / "plain-install"
# what the wheel is made of (pyproject.toml's packages and package-dir); README.md is
# only its long description, and changes often, so it does not make a new install
SOURCES = ("pyproject.toml", "agent_registry", "templates", "hooks")
COPIED = SOURCES + ("README.md",)
SKIPPED = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "node_modules")


class Install(NamedTuple):
    """One installation of agent-registry: the interpreter and the console scripts of its
    venv.  ``kind`` is "plain install" (a wheel in a fresh venv) or "checkout" (.venv)."""
    kind: str
    bindir: Path

    @property
    def python(self) -> str:
        return str(self.bindir / "python")

    @property
    def cli(self) -> str:
        return str(self.bindir / "agent-registry")

    @property
    def guard(self) -> str:
        return str(self.bindir / "agent-registry-guard")

    def env(self, env: dict[str, str]) -> dict[str, str]:
        """*env* without PYTHONPATH, so the installed package is the one imported."""
        return {k: v for k, v in env.items() if k != "PYTHONPATH"}


def checkout() -> Install:
    """The project's own .venv (editable, compat mode): the interpreter running this."""
    return Install("checkout", Path(sys.executable).parent)


def source_key(root: Path = ROOT) -> str:
    """A hash of every file the wheel is built from (path and content), so an edit to
    any of them makes a new install and nothing else does."""
    digest = hashlib.sha256()
    for top in SOURCES:
        base = root / top
        files = [base] if base.is_file() else sorted(
            p for p in base.rglob("*") if p.is_file()
            and "__pycache__" not in p.parts and p.suffix != ".pyc")
        for path in files:
            digest.update(str(path.relative_to(root)).encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def plain_install(*, quiet: bool = False) -> Install:
    """The wheel of this checkout installed in a venv of its own, built if its sources
    changed since the last one (a lock file keeps two benchmarks from building at once)."""
    key = source_key()
    HOME.mkdir(parents=True, exist_ok=True)
    venv = HOME / key
    bindir = venv / "bin"
    with open(HOME / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (venv / ".complete").exists():
            if not quiet:
                print(f"building a wheel of {ROOT} and installing it in {venv} ...",
                      file=sys.stderr, flush=True)
            shutil.rmtree(venv, ignore_errors=True)
            build(venv)
            (venv / ".complete").write_text(key + "\n")
        for old in HOME.iterdir():  # earlier sources' installs
            if old.is_dir() and old.name != key:
                shutil.rmtree(old, ignore_errors=True)
    return Install("plain install", bindir)


def build(venv: Path) -> None:
    """Wheel from a copy of the sources (a build leaves build/ and *.egg-info behind), then
    a venv without pip (ensurepip takes seconds) and this interpreter's pip installing the
    wheel and its dependencies into it; pip compiles the bytecode, as for a user."""
    with tempfile.TemporaryDirectory(prefix="plain-install-") as tmp:
        src = Path(tmp, "src")
        for name in COPIED:
            if (ROOT / name).is_dir():
                shutil.copytree(ROOT / name, src / name, ignore=SKIPPED, symlinks=True)
            else:
                src.mkdir(exist_ok=True)
                shutil.copy2(ROOT / name, src / name)
        out = Path(tmp, "dist")
        run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(src)])
        wheel = next(out.glob("agent_registry-*.whl"))
        run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
        run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
             "-q", str(wheel)])
    where = subprocess.run([str(venv / "bin" / "python"), "-c",
                            "import agent_registry; print(agent_registry.__file__)"],
                           cwd=venv, capture_output=True, text=True,
                           env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    if not Path(where.stdout.strip()).resolve().is_relative_to(venv.resolve()):
        raise SystemExit(f"the plain install in {venv} imports agent_registry from "
                         f"{where.stdout.strip() or where.stderr.strip()}")


def run(argv: list[str]) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}:\n{proc.stderr[-3000:]}")


def add_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--checkout", action="store_true",
                        help="measure the project's .venv (the checkout, editable) instead "
                             "of a wheel installed in a fresh venv (bench/install.py)")


def chosen(args: argparse.Namespace) -> Install:
    """What a benchmark run with *args* (given add_option) measures."""
    return checkout() if getattr(args, "checkout", False) else plain_install()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.parse_args()
    print(plain_install().bindir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
