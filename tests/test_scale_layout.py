"""A registry in a layout a tool does not write (issue 11, docs/design.md "Past one ref").

- This version writes layout formats 1, 2 and 3 (shards.WRITES); meeting a `layout.json`
  of a format it does not write (here a hand-written format 4), it refuses every write
  (and gc, and shard, also when git config asks for shards) in one line naming the
  version to install: it would write where no newer tool reads.  A 0.2 tool (WRITES 1
  and 2) meets a registry upgraded to format 3 the same way, naming 0.3.0.
- A tool older than that check reads the main branch alone, where the live sessions and
  locks no longer are; the fence the conversion leaves there (shards.fence_files) makes its
  claims, `lock check` and pre-commit hook refuse, in one line naming the version, instead
  of reading an empty lock table and letting everything through.  Today's code without
  the marker, with its conversion switched off (a tool older than the one layout never
  converted by itself), is such a tool: ``OLDER_TOOL``, or the core's Registry (which
  writes the layout it meets), on a single branch built through the core
  (helpers.single_branch)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers import git, single_branch

from agent_registry import Registry
from agent_registry.branch import shards as S

INSTALL = f"install agent-registry >= {S.REQUIRES}"
NEWER = b'{"format": 4, "shards": 64, "key_depth": 2, "requires": "9.9.9"}\n'


def convert(registry: Registry, *, marker: bytes | None) -> str:
    """Write what a conversion leaves on the main branch: the fence and, given, the
    layout *marker* (the locks would move to the shard refs)."""
    registry.init()
    old = registry.repo.read_ref(registry.ref)
    files = {**S.fence_files(registry.clock()), **({S.LAYOUT: marker} if marker else {})}
    tree = registry.repo.edit_tree(registry.repo.commit_info(old)[0], files)
    commit = registry.repo.commit_tree(tree, [old], "convert to layout format 2",
                                       "agent-registry <agent-registry@localhost>",
                                       int(registry.clock()))
    registry.repo.update_ref(registry.ref, commit, old, "test: convert")
    return commit


# A tool older than the layout check: this code reading the main branch alone, which
# never converts by itself (the one layout's first-write conversion switched off).
OLDER_TOOL = """
from agent_registry.sync import convert
convert.auto_convert = lambda registry: []
from agent_registry.cli.fast import run
run()
"""


@pytest.fixture
def old(repo, clock):
    """The registry of *repo* as a version before the one layout made it: one branch
    (built through the core, which writes what it meets), with the fake clock."""
    registry = single_branch(repo, clock=clock)
    yield registry
    registry.close()


@pytest.fixture
def older(repo):
    def tool(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", OLDER_TOOL, *args], cwd=repo,
                              capture_output=True, text=True, timeout=120)
    return tool


def one_line(proc: subprocess.CompletedProcess) -> str:
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


@pytest.mark.parametrize("configured", [False, True], ids=["plain", "config-shards"])
def test_this_version_refuses_to_write_a_format_it_does_not_write(repo, registry, run,
                                                                 configured):
    assert run("register", "old-1", "--provider", "test", "--working-on", "x").returncode == 0
    tip = convert(registry, marker=NEWER)
    if configured:  # asking for shards neither converts nor upgrades it
        git(repo, "config", "agent-registry.shards", "4")
    for args in (["register", "old-2", "--provider", "test"],
                 ["lock", "acquire", "src/auth.py", "--session", "old-1"],
                 ["lock", "heartbeat", "--session", "old-1"],
                 ["context", "log", "old-1", "a line"],
                 ["finish", "old-1"]):
        proc = run(*args)
        assert proc.returncode == 1, args
        assert "install agent-registry >= 9.9.9" in one_line(proc), args
        assert "layout format 4" in one_line(proc), args
    proc = run("gc", "--keep-days", "0")
    assert proc.returncode == 1 and "install agent-registry >= 9.9.9" in one_line(proc)
    proc = run("shard")
    assert proc.returncode == 1 and "install agent-registry >= 9.9.9" in one_line(proc)
    assert registry.repo.read_ref(registry.ref) == tip  # nothing written
    status = run("status")  # reading: works, or refuses in the same one line
    assert status.returncode == 0 or "install agent-registry >= 9.9.9" in one_line(status)


def test_an_older_claim_is_refused_naming_the_version(repo, old, older):
    tip = convert(old, marker=None)
    assert older("register", "old-1", "--provider", "test", "--working-on", "x").returncode == 0
    claim = older("lock", "acquire", "src/auth.py", "--session", "old-1")
    assert claim.returncode == 1 and INSTALL in one_line(claim)
    for target in ("src/", "docs/**/*.md", "README.md"):
        assert older("lock", "acquire", target, "--session", "old-1").returncode == 1, target
    check = older("lock", "check", "src/auth.py", "--session", "old-1")
    assert check.returncode == 1 and S.FENCE_SESSION in check.stdout + check.stderr
    assert old.repo.read_blob(f"{old.tip()}:{S.LAYOUT}") is None  # it never converted
    assert git(repo, "rev-list", "--count", f"{tip}..{old.tip()}").strip() == "1"  # the register


def test_an_older_pre_commit_hook_refuses_naming_the_version(repo, old, run):
    assert run("hooks", "install").returncode == 0
    tip = convert(old, marker=None)
    assert old.tip() == tip  # installing the hooks wrote nothing
    (repo / "src" / "auth.py").write_text("auth = 2\n")
    git(repo, "add", "src/auth.py")
    proc = subprocess.run(["git", "commit", "-q", "-m", "edit"], cwd=repo,
                          capture_output=True, text=True)
    assert proc.returncode != 0 and INSTALL in proc.stderr


def test_the_fence_outlives_cleanup_and_time(repo, old, clock):
    registry = old  # the core, as an older tool: it reads the main branch alone
    convert(registry, marker=None)
    clock.advance(10 * 365 * 86400)
    assert registry.cleanup()["stopped"] == []
    registry.register("old-2", provider="test")
    check = registry.check(["src/auth.py"], "old-2")
    assert check[0]["state"] == "locked" and check[0]["owner"] == S.FENCE_SESSION



# A 0.2 tool: this code as 0.2 had it, writing layout formats 1 and 2 only.
OLD_TOOL = """
import sys
from agent_registry.branch import shards
shards.WRITES = (1, 2)
from agent_registry.sync import convert
convert.auto_convert = lambda registry: []  # 0.2 upgraded nothing by itself
from agent_registry.cli.fast import run
run()
"""


def test_a_0_2_tool_refuses_a_registry_upgraded_to_format_3(repo, run):
    from test_scale_convert import format_2

    def old_tool(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", OLD_TOOL, *args], cwd=repo,
                              capture_output=True, text=True, timeout=120)

    format_2(run, repo)
    assert old_tool("register", "old-6", "--provider", "test").returncode == 0  # format 2: fine
    assert run("shard").returncode == 0  # upgraded to format 3
    tip = git(repo, "rev-parse", "refs/heads/agent-registry").strip()
    for args in (["register", "old-7", "--provider", "test"],
                 ["lock", "acquire", "src/auth.py", "--session", "old-6"],
                 ["lock", "heartbeat", "--session", "old-6"],
                 ["context", "log", "old-6", "a line"]):
        proc = old_tool(*args)
        assert proc.returncode == 1, (args, proc.stderr)
        line = one_line(proc)
        assert "layout format 3" in line and "install agent-registry >= 0.3.0" in line, args
    assert git(repo, "rev-parse", "refs/heads/agent-registry").strip() == tip


def test_the_fence_shows_nowhere_as_a_session(repo, run):
    """The fence is for tools older than the layout check; in the layout `init` makes,
    this version shows it nowhere: not in `status` (text or JSON), `lock list`, `lock
    check`, the main branch's registry.md, nor the dashboard's sessions and locks; and no
    count includes it."""
    from fastapi.testclient import TestClient

    from agent_registry.dashboard.app import create_app
    assert run("init").returncode == 0
    assert git(repo, "ls-tree", "--name-only", "agent-registry", "sessions/live/").split() == \
        [f"sessions/live/{S.FENCE_SESSION}.yaml"]  # the fence is there, for older tools
    assert run("register", "kimi-1", "--provider", "test", "--working-on", "x").returncode == 0
    assert run("lock", "acquire", "src/auth.py", "--session", "kimi-1").returncode == 0
    status = run("status")
    assert status.returncode == 0 and S.FENCE_SESSION not in status.stdout + status.stderr
    doc = json.loads(run("--json", "status").stdout)
    assert [s["id"] for s in doc["sessions"]] == ["kimi-1"]
    assert S.FENCE_SESSION not in json.dumps(doc)
    listed = run("--json", "lock", "list")
    assert S.FENCE_SESSION not in listed.stdout and "**" not in listed.stdout
    free = run("lock", "check", "README.md", "docs/x.md", "--session", "kimi-1")
    assert free.returncode == 0 and S.FENCE_SESSION not in free.stdout + free.stderr
    assert run("update", "kimi-1", "--todo-present", "page").returncode == 0  # renders it
    page = git(repo, "show", "agent-registry:registry.md")
    assert S.FENCE_SESSION not in page and "live_sessions: 1" in page and "held_locks: 1" in page
    app = create_app(str(repo))
    with TestClient(app, base_url="http://127.0.0.1") as client:
        sessions = client.get("/api/sessions?history=true").json()["sessions"]
        assert [s["id"] for s in sessions] == ["kimi-1"]
        locks = client.get("/api/locks").json()["locks"]
        assert [(l["path"], l["owner"]) for l in locks] == [("src/auth.py", "kimi-1")]
        assert S.FENCE_SESSION not in client.get("/api/sessions/kimi-1").text
    assert S.FENCE_SESSION not in run("--json", "sync").stdout
