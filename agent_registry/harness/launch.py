"""The start of every hook command a harness runs: ``PYTHON -I -S <this file> harness hook
HARNESS EVENT ...`` (harness/command.py).  A script is compiled at every start, its
bytecode never cached: so this is all of it, and the rest is harness/launching.py."""
import sys
from os.path import abspath, dirname

_here = dirname(abspath(__file__))
sys.path.insert(0, dirname(dirname(_here)))  # the folder that holds the package
from agent_registry.harness.launching import start  # noqa: E402

start(_here)
