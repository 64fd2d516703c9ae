"""Many clones, one remote: real bare repositories, real clones, real pushes racing.

The same scenarios run over a local path and over a real socket (`git daemon` on
127.0.0.1), since fetch and push behave differently once a network is in between.
"""
from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import CLI, FakeClock, Runner, git, make_repo

BRANCH = "agent-registry"


class Team:
    """A bare remote and clones of it, each with its own agent-registry runner."""

    def __init__(self, root: Path, url: str | None = None) -> None:
        self.root = root
        self.bare = root / "remote.git"
        seed = make_repo(root / "seed")
        git(root, "init", "-q", "--bare", str(self.bare))
        git(seed, "push", "-q", str(self.bare), "main")
        self.url = url or str(self.bare)

    def clone(self, name: str) -> Runner:
        path = self.root / name
        git(self.root, "clone", "-q", self.url, str(path))
        return Runner(path)

    def remote_tip(self) -> str | None:
        proc = subprocess.run(["git", "rev-parse", "-q", "--verify", f"refs/heads/{BRANCH}"],
                              cwd=self.bare, capture_output=True, text=True)
        return proc.stdout.strip() or None

    def remote_file(self, path: str) -> str | None:
        proc = subprocess.run(["git", "show", f"refs/heads/{BRANCH}:{path}"], cwd=self.bare,
                              capture_output=True, text=True)
        return proc.stdout if proc.returncode == 0 else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(params=["path", "git-daemon"])
def team(request, tmp_path):
    """A team over a local path, and over git:// served by a real `git daemon`."""
    if request.param == "path":
        yield Team(tmp_path)
        return
    port = free_port()
    t = Team(tmp_path, url=f"git://127.0.0.1:{port}/remote.git")
    daemon = subprocess.Popen(
        ["git", "daemon", "--export-all", "--enable=receive-pack", "--reuseaddr",
         f"--base-path={tmp_path}", "--listen=127.0.0.1", f"--port={port}", str(tmp_path)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):  # wait until it accepts connections
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.05)
    yield t
    daemon.terminate()
    daemon.wait()


def remote_registry(team: Team):
    """The library's registry of the bare remote itself: its whole view reads every ref
    the remote holds (the main branch, each lock shard, each clone ref), wherever the
    layout puts a record.  The caller closes it."""
    from agent_registry.core.registry import Registry as CoreRegistry
    return CoreRegistry.open(str(team.bare))


def sessions_on_remote(team: Team) -> list[str]:
    """The live sessions on the remote, as the library reads them."""
    with remote_registry(team) as reg:
        return sorted(s.id for s in reg.sessions())


def lock_owner_on_remote(team: Team, path: str) -> list[str]:
    """The holders of *path*'s lock on the remote, as the library's whole view of the
    remote's refs reads it (the record of that target, whichever shard holds it)."""
    with remote_registry(team) as reg:
        lock = reg.view().lock(path)
        return [h.session for h in lock.holders] if lock else []


def diary_on_remote(team: Team, sid: str) -> str:
    """*sid*'s diary on the remote as its readers merge it (main branch and clone refs);
    "" when it has none."""
    from agent_registry.errors import NotFound
    with remote_registry(team) as reg:
        try:
            return reg.diary(sid)["diary"]
        except NotFound:
            return ""


def session_on_remote(team: Team, sid: str):
    """*sid*'s session record on the remote, as the library reads it."""
    with remote_registry(team) as reg:
        return reg.session(sid)


def remote_ops(team: Team) -> list[dict]:
    """Every operation the remote's registry refs record (main branch, lock shards, clone
    refs; not intents), oldest first per ref, as the library's audit-log parser reads
    each commit (branch/trailers.parse_op)."""
    from agent_registry.branch.trailers import parse_op
    refs = git(team.bare, "for-each-ref", "--format=%(refname)", f"refs/heads/{BRANCH}",
               f"refs/heads/{BRANCH}-shards/", f"refs/heads/{BRANCH}-clones/").split()
    out = []
    for ref in refs:
        if "-intents/" in ref:
            continue
        for message in git(team.bare, "log", "--reverse", "--format=%B%x00", ref).split("\0"):
            op = parse_op(message.strip())
            if op:
                out.append(op)
    return out


