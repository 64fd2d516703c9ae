"""The core commits through a committer handed in from above (issue 10): with a remote,
sync's; the core never imports sync.  A registry with a remote and no committer refuses
in one line instead of committing what the remote would never see."""
from __future__ import annotations

import subprocess
import sys

from helpers import git

SCRIPT = """
import sys
from agent_registry.core.registry import Registry
from agent_registry.errors import RegistryError
registry = Registry.open(sys.argv[1])
try:
    registry.register("s1", provider="Kimi")
except RegistryError as exc:
    print("refused:", exc.message)
"""


def fresh_python(repo, code: str) -> str:
    proc = subprocess.run([sys.executable, "-c", code, str(repo)], capture_output=True,
                          text=True, env={"PATH": "/usr/bin:/bin", "HOME": str(repo.parent),
                                          "AGENT_REGISTRY_PID": "none"})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_a_registry_with_a_remote_and_no_committer_refuses(repo, tmp_path):
    git(tmp_path, "init", "-q", "--bare", "remote.git")
    git(repo, "remote", "add", "origin", str(tmp_path / "remote.git"))
    out = fresh_python(repo, SCRIPT)
    assert out.startswith("refused: this clone syncs with 'origin' but no remote committer "
                          "was handed in"), out
    assert git(repo, "branch", "--list", "agent-registry") == ""  # nothing committed


def test_the_public_api_and_the_faces_registry_commit_through_the_remote(repo, tmp_path):
    git(tmp_path, "init", "-q", "--bare", "remote.git")
    git(repo, "remote", "add", "origin", str(tmp_path / "remote.git"))
    public = SCRIPT.replace("from agent_registry.core.registry import Registry",
                            "from agent_registry import Registry")
    assert fresh_python(repo, public) == ""
    assert git(tmp_path / "remote.git", "log", "--format=%s", "agent-registry").startswith(
        "register s1")
    opened = SCRIPT.replace("from agent_registry.core.registry import Registry",
                            "from agent_registry.sync import Registry").replace('"s1"', '"s2"')
    assert fresh_python(repo, opened) == ""
    assert "register s2" in git(tmp_path / "remote.git", "log", "--format=%s", "agent-registry")


def test_without_a_remote_nothing_of_sync_is_imported(repo):
    code = ("import sys\nfrom agent_registry import Registry\n"
            "Registry.open(sys.argv[1]).register('s1', provider='Kimi')\n"
            "print('agent_registry.sync.remote' in sys.modules)")
    assert fresh_python(repo, code) == "False"
