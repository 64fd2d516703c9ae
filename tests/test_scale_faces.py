"""The commands that go over every branch of the registry cover the lock shards (layout
format 3, docs/shards.md): `sync` pushes the shards holding offline claims, `gc` squashes
each shard's history, `status` counts the shards with unpushed operations, the main
branch's registry.md lists every shard's locks, and `watch` follows the shard branches.

Real clones of a real bare remote, the real CLI in subprocesses; each registry is made
by `agent-registry init --shards 4`, as `init` makes it with a count of 4."""
from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from helpers import FakeClock, Runner, git, single_branch
from test_sync import Team

from agent_registry import Registry
from agent_registry.branch import shards as S
from agent_registry.branch.paths import record_name

COUNT = 4
BRANCH = "agent-registry"
FILE = "src/auth.py"


def ok(proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert proc.returncode == 0, (proc.args, proc.stdout, proc.stderr)
    return proc


def shard_branch(target: str) -> str:
    (index,) = S.lock_shards(target, COUNT)
    return S.shard_ref(BRANCH, index)[len("refs/heads/"):]


def sharded(tmp_path: Path, *names: str) -> tuple[Team, list[Runner]]:
    """A remote whose registry its first clone made with COUNT shards, and a clone per
    *name*, each with a registered session <name>1."""
    team = Team(tmp_path)
    clones = [team.clone(name) for name in names]
    ok(clones[0]("init", "--shards", str(COUNT)))
    ok(clones[0]("register", f"{names[0]}1", "--provider", "Codex", "--working-on", "auth"))
    for name, clone in zip(names[1:], clones[1:]):
        ok(clone("register", f"{name}1", "--provider", "Codex", "--working-on", "auth"))
    return team, clones


def remote_blob(team: Team, branch: str, path: str) -> str | None:
    proc = subprocess.run(["git", "show", f"refs/heads/{branch}:{path}"], cwd=team.bare,
                          capture_output=True, text=True)
    return proc.stdout if proc.returncode == 0 else None


def holders_on_remote(team: Team, target: str) -> list[str]:
    raw = remote_blob(team, shard_branch(target), record_name(target))
    return [h["session"] for h in json.loads(raw)["holders"]] if raw else []


def offline(team: Team, command):
    """Run *command* with the remote gone (the bare repository renamed), then restore it."""
    hidden = team.bare.with_name("hidden.git")
    team.bare.rename(hidden)
    try:
        return command()
    finally:
        hidden.rename(team.bare)


# -- sync -----------------------------------------------------------------------------

def test_a_claim_made_offline_is_confirmed_by_a_later_sync(tmp_path):
    team, (a,) = sharded(tmp_path, "a")
    claim = offline(team, lambda: a("lock", "acquire", FILE, "--session", "a1"))
    assert claim.returncode == 3, claim.stderr
    assert holders_on_remote(team, FILE) == []
    synced = ok(a("--json", "sync"))
    report = json.loads(synced.stdout)
    assert [p["branch"] for p in report["shards"]] == [shard_branch(FILE)]
    (part,) = report["shards"]
    assert part["pushed"] and part["confirmed"] == [{"session": "a1", "paths": [FILE]}]
    assert holders_on_remote(team, FILE) == ["a1"]
    assert git(a.cwd, "rev-parse", f"refs/heads/{shard_branch(FILE)}") == \
        git(team.bare, "rev-parse", f"refs/heads/{shard_branch(FILE)}")
    # nothing left to push: no shard is synced again
    assert json.loads(ok(a("--json", "sync")).stdout)["shards"] == []
    # the text says it too, one line per shard
    other = "docs/guide/intro.md"
    assert offline(team, lambda: a("lock", "acquire", other, "--session", "a1")).returncode == 3
    text = ok(a("sync")).stdout
    assert f"shard {shard_branch(other)}: pushed 1 operation(s) to origin" in text
    assert f"confirmed: {other} by a1" in text
    assert holders_on_remote(team, other) == ["a1"]
    assert ok(a("lock", "check", FILE, other, "--session", "a1"))


def test_a_claim_made_offline_and_taken_meanwhile_makes_sync_exit_1(tmp_path):
    team, (a, b) = sharded(tmp_path, "a", "b")
    assert offline(team, lambda: a("lock", "acquire", FILE, "--session", "a1")).returncode == 3
    ok(b("lock", "acquire", FILE, "--session", "b1"))
    synced = a("--json", "sync")
    assert synced.returncode == 1, synced.stderr
    assert "refused" in synced.stderr
    assert holders_on_remote(team, FILE) == ["b1"]
    text = a("sync")  # refused once, dropped: nothing left to push
    assert text.returncode == 0, text.stderr


# -- gc -------------------------------------------------------------------------------

def shard_state(repo: Path, prefix: str = "refs/heads/") -> dict[str, tuple[str, int]]:
    """Each shard branch: (its tree, how many commits its history has)."""
    out = {}
    for index in range(COUNT):
        ref = prefix + S.shard_ref(BRANCH, index)[len("refs/heads/"):]
        out[ref[len(prefix):]] = (git(repo, "rev-parse", f"{ref}^{{tree}}").strip(),
                                  int(git(repo, "rev-list", "--count", ref)))
    return out


def lock_list(clone: Runner) -> list[tuple]:
    return [(l["path"], l["owner"], l["mode"], l["since"], l["generation"], l["confirmed"])
            for l in json.loads(ok(clone("--json", "lock", "list")).stdout)["locks"]]


def test_gc_squashes_every_shard_and_leaves_its_state(tmp_path):
    team, (a, b) = sharded(tmp_path, "a", "b")
    files = ["src/auth.py", "docs/guide/intro.md", "lib/core/db.py", "tests/unit/test_x.py",
             "web/app/main.js", "ops/deploy/run.sh"]
    for _ in range(2):  # history on every shard: claims, renewals, releases
        ok(a("lock", "acquire", *files, "--session", "a1"))
        ok(a("lock", "acquire", "src/", "--session", "a1"))  # a broad lock: every shard
        ok(a("lock", "release", *files[2:], "src/", "--session", "a1"))
    ok(a("lock", "acquire", "web/app/main.js", "--session", "a1"))
    before = shard_state(a.cwd)
    assert all(count > 3 for _, count in before.values()), before
    locks = lock_list(a)
    result = json.loads(ok(a("--json", "gc", "--yes", "--keep-days", "0")).stdout)
    assert sorted(p["branch"] for p in result["shards"]) == sorted(before)
    for part in result["shards"]:
        assert part["squashed"] == before[part["branch"]][1] and part["kept"] == 0, part
    after = shard_state(a.cwd)
    assert after == {ref: (tree, 1) for ref, (tree, _) in before.items()}  # state unchanged
    assert shard_state(team.bare) == after  # and pushed
    assert lock_list(a) == locks
    # b fetched the old histories; its claims land on the rewritten shards
    ok(b("lock", "acquire", "lib/core/db.py", "--session", "b1"))
    assert holders_on_remote(team, "lib/core/db.py") == ["b1"]
    assert holders_on_remote(team, "src/auth.py") == ["a1"]
    assert int(git(team.bare, "rev-list", "--count", f"refs/heads/{shard_branch('lib/core/db.py')}")) == 2
    # nothing old enough: every shard left as it is
    again = json.loads(ok(a("--json", "gc", "--yes", "--keep-days", "30")).stdout)
    assert all(p["squashed"] == 0 for p in again["shards"])
    text = ok(a("gc", "--yes", "--keep-days", "30")).stdout
    assert f"shard {shard_branch(FILE)}: squashed 0 commit(s)" in text


# -- status ---------------------------------------------------------------------------

def git_commands(clone: Runner, *args: str, tmp: Path) -> tuple[subprocess.CompletedProcess, list[str]]:
    """Run *args* with GIT_TRACE on: the result, and the git commands it started."""
    trace = tmp / "trace.txt"
    proc = clone(*args, env={"GIT_TRACE": str(trace)})
    lines = trace.read_text().splitlines() if trace.exists() else []
    trace.unlink(missing_ok=True)
    return proc, [l.split("built-in: git ", 1)[1].split()[0] for l in lines
                  if "built-in: git " in l]


def test_status_counts_the_shards_with_unpushed_operations(tmp_path):
    team, (a,) = sharded(tmp_path, "a")
    doc = json.loads(ok(a("--json", "status")).stdout)
    assert doc["sync"]["shards"] == {"count": COUNT, "ahead": 0}
    assert "shards ahead 0 of 4" in ok(a("status")).stdout
    for target in (FILE, "docs/guide/intro.md"):  # one offline claim in each of two shards
        claim = offline(team, lambda: a("lock", "acquire", target, "--session", "a1"))
        assert claim.returncode == 3
    ahead = len({shard_branch(FILE), shard_branch("docs/guide/intro.md")})
    proc, commands = git_commands(a, "--json", "status", tmp=tmp_path)
    assert json.loads(ok(proc).stdout)["sync"]["shards"] == {"count": COUNT, "ahead": ahead}
    # cheap: one for-each-ref reads every shard's tips, one log finds which are ahead
    assert commands.count("for-each-ref") == 1 and commands.count("log") <= 1, commands
    assert f"shards ahead {ahead} of 4" in ok(a("status")).stdout
    ok(a("sync"))
    assert json.loads(ok(a("--json", "status")).stdout)["sync"]["shards"]["ahead"] == 0
    # another clone's claims make this one's shards behind, not ahead
    b = team.clone("b")
    ok(b("register", "b1", "--provider", "Codex"))
    ok(b("lock", "acquire", "lib/core/db.py", "--session", "b1"))
    ok(a("sync"))
    assert json.loads(ok(a("--json", "status")).stdout)["sync"]["shards"]["ahead"] == 0


# -- the forge page of the main branch -----------------------------------------------

def section(page: str, heading: str) -> str:
    start = page.index(heading) + len(heading)
    end = page.find("\n## ", start)
    return page[start:end if end != -1 else len(page)]


def test_the_main_branch_page_lists_the_shards_locks_and_names_the_shard_branches(tmp_path):
    """Rewritten for issue 32: the main branch's page used to list no lock ("the locks are
    on the shard branches").  Now it lists every held lock of every shard, as of its last
    render, and names the shard branches under the table."""
    team, (a,) = sharded(tmp_path, "a")
    ok(a("lock", "acquire", FILE, "--session", "a1"))
    ok(a("lock", "acquire", "docs/guide/", "--session", "a1"))
    assert S.lock_shards(FILE, COUNT) != S.lock_shards("docs/guide/", COUNT)  # two shards
    ok(a("update", "a1", "--working-on", "auth, sharded"))  # a main-branch commit re-renders
    page = remote_blob(team, BRANCH, "registry.md")
    locks = section(page, "## Locks")
    assert "| src/auth.py | a1 | auth, sharded |" in locks, locks
    assert "| docs/guide/ | a1 | auth, sharded |" in locks, locks
    assert "4 lock shard branches" in locks and "-shards/00` … `" in locks
    assert "-shards/03`" in locks and "agent-registry lock list" in locks
    assert "lock_shards: 4" in page and "held_locks: 2" in page
    assert "format\\-2" not in page and "format-2" not in page  # the fence is not a session
    live = section(page, "## Live sessions")
    assert "| a1 |" in live and "on the shards" not in live
    # the shard branch's own page lists the lock; the README names the shard branches
    shard_page = remote_blob(team, shard_branch(FILE), "registry.md")
    assert "src/auth.py | a1 | held" in section(shard_page, "## Locks")
    assert "`agent-registry-shards/00` …" in remote_blob(team, BRANCH, "README.md")
    # given the branch, the page names the shard branches in full
    from agent_registry.branch.render import registry_md
    with Registry.open(str(a.cwd)) as reg:
        main = reg.view_at(reg.tip())
        named = registry_md(main, time.time(), "test", branch=BRANCH).decode()
    assert f"`{BRANCH}-shards/00` … `{BRANCH}-shards/03`" in section(named, "## Locks")


def test_a_converted_single_branch_page_still_lists_its_locks(tmp_path):
    """A single-branch registry (as older versions made it) listed its locks on its page;
    converted by its first write, its main branch's page lists them still, now read from
    the shards."""
    team = Team(tmp_path)
    a = team.clone("a")
    with single_branch(a.cwd) as old:
        old.register("a1", provider="Codex", working_on="auth")
        old.claim("a1", [FILE])
    page = remote_blob(team, BRANCH, "registry.md")
    assert "src/auth.py | a1 | held" in section(page, "## Locks")
    assert "shard" not in page and "held_locks: 1" in page
    ok(a("register", "a2", "--provider", "Codex", "--working-on", "docs"))  # converts
    page = remote_blob(team, BRANCH, "registry.md")
    assert "lock_shards: 16" in page and "held_locks: 1" in page
    assert "| src/auth.py | a1 | auth |" in section(page, "## Locks")


# -- watch ----------------------------------------------------------------------------

def test_watch_follows_the_shard_branches_claims_are_activity(tmp_path):
    """A session last heard of on the main branch three hours ago, that claims on a
    shard now, is active: watch walks the shard branches too and does not call it idle;
    one that did nothing since is idle, as in the single-branch layout."""
    pytest.importorskip("apprise")
    from test_watch import Receiver, title, watch

    team, (agent, watcher) = sharded(tmp_path, "agent", "watcher")
    receiver = Receiver()
    try:
        assert json.loads(ok(watch(watcher, receiver)).stdout)["cold_start"]
        with Registry.open(str(agent.cwd), clock=FakeClock(time.time() - 3 * 3600)) as old:
            old.register("s-busy", provider="Codex", working_on="auth")
            old.register("s-quiet", provider="Kimi", working_on="docs")
        ok(agent("lock", "acquire", FILE, "--session", "s-busy"))  # a shard commit, now
        passed = json.loads(ok(watch(watcher, receiver, "--idle-minutes", "60")).stdout)
        keys = sorted(e["key"] for e in passed["events"])
        assert [k for k in keys if not k.startswith("idle/")] == \
            ["started/s-busy", "started/s-quiet"]
        assert [k.split("/")[1] for k in keys if k.startswith("idle/")] == ["s-quiet"]
        assert title("s-busy", "idle") not in receiver.accepted()
        state = json.loads((watcher.cwd / ".git" / "agent-registry" / "watch.json").read_text())
        shard_tip = git(watcher.cwd, "rev-parse",
                        f"refs/remotes/origin/{shard_branch(FILE)}").strip()
        assert shard_tip in state["shard_heads"]
    finally:
        receiver.close()


# -- doctor ---------------------------------------------------------------------------

def test_doctor_counts_the_shards_and_its_fix_pushes_them(tmp_path):
    team, (a,) = sharded(tmp_path, "a")
    assert offline(team, lambda: a("lock", "acquire", FILE, "--session", "a1")).returncode == 3
    proc = a("--json", "doctor")
    sync = next(c for c in json.loads(proc.stdout)["checks"] if c["name"] == "sync")
    assert sync["status"] == "fail" and sync["fixable"], sync
    assert "shards ahead 1 of 4" in sync["verdict"]
    assert f"1 claim(s) not confirmed by origin: {FILE} (a1)" in sync["verdict"]
    fixed = json.loads(a("--json", "doctor", "--fix").stdout)
    assert "sync" in fixed["fixed"], fixed
    sync = next(c for c in fixed["checks"] if c["name"] == "sync")
    assert sync["verdict"] == "origin reachable, 0 ahead, 0 behind, shards ahead 0 of 4", sync
    assert holders_on_remote(team, FILE) == ["a1"]


def test_the_dashboards_sync_button_pushes_the_shards(tmp_path):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from agent_registry.dashboard.app import create_app
    team, (a,) = sharded(tmp_path, "a")
    assert offline(team, lambda: a("lock", "acquire", FILE, "--session", "a1")).returncode == 3
    app = create_app(str(a.cwd))
    with TestClient(app, base_url="http://127.0.0.1") as client:
        assert client.get("/api/sync").json()["shards"] == {"count": COUNT, "ahead": 1}
        answer = client.post("/api/sync", headers={"X-Agent-Registry-Token": app.state.post_token})
        assert answer.status_code == 200, answer.text
        assert [p["branch"] for p in answer.json()["shards"]] == [shard_branch(FILE)]
        assert client.get("/api/sync").json()["shards"] == {"count": COUNT, "ahead": 0}
    assert holders_on_remote(team, FILE) == ["a1"]