def ops_on_remote(team: Team, kind: str | None = None) -> dict[str, int]:
    """Per operation id (of *kind*, or any but resolutions and intent records), how many
    commits of one of the remote's registry refs apply it (the most of any ref: a broad
    claim is applied once in each shard it writes), read back with the library's parser
    of the audit log (branch/trailers.parse_op), whichever ref the layout wrote."""
    from agent_registry.branch.trailers import parse_op
    refs = git(team.bare, "for-each-ref", "--format=%(refname)", f"refs/heads/{BRANCH}",
               f"refs/heads/{BRANCH}-shards/", f"refs/heads/{BRANCH}-clones/").split()
    refs = [r for r in refs if "-intents/" not in r]
    found: dict[str, int] = {}
    for ref in refs:
        here: dict[str, int] = {}
        for message in git(team.bare, "log", "--format=%B%x00", ref).split("\0"):
            op = parse_op(message.strip())
            if not op or not op.get("id") or op.get("op") in ("resolved", "intents"):
                continue
            if kind is None or op.get("op") == kind:
                here[op["id"]] = here.get(op["id"], 0) + 1
        for op_id, n in here.items():
            found[op_id] = max(found.get(op_id, 0), n)
    return found


def sync_parts(report: dict) -> list[dict]:
    """What one `sync --json` did on each ref: the main branch's report, each lock
    shard's that had something to push, this clone's ref's when it had."""
    return [report, *(report.get("shards") or []), *([report["clone"]] if report.get("clone") else [])]


def confirmed_by(report: dict) -> list[dict]:
    return [c for part in sync_parts(report) for c in part["confirmed"]]


def sent_by(report: dict) -> int:
    return sum(part.get("sent") or 0 for part in sync_parts(report))


def test_the_remote_decides_who_owns_a_path(team):
    a, b = team.clone("a"), team.clone("b")
    assert a("register", "a1", "--provider", "Kimi", "--working-on", "auth").returncode == 0
    assert a("lock", "acquire", "src/auth.py", "--session", "a1").returncode == 0
    assert b("register", "b1", "--provider", "Claude", "--working-on", "ui").returncode == 0
    lost = b("lock", "acquire", "src/auth.py", "--session", "b1")
    assert lost.returncode == 1 and "a1" in lost.stderr
    assert b("lock", "acquire", "README.md", "--session", "b1").returncode == 0
    assert sessions_on_remote(team) == ["a1", "b1"]
    assert lock_owner_on_remote(team, "src/auth.py") == ["a1"]
    assert lock_owner_on_remote(team, "README.md") == ["b1"]
    # each clone sees the other after a sync, with the sync line in status
    assert a("sync").returncode == 0
    status = a("status")
    assert "b1" in status.stdout and "sync: origin" in status.stdout


def test_a_fresh_clone_sees_the_branch_with_no_setup(team):
    a = team.clone("a")
    a("register", "a1", "--provider", "Kimi", "--working-on", "auth")
    a("lock", "acquire", "src/auth.py", "--session", "a1")
    fresh = team.clone("fresh")
    status = fresh("status")
    assert status.returncode == 0 and "a1" in status.stdout
    check = fresh("--json", "lock", "check", "src/auth.py")
    assert json.loads(check.stdout)["paths"][0]["owner"] == "a1"


def _race(clones: list[Runner], script_for) -> list[subprocess.CompletedProcess]:
    """Start one shell script per clone at the same instant; wait for all."""
    go = clones[0].cwd.parent / f"go-{random.random()}"
    procs = []
    for i, clone in enumerate(clones):
        cmd = f'while [ ! -e "{go}" ]; do sleep 0.005; done; {script_for(i)}'
        procs.append(subprocess.Popen(["bash", "-c", cmd], cwd=clone.cwd, text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    time.sleep(0.3)
    go.touch()
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=600)  # a watchdog: two soaks share 2 cores
        out.append(subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr))
    return out


def _team_of(team: Team, n: int) -> list[Runner]:
    clones = [team.clone(f"c{i}") for i in range(n)]
    for i, c in enumerate(clones):
        assert c("register", f"s{i}", "--provider", "Codex", "--working-on", f"task {i}").returncode == 0
    return clones


