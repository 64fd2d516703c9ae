"""What harness/launch.py, the start of every hook command a harness runs (``PYTHON -I -S
.../harness/launch.py harness hook HARNESS EVENT ...``: harness/command.py writes it into
the harness's settings), does: a module, so that its bytecode is cached (a script is
compiled from its source at every start: ~0.5 ms of each hook when this was the script).

A harness runs a hook before and after every tool call, and the interpreter's start is
most of what a hook costs.  ``-S`` skips ``site``, which reads the environment's ``.pth``
files (setuptools' distutils hack, an editable install's path): about 3 ms of a 10 ms
start (docs/benchmarks.md).  ``-I`` keeps out what a person's shell sets (PYTHONPATH,
PYTHONHOME, the user site), which a hook has no use for.  So the paths ``site`` would
have added are put here, as ``site`` finds them: the folder that holds this package (a
wheel's site-packages, an editable install's checkout), then the site-packages of the
virtual environment the interpreter belongs to when that is another folder (an editable
install: its dependencies, click for a usage error, psutil off Linux; ``pyvenv.cfg``
beside the interpreter or one folder up).  Outside a virtual environment, or in one made
with ``--system-site-packages``, a dependency may live in the interpreter's own site
folders (pip's ``--user`` install of the package beside a system click, Debian's
``dist-packages``): those that exist go after the standard library, where ``site`` puts
them, so nothing there hides a standard module.  Their ``.pth`` files are not read (an
editable install of a dependency there is not found: reinstall it, or the package in a
virtual environment).  A hook goes straight to harness/hook.py, without the console
script's modules (cli/fast, cli/console).
"""
import os
import sys

VERSION = "python%d.%d" % sys.version_info[:2]  # the name of the site folders' parent


def paths(here: str) -> tuple[list[str], list[str]]:
    """What goes before the standard library's folders on sys.path for the package whose
    harness/ folder is *here*, and what goes after them."""
    root = os.path.dirname(os.path.dirname(here))
    before, prefixes = [root], (sys.prefix, sys.exec_prefix)  # no venv: the interpreter's
    bindir = os.path.dirname(os.path.abspath(sys.executable))
    for venv in (bindir, os.path.dirname(bindir)):
        config = os.path.join(venv, "pyvenv.cfg")
        if os.path.isfile(config):
            lib = os.path.join(venv, "Lib", "site-packages") if os.name == "nt" else \
                os.path.join(venv, sys.platlibdir, VERSION, "site-packages")
            if os.path.normcase(lib) != os.path.normcase(root):
                before.append(lib)
            prefixes = (sys.base_prefix, sys.base_exec_prefix) if _system_site(config) \
                else ()
            break
    seen = {os.path.normcase(p) for p in before}
    after = []
    for prefix in dict.fromkeys(prefixes):
        for folder in _site_folders(prefix):
            if os.path.normcase(folder) not in seen and os.path.isdir(folder):
                seen.add(os.path.normcase(folder))
                after.append(folder)
    return before, after


def _system_site(config: str) -> bool:
    """Whether the venv of *config* (its pyvenv.cfg) sees the base interpreter's site
    folders (``include-system-site-packages = true``), read as ``site`` reads it."""
    try:
        with open(config, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return False
    for line in lines:
        key, equals, value = line.partition("=")
        if equals and key.strip().lower() == "include-system-site-packages":
            return value.strip().lower() == "true"
    return False


def _site_folders(prefix: str) -> list[str]:
    """The site folders of an interpreter installed under *prefix*: ``site``'s, and those
    Debian's ``site`` adds (``dist-packages``)."""
    if os.name == "nt":
        return [prefix, os.path.join(prefix, "Lib", "site-packages")]
    libs = dict.fromkeys((sys.platlibdir, "lib"))
    return [*(os.path.join(prefix, lib, VERSION, "site-packages") for lib in libs),
            os.path.join(prefix, "local", "lib", VERSION, "dist-packages"),
            os.path.join(prefix, "lib", "python3", "dist-packages"),
            os.path.join(prefix, "lib", VERSION, "dist-packages")]


def start(here: str) -> None:
    """Put the package whose harness/ folder is *here*, and what ``site`` would have
    added, on sys.path, then run the hook (or the console script for anything else)."""
    before, after = paths(here)
    # Python 3.10's -I does not imply -P: the script's folder is first; it is not a root
    sys.path[:] = list(dict.fromkeys(
        before + [p for p in sys.path if p and os.path.abspath(p) != here] + after))
    if sys.argv[1:3] == ["harness", "hook"]:  # what a harness runs around every tool call
        from .hook import launched
        launched(sys.argv[3:])  # returns only for arguments that are not a hook's
    from ..cli.fast import run
    run()
