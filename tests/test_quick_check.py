"""`lock check` read without the core (cli/quickcheck.py, issue 35: check at its floor).

Without a remote, the check reads the registry through branch/lockcheck.py alone, never
importing the core's Registry: its answer (each path's state, the holder's staleness,
the warnings of what cannot be read, the exit code) must be the core's, in the layout
`init` makes and in one branch, in a sha256 and a reftable repository too (the latter
with $AGENT_REGISTRY_TEST_NEW_GIT), for a live holder, a stale one (its process gone), a
holder whose session file cannot be read (held, and said), a directory lock, a glob lock
and the caller's own lock.  Where more decides (a remote, a registry branch named in
config, names compared ignoring case) the core answers.
"""
from __future__ import annotations

from contextlib import closing
import json
import os
import re
import subprocess
import sys
import time

import pytest

from helpers import FakeClock, Runner, git, make_repo, shard_refs_of, single_branch
from test_core_api import put_on_branch
from test_import_budget import LAUNCHER
from test_reftable import NEW_GIT
from test_reftable import VERSION as NEW_GIT_VERSION

from agent_registry.branch.view import live_path
from agent_registry.cli.output import check_code
from agent_registry.cli.quickcheck import open_check
from agent_registry.sync import Registry

PATHS = ["src/auth.py", "lib/x.py", "docs/a/b.md", "src/gone.py", "src/broken.py",
         "src/mine.py", "src/free.py"]


def holders(repo, registry, sleeper) -> None:
    """s2 holds a file, a folder and a glob; s3's process is gone; s4's session file
    is damaged; s1 holds src/mine.py."""
    for sid, pid, paths in (("s1", os.getpid(), ["src/mine.py"]),
                            ("s2", os.getpid(), ["src/auth.py", "lib/", "docs/**/*.md"]),
                            ("s3", sleeper.pid, ["src/gone.py"]),
                            ("s4", os.getpid(), ["src/broken.py"])):
        registry.register(sid, provider="test", pid=pid)
        registry.claim(sid, paths)
    sleeper.kill()
    sleeper.wait()
    put_on_branch(repo, {live_path("s4"): b"id: [not yaml\n"})


@pytest.fixture(params=["default", "one-branch", "sha256", "reftable"])
def repo(tmp_path, request, monkeypatch):
    """A registry in the layout `init` makes (in a sha256 repository too, and in one
    whose refs git keeps in a reftable), or in one branch as older versions made it
    (written by the core: a face would convert it)."""
    repo = tmp_path / "repo"
    if request.param == "reftable":
        if NEW_GIT_VERSION < (2, 46):
            pytest.skip(f"reftable needs git >= 2.46 in AGENT_REGISTRY_TEST_NEW_GIT ({NEW_GIT!r})")
        monkeypatch.setenv("PATH", f"{os.path.dirname(NEW_GIT)}{os.pathsep}{os.environ['PATH']}")
    if request.param in ("sha256", "reftable"):
        repo.mkdir()
        git(repo, "init", "-q", "--object-format=sha256" if request.param == "sha256"
            else "--ref-format=reftable")
    repo = make_repo(repo)  # (a second `git init` keeps the format)
    if request.param == "one-branch":
        registry = single_branch(repo)
    else:
        registry = Registry.open(str(repo))
        registry.init()
    with registry:
        holders(repo, registry, subprocess.Popen(["sleep", "600"]))
    return repo