@pytest.mark.parametrize("rounds", [1, pytest.param(6, marks=pytest.mark.slow)])
def test_sixteen_clones_race_for_one_path_exactly_one_wins(tmp_path, rounds):
    team = Team(tmp_path)
    clones = _team_of(team, 16)
    for r in range(rounds):
        path = f"src/contended-{r}.py"
        results = _race(clones, lambda i: f"exec {CLI} lock acquire {path} --session s{i}")
        winners = [i for i, p in enumerate(results) if p.returncode == 0]
        assert len(winners) == 1, [(p.returncode, p.stderr) for p in results]
        winner = f"s{winners[0]}"
        for i, p in enumerate(results):
            if i != winners[0]:
                assert p.returncode == 1, p.stderr
                assert winner in p.stderr
        assert lock_owner_on_remote(team, path) == [winner]
    assert sessions_on_remote(team) == sorted(f"s{i}" for i in range(16))


# 160 claim processes a round through one remote: two minutes of a 2-core machine, so it
# runs with the soak tests; make test keeps the sixteen-clone race for one path
@pytest.mark.slow
@pytest.mark.parametrize("rounds", [3])
def test_sixteen_clones_ten_distinct_paths_each_all_land(tmp_path, rounds):
    team = Team(tmp_path)
    clones = _team_of(team, 16)
    for r in range(rounds):
        def ten_claims(i: int) -> str:
            paths = " ".join(f"r{r}/c{i}/f{k}.py" for k in range(10))
            # one process per claim, as agents do; the loop stops at the first failure
            return f"for p in {paths}; do {CLI} lock acquire $p --session s{i} || exit $?; done"
        results = _race(clones, ten_claims)
        assert all(p.returncode == 0 for p in results), [p.stderr for p in results if p.returncode]
        for i in range(16):
            for k in range(10):
                assert lock_owner_on_remote(team, f"r{r}/c{i}/f{k}.py") == [f"s{i}"]
    assert sessions_on_remote(team) == sorted(f"s{i}" for i in range(16))


def test_offline_claim_exits_3_and_sync_confirms_it(team):
    a = team.clone("a")
    a("register", "a1", "--provider", "Kimi", "--working-on", "auth")
    hidden = team.bare.with_name("hidden.git")
    team.bare.rename(hidden)
    try:
        offline = a("lock", "acquire", "src/auth.py", "--session", "a1")
        assert offline.returncode == 3
        assert "not confirmed by origin" in offline.stderr and "agent-registry sync" in offline.stderr
        assert a("context", "log", "a1", "written offline").returncode == 0
        check = json.loads(a("--json", "lock", "check", "src/auth.py", "--session", "a1").stdout)
        assert check["paths"][0]["state"] == "locked-by-me"
        assert check["paths"][0]["confirmed"] is False
        assert a("sync").returncode == 3
    finally:
        hidden.rename(team.bare)
    synced = a("--json", "sync")
    assert synced.returncode == 0, synced.stderr
    assert confirmed_by(json.loads(synced.stdout)) == [{"session": "a1", "paths": ["src/auth.py"]}]
    assert lock_owner_on_remote(team, "src/auth.py") == ["a1"]
    assert "written offline" in diary_on_remote(team, "a1")
    check = json.loads(a("--json", "lock", "check", "src/auth.py", "--session", "a1").stdout)
    assert check["paths"][0]["confirmed"] is True


def test_offline_claim_is_refused_when_someone_else_got_there_first(team):
    a, b = team.clone("a"), team.clone("b")
    a("register", "a1", "--provider", "Kimi", "--working-on", "auth")
    b("register", "b1", "--provider", "Claude", "--working-on", "auth too")
    hidden = team.bare.with_name("hidden.git")
    team.bare.rename(hidden)
    assert a("lock", "acquire", "src/auth.py", "--session", "a1").returncode == 3
    assert a("context", "log", "a1", "diary line kept").returncode == 0
    hidden.rename(team.bare)
    assert b("lock", "acquire", "src/auth.py", "--session", "b1").returncode == 0
    synced = a("sync")
    assert synced.returncode == 1
    assert "refused" in synced.stdout and "b1" in synced.stdout
    assert lock_owner_on_remote(team, "src/auth.py") == ["b1"]
    assert "diary line kept" in diary_on_remote(team, "a1")  # nothing else lost
    check = json.loads(a("--json", "lock", "check", "src/auth.py", "--session", "a1").stdout)
    assert check["paths"][0]["owner"] == "b1"


