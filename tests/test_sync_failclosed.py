"""Sync fails closed: a remote that goes back in time, a remote that hangs, refuses or
denies, a URL with a password, a SHA-256 remote.  Real bare remotes, real clones, real
`git push --force`, real TCP and HTTP servers on 127.0.0.1; nothing of git is mocked.
"""
from __future__ import annotations

import http.server
import json
import selectors
import socket
import subprocess
import threading
from contextlib import contextmanager
from pathlib import Path

import pytest

from helpers import CLI, FakeClock, git, wait_for
from test_sync import (BRANCH, Team, free_port, lock_owner_on_remote, sessions_on_remote,
                       sync_parts)


def snapshot(team: Team) -> dict[str, str]:
    """The remote's registry branch and lock shards as they are now: ref -> commit."""
    out = git(team.bare, "for-each-ref", "--format=%(refname) %(objectname)",
              f"refs/heads/{BRANCH}", f"refs/heads/{BRANCH}-shards/")
    return dict(line.split() for line in out.splitlines() if "-intents/" not in line)


def rewind(team: Team, to: dict[str, str]) -> None:
    """Force-push the remote's registry branch and lock shards back to *to* (a
    :func:`snapshot`), as a person restoring it from an old copy would."""
    ops = team.root / "ops"
    if not ops.exists():
        git(team.root, "clone", "-q", str(team.bare), str(ops))
    git(ops, "fetch", "-q", "origin", f"+refs/heads/{BRANCH}*:refs/remotes/origin/{BRANCH}*")
    moved = [f"{tip}:{ref}" for ref, tip in to.items() if snapshot(team).get(ref) != tip]
    assert moved, "nothing to rewind"
    git(ops, "push", "-q", "--force", "origin", *moved)
    assert snapshot(team) == to


def rewinds(report: dict) -> tuple[list, list]:
    """(re-applied, refused) of every rewind one `sync --json` met, on any ref."""
    parts = sync_parts(report)
    return ([r for p in parts for r in (p.get("rewind") or {}).get("reapplied", [])],
            [r for p in parts for r in (p.get("rewind") or {}).get("refused", [])])


def on_the_shard_of(path: str, n: int = 1) -> list[str]:
    """*n* other files whose locks are recorded on *path*'s lock shard."""
    from agent_registry.branch.shards import lock_shards
    return [p for i in range(1000) if lock_shards(p := f"src/s{i}.py", 16, None)
            == lock_shards(path, 16, None)][:n]


def test_a_claim_on_a_rewound_remote_puts_this_clones_confirmed_locks_back(tmp_path):
    team = Team(tmp_path)
    a = team.clone("a")
    assert a("register", "a1", "--provider", "Kimi", "--working-on", "auth").returncode == 0
    before_claims = snapshot(team)
    assert a("lock", "acquire", "src/auth.py", "--session", "a1").returncode == 0
    rewind(team, before_claims)
    c = team.clone("c")  # a clone made after the rewind writes on the old state
    assert c("register", "c1", "--provider", "Claude", "--working-on", "ui").returncode == 0
    # ... of the main branch and of the lock shard: a remote that only went back would
    # take this clone's next push as a fast-forward, and need nothing re-applied
    theirs, neighbour = on_the_shard_of("src/auth.py", 2)
    assert c("lock", "acquire", theirs, "--session", "c1").returncode == 0
    assert lock_owner_on_remote(team, "src/auth.py") == []

    claim = a("lock", "acquire", neighbour, "--session", "a1")  # it writes the rewound shard
    assert claim.returncode == 0, claim.stderr
    assert "went back in time" in claim.stderr
    assert "re-applied: src/auth.py by a1" in claim.stderr
    assert lock_owner_on_remote(team, "src/auth.py") == ["a1"]
    assert lock_owner_on_remote(team, neighbour) == ["a1"]
    assert lock_owner_on_remote(team, theirs) == ["c1"]
    assert sessions_on_remote(team) == ["a1", "c1"]
    status = json.loads(a("--json", "status").stdout)["sync"]
    assert {"session": "a1", "path": "src/auth.py"} in status["rewind"]["reapplied"]
    assert status["rewind"]["refused"] == []
    assert "went back in time" in a("status").stdout
    # the re-applied lock is the holder's as before: it releases it as usual
    assert a("lock", "release", "src/auth.py", "--session", "a1").returncode == 0
    assert lock_owner_on_remote(team, "src/auth.py") == []


