"""store/spawn.py, the posix_spawn runner the one-shot commands start git with."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

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


@pytest.mark.parametrize("cwd", [None, "."])  # posix_spawn, and subprocess in another cwd
def test_a_child_past_its_timeout_is_killed_and_said(tmp_path, cwd):
    from agent_registry.store import spawn
    pidfile = tmp_path / "pid"
    # a child that writes down its pid, then neither ends nor writes: the timeout kills it
    sleeper = f"import os, time\nopen({str(pidfile)!r}, 'w').write(str(os.getpid()))\ntime.sleep(120)"
    argv = [sys.executable, "-c", sleeper]
    with pytest.raises(spawn.TimedOut) as said:
        spawn.run(argv, timeout=3, cwd=cwd)  # time enough to start, even on a busy machine
    assert "ran past 3 s" in str(said.value) and said.value.argv == argv
    pid = int(pidfile.read_text())
    with pytest.raises(ProcessLookupError):  # killed and reaped: no such process
        os.kill(pid, 0)


def test_a_child_within_its_timeout_runs_to_its_end():
    from agent_registry.store import spawn
    done = spawn.run([sys.executable, "-c", "print('fine')"], timeout=60)
    assert done.returncode == 0 and done.stdout == b"fine\n"
