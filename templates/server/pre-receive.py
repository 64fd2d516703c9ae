# agent-registry hook: pre-receive (server)
"""The pre-receive hook `agent-registry server install` puts in a bare repository: this
file is the ``__main__`` of the hook, a zip archive that carries the standard-library
modules of agent-registry it reads the registry through, so the server needs python3 and
git and nothing installed (docs/server.md).  A pre-receive hook that was there before runs
first, with the same input; `agent-registry server uninstall` puts it back."""
import os
import subprocess
import sys

# the copy of agent_registry in this archive, never an installed one: no site-packages
sys.path[:] = sys.path[:1] + [p for p in sys.path[1:] if not p.rstrip("/\\").endswith(
    ("site-packages", "dist-packages"))]
updates = sys.stdin.buffer.read()
chained = os.path.abspath(sys.argv[0]) + ".agent-registry-chained"
if os.path.exists(chained):
    code = subprocess.run([chained, *sys.argv[1:]], input=updates).returncode
    if code:
        sys.exit(code)
from agent_registry.enforce.receive import main  # noqa: E402 (after the path is set)

sys.exit(main(updates.decode("utf-8", "surrogateescape"), dict(os.environ)))