def answered(repo, *args: str) -> tuple[subprocess.CompletedProcess, bool]:
    """`agent-registry ARGS` run as the console script runs it, and whether it answered
    without importing the core."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", LAUNCHER, *args],
                          cwd=repo, capture_output=True, text=True, timeout=120)
    names = {line.split("|")[2].strip() for line in proc.stderr.splitlines()
             if line.startswith("import time:") and "|" in line}
    proc.stderr = "".join(line + "\n" for line in proc.stderr.splitlines()
                          if not line.startswith("import time:"))
    return proc, "agent_registry.core.registry" not in names


def core_answer(repo, sid: str | None) -> tuple[list[dict], list[str]]:
    with Registry.open(str(repo)) as registry:
        return registry.check(PATHS, sid), registry.warnings


def timeless(results: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "age_seconds"} for r in results]


@pytest.mark.parametrize("session", [["--session", "s1"], ["s1"], []])
def test_a_check_without_a_remote_answers_as_the_core_without_importing_it(repo, session):
    proc, quick = answered(repo, "--json", "lock", "check", *PATHS, *session)
    results, warnings = core_answer(repo, "s1" if session else None)
    assert quick, proc.stderr
    assert timeless(json.loads(proc.stdout)["paths"]) == timeless(results)
    assert proc.returncode == check_code(results) == 1
    assert proc.stderr == "".join(f"agent-registry: warning: {w}\n" for w in warnings)
    states = {r["path"]: (r["state"], r["owner"]) for r in results if r["state"] != "free"}
    assert states == {"src/auth.py": ("locked", "s2"), "lib/x.py": ("locked", "s2"),
                      "docs/a/b.md": ("locked", "s2"), "src/gone.py": ("stale", "s3"),
                      "src/broken.py": ("locked", "s4"),
                      "src/mine.py": ("locked-by-me" if session else "locked", "s1")}
    assert "sessions/live/s4.yaml is unreadable" in proc.stderr
    text, quick = answered(repo, "lock", "check", "src/gone.py", "src/free.py", *session)
    assert quick and text.returncode == 0
    assert text.stdout.startswith("stale: src/gone.py by s3") and "is gone" in text.stdout
    assert text.stdout.endswith("free: src/free.py\n")


@pytest.mark.parametrize("args, said, core", [
    (["--session", "bad id"], "invalid session id", False),
    # the error names the live ids likeliest meant: read by the core, on that path only
    (["nosuch-12"], "unknown session nosuch-12; live sessions: s1, s2, s3", True),
    (["s2"], None, False),  # a registered session named last is the session
])
def test_the_arguments_are_read_as_the_core_reads_them(repo, args, said, core):
    proc, quick = answered(repo, "lock", "check", "src/auth.py", *args)
    assert quick != core
    if said:
        assert proc.returncode == 2 and said in proc.stderr and proc.stdout == ""
    else:
        assert proc.returncode == 0 and proc.stdout.startswith("locked-by-me: src/auth.py")


@pytest.mark.parametrize("remote", [False, True])
def test_an_unknown_session_is_said_never_taken_for_nobody(tmp_path, remote):
    """`lock check --session nosuch` is NotFound (exit 1, one line naming it), as a claim
    by it is, whether the quick check (no remote) or the core (a remote) answers; an
    ended session is still a session: its check answers."""
    repo = make_repo(tmp_path / "repo")
    run = Runner(repo)
    if remote:
        git(tmp_path, "init", "-q", "--bare", "remote.git")
        git(repo, "remote", "add", "origin", str(tmp_path / "remote.git"))
    for args in (["init"], ["register", "s1", "--provider", "test"],
                 ["register", "s2", "--provider", "test"],
                 ["lock", "acquire", "src/auth.py", "--session", "s1"], ["finish", "s2"]):
        done = run(*args)
        assert done.returncode == 0, done.stderr
    for args in (["--session", "nosuch"], ["--session=nosuch"]):
        proc, quick = answered(repo, "lock", "check", "src/auth.py", *args)
        assert quick is False  # the error names the live ids: the core reads them
        assert (proc.returncode, proc.stdout, proc.stderr) == (
            1, "", "agent-registry: unknown session nosuch; live sessions: s1\n")
    proc, _ = answered(repo, "--json", "lock", "check", "src/auth.py", "--session", "nosuch")
    assert proc.returncode == 1 and json.loads(proc.stdout)["error"]["session"] == "nosuch"
    proc, quick = answered(repo, "lock", "check", "src/auth.py", "--session", "s2")
    assert proc.returncode == 1 and proc.stdout.startswith("locked: src/auth.py by s1")
    assert quick is not remote


def test_a_session_another_clone_registered_since_the_last_fetch_is_fetched_for(tmp_path):
    """Within readFreshness of its last fetch, a clone asked to check as a session
    another clone registered since fetches once more before calling it unknown."""
    from test_sync import Team
    team = Team(tmp_path)
    a, b = team.clone("a"), team.clone("b")
    assert a("init").returncode == 0
    assert b("lock", "check", "src/auth.py").returncode == 0  # b has fetched just now
    assert a("register", "a1", "--provider", "test").returncode == 0
    assert a("lock", "acquire", "src/auth.py", "--session", "a1").returncode == 0
    for args in (("lock", "check", "src/auth.py", "--session", "a1"),
                 ("--json", "lock", "check", "src/auth.py", "--session", "a1")):
        proc = b(*args)
        assert proc.returncode == 0 and "locked-by-me" in proc.stdout, proc.stderr
    nosuch = b("lock", "check", "src/auth.py", "--session", "nosuch")
    assert nosuch.returncode == 1 and "unknown session nosuch" in nosuch.stderr


def test_an_unknown_session_costs_one_fetch(tmp_path):
    """`lock check` as a session this clone does not know goes to the remote once: the
    fetch for it when the view was fresh, else the read's own (readFreshness 0: every
    read fetches), never that fetch and one more.  Counted in git's own trace: each
    `git fetch` process says `built-in: git fetch`."""
    from test_sync import Team
    team = Team(tmp_path)
    a, b = team.clone("a"), team.clone("b")
    assert a("init").returncode == 0
    assert b("lock", "check", "src/auth.py").returncode == 0  # b has fetched just now
    traces = iter(range(100))

    def fetches() -> int:
        trace = tmp_path / f"trace-{next(traces)}"
        proc = b("lock", "check", "src/auth.py", "--session", "nosuch",
                 env={"GIT_TRACE": str(trace)})
        assert proc.returncode == 1 and "unknown session nosuch" in proc.stderr, proc.stderr
        return len(re.findall(r"built-in: git fetch\b", trace.read_text()))

    assert fetches() == 1  # within readFreshness of the last fetch: fetched for it
    git(b.cwd, "config", "agent-registry.readFreshness", "0")
    assert fetches() == 1  # the read's own fetch is the one more


@pytest.mark.parametrize("setting", ["remote", "branch", "ignorecase"])
def test_where_more_decides_the_core_answers(tmp_path, setting):
    repo = make_repo(tmp_path / "repo")
    run = Runner(repo)
    if setting == "remote":
        git(tmp_path, "init", "-q", "--bare", "remote.git")
        git(repo, "remote", "add", "origin", str(tmp_path / "remote.git"))
    elif setting == "branch":
        git(repo, "config", "agent-registry.branch", "team-locks")
    else:
        git(repo, "config", "core.ignorecase", "true")
    for args in (["init"], ["register", "s1", "--provider", "test"],
                 ["register", "s2", "--provider", "test"],
                 ["lock", "acquire", "src/Auth.py", "--session", "s2"]):
        done = run(*args)
        assert done.returncode == 0, done.stderr
    spelled = "src/auth.py" if setting == "ignorecase" else "src/Auth.py"
    proc, quick = answered(repo, "lock", "check", spelled, "--session", "s1")
    assert not quick
    assert proc.returncode == 1 and proc.stdout.startswith(f"locked: {spelled} by s2")


def held_lists_read(repo, check, paths: list[str], sid: str) -> tuple[list[dict], set[str]]:
    """*check*'s answer for *paths*, and the lock shards whose held lists it read."""
    tips = {git(repo, "rev-parse", f"{ref}^{{tree}}").strip(): ref for ref in
            git(repo, "for-each-ref", "--format=%(refname)", "refs/heads/").split()}
    read: list[str] = []
    reader = check.repo.reader
    one, many = reader.read, reader.read_many
    reader.read = lambda rev: (read.append(rev), one(rev))[1]
    reader.read_many = lambda revs, *rest: (read.extend(revs), many(revs, *rest))[1]
    answer = check.check(paths, sid)
    return answer, {tips[rev.partition(":")[0]] for rev in read
                    if rev.partition(":")[2].startswith("held")}


