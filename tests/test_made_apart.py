"""Two registries made apart: clones of one remote each ran `init` (and registered
sessions) before the remote had a registry, then both published there.  The loser of
the atomic create adopts the winner's registry (its own init and layout are not carried
over: sync/replay.py ``made_apart``); its claims land on it, and the sessions those claims
name land first, on the registry branch (sync/remote.py ``_sessions_first``): no lock on
the remote ever names a session the remote does not list.  Real bare remote, real
clones, the real CLI; a watcher reads the remote while the claims race."""
from __future__ import annotations

import json
import subprocess
import threading

import pytest

from helpers import CLI, git
from test_sync import BRANCH, Team


def made_apart(team: Team, name: str, sessions: int = 1):
    """A clone of *team*'s remote whose registry (init, *sessions* sessions) was made with
    sync off, before the remote had any; then sync on (origin), never pushed."""
    run = team.clone(name)
    git(run.cwd, "config", "agent-registry.remote", "none")
    assert run("init").returncode == 0
    for n in range(1, sessions + 1):
        proc = run("register", f"{name}-{n}", "--provider", "Kimi")
        assert proc.returncode == 0, proc.stderr
    git(run.cwd, "config", "--unset", "agent-registry.remote")
    return run


def remote_seen(bare) -> tuple[set[str], set[str]]:
    """(sessions holding a lock in some shard, sessions the registry branch lists), the
    shards read before the registry branch: a lock seen there names a session the
    registry branch had by then, if its session went there first."""
    shards = git(bare, "for-each-ref", "--format=%(objectname)",
                 f"refs/heads/{BRANCH}-shards/").split()
    holders = set()
    for tip in shards:
        names = git(bare, "ls-tree", "--name-only", f"{tip}:held", check=False).split()
        holders |= {n[:-len(".json")] for n in names if n.endswith(".json")}
    main = git(bare, "rev-parse", "-q", "--verify", f"refs/heads/{BRANCH}", check=False).strip()
    listed = set()
    if main:
        for where in ("sessions/live", "sessions/done"):
            names = git(bare, "ls-tree", "-r", "--name-only", f"{main}:{where}", check=False)
            listed |= {n.rsplit("/", 1)[-1][:-len(".yaml")] for n in names.split()
                       if n.endswith(".yaml")}
    return holders, listed


def seen_from_a_third_clone(team: Team, paths: dict[str, str]) -> None:
    """A fresh clone of the remote lists every session, and each path's lock names its
    holder, a session it lists; no sync run anywhere first."""
    other = team.clone("third")
    proc = other("--json", "status")
    assert proc.returncode == 0, proc.stderr
    status = json.loads(proc.stdout)
    assert set(paths.values()) <= {s["id"] for s in status["sessions"]}, status["sessions"]
    for path, holder in paths.items():
        check = other("lock", "check", path)
        assert check.returncode == 1 and holder in check.stdout, (path, check)
        assert "unknown" not in (check.stdout + check.stderr).lower(), check


def one_registry(team: Team) -> None:
    """One registry on the remote: one root, the winner's layout, and nothing of the
    loser's init or conversion carried over onto it."""
    roots = git(team.bare, "rev-list", "--max-parents=0", f"refs/heads/{BRANCH}").split()
    assert len(roots) == 1, roots
    log = git(team.bare, "log", "--format=%s", f"refs/heads/{BRANCH}")
    assert log.count("init registry") == 1 and log.count("layout format") == 1, log
    assert "on replay" not in log, log
    for ref in git(team.bare, "for-each-ref", "--format=%(refname)",
                   f"refs/heads/{BRANCH}-shards/").split():
        assert len(git(team.bare, "rev-list", "--max-parents=0", ref).split()) == 1, ref


