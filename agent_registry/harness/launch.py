"""The start of every hook command a harness runs: ``PYTHON -I -S <this file> harness hook
HARNESS EVENT ...`` (harness/command.py writes it into the harness's settings).

A harness runs a hook before and after every tool call, and the interpreter's start is
most of what a hook costs.  ``-S`` skips ``site``, which reads the environment's ``.pth``
files (setuptools' distutils hack, an editable install's path): about 3 ms of a 10 ms
start (docs/benchmarks.md).  ``-I`` keeps out what a person's shell sets (PYTHONPATH,
PYTHONHOME, the user site), which a hook has no use for.  So the paths ``site`` would
have added are put here, and no others: the folder that holds this package (a wheel's
site-packages, an editable install's checkout), then the site-packages of the virtual
environment the interpreter belongs to when that is another folder (an editable install:
its dependencies, click for a usage error, psutil off Linux), found as ``site`` finds it
(``pyvenv.cfg`` beside the interpreter or one folder up).
"""
import os
import sys


def paths(here: str) -> list[str]:
    """What goes before the standard library's folders on sys.path for the package whose
    harness/ folder is *here*."""
    root = os.path.dirname(os.path.dirname(here))
    out = [root]
    bindir = os.path.dirname(os.path.abspath(sys.executable))
    for venv in (bindir, os.path.dirname(bindir)):
        if os.path.isfile(os.path.join(venv, "pyvenv.cfg")):
            lib = os.path.join(venv, "Lib", "site-packages") if os.name == "nt" else \
                os.path.join(venv, sys.platlibdir, "python%d.%d" % sys.version_info[:2],
                             "site-packages")
            if os.path.normcase(lib) != os.path.normcase(root):
                out.append(lib)
            break
    return out


if __name__ == "__main__":
    _here = os.path.dirname(os.path.abspath(__file__))
    # Python 3.10's -I does not imply -P: the script's folder is first; it is not a root
    sys.path[:] = paths(_here) + [p for p in sys.path if p and os.path.abspath(p) != _here]
    from agent_registry.cli.fast import run
    run()