def test_sync_reapplies_a_lost_session_and_refuses_a_path_taken_meanwhile(tmp_path):
    team = Team(tmp_path)
    a, c = team.clone("a"), team.clone("c")
    assert c("register", "c1", "--provider", "Claude", "--working-on", "ui").returncode == 0
    before_a = snapshot(team)
    assert a("register", "a1", "--provider", "Kimi", "--working-on", "auth").returncode == 0
    [neighbour] = on_the_shard_of("src/auth.py")  # two locks on one shard
    assert a("lock", "acquire", "src/auth.py", neighbour, "--session", "a1").returncode == 0
    a("context", "log", "a1", "working on auth")
    rewind(team, before_a)
    # c writes on the old state of both refs: the main branch, the lock shard
    assert c("update", "c1", "--working-on", "ui, after the rewind").returncode == 0
    assert c("lock", "acquire", "src/auth.py", "--session", "c1").returncode == 0

    synced = a("--json", "sync")
    assert synced.returncode == 1, synced.stderr
    report = json.loads(synced.stdout)["error"]
    assert report["rewind"]["to"] != report["rewind"]["from"]
    reapplied, refused = rewinds(report)  # the main branch's and each shard's
    assert {"session": "a1", "path": None} in reapplied
    assert {"session": "a1", "path": neighbour} in reapplied
    assert [(r["path"], r["owner"]) for r in refused] == [("src/auth.py", "c1")]
    assert sessions_on_remote(team) == ["a1", "c1"]
    assert lock_owner_on_remote(team, "src/auth.py") == ["c1"]
    assert lock_owner_on_remote(team, neighbour) == ["a1"]
    text = a("status").stdout
    assert "went back in time" in text and "not re-applied src/auth.py" in text
    # settled: the next sync has nothing more to re-apply
    again = json.loads(a("--json", "sync").stdout)
    assert rewinds(again) == ([], []) and all(p["pushed"] for p in sync_parts(again))


def test_a_gc_rewrite_is_not_a_rewind_and_brings_nothing_back(tmp_path):
    from agent_registry import Registry
    from agent_registry.sync.gc import gc
    team = Team(tmp_path)
    a, b = team.clone("a"), team.clone("b")
    assert b("register", "b1", "--provider", "Claude", "--working-on", "ui").returncode == 0
    assert b("lock", "acquire", "src/b.py", "--session", "b1").returncode == 0
    clock = FakeClock()
    with Registry.open(str(a.cwd), clock=clock) as reg:
        reg.register("a1", provider="Kimi", working_on="auth")
        for _ in range(5):
            reg.heartbeat("a1")
            clock.advance(3600)
        clock.advance(10 * 86400)
        reg.heartbeat("a1")
        assert gc(reg, keep_days=3)["squashed"] > 1
    forced = a("lock", "force-release", "src/b.py", "--force", "--reason", "stuck", "--by", "ops")
    assert forced.returncode == 0, forced.stderr
    synced = b("--json", "sync")
    assert synced.returncode == 0, synced.stderr
    assert json.loads(synced.stdout)["rewind"] is None
    assert lock_owner_on_remote(team, "src/b.py") == []  # what was removed after gc stays so
    assert "went back in time" not in b("status").stdout