def test_the_loser_brings_its_sessions_with_its_claims(tmp_path):
    """One after the other: the second clone's claim meets the first one's registry."""
    team = Team(tmp_path)
    a, b = made_apart(team, "a"), made_apart(team, "b")
    for run, name in ((a, "a"), (b, "b")):
        proc = run("lock", "acquire", f"src/{name}.py", "--session", f"{name}-1")
        assert proc.returncode == 0, proc.stderr
        holders, listed = remote_seen(team.bare)
        assert holders <= listed, (holders, listed)
    seen_from_a_third_clone(team, {"src/a.py": "a-1", "src/b.py": "b-1"})
    one_registry(team)


def test_claims_racing_from_two_registries_made_apart_never_name_an_unknown_session(tmp_path):
    """Two clones with two sessions each claim at once (four processes); a watcher reads
    the remote all along: no lock there ever names a session it does not list, and at
    the end a third clone sees all four sessions holding their paths."""
    team = Team(tmp_path)
    clones = {name: made_apart(team, name, sessions=2) for name in ("a", "b")}
    claims = {f"src/{name}{n}.py": f"{name}-{n}" for name in clones for n in (1, 2)}
    seen_wrong: list = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            holders, listed = remote_seen(team.bare)
            if not holders <= listed:
                seen_wrong.append((holders, listed))

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        procs = [subprocess.Popen([CLI, "lock", "acquire", path, "--session", sid],
                                  cwd=clones[sid[0]].cwd, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
                 for path, sid in claims.items()]
        for proc in procs:
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
    finally:
        done.set()
        watcher.join()
    assert not seen_wrong, seen_wrong[0]
    holders, listed = remote_seen(team.bare)
    assert set(claims.values()) <= holders <= listed, (holders, listed)
    seen_from_a_third_clone(team, claims)
    one_registry(team)


def test_the_loser_made_in_another_shard_count_takes_the_winners_layout(tmp_path):
    """The loser's registry had 4 lock shards, the winner's 16: the remote keeps 16, and
    the loser's claim is where the winner's layout puts it."""
    team = Team(tmp_path)
    a = made_apart(team, "a")
    b = team.clone("b")
    git(b.cwd, "config", "agent-registry.remote", "none")
    assert b("init", "--shards", "4").returncode == 0
    assert b("register", "b-1", "--provider", "Kimi").returncode == 0
    git(b.cwd, "config", "--unset", "agent-registry.remote")
    for run, name in ((a, "a"), (b, "b")):
        proc = run("lock", "acquire", f"src/{name}.py", "--session", f"{name}-1")
        assert proc.returncode == 0, proc.stderr
    layout = json.loads(git(team.bare, "show", f"refs/heads/{BRANCH}:layout.json"))
    assert layout["shards"] == 16, layout
    seen_from_a_third_clone(team, {"src/a.py": "a-1", "src/b.py": "b-1"})
    one_registry(team)


def registered_offline(tmp_path):
    """(team, clone a): a registry on the team's remote, and a-1 registered in clone a
    while its remote could not be used (kept here only)."""
    team = Team(tmp_path)
    a = team.clone("a")
    assert a("init").returncode == 0
    git(a.cwd, "remote", "set-url", "origin", str(tmp_path / "nowhere.git"))
    assert a("register", "a-1", "--provider", "Kimi").returncode == 0
    git(a.cwd, "remote", "set-url", "origin", team.url)
    return team, a


def test_a_claim_after_a_register_whose_push_failed_puts_the_session_there_first(tmp_path):
    """The same rule outside a registry made apart: a session registered while the remote
    could not be used goes to the remote before the lock that names it."""
    team, a = registered_offline(tmp_path)
    assert "a-1" not in remote_seen(team.bare)[1]
    proc = a("lock", "acquire", "src/a.py", "--session", "a-1")
    assert proc.returncode == 0, proc.stderr
    holders, listed = remote_seen(team.bare)
    assert "a-1" in holders and holders <= listed, (holders, listed)
    seen_from_a_third_clone(team, {"src/a.py": "a-1"})


def test_a_claim_whose_session_cannot_go_first_says_why_once(tmp_path):
    """The session's register could not be pushed, and the remote now refuses the
    registry branch (a hook) while it takes the shards: the claim stays unconfirmed (exit
    3), nothing of it lands, and the remote's words are said once, not wrapped twice in
    "origin denied the push to ...: "."""
    team, a = registered_offline(tmp_path)
    hook = team.bare / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\nwhile read old new ref; do\n"
                    f"  [ \"$ref\" = refs/heads/{BRANCH} ] && echo 'main is protected' >&2 "
                    "&& exit 1\ndone\nexit 0\n")
    hook.chmod(0o755)
    proc = a("--json", "lock", "acquire", "src/a.py", "--session", "a-1")
    assert proc.returncode == 3, (proc.stdout, proc.stderr)
    error = json.loads(proc.stdout)["error"]
    said = error["remote_error"]
    assert said["kind"] == "denied", said
    assert said["message"].count("denied the push") == 1, said["message"]
    assert error["message"].count("denied the push") == 1, error["message"]
    assert "main is protected" in said["message"], said
    holders, listed = remote_seen(team.bare)
    assert "a-1" not in holders and holders <= listed, (holders, listed)


