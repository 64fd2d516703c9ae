"""Converting a single-branch registry (layout format 1) to lock shards (format 3), and
upgrading lock shards of format 2 (agent-registry 0.2) to format 3: `agent-registry
shard`, and the first write of any command, which converts (or upgrades) before it
writes: the layout `init` makes is the only one a command writes (issue 32,
sync/convert.py, docs/shards.md).

No command makes the old layouts any more, so the registries converted here are built
as older versions left them: one branch through the core (helpers.single_branch, whose
writes keep the layout they meet), format 2 by rewriting a converted registry's marker
with git plumbing (``downgrade``).

Real repositories, real processes, real bare remotes.  Each conversion is checked file
by file against the tree it converted (tests/test_shards.py ``check_split``): every file
of the single branch is on the main branch as it was (live sessions' ``locks:`` lists
emptied) or, a lock record, in exactly the shards of its target, and each live session's
held lists over the shards are its old ``locks:`` list."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import CLI, WAITER, Runner, git, make_repo, single_branch
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


def layout_refs(repo: Path) -> dict[str, str]:
    """The main branch and its lock shards, name -> commit (what a conversion writes)."""
    return {k: v for k, v in registry_refs(repo).items()
            if k == BRANCH or k.startswith(f"{BRANCH}-shards/")}


def shard_trees(repo: Path, count: int, prefix: str = "refs/heads/") -> list[dict[str, bytes]]:
    """Each shard's tree as the conversion made it: the root commit of its ref (one, a
    conversion's; the claims made since are commits on it)."""
    trees = []
    for index in range(count):
        tip = ref(repo, prefix + S.shard_ref(BRANCH, index)[len("refs/heads/"):])
        assert tip is not None, f"shard {index} missing"
        roots = git(repo, "rev-list", "--max-parents=0", tip).split()
        assert len(roots) == 1, (index, roots)  # one root: the conversion's
        trees.append(files_at(repo, roots[0]))
    return trees


