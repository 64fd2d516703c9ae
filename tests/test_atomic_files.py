"""A local state file that cannot be written (a full disk, a file size limit) leaves the
old file and no temporary file behind (issue 24: a full disk left empty sync.XXXX and
watch.XXXX files).  The failure is real: the writer runs in a process whose file size
limit (RLIMIT_FSIZE) is smaller than what it writes, so the kernel refuses the write."""
from __future__ import annotations

import subprocess
import sys
import textwrap

from helpers import git

WRITER = textwrap.dedent("""
    import resource, signal, sys
    # no bytecode written under the limit: Python keeps a .pyc cut short at 4096 bytes,
    # and every later import of that module in this checkout fails (EOFError)
    sys.dont_write_bytecode = True
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails with EFBIG instead
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
    from agent_registry import Registry
    from agent_registry.sync.state import save_state
    from agent_registry.watch.follow import save_state as save_watch
    folder = sys.argv[2]
    with Registry.open(sys.argv[1]) as registry:
        for write in (lambda: save_state(registry, big="x" * 100_000),
                      lambda: save_watch(folder + "/watch.json", {"big": "x" * 100_000})):
            try:
                write()
            except OSError as exc:
                print("refused", exc.errno)
""")


def test_a_state_file_that_cannot_be_written_leaves_no_temporary_file(repo, run, tmp_path):
    assert run("register", "k-1", "--provider", "Kimi", "--working-on", "x").returncode == 0
    state = repo / ".git" / "agent-registry"
    (tmp_path / "watch").mkdir()
    (tmp_path / "watch" / "watch.json").write_text("{}")
    before = sorted(p.name for p in state.iterdir())
    proc = subprocess.run([sys.executable, "-c", WRITER, str(repo), str(tmp_path / "watch")],
                          capture_output=True, text=True, timeout=60)
    assert proc.stdout.split("\n")[:2] == ["refused 27", "refused 27"], proc.stdout + proc.stderr
    assert sorted(p.name for p in state.iterdir()) == before
    assert [p.name for p in (tmp_path / "watch").iterdir()] == ["watch.json"]
    assert (tmp_path / "watch" / "watch.json").read_text() == "{}"
    assert git(repo, "status", "--porcelain") == ""