@pytest.mark.parametrize("counts", [(4, 16), (16, 4)], ids=["winner-4", "winner-16"])
def test_the_losers_first_claims_go_where_the_winners_layout_puts_them(tmp_path, counts):
    """Registries made apart in different shard counts: the loser's first claim was
    routed by its own layout, which it gives up for the winner's when its session goes
    there first; every claim each clone was told it holds is seen held from a third
    clone (several paths: one alone may fall in the same shard under both counts), and no
    shard the winner's layout does not name is made on the remote."""
    team = Team(tmp_path)
    runs = {name: made_in(team, name, count, []) for name, count in zip("ab", counts)}
    paths = {}
    for name, run in runs.items():
        for n in range(4):
            proc = run("lock", "acquire", f"src/{name}{n}.py", "--session", f"{name}-1")
            assert proc.returncode == 0, proc.stderr
            paths[f"src/{name}{n}.py"] = f"{name}-1"
    layout = json.loads(git(team.bare, "show", f"refs/heads/{BRANCH}:layout.json"))
    assert layout["shards"] == counts[0], layout
    shards = git(team.bare, "for-each-ref", "--format=%(refname)",
                 f"refs/heads/{BRANCH}-shards/").split()
    assert len(shards) == counts[0], shards
    seen_from_a_third_clone(team, paths)
    one_registry(team)


def test_the_losers_sync_counts_no_operation_of_the_registry_it_gave_up(tmp_path):
    """The loser's own shard roots (its `init`'s conversion) are not carried over: its
    next `sync` pushes nothing, and says so, never "pushed 1 operation(s)" for each shard
    its claims did not touch."""
    team = Team(tmp_path)
    a, b = made_apart(team, "a"), made_apart(team, "b")
    for run, name in ((a, "a"), (b, "b")):
        assert run("lock", "acquire", f"src/{name}.py", "--session", f"{name}-1").returncode == 0
    refs = git(team.bare, "for-each-ref")
    synced = b("--json", "sync")
    assert synced.returncode == 0, synced.stderr
    report = json.loads(synced.stdout)
    assert report["sent"] == 0 and all(part["sent"] == 0 for part in report["shards"]), \
        [(part["branch"], part["sent"]) for part in report["shards"]]
    text = b("sync")
    assert text.returncode == 0 and "pushed 1 operation" not in text.stdout, text.stdout
    assert git(team.bare, "for-each-ref") == refs


