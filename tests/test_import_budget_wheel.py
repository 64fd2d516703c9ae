"""The import budget, on the package as users install it (issues 32 and 35).

``pip install .``, pipx and ``uv tool`` install a wheel: the package in site-packages, its
templates and hooks inside it, no checkout around it.  tests/test_import_budget.py runs
the commands from the checkout, so it could not see the wheel's claim path read templates
through ``importlib.resources`` (pathlib, zipfile, tempfile, shutil, typing, re ...: 139
modules against 77).  Here a wheel is built from this checkout once per test session and
installed into a fresh virtual environment; its dependencies (click, ruamel.yaml, ...)
come from the test environment's site-packages through a ``.pth``, so no network is
needed.  The hot commands and the pre-commit hook run there under the same budget as in
the checkout, import nothing the checkout's do not, and a claim loads none of
importlib.resources, zipfile, tempfile or pathlib.  A failure names each module that broke
the budget and the line of the package that imported it.
"""
from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from importlib.metadata import distribution
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from helpers import CLI, git
from test_import_budget import (COMMANDS, GUARD_PATH, LAUNCHER, NEVER, NOR, PATHS, RAN,
                                imported, made)
from test_wheel import build_wheel

# what importlib.resources brought into every commit of a wheel install
CLAIM_NEVER = {"importlib.resources", "zipfile", "tempfile", "pathlib"}
# the checkout's budget: that of the console script (NEVER) and of its launcher (NOR)
BUDGET = NEVER | NOR | CLAIM_NEVER

# Put on PYTHONPATH for every run, installed or checkout alike: for each module imported,
# one stderr line naming the line of the package that imported it (the nearest frame of
# agent_registry's), so a broken budget names its culprit.  It imports nothing.
WHO = '''
import sys


class Who:
    @staticmethod
    def find_spec(name, path=None, target=None):
        frame = sys._getframe(1)
        while frame is not None and \\
                not frame.f_globals.get("__name__", "").startswith("agent_registry"):
            frame = frame.f_back
        if frame is not None:
            sys.stderr.write(f"imported-by: {name} "
                             f"{frame.f_globals['__name__']}:{frame.f_lineno}\\n")
        return None


sys.meta_path.insert(0, Who)
'''


@pytest.fixture(scope="session")
def wheel(tmp_path_factory) -> Path:
    """A wheel of this checkout, built once per test session (per xdist worker)."""
    return build_wheel(tmp_path_factory.mktemp("wheel-budget"))


