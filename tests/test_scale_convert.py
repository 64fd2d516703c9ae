"""Converting a single-branch registry (layout format 1) to lock shards (format 2):
`agent-registry shard`, sync/convert.py, docs/shards.md.

Real repositories, real processes, real bare remotes.  Each conversion is checked file
by file against the tree it converted (tests/test_shards.py ``check_split``): every file
of the single branch is on the main branch as it was (live sessions' ``locks:`` lists
emptied) or, a lock record, in exactly the shards of its target, and each live session's
held lists over the shards are its old ``locks:`` list."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import CLI, WAITER, Runner, git, make_repo
from test_shards import check_split

from agent_registry import Registry
from agent_registry.branch import shards as S

BRANCH = "agent-registry"


def files_at(repo: Path, commit: str) -> dict[str, bytes]:
    """Every file of *commit*'s tree, by path (read with git itself)."""
    names = git(repo, "ls-tree", "-r", "-z", "--name-only", commit).split("\0")
    return {name: subprocess.run(["git", "cat-file", "blob", f"{commit}:{name}"], cwd=repo,
                                 capture_output=True, check=True).stdout
            for name in names if name}


def ref(repo: Path, name: str) -> str | None:
    proc = subprocess.run(["git", "rev-parse", "-q", "--verify", name], cwd=repo,
                          capture_output=True, text=True)
    return proc.stdout.strip() or None


def registry_refs(repo: Path, prefix: str = "refs/heads/") -> dict[str, str]:
    """The registry's refs under *prefix* (main, shards, messages), name -> commit."""
    out = git(repo, "for-each-ref", "--format=%(refname) %(objectname)", prefix)
    return {name[len(prefix):]: oid for name, oid in (line.split() for line in out.splitlines())
            if name[len(prefix):].startswith(BRANCH)}


def shard_trees(repo: Path, count: int, prefix: str = "refs/heads/") -> list[dict[str, bytes]]:
    trees = []
    for index in range(count):
        tip = ref(repo, prefix + S.shard_ref(BRANCH, index)[len("refs/heads/"):])
        assert tip is not None, f"shard {index} missing"
        assert git(repo, "rev-list", "--count", tip).strip() == "1"  # a root commit
        trees.append(files_at(repo, tip))
    return trees