def ok(proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert proc.returncode == 0, (proc.args, proc.stdout, proc.stderr)
    return proc


def old_layout(path: Path, tag: str = "", **kwargs):
    """A single-branch registry (layout format 1) in the clone at *path*, as versions
    before the one layout left it (made, or with a remote adopted, through the core),
    holding what ``populate`` writes; returns it open (the caller closes it)."""
    registry = single_branch(path, **kwargs)
    assert registry.repo.read_blob(f"{registry.tip()}:{S.LAYOUT}") is None  # one branch
    if tag is not None:
        populate(registry, tag)
    return registry


def one_branch(path: Path, tag: str = "", **kwargs) -> None:
    old_layout(path, tag, **kwargs).close()


def populate(registry, tag: str = "") -> None:
    """Live sessions holding file, directory, glob and broad locks (one shared), with
    diaries; an ended session with its wiki entry; a finished one; a message: written
    through the core *registry*, which keeps the layout it meets."""
    from agent_registry.core.messages import send
    from agent_registry.wiki.ops import end_session
    for sid in (f"kimi{tag}-1", f"codex{tag}-2", f"gemini{tag}-3", f"claude{tag}-4"):
        registry.register(sid, provider="test", working_on=f"work of {sid}")
        registry.context_log(sid, f"diary of {sid}")
    registry.claim(f"kimi{tag}-1", ["src/auth/token.py", "docs/guide/"])
    registry.claim(f"codex{tag}-2", ["src/api/*.py", "README.md"])
    registry.claim(f"codex{tag}-2", ["tests/unit/"], shared=True)
    registry.claim(f"gemini{tag}-3", ["tests/unit/"], shared=True)
    registry.claim(f"gemini{tag}-3", ["lib/"])  # broad: every shard
    registry.claim(f"claude{tag}-4", ["bench/x.py"])
    end_session(registry, f"claude{tag}-4", what="benchmarks", how="by hand")
    registry.register(f"old{tag}-5", provider="test")
    registry.finish(f"old{tag}-5")
    send(registry, f"kimi{tag}-1", {"session": f"codex{tag}-2"}, "hello")
    assert registry.repo.read_blob(f"{registry.tip()}:{S.LAYOUT}") is None  # still one branch


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
    one_branch(repo)
    messages = ref(repo, "refs/heads/agent-registry-messages")
    before = ref(repo, f"refs/heads/{BRANCH}")
    result = json.loads(ok(run("--json", "shard", "--count", "8")).stdout)
    assert (result["converted"], result["format"], result["shards"]) == (True, S.FORMAT, 8)
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
    # what the readers read is what the single branch held
    status = json.loads(ok(run("--json", "status")).stdout)
    assert status["layout"] == {"format": S.FORMAT, "shards": 8}
    held = {s["id"]: sorted(s["locks"]) for s in status["sessions"]}
    assert held == {"kimi-1": ["docs/guide/", "src/auth/token.py"],
                    "codex-2": ["README.md", "src/api/*.py", "tests/unit/"],
                    "gemini-3": ["lib/", "tests/unit/"]}
    check = run("lock", "check", "lib/x.py", "--session", "kimi-1")
    assert check.returncode == 1 and "gemini-3" in check.stdout + check.stderr
    assert "diary of kimi-1" in ok(run("context", "show", "kimi-1")).stdout


def test_a_crash_between_the_shard_refs_and_the_main_branch_is_redone(repo, run, clock):
    """Shard refs written, the main branch not moved (a kill between the two): nothing
    reads the shards (no marker), and the next conversion writes them again."""
    one_branch(repo)
    before = ref(repo, f"refs/heads/{BRANCH}")
    from agent_registry.sync import convert as C
    with Registry.open(str(repo), clock=clock) as registry:
        built = C._build(registry, before, 4)
        for index, commit in enumerate(built["shards"]):
            registry.repo.update_ref(S.shard_ref(BRANCH, index), commit, None, "test: crash")
    assert ref(repo, f"refs/heads/{BRANCH}") == before
    status = json.loads(ok(run("--json", "status")).stdout)  # a read: still the single branch
    assert status["layout"] == {"format": 1, "shards": 0}
    assert ref(repo, f"refs/heads/{BRANCH}") == before
    result = json.loads(ok(run("--json", "shard", "--count", "4")).stdout)
    assert result["converted"] is True
    check_converted(repo, 4)
    assert git(repo, "rev-parse", f"refs/heads/{BRANCH}^").strip() == before


@pytest.mark.parametrize("count", ["65", "257", "0", "abc", "", " ", "-3", "4.5", "1e2"])
def test_a_bad_count_is_refused_in_one_line_and_writes_nothing(repo, run, count):
    """On a single-branch registry, which a good count would convert: a count that is
    not 1 to 64 is bad input (exit 2, one line) and nothing is written; 0, the single
    branch of earlier versions, says it is no longer a layout."""
    one_branch(repo, tag=None)
    refs = registry_refs(repo)
    proc = run("shard", "--count", count)
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "shard count" in proc.stderr
    assert "1 to 64" in proc.stderr
    if count == "0":
        assert "no longer a layout" in proc.stderr
    assert registry_refs(repo) == refs


@pytest.mark.parametrize("count", ["0", "65", "x"])
def test_init_refuses_a_bad_count_and_makes_nothing(repo, run, count):
    """`init --shards 0` made the single branch in earlier versions: now, like any count
    outside 1 to 64, it is bad input (exit 2, one line) and no ref is made."""
    proc = run("init", "--shards", count)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "--shards" in lines[0] and "1 to 64" in lines[0], lines
    if count == "0":
        assert "no longer a layout" in lines[0]
    assert registry_refs(repo) == {} and git(repo, "for-each-ref").count("agent-registry") == 0


def test_init_makes_the_one_layout_with_one_to_64_shards(repo, run, tmp_path):
    made = json.loads(ok(run("--json", "init", "--shards", "1")).stdout)
    assert made["layout"] == {"format": S.FORMAT, "shards": 1}
    assert "1 lock shard with clone refs" in ok(run("status")).stdout
    top = make_repo(tmp_path / "top")
    made = json.loads(ok(Runner(top)("--json", "init", "--shards", "64")).stdout)
    assert made["layout"] == {"format": S.FORMAT, "shards": 64}
    assert len([n for n in registry_refs(top) if n.startswith(f"{BRANCH}-shards/")]) == 64


def test_no_registry_branch_is_refused(repo, run):
    proc = run("shard")
    assert proc.returncode == 1 and "agent-registry init" in proc.stderr
    assert registry_refs(repo) == {}


# -- the first write converts ----------------------------------------------------------

CONVERTED = "this registry was converted to {} lock shards"


def conversions(repo: Path, name: str = f"refs/heads/{BRANCH}") -> list[str]:
    """The commits of *name*'s history that add layout.json."""
    return git(repo, "log", "--format=%H", "--diff-filter=A", name, "--", S.LAYOUT).split()


def test_the_first_write_converts_to_16_shards_saying_so_once(repo, run):
    """No setting asked for: a single-branch registry's first write (a register) converts
    it to the 16 shards `init` makes, says so in one line, and then writes in the new
    layout; the next write converts nothing.  (Before issue 32 a registry kept its layout
    unless `git config agent-registry.shards` asked: that rule is gone.)"""
    one_branch(repo)
    before = ref(repo, f"refs/heads/{BRANCH}")
    proc = ok(run("register", "late-6", "--provider", "test", "--working-on", "after the split"))
    said = [line for line in proc.stderr.splitlines() if "converted" in line]
    assert said == [f"agent-registry: warning: {CONVERTED.format(16)} with clone refs (layout format 3), "
                    "the one layout this version writes; older versions refuse it "
                    "(docs/shards.md)"], proc.stderr
    main = ref(repo, f"refs/heads/{BRANCH}")
    log = git(repo, "log", "--format=%s", f"{before}..{main}").splitlines()
    assert len(log) == 2 and log[1].startswith(f"convert to layout format {S.FORMAT}: 16 lock shards")
    check_converted(repo, 16)
    assert "late-6" in {s["id"] for s in json.loads(ok(run("--json", "status")).stdout)["sessions"]}
    again = ok(run("register", "late-7", "--provider", "test"))
    assert "converted" not in again.stderr
    ok(run("lock", "acquire", "src/late.py", "--session", "late-7"))
    assert len(conversions(repo)) == 1
    assert json.loads(ok(run("--json", "status")).stdout)["layout"] == \
        {"format": S.FORMAT, "shards": 16}


@pytest.mark.parametrize("first", [
    ["lock", "acquire", "src/new.py", "--session", "kimi-1"],
    ["context", "log", "kimi-1", "a line after the split"],
    ["lock", "heartbeat", "--session", "kimi-1"],
    ["send", "--from", "kimi-1", "--to", "codex-2", "after the split"],
    ["finish", "gemini-3"],
])
def test_any_first_write_converts(repo, run, first):
    """Whatever the first write is (a claim, a diary line, a heartbeat, a send, a
    finish), it converts first, and then does what it was asked in the new layout."""
    one_branch(repo)
    proc = ok(run(*first))
    assert CONVERTED.format(16) in proc.stderr, proc.stderr
    check_converted(repo, 16)
    status = json.loads(ok(run("--json", "status")).stdout)
    assert status["layout"] == {"format": S.FORMAT, "shards": 16}
    held = {s["id"]: s["locks"] for s in status["sessions"]}
    if first[0] == "lock" and first[1] == "acquire":
        assert "src/new.py" in held["kimi-1"]
    if first[0] == "context":
        assert "a line after the split" in ok(run("context", "show", "kimi-1")).stdout
    if first[0] == "send":
        inbox = json.loads(ok(run("--json", "inbox", "codex-2")).stdout)
        assert "after the split" in [m["body"] for m in inbox["messages"]]
    if first[0] == "finish":
        assert "gemini-3" not in held
        assert run("lock", "check", "lib/x.py", "--session", "kimi-1").returncode == 0
    assert len(conversions(repo)) == 1


def test_the_config_converts_to_its_count(repo, run):
    """`git config agent-registry.shards N` is only the count the conversion makes."""
    one_branch(repo)
    before = ref(repo, f"refs/heads/{BRANCH}")
    git(repo, "config", "agent-registry.shards", "4")
    proc = ok(run("register", "late-6", "--provider", "test", "--working-on", "after the split"))
    assert CONVERTED.format(4) in proc.stderr
    main = ref(repo, f"refs/heads/{BRANCH}")
    log = git(repo, "log", "--format=%s", f"{before}..{main}").splitlines()
    assert len(log) == 2 and log[1].startswith(f"convert to layout format {S.FORMAT}: 4 lock shards")
    check_converted(repo, 4)
    assert "sessions/live/late-6.yaml" in files_at(repo, main)
    ok(run("register", "late-7", "--provider", "test"))  # converted once
    assert len(conversions(repo)) == 1


@pytest.mark.parametrize("value", ["0", "lots", "65", "300", ""])
def test_a_bad_config_value_is_bad_input(repo, run, value):
    """A config that is not a count from 1 to 64 refuses the write before anything is
    converted or written (exit 2, one line naming the setting); 0, the single branch of
    earlier versions, says it is no longer a layout.  (It used to keep the single branch.)"""
    one_branch(repo, tag=None)
    refs = registry_refs(repo)
    git(repo, "config", "agent-registry.shards", value)
    proc = run("register", "kimi-1", "--provider", "test")
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "agent-registry.shards" in lines[0], lines
    if value == "0":
        assert "no longer a layout" in lines[0]
    assert registry_refs(repo) == refs


def test_a_bad_config_value_refuses_on_the_one_layout_too(repo, run):
    ok(run("init"))
    refs = registry_refs(repo)
    git(repo, "config", "agent-registry.shards", "0")
    proc = run("register", "kimi-1", "--provider", "test")
    assert proc.returncode == 2 and "no longer a layout" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert registry_refs(repo) == refs


def test_the_variable_of_zero_shards_is_refused(repo, run):
    """`AGENT_REGISTRY_SHARDS=0` asked earlier versions for one branch: bad input now."""
    proc = run("init", env={"AGENT_REGISTRY_SHARDS": "0"})
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "AGENT_REGISTRY_SHARDS" in proc.stderr and "no longer a layout" in proc.stderr
    assert registry_refs(repo) == {}


def test_a_kill_during_the_first_writes_conversion_leaves_one_branch_or_the_conversion(repo, run):
    """kill -9 of the converting write at growing instants: each time the registry is
    either still the single branch as it was, or converted once, losing nothing; the next
    write finishes the work."""
    one_branch(repo)
    before = ref(repo, f"refs/heads/{BRANCH}")
    for delay in (0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.6, 0.8, 1.2, 2.0):
        proc = subprocess.Popen([CLI, "lock", "acquire", "src/kill.py", "--session", "kimi-1"],
                                cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(delay)
        proc.kill()
        proc.communicate()
        main = ref(repo, f"refs/heads/{BRANCH}")
        if main == before:
            assert ref(repo, f"{main}:{S.LAYOUT}") is None  # still one branch, as it was
            continue
        check_converted(repo, 16)  # converted, once, nothing lost
        assert git(repo, "rev-parse", f"{conversions(repo)[0]}^").strip() == before
        break
    ok(run("lock", "acquire", "src/kill.py", "--session", "kimi-1"))
    check_converted(repo, 16)
    assert git(repo, "rev-parse", f"{conversions(repo)[0]}^").strip() == before
    status = json.loads(ok(run("--json", "status")).stdout)
    assert "src/kill.py" in {s["id"]: s["locks"] for s in status["sessions"]}["kimi-1"]


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


# one round in make test, four more with the soak tests (make test-slow, CI)
@pytest.mark.parametrize("round_", [0, *(pytest.param(r, marks=pytest.mark.slow)
                                         for r in range(1, 5))])
def test_two_clones_converting_at_once_land_one_conversion(tmp_path, round_):
    """Rounds 0, 2 and 4 race `shard` against `shard`; rounds 1 and 3 race `shard`
    against another clone's first write (a register), which converts by itself."""
    team = Team(tmp_path)
    a, b = team.clone("a"), team.clone("b")
    one_branch(a.cwd, "a")
    bee = old_layout(b.cwd, tag=None)  # adopts the remote's single branch
    bee.register("bee-1", provider="test")
    bee.claim("bee-1", ["pkg/b/mod.py"])
    bee.close()
    ok(a("sync"))
    git(b.cwd, "config", "agent-registry.shards", "4")
    b_args = ["register", f"late-{round_}", "--provider", "test"] if round_ % 2 else \
        ["--json", "shard", "--count", "4"]
    results = racing([(a, ["--json", "shard", "--count", "4"]), (b, b_args)], tmp_path / "race")
    for proc in results:
        assert proc.returncode == 0, proc.stderr
    if round_ % 2:
        outcome = json.loads(results[0].stdout)
        said = CONVERTED.format(4) in results[1].stderr
        assert sorted([outcome["converted"], said]) == [False, True], (outcome, results[1].stderr)
    else:
        outcomes = [json.loads(proc.stdout) for proc in results]
        assert sorted(o["converted"] for o in outcomes) == [False, True], outcomes
    remote = registry_refs(team.bare)
    assert set(remote) >= {BRANCH, *[S.shard_ref(BRANCH, i)[len("refs/heads/"):] for i in range(4)]}
    for clone in (a, b):  # both end where the remote is
        ok(clone("sync"))
        local = registry_refs(clone.cwd)
        assert {k: v for k, v in local.items() if k in remote} == remote, clone.cwd
    if round_ % 2:  # the register that converted (or met the conversion) landed after it
        assert f"late-{round_}" in {s["id"] for s in json.loads(ok(a("--json", "status")).stdout)
                                    ["sessions"]}
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
    registry = old_layout(a.cwd, tag=None)
    registry.register("kimi-1", provider="test")
    registry.close()
    git(a.cwd, "remote", "set-url", "origin", str(tmp_path / "nowhere.git"))
    from agent_registry.errors import Unconfirmed
    with single_branch(a.cwd) as registry, pytest.raises(Unconfirmed):
        registry.claim("kimi-1", ["src/auth/token.py"])  # claimed locally, not confirmed
    assert ref(team.bare, BRANCH) != ref(a.cwd, f"refs/heads/{BRANCH}")
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
    one_branch(a.cwd, "a")
    one_branch(b.cwd, tag=None)  # adopts the remote's single branch
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
    remote = layout_refs(team.bare)
    assert not set(built[0]["shards"]) & set(remote.values())
    assert {k: v for k, v in registry_refs(b.cwd).items() if k in remote} == remote
    check_converted(team.bare, 4)


def test_the_config_waits_for_an_unreachable_remote(tmp_path):
    """Automatic conversion needs the remote (it lands in one atomic push): offline, the
    operation goes on in the single branch with a warning, and a later operation converts
    once the remote answers."""
    team = Team(tmp_path)
    a = team.clone("a")
    registry = old_layout(a.cwd, tag=None)
    registry.register("kimi-1", provider="test")
    registry.close()
    git(a.cwd, "config", "agent-registry.shards", "4")
    git(a.cwd, "remote", "set-url", "origin", str(tmp_path / "nowhere.git"))
    offline = a("register", "kimi-2", "--provider", "test")
    assert offline.returncode in (0, 3), offline.stderr
    assert "not converted to 4 lock shards" in offline.stderr
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
    one_branch(a.cwd, "a")
    one_branch(b.cwd, tag=None)
    from agent_registry.sync import convert as C
    with Registry.open(str(a.cwd)) as registry:
        tip = ref(a.cwd, f"refs/remotes/origin/{BRANCH}")
        built = C._build(registry, tip, 4)
        assert C._push_atomic(registry, [f"{built['main']}:{registry.ref}"] + [
            f"{c}:{S.shard_ref(BRANCH, i)}" for i, c in enumerate(built["shards"])])
    assert ref(a.cwd, f"refs/heads/{BRANCH}") == tip  # the crash: nothing moved here
    remote = layout_refs(team.bare)
    for clone in (a, b):
        result = json.loads(ok(clone("--json", "shard", "--count", "4")).stdout)
        assert result["converted"] is False and result["shards"] == 4
        assert {k: v for k, v in registry_refs(clone.cwd).items() if k in remote} == remote
    assert layout_refs(team.bare) == remote
    check_converted(team.bare, 4)


# -- upgrading format 2 (agent-registry 0.2) to format 3 ------------------------------

OLD_REQUIRES = "0.2.0"
OLD_FENCE = ("this registry uses layout format 2 (sharded): install agent-registry >= "
             f"{OLD_REQUIRES} to use it")
FENCE = f"sessions/live/{S.FENCE_SESSION}.yaml"


def blob(repo: Path, spec: str) -> bytes:
    return subprocess.run(["git", "cat-file", "blob", spec], cwd=repo, capture_output=True,
                          check=True).stdout


def downgrade(repo: Path, name: str = f"refs/heads/{BRANCH}") -> str:
    """Make the sharded registry at ref *name* of *repo* (bare or not) what the 0.2 dev
    build left: layout.json of format 2 requiring 0.2.0 and the fence naming 0.2.0, in
    one commit made with git plumbing (a temporary index, never the user's)."""
    tip = git(repo, "rev-parse", name).strip()
    layout = json.loads(blob(repo, f"{tip}:{S.LAYOUT}"))
    assert layout["format"] == S.FORMAT
    old_layout = (json.dumps({"format": 2, "shards": layout["shards"], "key_depth": 2,
                              "requires": OLD_REQUIRES}, indent=1) + "\n").encode()
    fence = blob(repo, f"{tip}:{FENCE}").decode()
    old_fence = fence.replace(S.FENCE_TEXT, OLD_FENCE).replace(
        f'ai_version: "{S.REQUIRES}"', f'ai_version: "{OLD_REQUIRES}"')
    assert OLD_FENCE in old_fence and f'"{OLD_REQUIRES}"' in old_fence
    env = {**os.environ, "GIT_INDEX_FILE": str(repo / ".." / "downgrade-index")}

    def plumb(*args: str, data: bytes | None = None) -> str:
        return subprocess.run(["git", *args], cwd=repo, env=env, input=data,
                              capture_output=True, check=True).stdout.decode().strip()

    plumb("read-tree", tip)
    for path, data in ((S.LAYOUT, old_layout), (FENCE, old_fence.encode())):
        oid = plumb("hash-object", "-w", "--stdin", data=data)
        plumb("update-index", "--cacheinfo", f"100644,{oid},{path}")
    commit = plumb("commit-tree", plumb("write-tree"), "-p", tip, "-m",
                   "layout format 2, as agent-registry 0.2 wrote it")
    plumb("update-ref", name, commit, tip)
    Path(env["GIT_INDEX_FILE"]).unlink()
    return commit


def fmt(repo: Path, commit: str) -> dict:
    return json.loads(blob(repo, f"{commit}:{S.LAYOUT}"))


UPGRADE = f"upgrade to layout format {S.FORMAT}: heartbeats and diary lines on clone refs"


def upgrades(repo: Path, tip: str) -> list[str]:
    """The upgrade commits in *tip*'s history (by subject)."""
    return [line.split(" ", 1)[0] for line in git(repo, "log", "--format=%H %s", tip).splitlines()
            if line.split(" ", 1)[1] == UPGRADE]


def check_upgraded(repo: Path, old: str, new: str, count: int) -> None:
    """*new* is *old* upgraded to format 3: layout.json says format 3 requiring this
    release's major.minor, with the same shards and key depth; the fence names it; nothing
    else but the rendered pages differs."""
    from agent_registry import __version__
    layout = fmt(repo, new)
    assert layout == {"format": S.FORMAT, "shards": count, "key_depth": 2,
                      "requires": S.REQUIRES}
    assert blob(repo, f"{new}:{S.LAYOUT}") == S.layout_bytes(count)
    assert layout["requires"] == "0.3.0"
    assert layout["requires"].split(".")[:2] == __version__.split(".")[:2]
    fence = blob(repo, f"{new}:{FENCE}").decode()
    assert S.FENCE_TEXT in fence and "layout format 3" in fence and ">= 0.3.0" in fence
    assert f'ai_version: "{S.REQUIRES}"' in fence and OLD_REQUIRES not in fence
    before, after = files_at(repo, old), files_at(repo, new)
    changed = {p for p in before.keys() | after.keys() if before.get(p) != after.get(p)}
    assert changed <= {S.LAYOUT, FENCE, "registry.md", "README.md"}, changed
    assert {S.LAYOUT, FENCE} <= changed
    old_fence = before[FENCE].decode().splitlines()
    assert [line for line in fence.splitlines() if "0.3.0" not in line] == \
        [line for line in old_fence if OLD_REQUIRES not in line]  # the rest kept


def format_2(run: Runner, repo: Path, count: int = 4) -> str:
    """A registry in lock shards of format 2, as 0.2 left it (sessions with locks and
    diaries on the main branch, an ended one, a message; no clone ref): a single-branch
    registry converted by `shard`, its marker then rewritten to format 2.  Its main tip."""
    one_branch(repo)
    ok(run("shard", "--count", str(count)))
    assert not [n for n in registry_refs(repo) if n.startswith(f"{BRANCH}-clones/")]
    return downgrade(repo)


def test_shard_upgrades_format_2_in_one_commit_and_a_second_run_is_a_no_op(repo, run):
    old = format_2(run, repo)
    refs = registry_refs(repo)
    result = json.loads(ok(run("--json", "shard", "--count", "8")).stdout)
    assert (result["converted"], result["upgraded"], result["format"], result["shards"]) \
        == (False, True, S.FORMAT, 4)  # the count is kept: changing it is not built
    main = ref(repo, f"refs/heads/{BRANCH}")
    assert result["tip"] == main and git(repo, "rev-parse", f"{main}^").strip() == old
    check_upgraded(repo, old, main, 4)
    after = registry_refs(repo)
    assert {k: v for k, v in after.items() if k != BRANCH} == \
        {k: v for k, v in refs.items() if k != BRANCH}  # no shard, lock or message moved
    assert upgrades(repo, main) == [main]
    again = json.loads(ok(run("--json", "shard")).stdout)
    assert (again["converted"], again["upgraded"], again["format"]) == (False, False, S.FORMAT)
    assert registry_refs(repo) == after
    text = ok(run("shard")).stdout
    assert "already" in text and registry_refs(repo) == after
    # the upgraded registry works: a claim, a diary line, a heartbeat, lock check
    ok(run("lock", "acquire", "src/auth.py", "--session", "kimi-1"))
    ok(run("context", "log", "kimi-1", "after the upgrade"))
    ok(run("lock", "heartbeat", "--session", "kimi-1"))
    check = run("lock", "check", "src/auth.py", "--session", "codex-2")
    assert check.returncode == 1 and "kimi-1" in check.stdout + check.stderr


def test_shard_upgrade_prints_what_it_did(repo, run):
    format_2(run, repo)
    text = ok(run("shard")).stdout
    assert f"upgraded {BRANCH} to layout format {S.FORMAT}" in text


def test_the_first_write_upgrades_format_2_keeping_its_count(repo, run):
    """The first write of any command upgrades format 2 before it writes, saying so in
    one line; the config's count (8) does not change the registry's (4)."""
    old = format_2(run, repo)
    git(repo, "config", "agent-registry.shards", "8")
    proc = ok(run("register", "late-6", "--provider", "test", "--working-on", "after the upgrade"))
    said = [line for line in proc.stderr.splitlines() if "upgraded" in line]
    assert len(said) == 1 and f"this registry was upgraded to layout format {S.FORMAT}" in said[0]
    main = ref(repo, f"refs/heads/{BRANCH}")
    log = git(repo, "log", "--format=%s", f"{old}..{main}").splitlines()
    assert len(log) == 2 and log[1].startswith(f"upgrade to layout format {S.FORMAT}"), log
    check_upgraded(repo, old, git(repo, "rev-parse", f"{main}^").strip(), 4)
    assert "sessions/live/late-6.yaml" in files_at(repo, main)
    ok(run("register", "late-7", "--provider", "test"))  # upgraded once
    assert len(upgrades(repo, ref(repo, f"refs/heads/{BRANCH}"))) == 1


def test_a_format_2_registry_is_upgraded_by_its_first_write_without_any_config(repo, run):
    """Rewritten for issue 32: a 0.2 registry used to stay format 2 without `shard` or
    the config (heartbeats and diary lines on its main branch).  Now no command writes
    format 2: the first write, with no setting, upgrades it, and from then on heartbeats
    and diary lines go to this clone's ref, not the main branch."""
    old = format_2(run, repo)
    proc = ok(run("register", "late-6", "--provider", "test"))
    assert f"upgraded to layout format {S.FORMAT}" in proc.stderr
    main = ref(repo, f"refs/heads/{BRANCH}")
    assert len(upgrades(repo, main)) == 1 and fmt(repo, main)["format"] == S.FORMAT
    check_upgraded(repo, old, upgrades(repo, main)[0], 4)
    ok(run("lock", "acquire", "src/late.py", "--session", "late-6"))
    before = ref(repo, f"refs/heads/{BRANCH}")
    ok(run("lock", "heartbeat", "--session", "late-6"))
    ok(run("context", "log", "late-6", "now format 3"))
    assert ref(repo, f"refs/heads/{BRANCH}") == before  # neither wrote the main branch
    assert [name for name in registry_refs(repo) if name.startswith(f"{BRANCH}-clones/")]
    assert "now format 3" in ok(run("context", "show", "late-6")).stdout
    assert "diary of kimi-1" in ok(run("context", "show", "kimi-1")).stdout  # kept
    ok(run("finish", "late-6"))
    assert len(upgrades(repo, ref(repo, f"refs/heads/{BRANCH}"))) == 1


def shared_format_2(tmp_path: Path) -> tuple[Team, Runner, Runner]:
    """A bare remote holding a format-2 registry (made by clone a, downgraded on the
    remote), and two clones of it, each with sessions holding locks and diaries."""
    team = Team(tmp_path)
    a = team.clone("a")
    one_branch(a.cwd, "a")
    ok(a("shard", "--count", "4"))
    downgrade(team.bare)
    ok(a("sync"))
    b = team.clone("b")
    with single_branch(b.cwd) as bee:  # the core adopts format 2 and writes it as it is
        bee.register("bee-1", provider="test")
        bee.claim("bee-1", ["pkg/b/mod.py"])
        bee.context_log("bee-1", "diary of bee-1")
    ok(a("sync"))
    main = ref(team.bare, BRANCH)
    assert fmt(team.bare, main)["format"] == 2
    return team, a, b


def lasting(repo: Path, main: str) -> tuple[dict, dict]:
    """What an upgrade must keep: the main branch's sessions and diaries, and every
    shard ref."""
    files = files_at(repo, main)
    kept = {p: d for p, d in files.items() if p.startswith(("sessions/", "contexts/", "wiki/"))
            and p != FENCE}
    shards = {k: v for k, v in registry_refs(repo).items() if k.startswith(f"{BRANCH}-shards/")}
    return kept, shards


@pytest.mark.parametrize("round_", [0, *(pytest.param(r, marks=pytest.mark.slow)
                                         for r in range(1, 4))])
def test_two_clones_upgrading_at_once_land_one_upgrade(tmp_path, round_):
    """Rounds 0 and 2 race `shard` against `shard`; rounds 1 and 3 race `shard` against
    an operation of a clone whose git config asks for shards (the automatic upgrade)."""
    team, a, b = shared_format_2(tmp_path)
    old = ref(team.bare, BRANCH)
    kept, shards = lasting(team.bare, old)
    if round_ % 2:
        git(b.cwd, "config", "agent-registry.shards", "4")
        b_args = ["register", f"late-{round_}", "--provider", "test"]
    else:
        b_args = ["--json", "shard"]
    results = racing([(a, ["--json", "shard"]), (b, b_args)], tmp_path / "race")
    for proc in results:
        assert proc.returncode == 0, proc.stderr
    main = ref(team.bare, BRANCH)
    landed = upgrades(team.bare, main)
    assert len(landed) == 1
    assert git(team.bare, "rev-parse", f"{landed[0]}^").strip() == old
    check_upgraded(team.bare, old, landed[0], 4)
    outcome_a = json.loads(results[0].stdout)
    if round_ % 2:
        assert "sessions/live/" f"late-{round_}.yaml" in files_at(team.bare, main)
    else:
        outcome_b = json.loads(results[1].stdout)
        assert sorted([outcome_a["upgraded"], outcome_b["upgraded"]]) == [False, True]
        loser = outcome_a if not outcome_a["upgraded"] else outcome_b
        # "by" when its own push lost; none when it found format 3 at its first look
        assert loser.get("by") in (None, "another clone") and loser["format"] == S.FORMAT
    now_kept, now_shards = lasting(team.bare, main)
    assert {p: d for p, d in now_kept.items() if p in kept} == kept  # nothing lost
    assert now_shards == shards  # no lock moved
    for clone in (a, b):  # both end at format 3, where the remote is
        ok(clone("sync"))
    remote = ref(team.bare, BRANCH)
    for clone in (a, b):
        local = ref(clone.cwd, f"refs/heads/{BRANCH}")
        assert local == remote, clone.cwd
        assert fmt(clone.cwd, local)["format"] == S.FORMAT
        again = json.loads(ok(clone("--json", "shard")).stdout)
        assert (again["converted"], again["upgraded"]) == (False, False)
    assert ref(team.bare, BRANCH) == remote and len(upgrades(team.bare, remote)) == 1


def test_a_clone_that_loses_the_upgrade_push_adopts_the_winners(tmp_path, monkeypatch):
    """Deterministically the race's losing side: clone b builds its upgrade from the
    remote tip, clone a's upgrade lands first, b's push is rejected, b fetches, finds
    format 3 and adopts a's commit instead of upgrading again."""
    team, a, b = shared_format_2(tmp_path)
    ok(b("sync"))
    from agent_registry.sync import convert as C
    real_build, built = C._build_upgrade, []

    def build_then_lose(registry, tip, layout):
        made = real_build(registry, tip, layout)
        if not built:
            ok(a("shard"))  # the other clone lands first
        built.append(made)
        return made

    monkeypatch.setattr(C, "_build_upgrade", build_then_lose)
    with Registry.open(str(b.cwd)) as registry:
        result = C.convert(registry)
    assert (result["upgraded"], result.get("by"), result["format"]) == \
        (False, "another clone", S.FORMAT)
    assert len(built) == 1
    remote = ref(team.bare, BRANCH)
    assert built[0]["main"] not in git(team.bare, "rev-list", remote).split()
    assert ref(b.cwd, f"refs/heads/{BRANCH}") == remote
    assert len(upgrades(team.bare, remote)) == 1


def test_the_config_upgrade_waits_for_an_unreachable_remote(tmp_path):
    """Offline, the automatic upgrade leaves format 2 with a warning, the operation goes
    on there; a later operation upgrades once the remote answers."""
    team, a, _ = shared_format_2(tmp_path)
    git(a.cwd, "config", "agent-registry.shards", "4")
    git(a.cwd, "remote", "set-url", "origin", str(tmp_path / "nowhere.git"))
    offline = a("register", "kimi-9", "--provider", "test")
    assert offline.returncode in (0, 3), offline.stderr
    assert f"not upgraded to layout format {S.FORMAT}" in offline.stderr
    assert fmt(a.cwd, ref(a.cwd, f"refs/heads/{BRANCH}"))["format"] == 2
    git(a.cwd, "remote", "set-url", "origin", str(team.bare))
    ok(a("register", "kimi-10", "--provider", "test"))
    main = ref(team.bare, BRANCH)
    assert len(upgrades(team.bare, main)) == 1 and fmt(team.bare, main)["format"] == S.FORMAT
    files = files_at(team.bare, main)
    assert "sessions/live/kimi-9.yaml" in files and "sessions/live/kimi-10.yaml" in files


def test_the_config_converts_only_the_main_branch_never_a_clone_ref(repo, run):
    """In format 3 a heartbeat and a diary line write this clone's own ref through a
    registry of the main registry's class: with the config set, that registry must not
    take its branch for a single-branch registry to convert."""
    ok(run("init"))
    git(repo, "config", "agent-registry.shards", "4")
    ok(run("register", "kimi-1", "--provider", "test"))
    for line in ("one", "two", "three"):  # the clone ref exists from the first on
        ok(run("context", "log", "kimi-1", line))
        ok(run("lock", "heartbeat", "--session", "kimi-1"))
    names = registry_refs(repo)
    clones = [n for n in names if n.startswith(f"{BRANCH}-clones/")]
    assert clones, names  # the lead's routing wrote the clone ref
    assert not [n for n in clones if "shards" in n or "layout" in n], names
    for name in clones:
        assert S.LAYOUT not in files_at(repo, ref(repo, f"refs/heads/{name}"))
    assert len(git(repo, "log", "--format=%H", "--diff-filter=A", f"refs/heads/{BRANCH}",
                   "--", S.LAYOUT).split()) == 1