@pytest.mark.parametrize("counts", [(4, 16), (16, 4)], ids=["winner-4", "winner-16"])
def test_claims_made_offline_in_a_registry_made_apart_land_where_the_winners_layout_puts_them(
        tmp_path, counts):
    """Registries made apart in different shard counts, the loser's claims made before its
    first sync: its `sync` adopts the winner's layout and moves each pending claim to the
    shard that layout puts its path in (none is left on a shard ref no reader looks at,
    or in a shard of the same name that no longer records its path)."""
    team = Team(tmp_path)
    paths = {f"src/{name}{n}.py": f"{name}-1" for name in "ab" for n in range(4)}
    runs = {name: made_in(team, name, count, [p for p in paths if p[4] == name])
            for name, count in zip("ab", counts)}
    for run in runs.values():
        synced = run("sync")
        assert synced.returncode == 0, synced.stdout + synced.stderr
    shards = git(team.bare, "for-each-ref", "--format=%(refname)",
                 f"refs/heads/{BRANCH}-shards/").split()
    assert len(shards) == counts[0], shards
    seen_from_a_third_clone(team, paths)
    assert not misplaced(team, counts[0]), misplaced(team, counts[0])
    one_registry(team)


def made_in(team: Team, name: str, count: int, claims: list[str]):
    """A clone whose registry was made in *count* lock shards with sync off, its session
    {name}-1 registered and *claims* made there (exit 0: no remote to confirm them);
    then sync on (origin), never pushed."""
    run = team.clone(name)
    git(run.cwd, "config", "agent-registry.remote", "none")
    assert run("init", "--shards", str(count)).returncode == 0
    assert run("register", f"{name}-1", "--provider", "Kimi").returncode == 0
    for path in claims:
        proc = run("lock", "acquire", path, "--session", f"{name}-1")
        assert proc.returncode == 0, proc.stderr
    git(run.cwd, "config", "--unset", "agent-registry.remote")
    return run


def apart(path: str, counts: tuple[int, int]) -> bool:
    """Whether *path*'s shard under the loser's count is not its shard under the
    winner's (where a claim routed by the loser's count is read by no one)."""
    from agent_registry.branch.shards import path_shard
    return path_shard(path, counts[1]) != path_shard(path, counts[0])


def misplaced(team: Team, count: int) -> list[tuple[str, str]]:
    """(shard, path) of each lock the remote's shards hold outside the shard *count*
    puts its path in (where no reader looks for it), from their held lists."""
    from agent_registry.branch.shards import path_shard
    out = []
    for line in git(team.bare, "for-each-ref", "--format=%(objectname) %(refname)",
                    f"refs/heads/{BRANCH}-shards/").splitlines():
        tip, ref = line.split()
        for name in git(team.bare, "ls-tree", "--name-only", f"{tip}:held",
                        check=False).split():
            held = json.loads(git(team.bare, "show", f"{tip}:held/{name}"))
            out += [(ref, path) for path in held["locks"]
                    if path_shard(path, count) != int(ref.rsplit("/", 1)[1])]
    return out


def local_shards(run) -> list[str]:
    return git(run.cwd, "for-each-ref", "--format=%(refname)",
               f"refs/heads/{BRANCH}-shards/").split()


@pytest.mark.parametrize("counts", [(4, 16), (16, 4)], ids=["winner-4", "winner-16"])
def test_offline_claims_of_a_registry_made_apart_move_with_the_losers_first_online_claim(
        tmp_path, counts):
    """The same, reached through a claim: the loser's first claim online puts its session
    on the remote first (adopting the winner's layout there), and its offline claims move
    to the winner's shards with it; its next `sync` pushes them, and it keeps no shard
    ref the winner's layout does not name."""
    team = Team(tmp_path)
    a = made_in(team, "a", counts[0], [])
    assert a("sync").returncode == 0
    offline = [f"src/b{n}.py" for n in range(6)]
    b = made_in(team, "b", counts[1], offline)
    proc = b("lock", "acquire", "src/online.py", "--session", "b-1")
    assert proc.returncode == 0, proc.stderr
    assert len(local_shards(b)) <= counts[0], local_shards(b)
    synced = b("sync")
    assert synced.returncode == 0, synced.stdout + synced.stderr
    seen_from_a_third_clone(team, {p: "b-1" for p in offline + ["src/online.py"]})
    assert len(git(team.bare, "for-each-ref", f"refs/heads/{BRANCH}-shards/").split("\n")) \
        == counts[0] + 1
    assert not misplaced(team, counts[0]), misplaced(team, counts[0])
    one_registry(team)