def sha256_team(root: Path) -> Team:
    team = Team.__new__(Team)
    team.root, team.bare = root, root / "remote.git"
    seed = root / "seed"
    seed.mkdir()
    git(seed, "init", "-q", "--object-format=sha256")
    (seed / "README.md").write_text("project\n")
    git(seed, "add", "README.md")
    git(seed, "commit", "-q", "-m", "initial")
    git(root, "init", "-q", "--bare", "--object-format=sha256", str(team.bare))
    git(seed, "push", "-q", str(team.bare), "main")
    team.url = str(team.bare)
    return team


def test_status_remote_reads_a_sha256_remote(tmp_path):
    team = sha256_team(tmp_path)
    a = team.clone("a")
    assert a("register", "a1", "--provider", "Kimi", "--working-on", "auth").returncode == 0
    assert a("lock", "acquire", "README.md", "--session", "a1").returncode == 0
    assert len(team.remote_tip()) == 64
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = subprocess.run([CLI, "--json", "status", "--remote", team.url], cwd=elsewhere,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    snap = json.loads(out.stdout)
    assert [s["id"] for s in snap["sessions"]] == ["a1"] and len(snap["tip"]) == 64
    assert [l["path"] for l in snap["locks"]] == ["README.md"]


# -- remote failures: which one, and no credential anywhere -----------------------------

class _Unauthorized(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Basic realm="registry"')
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_POST = do_GET

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def refusing_http():
    """A real HTTP server on 127.0.0.1 that answers every request with 401."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Unauthorized)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def registered_clone(team: Team, name: str, *sids: str):
    clone = team.clone(name)
    for sid in sids:
        assert clone("register", sid, "--provider", "Kimi", "--working-on", "w").returncode == 0
    return clone


def test_remote_failures_say_which_and_the_advice_fits(tmp_path, refusing_http):
    team = Team(tmp_path)
    a = registered_clone(team, "a", "a1")
    cases = {
        "unreachable": f"git://127.0.0.1:{free_port()}/remote.git",  # nothing listening
        "unreachable-ssh": f"ssh://git@127.0.0.1:{free_port()}/remote.git",
        "credentials": f"http://127.0.0.1:{refusing_http}/remote.git",
    }
    for i, (kind, url) in enumerate(cases.items()):
        git(a.cwd, "remote", "set-url", "origin", url)
        claim = a("--json", "lock", "acquire", f"f{i}.py", "--session", "a1",
                  env={"GIT_SSH_COMMAND": "ssh -o BatchMode=yes -o StrictHostKeyChecking=no"})
        assert claim.returncode == 3, (kind, claim.stderr)
        error = json.loads(claim.stdout)["error"]
        assert error["remote_error"]["kind"] == kind.split("-")[0], (kind, claim.stderr)
        assert "Could not read from remote repository" not in claim.stderr
        if kind == "credentials":
            assert "origin refused our credentials" in claim.stderr
            assert "once origin is reachable" not in claim.stderr
        else:
            assert "origin is unreachable" in claim.stderr
            assert "once origin is reachable" in claim.stderr
    # a server that takes the connection and refuses the branch
    git(a.cwd, "remote", "set-url", "origin", str(team.bare))
    hook = team.bare / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'registry pushes are frozen' >&2\nexit 1\n")
    hook.chmod(0o755)
    claim = a("--json", "lock", "acquire", "src/auth.py", "--session", "a1")
    assert claim.returncode == 3, claim.stderr
    assert json.loads(claim.stdout)["error"]["remote_error"]["kind"] == "denied"
    assert "origin denied the push to agent-registry" in claim.stderr
    assert "registry pushes are frozen" in claim.stderr
    assert "once origin is reachable" not in claim.stderr
    synced = a("--json", "sync")
    assert synced.returncode == 3
    # the claims wait on their lock shards: each shard's push was denied
    kinds = [p["remote_error"]["kind"] for p in sync_parts(json.loads(synced.stdout)["error"])
             if p.get("remote_error")]
    assert kinds and set(kinds) == {"denied"}, synced.stdout
    assert "last error: origin denied the push" in a("status").stdout


def test_register_and_context_log_that_cannot_be_pushed_say_so(tmp_path):
    team = Team(tmp_path)
    a = registered_clone(team, "a", "a0")
    hidden = team.bare.with_name("hidden.git")
    team.bare.rename(hidden)
    try:
        reg = a("--json", "register", "a1", "--provider", "Kimi", "--working-on", "auth")
        assert reg.returncode == 0, reg.stderr  # done here: the session works in this clone
        assert "a1 is registered in this clone only" in reg.stderr
        assert "agent-registry sync" in reg.stderr
        body = json.loads(reg.stdout)
        assert body["confirmed"] is False and body["remote_error"]["kind"] == "not-found"
        log = a("--json", "context", "log", "a1", "offline line")
        assert log.returncode == 0 and "not pushed to origin" in log.stderr
        assert json.loads(log.stdout)["confirmed"] is False
    finally:
        hidden.rename(team.bare)
    reg = a("--json", "register", "a2", "--provider", "Kimi", "--working-on", "auth")
    assert reg.returncode == 0 and "not pushed" not in reg.stderr
    assert "confirmed" not in json.loads(reg.stdout)
    assert sessions_on_remote(team) == ["a0", "a1", "a2"]


def test_no_password_is_printed_or_stored(tmp_path, refusing_http):
    secret = "s3cr3t-pw"
    team = Team(tmp_path)
    a = registered_clone(team, "a", "a1")
    outputs = []
    for url in (f"http://agent:{secret}@127.0.0.1:{free_port()}/remote.git",  # unreachable
                f"http://agent:{secret}@127.0.0.1:{refusing_http}/remote.git"):  # 401
        git(a.cwd, "remote", "set-url", "origin", url)
        for args in (("register", "a2", "--provider", "Kimi", "--working-on", "w"),
                     ("context", "log", "a1", "line"),
                     ("lock", "acquire", "src/auth.py", "--session", "a1"),
                     ("sync",), ("status",), ("status", "--remote", url)):
            for mode in ((), ("--json",)):
                proc = a(*mode, *args)
                assert proc.returncode in (0, 1, 3), (args, proc.stderr)
                outputs += [proc.stdout, proc.stderr]
    assert any("cannot read" in o for o in outputs)
    assert not [o for o in outputs if secret in o]
    state = Path(git(a.cwd, "rev-parse", "--git-common-dir").strip())
    state = (state if state.is_absolute() else a.cwd / state) / "agent-registry"
    for path in state.rglob("*"):
        if path.is_file():
            assert secret not in path.read_text(errors="replace"), path
    assert secret not in git(a.cwd, "log", "--all", "--format=%B")  # on no registry ref


# -- a remote that accepts the connection and never answers -----------------------------

class SilentServer:
    """A TCP server on 127.0.0.1 that accepts every connection, reads what the client
    says, and never answers.  Records how many connections were open at once."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.open = self.most_open = self.accepted = 0
        self._stop = False
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        sel = selectors.DefaultSelector()
        sel.register(self.sock, selectors.EVENT_READ)
        while not self._stop:
            for key, _ in sel.select(timeout=0.1):
                if key.fileobj is self.sock:
                    conn, _ = self.sock.accept()
                    sel.register(conn, selectors.EVENT_READ)
                    self.open += 1
                    self.accepted += 1
                    self.most_open = max(self.most_open, self.open)
                elif not key.fileobj.recv(65536):  # the client gave up and closed
                    sel.unregister(key.fileobj)
                    key.fileobj.close()
                    self.open -= 1

    def close(self) -> None:
        self._stop = True
        self._thread.join()
        self.sock.close()


@contextmanager
def silent_origin(clone, timeout: int):
    """*clone*'s origin a SilentServer (yielded), and its network timeout *timeout* s."""
    server = SilentServer()
    try:
        git(clone.cwd, "remote", "set-url", "origin", f"git://127.0.0.1:{server.port}/remote.git")
        git(clone.cwd, "config", "agent-registry.networkTimeout", str(timeout))
        yield server
    finally:
        server.close()


def test_a_hung_remote_does_not_queue_the_clones_claims_behind_each_other(tmp_path):
    team = Team(tmp_path)
    a = registered_clone(team, "a", "s0", "s1", "s2")
    # long enough that three processes started together are all connected at once
    with silent_origin(a, 8) as server:
        procs = [subprocess.Popen([CLI, "lock", "acquire", f"src/f{i}.py", "--session", f"s{i}"],
                                  cwd=a.cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True) for i in range(3)]
        results = [(p.wait(timeout=120), p.stderr.read()) for p in procs]
    assert [code for code, _ in results] == [3, 3, 3], results
    assert all("origin is unreachable: no answer within 8 s" in err for _, err in results)
    # the three waited for the remote together, not one after the other behind the flock
    assert server.most_open == 3
    held = json.loads(a("--json", "lock", "list").stdout)["locks"]
    assert sorted((l["path"], l["confirmed"]) for l in held) == \
        [(f"src/f{i}.py", False) for i in range(3)]


def test_a_remote_that_never_answers_is_waited_for_once_per_operation(tmp_path):
    """A fresh clone's first operation makes the registry, settles its layout and then
    does its own work, each of which would ask the remote: one that accepts the
    connection and never answers is asked once, and each operation after it (still
    in the single-branch layout it was made in, offline) once more, not twice."""
    team = Team(tmp_path)
    a = team.clone("a")
    with silent_origin(a, 2) as server:
        made = a("register", "s0", "--provider", "Kimi")
        after_register = server.accepted
        claimed = a("lock", "acquire", "src/a.py", "--session", "s0")
        wait_for(lambda: server.open == 0, "the timed-out connections to close")
    assert "not yet shared with other clones: origin is unreachable: no answer within 2 s" \
        in made.stderr
    assert claimed.returncode == 3, claimed.stderr
    assert "not converted to 16 lock shards" in claimed.stderr  # tried, in the same wait
    assert (after_register, server.accepted) == (1, 2)
    held = json.loads(a("--json", "lock", "list").stdout)["locks"]
    assert [(l["path"], l["confirmed"]) for l in held] == [("src/a.py", False)]


def test_a_claim_over_many_lock_shards_waits_for_a_silent_remote_once(tmp_path):
    """A claim of paths in several lock shards is one operation on each: the first to
    meet a remote that never answers waits out the timeout, the others get its answer
    at once, and each path is held here, unconfirmed."""
    team = Team(tmp_path)
    a = registered_clone(team, "a", "s0")
    paths = [f"src/m{i}.py" for i in range(8)]  # in several of the 16 shards
    with silent_origin(a, 2) as server:
        claimed = a("lock", "acquire", *paths, "--session", "s0")
        wait_for(lambda: server.open == 0, "the timed-out connection to close")
    assert claimed.returncode == 3, claimed.stderr
    assert "origin is unreachable: no answer within 2 s" in claimed.stderr
    assert server.accepted == 1
    held = json.loads(a("--json", "lock", "list").stdout)["locks"]
    assert sorted((l["path"], l["confirmed"]) for l in held) == [(p, False) for p in paths]
    from agent_registry.branch.shards import claim_shards
    assert len(claim_shards("s0", paths, 16)) > 2  # several shards' operations


def test_processes_of_two_clones_racing_through_a_remote_agree_on_one_winner(tmp_path):
    """Fetch and push outside the flock: processes of one clone push side by side, and a
    claim dropped by a sibling's replay is still reported refused to its own process."""
    from test_sync import _race
    team = Team(tmp_path)
    a = registered_clone(team, "a", *(f"a{i}" for i in range(4)))
    b = registered_clone(team, "b", *(f"b{i}" for i in range(4)))
    runners = [a] * 4 + [b] * 4
    sids = [f"a{i}" for i in range(4)] + [f"b{i}" for i in range(4)]
    results = _race(runners, lambda i: f"exec {CLI} lock acquire contended.py --session {sids[i]}")
    winners = [sids[i] for i, p in enumerate(results) if p.returncode == 0]
    assert len(winners) == 1, [(p.returncode, p.stderr) for p in results]
    assert all(p.returncode == 1 for p in results if p.returncode != 0)
    assert lock_owner_on_remote(team, "contended.py") == winners
    results = _race(runners, lambda i: f"exec {CLI} lock acquire own/{sids[i]}.py --session {sids[i]}")
    assert all(p.returncode == 0 for p in results), [p.stderr for p in results if p.returncode]
    for sid in sids:
        assert lock_owner_on_remote(team, f"own/{sid}.py") == [sid]


def test_a_lock_lost_to_a_rewound_shard_is_named_by_sync_whichever_command_met_it(tmp_path):
    team = Team(tmp_path)
    a = team.clone("a")
    assert a("register", "a1", "--provider", "Kimi", "--working-on", "auth").returncode == 0
    before = snapshot(team)
    assert a("lock", "acquire", "src/auth.py", "--session", "a1").returncode == 0  # confirmed
    [shard] = [ref for ref, tip in snapshot(team).items() if before[ref] != tip]
    git(team.bare, "update-ref", shard, before[shard])  # the shard alone goes back
    c = team.clone("c")
    assert c("register", "c1", "--provider", "Claude").returncode == 0
    assert c("lock", "acquire", "src/auth.py", "--session", "c1").returncode == 0  # first
    # another command of this clone meets the rewind first: its answer is its own
    assert a("register", "a2", "--provider", "Kimi").returncode == 0
    assert a("lock", "acquire", "src/auth.py", "--session", "a2").returncode == 1
    assert lock_owner_on_remote(team, "src/auth.py") == ["c1"]

    synced = a("--json", "sync")
    assert synced.returncode == 1, synced.stdout
    [lost] = json.loads(synced.stdout)["error"]["lost"]
    assert (lost["session"], lost["path"], lost["owner"], lost["branch"], lost["told"]) == \
        ("a1", "src/auth.py", "c1", shard.removeprefix("refs/heads/"), True)
    told = json.loads(a("--json", "inbox", "a1").stdout)["messages"]
    assert [m["subject"] for m in told] == ["lock lost to a rewind"]
    assert "src/auth.py" in told[0]["body"] and "c1" in told[0]["body"]
    assert a("sync").returncode == 0  # named once


def test_a_claim_does_not_make_anew_a_lock_shard_deleted_on_the_remote(tmp_path):
    from agent_registry.branch.shards import lock_shards, shard_branch
    team = Team(tmp_path)
    a, b = team.clone("a"), team.clone("b")
    git(b.cwd, "config", "agent-registry.readFreshness", "0")  # every read fetches
    assert a("register", "a1", "--provider", "Kimi").returncode == 0
    assert b("register", "b1", "--provider", "Claude").returncode == 0
    assert a("lock", "acquire", "src/auth.py", "--session", "a1").returncode == 0
    assert b("lock", "check", "src/auth.py").returncode == 1
    shard = shard_branch(BRANCH, lock_shards("src/auth.py", 16, None)[0])
    git(team.bare, "update-ref", "-d", f"refs/heads/{shard}")  # a forge's "delete branch"
    check = b("lock", "check", "src/auth.py")  # fetched: the shard is gone here too
    assert check.returncode == 1 and "missing here" in check.stderr, check.stderr

    claim = b("lock", "acquire", "src/auth.py", "--session", "b1")
    assert claim.returncode == 1 and "gone from origin" in claim.stderr, claim.stderr
    assert git(team.bare, "for-each-ref", f"refs/heads/{shard}") == ""
    # the clone that wrote it pushes it back, its claim with it
    assert a("sync").returncode == 0
    assert lock_owner_on_remote(team, "src/auth.py") == ["a1"]
    assert b("lock", "acquire", "src/auth.py", "--session", "b1").returncode == 1