@pytest.mark.parametrize("check_with", ["quick", "core"])
def test_a_holder_its_own_record_vouches_for_is_judged_without_the_held_lists(
        tmp_path, check_with):
    """A live holder whose session record's heartbeat is within the TTL counts whatever
    its held lists on the lock shards say (their stamps can only be newer), so a check
    reads none of them (issue 35: the check at 10,000 locks read sixteen)."""
    repo = make_repo(tmp_path / "repo")
    with Registry.open(str(repo)) as registry:
        registry.init()
        registry.register("s1", provider="test", pid=os.getpid())  # who checks
        registry.register("s2", provider="test", pid=os.getpid())
        registry.claim("s2", [f"src/f{i}.py" for i in range(64)])  # on every shard
    with closing(open_check(str(repo)) if check_with == "quick" else Registry.open(str(repo))) as check:
        answer, held = held_lists_read(repo, check, ["src/f1.py", "src/free.py"], "s1")
    assert [(r["state"], r.get("owner")) for r in answer] == [("locked", "s2"), ("free", None)]
    assert held == set()


def test_a_holder_whose_record_aged_counts_by_a_newer_claim_on_another_shard(tmp_path):
    """The record alone is only a shortcut: a holder whose record's heartbeat is past the
    TTL but whose last claim (on another shard) is not still counts, as it did."""
    repo = make_repo(tmp_path / "repo")
    clock = FakeClock(time.time() - 1000)
    with Registry.open(str(repo), clock=clock) as registry:
        registry.init()
        registry.register("s1", provider="test", pid=os.getpid())  # who checks
        registry.register("s2", provider="test", pid=os.getpid())
        registry.claim("s2", ["src/old.py"])
        clock.advance(990)
        fresh = next(f"src/n{i}.py" for i in range(99)
                     if set(shard_refs_of(repo, f"src/n{i}.py")).isdisjoint(
                         shard_refs_of(repo, "src/old.py")))
        registry.claim("s2", [fresh])
    with closing(open_check(str(repo))) as check:
        answer, held = held_lists_read(repo, check, ["src/old.py"], "s1")
    assert [(r["state"], r["owner"]) for r in answer] == [("locked", "s2")]
    assert set(shard_refs_of(repo, fresh)) <= held  # its newer stamp there was read
    proc, quick = answered(repo, "lock", "check", "src/old.py", "--session", "s1")
    assert quick and proc.returncode == 1 and proc.stdout.startswith("locked: src/old.py by s2")