def test_deleted_remote_branch_is_recreated_without_loss(team):
    a = team.clone("a")
    a("register", "a1", "--provider", "Kimi", "--working-on", "auth")
    a("lock", "acquire", "src/auth.py", "--session", "a1")
    git(team.bare, "update-ref", "-d", f"refs/heads/{BRANCH}")  # a1's session with it
    assert sessions_on_remote(team) == []
    assert a("lock", "acquire", "README.md", "--session", "a1").returncode == 0
    assert a("update", "a1", "--working-on", "auth again").returncode == 0
    assert sessions_on_remote(team) == ["a1"]
    assert session_on_remote(team, "a1").working_on == "auth again"
    assert lock_owner_on_remote(team, "src/auth.py") == ["a1"]
    assert lock_owner_on_remote(team, "README.md") == ["a1"]


def test_a_deleted_remote_shard_is_recreated_by_sync(tmp_path):
    from agent_registry.branch.shards import lock_shards, shard_branch
    team = Team(tmp_path)
    a = team.clone("a")
    a("register", "a1", "--provider", "Kimi", "--working-on", "auth")
    a("lock", "acquire", "src/auth.py", "--session", "a1")
    [shard] = lock_shards("src/auth.py", 16, None)
    git(team.bare, "update-ref", "-d", f"refs/heads/{shard_branch(BRANCH, shard)}")
    assert a("sync").returncode == 0
    fresh = team.clone("fresh")  # a clone of the remote reads it whole again
    check = fresh("--json", "lock", "check", "src/auth.py")
    assert json.loads(check.stdout)["paths"][0]["owner"] == "a1", check.stderr
    assert lock_owner_on_remote(team, "src/auth.py") == ["a1"]


def test_force_pushed_remote_keeps_our_pending_operations(team):
    a, b = team.clone("a"), team.clone("b")
    a("register", "a1", "--provider", "Kimi", "--working-on", "auth")
    b("register", "b1", "--provider", "Claude", "--working-on", "ui")
    # someone rewrites the remote history (same state, new commits): a squash by hand
    tip = team.remote_tip()
    tree = git(team.bare, "rev-parse", f"{tip}^{{tree}}").strip()
    squashed = git(team.bare, "commit-tree", tree, "-m", "squash by hand").strip()
    git(team.bare, "update-ref", f"refs/heads/{BRANCH}", squashed)
    hidden = team.bare.with_name("hidden.git")
    team.bare.rename(hidden)
    assert a("update", "a1", "--working-on", "pending while offline").returncode == 0
    assert a("context", "log", "a1", "pending while offline").returncode == 0
    hidden.rename(team.bare)
    assert a("lock", "acquire", "src/auth.py", "--session", "a1").returncode == 0
    assert a("sync").returncode == 0  # the main branch's pending update, on the squash
    assert sessions_on_remote(team) == ["a1", "b1"]
    assert session_on_remote(team, "a1").working_on == "pending while offline"
    assert "pending while offline" in diary_on_remote(team, "a1")
    assert lock_owner_on_remote(team, "src/auth.py") == ["a1"]