def ok(proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert proc.returncode == 0, (proc.args, proc.stdout, proc.stderr)
    return proc


def populate(run: Runner, tag: str = "") -> None:
    """Live sessions holding file, directory, glob and broad locks (one shared), with
    diaries; an ended session with its wiki entry; a finished one; a message."""
    for sid in (f"kimi{tag}-1", f"codex{tag}-2", f"gemini{tag}-3", f"claude{tag}-4"):
        ok(run("register", sid, "--provider", "test", "--working-on", f"work of {sid}"))
        ok(run("context", "log", sid, f"diary of {sid}"))
    ok(run("lock", "acquire", "src/auth/token.py", "docs/guide/", "--session", f"kimi{tag}-1"))
    ok(run("lock", "acquire", "src/api/*.py", "README.md", "--session", f"codex{tag}-2"))
    ok(run("lock", "acquire", "tests/unit/", "--shared", "--session", f"codex{tag}-2"))
    ok(run("lock", "acquire", "tests/unit/", "--shared", "--session", f"gemini{tag}-3"))
    ok(run("lock", "acquire", "lib/", "--session", f"gemini{tag}-3"))  # broad: every shard
    ok(run("lock", "acquire", "bench/x.py", "--session", f"claude{tag}-4"))
    ok(run("end", f"claude{tag}-4", "--what", "benchmarks", "--how", "by hand"))
    ok(run("register", f"old{tag}-5", "--provider", "test"))
    ok(run("finish", f"old{tag}-5"))
    ok(run("send", "--from", f"kimi{tag}-1", "--to", f"codex{tag}-2", "hello"))


def check_converted(repo: Path, count: int, prefix: str = "refs/heads/") -> dict:
    """The registry of *repo* (its refs under *prefix*) was converted once, losing
    nothing: the conversion commit's parent is the tree compared."""
    main = ref(repo, prefix + BRANCH)
    added = git(repo, "log", "--format=%H", "--diff-filter=A", main, "--", S.LAYOUT).split()
    assert len(added) == 1, added  # layout.json appears exactly once in the history
    parent = git(repo, "rev-parse", f"{added[0]}^").strip()
    before, after = files_at(repo, parent), files_at(repo, added[0])
    assert S.LAYOUT not in before
    assert json.loads(after[S.LAYOUT])["shards"] == count
    return check_split(before, after, shard_trees(repo, count, prefix), count)


# -- one clone -------------------------------------------------------------------------

def test_a_conversion_loses_nothing_and_a_second_is_a_no_op(repo, run):
    ok(run("init"))
    populate(run)
    messages = ref(repo, "refs/heads/agent-registry-messages")
    before = ref(repo, f"refs/heads/{BRANCH}")
    result = json.loads(ok(run("--json", "shard", "--count", "8")).stdout)
    assert (result["converted"], result["format"], result["shards"]) == (True, 2, 8)
    main = ref(repo, f"refs/heads/{BRANCH}")
    assert result["tip"] == main and git(repo, "rev-parse", f"{main}^").strip() == before
    counted = check_converted(repo, 8)
    assert counted["sessions"] == 3 and counted["records"] == 6
    assert result["moved"] == {"locks": 6, "held": counted["held"], "sessions": 3}
    assert ref(repo, "refs/heads/agent-registry-messages") == messages  # untouched
    main_files = files_at(repo, main)
    assert "wiki/claude-4.md" in main_files and "contexts/kimi-1.md" in main_files
    assert not [p for p in main_files if p.startswith(S.HELD_DIR + "/")]

    refs = registry_refs(repo)
    again = ok(run("--json", "shard"))
    assert json.loads(again.stdout)["converted"] is False
    assert registry_refs(repo) == refs  # nothing written
    text = ok(run("shard", "--count", "4")).stdout
    assert "already" in text and registry_refs(repo) == refs


def test_a_crash_between_the_shard_refs_and_the_main_branch_is_redone(repo, run, clock):
    """Shard refs written, the main branch not moved (a kill between the two): nothing
    reads the shards (no marker), and the next conversion writes them again."""
    ok(run("init"))
    populate(run)
    before = ref(repo, f"refs/heads/{BRANCH}")
    from agent_registry.sync import convert as C
    with Registry.open(str(repo), clock=clock) as registry:
        built = C._build(registry, before, 4)
        for index, commit in enumerate(built["shards"]):
            registry.repo.update_ref(S.shard_ref(BRANCH, index), commit, None, "test: crash")
    assert ref(repo, f"refs/heads/{BRANCH}") == before
    assert ok(run("status")).returncode == 0  # still the single branch
    result = json.loads(ok(run("--json", "shard", "--count", "4")).stdout)
    assert result["converted"] is True
    check_converted(repo, 4)
    assert git(repo, "rev-parse", f"refs/heads/{BRANCH}^").strip() == before


@pytest.mark.parametrize("count", ["1", "257", "0", "abc", "", " ", "-3", "4.5", "1e2"])
def test_a_bad_count_is_refused_in_one_line_and_writes_nothing(repo, run, count):
    ok(run("init"))
    ok(run("register", "kimi-1", "--provider", "test"))
    refs = registry_refs(repo)
    proc = run("shard", "--count", count)
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "shard count" in proc.stderr
    assert registry_refs(repo) == refs


def test_no_registry_branch_is_refused(repo, run):
    proc = run("shard")
    assert proc.returncode == 1 and "agent-registry init" in proc.stderr
    assert registry_refs(repo) == {}


# -- the git config ----------------------------------------------------------------------

def test_the_config_converts_before_the_next_operation(repo, run):
    ok(run("init"))
    populate(run)
    ok(run("register", "plain-1", "--provider", "test"))  # no config: the single branch
    assert ref(repo, f"refs/heads/{BRANCH}:{S.LAYOUT}") is None
    before = ref(repo, f"refs/heads/{BRANCH}")
    git(repo, "config", "agent-registry.shards", "4")
    ok(run("register", "late-6", "--provider", "test", "--working-on", "after the split"))
    main = ref(repo, f"refs/heads/{BRANCH}")
    log = git(repo, "log", "--format=%s", f"{before}..{main}").splitlines()
    assert len(log) == 2 and log[1].startswith("convert to layout format 2: 4 lock shards")
    check_converted(repo, 4)
    assert "sessions/live/late-6.yaml" in files_at(repo, main)
    ok(run("register", "late-7", "--provider", "test"))  # converted once
    added = git(repo, "log", "--format=%H", "--diff-filter=A", f"refs/heads/{BRANCH}", "--",
                S.LAYOUT).split()
    assert len(added) == 1


@pytest.mark.parametrize("value", ["1", "lots", "300", ""])
def test_a_bad_config_value_is_bad_input(repo, run, value):
    ok(run("init"))
    refs = registry_refs(repo)
    git(repo, "config", "agent-registry.shards", value)
    proc = run("register", "kimi-1", "--provider", "test")
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "agent-registry.shards" in lines[0]
    assert registry_refs(repo) == refs


# -- through a remote --------------------------------------------------------------------

class Team:
    """A bare remote, and clones of it sharing one format-1 registry."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.bare = root / "remote.git"
        seed = make_repo(root / "seed")
        git(root, "init", "-q", "--bare", str(self.bare))
        git(seed, "push", "-q", str(self.bare), "main")

    def clone(self, name: str) -> Runner:
        path = self.root / name
        git(self.root, "clone", "-q", str(self.bare), str(path))
        return Runner(path)


def racing(runs: list[tuple[Runner, list[str]]], workdir: Path) -> list[subprocess.CompletedProcess]:
    """Each (runner, args) as its own process in its own clone, all released at once."""
    workdir.mkdir(parents=True)
    go = workdir / "go"
    procs = [subprocess.Popen([sys.executable, "-c", WAITER, str(workdir / f"ready-{i}"),
                               str(go), CLI, *args], cwd=runner.cwd, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
             for i, (runner, args) in enumerate(runs)]
    for _ in range(30_000):  # a watchdog, not a timing: a broken racer fails the test
        if sum(1 for p in workdir.iterdir() if p.name.startswith("ready-")) == len(runs):
            break
        assert all(p.poll() is None for p in procs), "a racer died before the start"
        time.sleep(0.01)
    go.touch()
    results = []
    for proc, (_, args) in zip(procs, runs):
        out, err = proc.communicate(timeout=600)
        results.append(subprocess.CompletedProcess(args, proc.returncode, out, err))
    return results


@pytest.mark.parametrize("round_", range(5))
def test_two_clones_converting_at_once_land_one_conversion(tmp_path, round_):
    team = Team(tmp_path)
    a, b = team.clone("a"), team.clone("b")
    ok(a("init"))
    populate(a, "a")
    ok(b("register", "bee-1", "--provider", "test"))
    ok(b("lock", "acquire", "pkg/b/mod.py", "--session", "bee-1"))
    ok(a("sync"))
    results = racing([(a, ["--json", "shard", "--count", "4"]),
                      (b, ["--json", "shard", "--count", "4"])], tmp_path / "race")
    for proc in results:
        assert proc.returncode == 0, proc.stderr
    outcomes = [json.loads(proc.stdout) for proc in results]
    assert sorted(o["converted"] for o in outcomes) == [False, True], outcomes
    remote = registry_refs(team.bare)
    assert set(remote) >= {BRANCH, *[S.shard_ref(BRANCH, i)[len("refs/heads/"):] for i in range(4)]}
    for clone in (a, b):  # both end where the remote is
        local = registry_refs(clone.cwd)
        assert {k: v for k, v in local.items() if k in remote} == remote, clone.cwd
        assert set(local) == set(remote)
    counted = check_converted(team.bare, 4)
    assert counted["sessions"] == 4  # kimi, codex, gemini of a; bee-1 of b
    assert "bee-1" in {h[len(S.HELD_DIR) + 1:-5] for part in shard_trees(team.bare, 4)
                       for h in part if h.startswith(S.HELD_DIR + "/")}
    for clone in (a, b):  # and a second run is a no-op in either
        again = json.loads(ok(clone("--json", "shard")).stdout)
        assert again["converted"] is False
    assert registry_refs(team.bare) == remote


def test_pending_operations_are_pushed_before_the_conversion(tmp_path):
    """A clone's operations committed while the remote was unreachable are pushed (and
    decided on the single branch) before it converts: the conversion carries them."""
    team = Team(tmp_path)
    a = team.clone("a")
    ok(a("init"))
    ok(a("register", "kimi-1", "--provider", "test"))
    git(a.cwd, "remote", "set-url", "origin", str(tmp_path / "nowhere.git"))
    claim = a("lock", "acquire", "src/auth/token.py", "--session", "kimi-1")
    assert claim.returncode == 3  # claimed locally, not confirmed
    git(a.cwd, "remote", "set-url", "origin", str(team.bare))
    result = json.loads(ok(a("--json", "shard", "--count", "4")).stdout)
    assert result["converted"] is True
    check_converted(team.bare, 4)
    shard = S.path_shard("src/auth/token.py", 4)
    tree = shard_trees(team.bare, 4)[shard]
    assert S.parse_held(tree[S.held_path("kimi-1")])[0] == ["src/auth/token.py"]


def test_a_clone_that_loses_the_push_adopts_the_winners_conversion(tmp_path, monkeypatch):
    """Deterministically the race's losing side: clone b builds its conversion from the
    remote tip, clone a's conversion lands first, b's atomic push is rejected as a whole
    (no shard ref of b's reaches the remote), b fetches, finds layout.json and adopts a's
    refs."""
    team = Team(tmp_path)
    a, b = team.clone("a"), team.clone("b")
    ok(a("init"))
    populate(a, "a")
    ok(b("sync"))
    from agent_registry.sync import convert as C
    real_build, built = C._build, []

    def build_then_lose(registry, tip, count):
        made = real_build(registry, tip, count)
        if not built:
            ok(a("shard", "--count", "4"))  # the other clone lands first
        built.append(made)
        return made

    monkeypatch.setattr(C, "_build", build_then_lose)
    with Registry.open(str(b.cwd)) as registry:
        result = C.convert(registry, 4)
    assert (result["converted"], result.get("by")) == (False, "another clone")
    assert len(built) == 1  # b built once, lost, and adopted instead of building again
    remote = registry_refs(team.bare)
    assert not set(built[0]["shards"]) & set(remote.values())
    assert {k: v for k, v in registry_refs(b.cwd).items() if k in remote} == remote
    check_converted(team.bare, 4)


def test_the_config_waits_for_an_unreachable_remote(tmp_path):
    """Automatic conversion needs the remote (it lands in one atomic push): offline, the
    operation goes on in the single branch with a warning, and a later operation converts
    once the remote answers."""
    team = Team(tmp_path)
    a = team.clone("a")
    ok(a("init"))
    ok(a("register", "kimi-1", "--provider", "test"))
    git(a.cwd, "config", "agent-registry.shards", "4")
    git(a.cwd, "remote", "set-url", "origin", str(tmp_path / "nowhere.git"))
    offline = ok(a("register", "kimi-2", "--provider", "test"))
    assert "not converted to lock shards" in offline.stderr
    assert ref(a.cwd, f"refs/heads/{BRANCH}:{S.LAYOUT}") is None
    assert registry_refs(a.cwd).keys() == {BRANCH}
    git(a.cwd, "remote", "set-url", "origin", str(team.bare))
    ok(a("register", "kimi-3", "--provider", "test"))
    counted = check_converted(team.bare, 4)
    assert counted["sessions"] == 2  # kimi-1, and kimi-2 pushed first; kimi-3 after
    assert "sessions/live/kimi-3.yaml" in files_at(team.bare, ref(team.bare, BRANCH))


def test_a_crash_after_the_push_is_adopted_by_the_next_run(tmp_path):
    """The atomic push landed, the process died before moving its own refs: the next run
    (of that clone, or of another) finds layout.json on the remote and takes its refs."""
    team = Team(tmp_path)
    a, b = team.clone("a"), team.clone("b")
    ok(a("init"))
    populate(a, "a")
    ok(b("sync"))
    from agent_registry.sync import convert as C
    with Registry.open(str(a.cwd)) as registry:
        tip = ref(a.cwd, f"refs/remotes/origin/{BRANCH}")
        built = C._build(registry, tip, 4)
        assert C._push_atomic(registry, [f"{built['main']}:{registry.ref}"] + [
            f"{c}:{S.shard_ref(BRANCH, i)}" for i, c in enumerate(built["shards"])])
    assert ref(a.cwd, f"refs/heads/{BRANCH}") == tip  # the crash: nothing moved here
    remote = registry_refs(team.bare)
    for clone in (a, b):
        result = json.loads(ok(clone("--json", "shard", "--count", "4")).stdout)
        assert result["converted"] is False and result["shards"] == 4
        assert {k: v for k, v in registry_refs(clone.cwd).items() if k in remote} == remote
    assert registry_refs(team.bare) == remote
    check_converted(team.bare, 4)