def test_a_check_reads_only_the_lock_shards_recording_its_paths(tmp_path):
    """A check of two paths reads the main branch and the shards their locks are
    recorded in, not the sixteen (issue 35: each shard's commit is a file to read); a
    shard git cannot read elsewhere is said by what reads every shard (`status`, and the
    guard, which refuses: tests/test_failclosed_guard.py), not by a check of these."""
    repo = make_repo(tmp_path / "repo")
    with Registry.open(str(repo)) as registry:
        registry.init()
        registry.register("s1", provider="test", pid=os.getpid())  # who checks
        registry.register("s2", provider="test", pid=os.getpid())
        registry.claim("s2", ["src/a.py"])
    tips = {line.split()[0]: line.split()[1] for line in git(
        repo, "for-each-ref", "--format=%(objectname) %(refname)", "refs/heads/").splitlines()}
    mine = {*shard_refs_of(repo, "src/a.py"), *shard_refs_of(repo, "src/free.py")}
    with closing(open_check(str(repo))) as check:
        read: list[str] = []
        reader = check.repo.reader
        one = reader.read
        reader.read = lambda rev: (read.append(rev), one(rev))[1]
        answer = check.check(["src/a.py", "src/free.py"], "s1")
    assert [r["state"] for r in answer] == ["locked", "free"]
    assert {tips[rev] for rev in read if rev in tips} == {"refs/heads/agent-registry", *mine}
    other = next(ref for ref in tips.values() if "-shards/" in ref and ref not in mine)
    (repo / ".git" / other).write_text("1" * 40 + "\n")  # a missing commit
    proc, quick = answered(repo, "lock", "check", "src/a.py", "src/free.py", "--session", "s1")
    assert quick and proc.returncode == 1 and proc.stdout.startswith("locked: src/a.py by s2")
    status = Runner(repo)("status")
    assert status.returncode != 0 and other in status.stderr