def test_a_remote_that_drops_most_sessions_is_not_adopted(team):
    a = team.clone("a")
    for i in range(6):
        a("register", f"s{i}", "--provider", "Kimi", "--working-on", f"task {i}")
    # someone replaces the remote branch with an almost empty one, without gc
    blob = subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=team.bare, input="x\n",
                          capture_output=True, text=True).stdout.strip()
    tree = subprocess.run(["git", "mktree"], cwd=team.bare, input=f"100644 blob {blob}\tREADME.md\n",
                          capture_output=True, text=True).stdout.strip()
    wiped = git(team.bare, "commit-tree", tree, "-m", "wipe").strip()
    git(team.bare, "update-ref", f"refs/heads/{BRANCH}", wiped)
    synced = a("sync")
    assert synced.returncode == 1
    assert "not adopted" in synced.stderr
    status = a("status")
    assert all(f"s{i}" in status.stdout for i in range(6))  # local state kept
    assert "not adopted" in status.stdout  # the sync line says why
    update = a("update", "s0", "--working-on", "kept here")  # a write of the main branch
    assert update.returncode == 0 and "not adopted" in update.stderr, update.stderr
    assert sessions_on_remote(team) == []  # nothing pushed over the wiped branch
    # a claim writes its lock shard, which was not wiped, but its lock would name a
    # session the remote no longer lists: s0 goes to the registry branch first
    # (sync/remote.py _sessions_first), which the guard refuses, so the claim is held
    # here, not confirmed (exit 3), and no lock of s0 lands on the remote
    claim = a("lock", "acquire", "src/auth.py", "--session", "s0")
    assert claim.returncode == 3 and "not adopted" in claim.stderr, claim.stderr
    check = json.loads(a("--json", "lock", "check", "src/auth.py", "--session", "s0").stdout)
    assert check["paths"][0]["state"] == "locked-by-me" and not check["paths"][0]["confirmed"]
    shards = git(team.bare, "for-each-ref", "--format=%(refname)", f"refs/heads/{BRANCH}-shards/")
    assert not any(git(team.bare, "ls-tree", "-r", "--name-only", ref, "held").split()
                   for ref in shards.split())


def test_a_remote_that_rejects_pushes_leaves_claims_unconfirmed(team):
    a = team.clone("a")
    a("register", "a1", "--provider", "Kimi", "--working-on", "auth")
    hook = team.bare / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'registry pushes are frozen' >&2\nexit 1\n")
    hook.chmod(0o755)
    claim = a("lock", "acquire", "src/auth.py", "--session", "a1")
    assert claim.returncode == 3 and "not confirmed" in claim.stderr
    assert a("update", "a1", "--working-on", "auth, still").returncode == 0  # kept locally
    assert lock_owner_on_remote(team, "src/auth.py") == []
    assert session_on_remote(team, "a1").working_on == "auth"
    hook.unlink()
    assert a("sync").returncode == 0
    assert lock_owner_on_remote(team, "src/auth.py") == ["a1"]
    assert session_on_remote(team, "a1").working_on == "auth, still"


def test_kill_9_during_push_leaves_everything_consistent(tmp_path):
    team = Team(tmp_path)
    a = team.clone("a")
    a("register", "a1", "--provider", "Kimi", "--working-on", "auth")
    rng = random.Random(7)
    for i in range(12):
        proc = subprocess.Popen([CLI, "lock", "acquire", f"k/{i}.py", "--session", "a1"],
                                cwd=a.cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.0, 0.25))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    # the next commands work and converge: every claim is on the remote or not at all,
    # and the local branch, the remote branch and its objects are valid
    assert a("sync").returncode == 0
    assert a("lock", "acquire", "final.py", "--session", "a1").returncode == 0
    for where in (a.cwd, team.bare):
        fsck = subprocess.run(["git", "fsck", "--strict"], cwd=where, capture_output=True, text=True)
        assert fsck.returncode == 0, fsck.stderr
    # nothing of this clone waits to be pushed, on any of its refs
    sync_state = json.loads(a("--json", "status").stdout)["sync"]
    assert sync_state["ahead"] == 0 and sync_state["shards"]["ahead"] == 0, sync_state
    assert not (sync_state.get("clone") or {}).get("ahead"), sync_state
    held = json.loads(a("--json", "lock", "list").stdout)["locks"]
    assert "final.py" in [lock["path"] for lock in held]
    assert all(lock["confirmed"] for lock in held), held
    for lock in held:  # every lock listed by the session has a record on the remote
        assert lock_owner_on_remote(team, lock["path"]) == ["a1"]
    with remote_registry(team) as reg:  # and the remote holds no other of a1's
        assert sorted(l["path"] for l in reg.locks()) == sorted(l["path"] for l in held)


