"""store/spawn.py, the posix_spawn runner the one-shot commands start git with."""
from __future__ import annotations

import subprocess
import sys

CHILD = "import sys\nfor line in sys.stdin.buffer: sys.stdout.buffer.write(line * 50)"
DRIVER = f"""
import sys
from agent_registry.store import spawn
data = (b"y" * 99 + b"\\n") * 2000
done = spawn.run([sys.executable, "-c", {CHILD!r}], input=data)
assert done.returncode == 0 and done.stdout == b"".join(l * 50 for l in data.splitlines(True))
print("ok")
"""


def test_a_child_that_writes_while_it_reads_its_input_does_not_deadlock():
    # 200 KB in, 10 MB out: the child fills its stdout before it has read its stdin, so a
    # blocking write of the input would wait for it while it waited for us
    proc = subprocess.run([sys.executable, "-c", DRIVER], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0 and proc.stdout == "ok\n", proc.stderr