def test_an_offline_claim_of_the_loser_on_a_path_the_winner_holds_is_refused_by_its_sync(
        tmp_path):
    """The winner's session holds the paths the loser claimed offline: moved to the
    winner's shards, each claim is refused there like any lost race, and `sync` says so
    (exit 1, a refused line per claim), never dropping one silently."""
    team = Team(tmp_path)
    paths = [f"src/x{n}.py" for n in range(6)]
    a = made_in(team, "a", 4, [])
    assert a("sync").returncode == 0
    assert a("lock", "acquire", *paths, "--session", "a-1").returncode == 0
    b = made_in(team, "b", 16, paths)
    synced = b("sync")
    assert synced.returncode == 1, synced.stdout + synced.stderr
    for path in paths:
        assert any(line.startswith("refused: claim") and path in line and "b-1" in line
                   for line in synced.stdout.splitlines()), (path, synced.stdout)
    seen_from_a_third_clone(team, {p: "a-1" for p in paths})
    assert not misplaced(team, 4), misplaced(team, 4)
    one_registry(team)


@pytest.mark.parametrize("counts", [(4, 16), (16, 4)], ids=["winner-4", "winner-16"])
def test_a_claim_routed_by_the_count_given_up_meanwhile_goes_where_the_remote_puts_it(
        tmp_path, counts):
    """A claim of the loser clone was committed on a shard of the loser's own count, and
    while that process put its session on the remote first, the clone's `sync` adopted
    the winner's count: the claim lands in the shard the winner's layout puts its path
    in, and none is left in a shard of the count given up (read by no one for that
    path); the remote's layout is checked before each shard push."""
    team = Team(tmp_path)
    a = made_in(team, "a", counts[0], [])
    assert a("sync").returncode == 0
    b = made_in(team, "b", counts[1], [])
    path = next(p for p in (f"src/late{n}.py" for n in range(64)) if apart(p, counts))
    hook = b.cwd / ".git" / "hooks" / "reference-transaction"
    armed, ready, go = (tmp_path / w for w in ("armed", "ready", "go"))
    # its first push (its session's, to the registry branch; no flock held), once the
    # tracking ref is written: wait there
    hook.write_text(f"#!/bin/sh\n[ \"$1\" = committed ] || exit 0\n"
                    f"grep -q ' refs/remotes/origin/{BRANCH}' || exit 0\n"
                    f"if rm \"{armed}\" 2>/dev/null; then\n  touch \"{ready}\"\n"
                    f"  while [ ! -e \"{go}\" ]; do sleep 0.02; done\nfi\nexit 0\n")
    hook.chmod(0o755)
    armed.touch()
    claim = subprocess.Popen([CLI, "lock", "acquire", path, "--session", "b-1"], cwd=b.cwd,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             stdin=subprocess.DEVNULL)
    try:
        for _ in range(3000):
            if ready.exists() or claim.poll() is not None:
                break
            threading.Event().wait(0.02)
        assert ready.exists(), claim.communicate()
        synced = b("sync")
        assert synced.returncode == 0, synced.stdout + synced.stderr
    finally:
        go.touch()
    out, err = claim.communicate(timeout=120)
    print("CLAIM", claim.returncode, out, err, path)
    print("SYNC", synced.stdout)
    print(git(team.bare, "for-each-ref"))
    print(git(b.cwd, "for-each-ref"))
    assert claim.returncode == 0, out + err
    shards = git(team.bare, "for-each-ref", "--format=%(refname)",
                 f"refs/heads/{BRANCH}-shards/").split()
    assert len(shards) == counts[0], shards
    # nor kept in this clone, on a ref the remote's layout does not name
    assert all(int(ref[-2:]) < counts[0] for ref in local_shards(b)), local_shards(b)
    seen_from_a_third_clone(team, {path: "b-1"})
    assert not misplaced(team, counts[0]), misplaced(team, counts[0])
    one_registry(team)