def test_status_remote_reads_without_a_clone(team, tmp_path):
    a = team.clone("a")
    a("register", "a1", "--provider", "Kimi", "--working-on", "auth")
    a("lock", "acquire", "src/auth.py", "--session", "a1")
    elsewhere = tmp_path / "not-a-repo"
    elsewhere.mkdir()
    out = subprocess.run([CLI, "--json", "status", "--remote", team.url], cwd=elsewhere,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    snap = json.loads(out.stdout)
    assert [s["id"] for s in snap["sessions"]] == ["a1"]
    assert [l["path"] for l in snap["locks"]] == ["src/auth.py"]
    missing = subprocess.run([CLI, "status", "--remote", str(tmp_path / "nope.git")],
                             cwd=elsewhere, capture_output=True, text=True)
    assert missing.returncode == 1 and "cannot read" in missing.stderr


def test_gc_squashes_old_history_and_other_clones_follow(tmp_path):
    from agent_registry import Registry
    from agent_registry.sync.gc import gc
    team = Team(tmp_path)
    a, b = team.clone("a"), team.clone("b")
    clock = FakeClock()
    with Registry.open(str(a.cwd), clock=clock) as reg:
        # writes of the main branch (a heartbeat goes to this clone's own ref)
        reg.register("a1", provider="Kimi", working_on="auth")
        for i in range(20):
            reg.update("a1", working_on=f"auth {i}")
            clock.advance(60)
        reg.claim("a1", ["src/auth.py"])
        clock.advance(10 * 86400)
        for i in range(3):
            reg.update("a1", working_on=f"auth, later {i}")
            clock.advance(60)
        before_tree = git(a.cwd, "rev-parse", f"{BRANCH}^{{tree}}").strip()
        before_count = int(git(a.cwd, "rev-list", "--count", BRANCH))
        result = gc(reg, keep_days=3)
    assert result["squashed"] == before_count - 3 and result["kept"] == 3
    assert int(git(a.cwd, "rev-list", "--count", BRANCH)) == 4
    assert git(a.cwd, "rev-parse", f"{BRANCH}^{{tree}}").strip() == before_tree  # state unchanged
    assert team.remote_tip() == git(a.cwd, "rev-parse", BRANCH).strip()
    # b fetched the old history before; its pending work replays on the rewritten remote
    assert b("register", "b1", "--provider", "Claude", "--working-on", "ui").returncode == 0
    assert sessions_on_remote(team) == ["a1", "b1"]
    assert int(git(team.bare, "rev-list", "--count", BRANCH)) == 5
    # the state gc kept: a1's session as last updated, its lock on its shard
    assert session_on_remote(team, "a1").working_on == "auth, later 2"
    assert lock_owner_on_remote(team, "src/auth.py") == ["a1"]


def test_gc_cli_validates_input(team):
    a = team.clone("a")
    a("register", "a1", "--provider", "Kimi", "--working-on", "auth")
    tip = team.remote_tip()
    assert a("gc", "--keep-days", "-1").returncode == 2
    assert team.remote_tip() == tip
    assert a("gc", "--keep-days", "30").returncode == 0  # nothing that old: no change
    assert team.remote_tip() == tip


def test_release_here_and_force_release_there_resolve_by_meaning(team):
    a, b = team.clone("a"), team.clone("b")
    a("register", "a1", "--provider", "Kimi", "--working-on", "auth")
    assert a("lock", "acquire", "src/auth.py", "--session", "a1").returncode == 0
    assert b("sync").returncode == 0
    hidden = team.bare.with_name("hidden.git")
    team.bare.rename(hidden)
    assert a("lock", "release", "src/auth.py", "--session", "a1").returncode == 0  # offline
    hidden.rename(team.bare)
    forced = b("lock", "force-release", "src/auth.py", "--force", "--reason", "stuck", "--by", "ops")
    assert forced.returncode == 0, forced.stderr
    synced = a("--json", "sync")
    assert synced.returncode == 0, synced.stderr
    report = json.loads(synced.stdout)
    assert [r for part in sync_parts(report) for r in part["refused"]] == []
    assert sent_by(report) == 1  # the release reached the remote, refused by no one
    # the audit log, as the library parses it: the force-release applied once, and the
    # release resolved on replay as a change the remote had made already
    ops = remote_ops(team)
    [forced_op] = [op for op in ops if op["op"] == "force-release"]
    assert forced_op["path"] == "src/auth.py" and forced_op["by"] == "ops"
    assert [op["of"]["op"] for op in ops if op["op"] == "resolved"] == ["release"]
    assert not [op for op in ops if op["op"] == "release"]
    assert lock_owner_on_remote(team, "src/auth.py") == []
    assert session_on_remote(team, "a1").locks == []
    for clone in (a, b):
        check = json.loads(clone("--json", "lock", "check", "src/auth.py").stdout)
        assert check["paths"][0]["state"] == "free"


def test_the_users_pre_push_hook_does_not_run_on_registry_pushes(team):
    a = team.clone("a")
    hook = a.cwd / ".git" / "hooks" / "pre-push"
    hook.write_text("#!/bin/sh\necho 'the whole test suite would run here' >&2\nexit 1\n")
    hook.chmod(0o755)
    a("register", "a1", "--provider", "Kimi", "--working-on", "auth")
    claim = a("lock", "acquire", "src/auth.py", "--session", "a1")
    assert claim.returncode == 0, claim.stderr
    assert lock_owner_on_remote(team, "src/auth.py") == ["a1"]


def test_sync_says_what_it_pushed_and_when_there_was_nothing(tmp_path):
    team = Team(tmp_path)
    a = team.clone("a")
    assert a("register", "a1", "--provider", "Kimi", "--working-on", "auth").returncode == 0
    layout = "layout: 16 lock shards with clone refs, layout format 3"
    idle = a("sync")
    assert idle.returncode == 0 and idle.stdout.splitlines() == [
        "up to date with origin: nothing to push", layout]
    assert sent_by(json.loads(a("--json", "sync").stdout)) == 0
    hidden = team.bare.with_name("hidden.git")
    team.bare.rename(hidden)
    assert a("lock", "acquire", "src/auth.py", "--session", "a1").returncode == 3
    assert a("context", "log", "a1", "offline line").returncode == 0
    hidden.rename(team.bare)
    synced = a("--json", "sync")
    assert synced.returncode == 0 and sent_by(json.loads(synced.stdout)) == 2
    assert a("lock", "release", "src/auth.py", "--session", "a1").returncode == 0
    team.bare.rename(hidden)
    assert a("lock", "acquire", "README.md", "--session", "a1").returncode == 3
    hidden.rename(team.bare)
    from agent_registry.branch.shards import lock_shards, shard_branch
    [shard] = lock_shards("README.md", 16, None)
    assert a("sync").stdout.splitlines() == [
        "up to date with origin: nothing to push",
        f"shard {shard_branch(BRANCH, shard)}: pushed 1 operation(s) to origin",
        "confirmed: README.md by a1", layout]


def _old_history(team: Team) -> Runner:
    """A clone whose registry branch holds a few commits made two months ago."""
    from agent_registry import Registry
    a = team.clone("a")
    with Registry.open(str(a.cwd), clock=FakeClock()) as reg:
        reg.register("a1", provider="Kimi", working_on="auth")
        for i in range(4):  # writes of the main branch (heartbeats go to the clone's ref)
            reg.update("a1", working_on=f"auth {i}")
    return a


def _on_a_terminal(runner: Runner, args: list[str], answer: bytes) -> subprocess.CompletedProcess:
    import pty
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen([CLI, *args], cwd=runner.cwd, stdin=slave,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        os.write(master, answer)
        out, err = proc.communicate(timeout=120)
    finally:
        os.close(master)
        os.close(slave)
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


def test_gc_dry_run_changes_nothing_and_a_terminal_is_asked_first(tmp_path):
    team = Team(tmp_path)
    a = _old_history(team)
    tip = team.remote_tip()
    dry = a("--json", "gc", "--keep-days", "30", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    plan = json.loads(dry.stdout)
    # the main branch's 7: init, the layout, register and 4 updates
    assert plan["dry_run"] is True and plan["squashed"] == 7 and plan["kept"] == 0
    assert team.remote_tip() == tip == git(a.cwd, "rev-parse", BRANCH).strip()
    assert a("gc", "--keep-days", "30", "--dry-run").stdout.startswith("would squash 7 commit(s)")
    declined = _on_a_terminal(a, ["gc", "--keep-days", "30"], b"n\n")
    assert declined.returncode == 1, declined.stderr
    assert "squash 7 commit(s) of agent-registry" in declined.stderr
    assert "not confirmed; nothing changed" in declined.stderr
    assert team.remote_tip() == tip == git(a.cwd, "rev-parse", BRANCH).strip()
    done = _on_a_terminal(a, ["gc", "--keep-days", "30", "--yes"], b"")
    assert done.returncode == 0 and "squashed 7 commit(s)" in done.stdout, done.stderr
    assert team.remote_tip() != tip
