"""Converting a single-branch registry (layout format 1) to lock shards (format 3), and
upgrading lock shards of format 2 (agent-registry 0.2) to format 3: `agent-registry
shard`, sync/convert.py, docs/shards.md.

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
    assert len(log) == 2 and log[1].startswith(f"convert to layout format {S.FORMAT}: 4 lock shards")
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


# one round in make test, four more with the soak tests (make test-slow, CI)
@pytest.mark.parametrize("round_", [0, *(pytest.param(r, marks=pytest.mark.slow)
                                         for r in range(1, 5))])
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
    diaries, an ended one, a message): its main tip."""
    ok(run("init"))
    populate(run)
    ok(run("shard", "--count", str(count)))
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


def test_the_config_upgrades_format_2_before_the_next_operation(repo, run):
    old = format_2(run, repo)
    git(repo, "config", "agent-registry.shards", "8")
    ok(run("register", "late-6", "--provider", "test", "--working-on", "after the upgrade"))
    main = ref(repo, f"refs/heads/{BRANCH}")
    log = git(repo, "log", "--format=%s", f"{old}..{main}").splitlines()
    assert len(log) == 2 and log[1].startswith(f"upgrade to layout format {S.FORMAT}"), log
    check_upgraded(repo, old, git(repo, "rev-parse", f"{main}^").strip(), 4)
    assert "sessions/live/late-6.yaml" in files_at(repo, main)
    ok(run("register", "late-7", "--provider", "test"))  # upgraded once
    assert len(upgrades(repo, ref(repo, f"refs/heads/{BRANCH}"))) == 1


def test_a_format_2_registry_not_upgraded_keeps_heartbeats_on_its_main_branch(repo, run):
    """Without `shard` or the config a 0.2 registry stays format 2 and works as 0.2 did:
    heartbeats and diary lines are commits of the main branch, no clone ref appears."""
    old = format_2(run, repo)
    ok(run("register", "late-6", "--provider", "test"))
    ok(run("lock", "acquire", "src/late.py", "--session", "late-6"))
    before = ref(repo, f"refs/heads/{BRANCH}")
    ok(run("lock", "heartbeat", "--session", "late-6"))
    ok(run("context", "log", "late-6", "still format 2"))
    main = ref(repo, f"refs/heads/{BRANCH}")
    bodies = git(repo, "log", "--format=%B", f"{before}..{main}")
    assert "Registry-Op: heartbeat" in bodies and "Registry-Op: context-log" in bodies
    assert b"still format 2" in files_at(repo, main)["contexts/late-6.md"]
    assert fmt(repo, main)["format"] == 2 and not upgrades(repo, main)
    assert not [name for name in registry_refs(repo) if name.startswith(f"{BRANCH}-clones")]
    ok(run("finish", "late-6"))
    assert fmt(repo, ref(repo, f"refs/heads/{BRANCH}"))["format"] == 2
    assert git(repo, "rev-parse", f"refs/heads/{BRANCH}").strip() != old


def shared_format_2(tmp_path: Path) -> tuple[Team, Runner, Runner]:
    """A bare remote holding a format-2 registry (made by clone a, downgraded on the
    remote), and two clones of it, each with sessions holding locks and diaries."""
    team = Team(tmp_path)
    a = team.clone("a")
    ok(a("init"))
    populate(a, "a")
    ok(a("shard", "--count", "4"))
    downgrade(team.bare)
    ok(a("sync"))
    b = team.clone("b")
    ok(b("register", "bee-1", "--provider", "test"))
    ok(b("lock", "acquire", "pkg/b/mod.py", "--session", "bee-1"))
    ok(b("context", "log", "bee-1", "diary of bee-1"))
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
