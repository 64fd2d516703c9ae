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
    runs = {}
    for name, count in zip("ab", counts):
        run = team.clone(name)
        git(run.cwd, "config", "agent-registry.remote", "none")
        assert run("init", "--shards", str(count)).returncode == 0
        assert run("register", f"{name}-1", "--provider", "Kimi").returncode == 0
        git(run.cwd, "config", "--unset", "agent-registry.remote")
        runs[name] = run
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