def test_a_claim_routed_to_a_shard_the_adopted_layout_does_not_name_is_routed_again(
        tmp_path, monkeypatch):
    """A process of the loser clone read its layout (16 shards) before another process
    adopted the winner's (4): its claim goes to shard 9 or above, which the remote's
    layout does not name.  Not refused as a shard gone from the remote, and not made
    there: routed again by the remote's count, and held where a third clone looks."""
    from agent_registry.core import routing
    from agent_registry.sync import Registry
    team = Team(tmp_path)
    a = made_in(team, "a", 4, [])
    assert a("sync").returncode == 0
    b = made_in(team, "b", 16, [])
    assert b("sync").returncode == 0  # adopted: 4 shards
    from agent_registry.branch.shards import path_shard
    path = next(p for p in (f"src/stale{n}.py" for n in range(200))
                if path_shard(p, 16) >= 4)
    real, seen = routing.layout, []

    def stale(registry):  # the layout this process read before the adoption
        seen.append(registry)
        return real(registry) if len(seen) > 1 else {**real(registry), "shards": 16}

    monkeypatch.setattr(routing, "layout", stale)
    with Registry.open(str(b.cwd)) as registry:
        result = registry.claim("b-1", [path])
    assert [lock["status"] for lock in result["locks"]] == ["acquired"], result
    shards = git(team.bare, "for-each-ref", "--format=%(refname)",
                 f"refs/heads/{BRANCH}-shards/").split()
    assert len(shards) == 4, shards
    assert len(local_shards(b)) == 4, local_shards(b)
    seen_from_a_third_clone(team, {path: "b-1"})
    assert not misplaced(team, 4), misplaced(team, 4)


@pytest.mark.parametrize("when", ["prepared", "committed"])
def test_a_sync_killed_while_it_moves_the_losers_claims_loses_none(tmp_path, when):
    """`sync` killed (-9) at the one ref transaction that moves the loser's registry
    branch and shard refs onto the winner's layout: before it commits (git killed too,
    its .lock files left), or once it has (before the sync state says so).  Every ref
    still reads, and the next `sync` lands every claim where the winner's layout puts it."""
    team = Team(tmp_path)
    paths = [f"src/k{n}.py" for n in range(6)]
    a = made_in(team, "a", 4, [])
    assert a("sync").returncode == 0
    b = made_in(team, "b", 16, paths)
    hook = b.cwd / ".git" / "hooks" / "reference-transaction"
    armed = tmp_path / "armed"
    kill = 'kill -9 "$py" "$PPID"' if when == "prepared" else 'kill -9 "$py"'
    hook.write_text(f"#!/bin/sh\n[ \"$1\" = {when} ] || exit 0\nin=$(cat)\n"
                    f"echo \"$in\" | grep -q ' refs/heads/{BRANCH}$' || exit 0\n"
                    f"echo \"$in\" | grep -q ' refs/heads/{BRANCH}-shards/' || exit 0\n"
                    f"rm \"{armed}\" 2>/dev/null || exit 0\n"
                    f"py=$(ps -o ppid= -p \"$PPID\" | tr -d ' ')\n{kill}\nexit 0\n")
    hook.chmod(0o755)
    armed.touch()
    killed = b("sync")
    assert killed.returncode == -9 and not armed.exists(), (killed, armed.exists())
    git(b.cwd, "for-each-ref")  # every ref still reads
    synced = b("sync")
    assert synced.returncode == 0, synced.stdout + synced.stderr
    assert all(int(ref[-2:]) < 4 for ref in local_shards(b)), local_shards(b)
    seen_from_a_third_clone(team, {p: "b-1" for p in paths})
    assert not misplaced(team, 4), misplaced(team, 4)
    one_registry(team)