@pytest.fixture(scope="session")
def installed(wheel, tmp_path_factory) -> Path:
    """The bin folder of a fresh venv holding the wheel of this checkout."""
    tmp = tmp_path_factory.mktemp("wheel-venv")
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=300)
    bindir = venv / ("Scripts" if os.name == "nt" else "bin")
    python = bindir / "python"
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install",
                           "-q", "--no-index", "--no-deps", str(wheel)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    site = subprocess.run([str(python), "-c",
                           "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    # the wheel's dependencies, from where this environment has them; a path line adds the
    # folder only (an editable install's .pth in it is not read): agent_registry is the wheel's
    Path(site, "dependencies.pth").write_text(
        "".join(f"{folder}\n" for folder in dependency_folders(wheel)))
    where = subprocess.run([str(python), "-c",
                            "import agent_registry; print(agent_registry.__file__)"],
                           cwd=tmp, env=without_pythonpath(), capture_output=True, text=True)
    assert Path(where.stdout.strip()).resolve().is_relative_to(venv.resolve()), where
    return bindir


@pytest.fixture(scope="module")
def who(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("who")
    (folder / "sitecustomize.py").write_text(WHO)
    return folder


@pytest.fixture(scope="module")
def repos(tmp_path_factory) -> dict[str, Path]:
    """Two registries made alike (s2 holds src/auth.py, s1 src/mine.py): the commands run
    in the same order in each, from the wheel in one and the checkout in the other."""
    return {side: made(tmp_path_factory.mktemp(f"budget-{side}") / "repo")
            for side in ("wheel", "checkout")}


def dependency_folders(wheel: Path) -> list[str]:
    """The site folders holding the distributions *wheel* requires on this platform."""
    with zipfile.ZipFile(wheel) as archive:
        meta = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        lines = archive.read(meta).decode().splitlines()
    folders = set()
    for line in lines:
        if line.startswith("Requires-Dist:"):
            need = Requirement(line.split(":", 1)[1])
            if need.marker is None or need.marker.evaluate({"extra": ""}):
                folders.add(str(distribution(need.name).locate_file("")))
    return sorted(folders)


def without_pythonpath() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def importers(stderr: str) -> dict[str, str]:
    """Module -> the package's line that imported it, from WHO's lines."""
    found: dict[str, str] = {}
    for line in stderr.splitlines():
        if line.startswith("imported-by: "):
            name, where = line[len("imported-by: "):].split(" ", 1)
            found.setdefault(name, where)
    return found


def broke(names: set[str], stderr: str, forbidden) -> list[str]:
    """The modules of *names* that *forbidden* (a module name -> bool) rules out, each
    with what imported it."""
    by = importers(stderr)
    return [f"{name} (imported by {by.get(name, 'the interpreter or a module above')})"
            for name in sorted(names) if forbidden(name)]


def run_command(side: str, installed: Path, repos, who: Path, args: list[str]):
    python = str(installed / "python") if side == "wheel" else sys.executable
    return imported(repos[side], args, python=python, script=("-c", LAUNCHER),
                    env={**without_pythonpath(), "PYTHONPATH": str(who)})


LOOSEREF = "agent_registry.store.looseref"


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_installed_hot_command_keeps_the_checkouts_budget(installed, repos, who, command):
    """Run as the console script runs it: the same budget as from the checkout, nothing
    the checkout's run does not import, and for a claim none of the modules
    importlib.resources would bring."""
    args = COMMANDS[command]
    checkout, _ = run_command("checkout", installed, repos, who, args)
    names, proc = run_command("wheel", installed, repos, who, args)
    assert proc.returncode == (1 if command == "check" else 0), proc.stderr[-2000:]
    assert RAN[command] in names  # it did run the command
    said = f"`agent-registry {' '.join(args)}` installed from a wheel imported"
    over = broke(names, proc.stderr, lambda n: n in BUDGET or n.split(".")[0] in BUDGET)
    assert not over, f"{said} {'; '.join(over)}"
    # a ref moved in process (store/looseref.py) where an earlier process in that
    # repository kept git's identity: the repository's history decides, not the install
    more = broke(names, proc.stderr, lambda n: n not in checkout and n != LOOSEREF)
    assert not more, f"{said}, and from the checkout did not: {'; '.join(more)}"
    beyond = broke(names, proc.stderr, lambda n: n.startswith("agent_registry")
                   and n not in PATHS[command])
    assert not beyond, f"{said} beyond its PATHS: {'; '.join(beyond)}"
    if command == "acquire":
        assert "agent_registry.branch.render" in names  # its commit rendered the templates


def test_installed_pre_commit_hook_imports_what_the_checkouts_does(installed, repos, who):
    """The pre-commit hook a wheel's `hooks install` writes runs the guard with the
    venv's Python: it refuses the commit as from the checkout, importing nothing more."""
    imports = {}
    for side, cli in (("checkout", CLI), ("wheel", str(installed / "agent-registry"))):
        repo = repos[side]
        done = subprocess.run([cli, "hooks", "install"], cwd=repo, capture_output=True,
                              text=True, env=without_pythonpath(), timeout=120)
        assert done.returncode == 0, done.stderr
        (repo / "src" / "auth.py").write_text("auth = 2\n")  # s2 holds it
        git(repo, "add", "src/auth.py")
        env = {**without_pythonpath(), "PYTHONPATH": str(who), "PYTHONPROFILEIMPORTTIME": "1",
               "AGENT_REGISTRY_SESSION": "s1"}
        proc = subprocess.run(["git", "commit", "-q", "-m", "edit auth"], cwd=repo, env=env,
                              capture_output=True, text=True, timeout=120)
        git(repo, "reset", "-q", "--hard", "HEAD")
        assert proc.returncode == 1 and "src/auth.py: locked by s2" in proc.stderr, proc.stderr
        names = {line.split("|")[2].strip() for line in proc.stderr.splitlines()
                 if line.startswith("import time:") and "|" in line} - {"cumulative"}
        assert "agent_registry.enforce.guard" in names
        imports[side] = names, proc.stderr
    names, stderr = imports["wheel"]
    said = "the pre-commit hook of a wheel install imported"
    over = broke(names, stderr, lambda n: n in BUDGET or n.split(".")[0] in BUDGET
                 or n.startswith("agent_registry") and n not in GUARD_PATH)
    assert not over, f"{said} {'; '.join(over)}"
    more = broke(names, stderr, lambda n: n not in imports["checkout"][0])
    assert not more, f"{said}, and the checkout's did not: {'; '.join(more)}"


def test_a_zip_import_still_reads_the_shipped_files(wheel, tmp_path):
    """Only a package imported from an archive (a wheel is one) goes through
    importlib.resources, and reads the same templates and hooks."""
    code = ("from agent_registry.store import shipped; print(shipped.__file__); "
            "print(shipped.read_text('templates', 'registry.md'), end=''); "
            "print(shipped.folder('hooks').joinpath('pre-commit').read_text(), end='')")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(wheel)})
    assert proc.returncode == 0, proc.stderr
    where, text = proc.stdout.split("\n", 1)
    assert where.startswith(str(wheel)), where
    root = Path(__file__).resolve().parent.parent
    assert text == (root / "templates" / "registry.md").read_text() + \
        (root / "hooks" / "pre-commit").read_text()
