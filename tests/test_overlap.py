"""The conflict forecast (issue 27): `agent-registry overlap` over real worktrees and
clones, its messages (sent once, shown by the prompt hook), and a claim's
`changed_elsewhere`."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from helpers import git, user_state
from test_guard import agents  # noqa: F401  (fixture)
from test_harness_hooks import NATIVE, base, context_of, hook
from test_hotpath import both

BILLING = "".join(f"def f{i}():\n    return {i}\n\n" for i in range(12))


def edit(path: Path, old: str, new: str) -> None:
    path.write_text(path.read_text().replace(old, new))


def commit_all(where: Path, message: str) -> None:
    git(where, "add", "-A")
    git(where, "commit", "-q", "-m", message)


def open_at(where: Path):
    from agent_registry import Registry
    return Registry.open(str(where))


@pytest.fixture
def team(repo, tmp_path, monkeypatch):
    """Two worktrees of *repo* on branches feat-a and feat-b, a session in each (a1, b1),
    and src/billing.py, a file of twelve functions, on main before they forked."""
    monkeypatch.setenv("AGENT_REGISTRY_PID", "none")
    (repo / "src" / "billing.py").write_text(BILLING)
    commit_all(repo, "billing")
    trees = {}
    for name in ("a", "b"):
        trees[name] = tmp_path / f"wt-{name}"
        git(repo, "worktree", "add", "-q", "-b", f"feat-{name}", str(trees[name]))
    with open_at(repo) as registry:
        registry.init()
    for name, where in trees.items():
        with open_at(where) as registry:
            registry.register(f"{name}1", provider="Kimi", working_on=f"task {name}")
    return trees


def forecast(where: Path) -> dict:
    from agent_registry.forecast.overlap import overlaps
    with open_at(where) as registry:
        return overlaps(registry)


def paths_of(report: dict) -> dict[str, str]:
    assert len(report["overlaps"]) <= 1, report["overlaps"]
    return {p["path"]: p["kind"] for o in report["overlaps"] for p in o["paths"]}


def test_one_function_edited_on_two_branches_is_a_conflict(team, run, repo):
    edit(team["a"] / "src/billing.py", "return 3\n", "return 30\n")
    commit_all(team["a"], "a")
    edit(team["b"] / "src/billing.py", "return 3\n", "return 300\n")
    commit_all(team["b"], "b")
    proc = run("overlap", "--json")  # from the main worktree, where nobody works
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["method"] == "merge-tree" and report["skipped"] == []
    (found,) = report["overlaps"]
    assert found["sessions"] == ["a1", "b1"] and found["kinds"] == ["conflict"]
    assert found["paths"] == [{"path": "src/billing.py", "kind": "conflict", "held_by": [],
                               "changed_by": ["a1", "b1"]}]
    assert [s["branch"] for s in found["sides"]] == ["feat-a", "feat-b"]
    assert found["sides"][1]["working_on"] == "task b"
    text = run("overlap").stdout
    assert "a1 (feat-a) and b1 (feat-b)" in text and "conflict" in text


def test_one_file_in_separate_hunks_overlaps_without_conflict(team):
    edit(team["a"] / "src/billing.py", "return 1\n", "return 10\n")
    commit_all(team["a"], "a")
    edit(team["b"] / "src/billing.py", "return 11\n", "return 110\n")
    (team["b"] / "src/auth.py").write_text("auth = 2\n")  # b's alone: no overlap
    commit_all(team["b"], "b")
    assert paths_of(forecast(team["a"])) == {"src/billing.py": "both-changed"}


def test_a_path_one_holds_and_the_other_changed(team):
    with open_at(team["a"]) as registry:
        registry.claim("a1", ["src/auth.py"])
    (team["b"] / "src/auth.py").write_text("auth = 2\n")
    commit_all(team["b"], "b")
    (found,) = forecast(team["b"])["overlaps"]
    assert found["paths"] == [{"path": "src/auth.py", "kind": "held-changed",
                               "held_by": ["a1"], "changed_by": ["b1"]}]


def test_an_uncommitted_change_counts_and_the_worktree_is_untouched(team):
    edit(team["a"] / "src/billing.py", "return 5\n", "return 50\n")
    commit_all(team["a"], "a")
    wb = team["b"]
    edit(wb / "src/billing.py", "return 5\n", "return 500\n")  # not staged
    (wb / "notes.txt").write_text("untracked\n")
    git(wb, "add", "notes.txt")  # staged, so the index differs from HEAD too
    (wb / "scratch.txt").write_text("untracked\n")
    before = user_state(wb)
    files = {p: p.read_bytes() for p in wb.rglob("*") if p.is_file() and ".git" not in p.parts}
    report = forecast(team["a"])
    assert paths_of(report) == {"src/billing.py": "conflict"}
    side = next(s for s in report["sessions"] if s["session"] == "b1")
    assert side["dirty"] and side["tip"] != git(wb, "rev-parse", "HEAD").strip()
    assert user_state(wb) == before
    assert {p: p.read_bytes() for p in wb.rglob("*")
            if p.is_file() and ".git" not in p.parts} == files
    assert not list(Path(git(wb, "rev-parse", "--git-common-dir").strip())
                    .joinpath("agent-registry").glob("index.*"))


def test_a_repeat_run_reuses_the_merges_and_the_snapshots(team, tmp_path, monkeypatch):
    edit(team["a"] / "src/billing.py", "return 1\n", "return 10\n")
    commit_all(team["a"], "a")
    edit(team["b"] / "src/billing.py", "return 1\n", "return 100\n")  # uncommitted
    trace = tmp_path / "trace"
    monkeypatch.setenv("GIT_TRACE", str(trace))
    first = forecast(team["a"])
    assert paths_of(first) == {"src/billing.py": "conflict"}
    assert "merge-tree" in trace.read_text() and "write-tree" in trace.read_text()
    trace.unlink()
    again = forecast(team["a"])
    assert "merge-tree" not in trace.read_text() and "write-tree" not in trace.read_text()
    assert again["overlaps"] == first["overlaps"]
    edit(team["b"] / "src/billing.py", "return 100\n", "return 1\n")  # changed back
    (team["b"] / "src/auth.py").write_text("auth = 2\n")
    assert forecast(team["a"])["overlaps"] == []


def clone_on_feat_c(repo: Path, tmp_path: Path, change) -> Path:
    """A second clone of *repo* (through a bare remote, origin) where session c1 works on
    branch feat-c, pushed after *change(clone)* was committed on it."""
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(repo, "remote", "add", "origin", str(remote))
    git(repo, "push", "-q", "origin", "main", "agent-registry")
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(remote), str(other))
    git(other, "checkout", "-q", "-b", "feat-c")
    change(other)
    commit_all(other, "c")
    git(other, "push", "-q", "origin", "feat-c")
    with open_at(other) as registry:
        registry.register("c1", provider="Kimi", working_on="task c")
    return other


def test_another_clones_session_is_read_through_its_pushed_branch(team, repo, tmp_path,
                                                                    run):
    other = clone_on_feat_c(repo, tmp_path, lambda where: edit(
        where / "src/billing.py", "return 7\n", "return 70\n"))
    edit(team["a"] / "src/billing.py", "return 7\n", "return 77\n")
    commit_all(team["a"], "a")
    assert run("sync").returncode == 0
    git(repo, "fetch", "-q", "origin")
    report = forecast(repo)
    pairs = {tuple(o["sessions"]): o for o in report["overlaps"]}
    assert {p["path"]: p["kind"] for p in pairs[("a1", "c1")]["paths"]} == \
        {"src/billing.py": "conflict"}
    side = next(s for s in report["sessions"] if s["session"] == "c1")
    assert side["source"] == "remote-tracking" and side["branch"] == "feat-c"

    # told once across clones: the other clone finds the keyed messages on the remote
    git(team["a"], "push", "-q", "origin", "feat-a")
    here = json.loads(run("--json", "overlap", "--notify").stdout)["notified"]
    assert sorted((n["to"], n["created"]) for n in here if "c1" in (n["to"], n["from"])) == \
        [("a1", True), ("c1", True)]
    git(other, "fetch", "-q", "origin")
    assert run("sync", cwd=other).returncode == 0
    there = run("--json", "overlap", "--notify", cwd=other)
    assert there.returncode == 0, there.stderr
    assert sorted((n["to"], n["created"]) for n in json.loads(there.stdout)["notified"]) == \
        [("a1", False), ("c1", False)]


def test_notify_tells_each_session_once_and_the_prompt_hook_shows_it(team, agents):
    wb = team["b"]
    start = hook(wb, "claude", "session-start",
                 {**base("claude", wb, "SessionStart"), "source": "startup"},
                 "--pid", str(agents()))
    assert start.returncode == 0, start.stderr
    bid = f"claude-{NATIVE}"
    with open_at(wb) as registry:
        registry.finish("b1")
    edit(team["a"] / "src/billing.py", "return 2\n", "return 20\n")
    commit_all(team["a"], "a")
    edit(wb / "src/billing.py", "return 2\n", "return 200\n")
    commit_all(wb, "b")

    from agent_registry.core.messages import inbox
    from agent_registry.forecast.overlap import overlaps
    from agent_registry.forecast.tell import notify
    with open_at(team["a"]) as registry:
        sent = notify(registry)
        assert sorted((n["to"], n["from"], n["created"]) for n in sent) == \
            [("a1", bid, True), (bid, "a1", True)]
        assert notify(registry) == []  # remembered here
        os.unlink(registry.repo.state_path("overlap.json"))
        assert [n["created"] for n in notify(registry)] == [False, False]  # on the branch
        (message,) = inbox(registry, "a1")["messages"]
    assert message["from"] == bid and message["subject"] == "overlap forecast"
    assert "src/billing.py" in message["body"] and "conflict" in message["body"]

    prompt = {**base("claude", wb, "UserPromptSubmit"), "prompt": "go on"}
    shown = context_of("claude", hook(wb, "claude", "user-prompt-submit", prompt),
                       "user-prompt-submit")
    assert "[overlap forecast] a1 on branch feat-a (working on: task a)" in shown
    assert "src/billing.py" in shown

    # a new commit on the same path: nothing new to say; a new path: one more message
    edit(wb / "src/billing.py", "return 200\n", "return 2000\n")
    commit_all(wb, "b again")
    with open_at(team["a"]) as registry:
        assert notify(registry) == []
    edit(team["a"] / "src/auth.py", "1", "3")
    commit_all(team["a"], "a auth")
    edit(wb / "src/auth.py", "1", "4")
    commit_all(wb, "b auth")
    with open_at(team["a"]) as registry:
        assert sorted(n["to"] for n in notify(registry) if n["created"]) == ["a1", bid]
        assert len(inbox(registry, "a1")["messages"]) == 2
    # a path dropping out (b takes its auth.py change back) is not news either
    edit(wb / "src/auth.py", "4", "1")
    commit_all(wb, "b auth undone")
    with open_at(team["a"]) as registry:
        assert paths_of(overlaps(registry)) == {"src/billing.py": "conflict"}
        assert notify(registry) == []
        assert len(inbox(registry, "a1")["messages"]) == 2


def test_a_claim_of_a_path_changed_elsewhere_says_so(team, run, tmp_path):
    (team["b"] / "src/auth.py").write_text("auth = 2\n")
    commit_all(team["b"], "b")
    for code, out, err in both(team["a"], "--json", "lock", "acquire", "src/auth.py",
                               "src/billing.py", "--session", "a1"):  # click-free, click
        assert code == 0, err
        (found,) = json.loads(out)["changed_elsewhere"]
        assert found == {"session": "b1", "branch": "feat-b", "host": found["host"],
                         "path": "src/auth.py", "where": "committed", "kind": "changed"}
        assert "src/auth.py was already changed by b1 on branch feat-b" in err
    proc = run("--json", "lock", "acquire", "README.md", "--session", "a1", cwd=team["a"],
               env={"GIT_TRACE": str(tmp_path / "trace")})
    assert "changed_elsewhere" not in json.loads(proc.stdout) and proc.stderr == ""
    assert "merge-tree" not in (tmp_path / "trace").read_text()  # the pair of tips is cached


def test_a_claim_with_nobody_elsewhere_does_not_load_the_forecast(team, run):
    with open_at(team["a"]) as registry:
        registry.finish("b1")
        registry.register("a2", provider="Kimi")  # the same worktree: nothing to forecast
    proc = run("lock", "acquire", "src/auth.py", "--session", "a1", cwd=team["a"],
               env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert proc.returncode == 0, proc.stderr
    assert "agent_registry.forecast.gate" in proc.stderr
    assert "agent_registry.forecast.overlap" not in proc.stderr


def test_watch_tells_each_new_overlap_once(team, run):
    edit(team["a"] / "src/billing.py", "return 4\n", "return 40\n")
    commit_all(team["a"], "a")
    edit(team["b"] / "src/billing.py", "return 4\n", "return 400\n")
    commit_all(team["b"], "b")
    env = {"AGENT_REGISTRY_NOTIFY_URLS": "json://127.0.0.1:9/hook"}  # nothing to deliver
    from agent_registry.core.messages import inbox
    for _ in range(2):
        proc = run("watch", "--once", env=env)
        assert proc.returncode == 0, proc.stderr
        with open_at(team["a"]) as registry:
            for sid, other in (("a1", "b1"), ("b1", "a1")):
                (message,) = inbox(registry, sid)["messages"]
                assert message["from"] == other and "src/billing.py" in message["body"]


@pytest.mark.parametrize("version,conflicts,both", [
    ((2, 37, 0), [], ["src/billing.py"]),  # before merge-tree --write-tree: changed paths
    ((2, 38, 0), ["src/billing.py"], []),  # --write-tree, one process per pair
])
def test_older_git_falls_back(team, version, conflicts, both):
    from agent_registry.forecast import merges
    edit(team["a"] / "src/billing.py", "return 6\n", "return 60\n")
    (team["a"] / "src/auth.py").write_text("auth = 3\n")
    commit_all(team["a"], "a")
    edit(team["b"] / "src/billing.py", "return 6\n", "return 600\n")
    commit_all(team["b"], "b")
    tips = [git(team[n], "rev-parse", "HEAD").strip() for n in ("a", "b")]
    with open_at(team["a"]) as registry:
        found, method = merges.changes(registry.repo, [tuple(tips)], {}, version)
    entry = found[merges.pair_key(*tips)]
    assert method == ("changed-paths" if version < (2, 38) else "merge-tree")
    assert (entry["conflicts"], entry["both"]) == (conflicts, both)
    assert entry[tips[0]] == ["src/auth.py", "src/billing.py"]
    assert entry[tips[1]] == ["src/billing.py"]


def test_a_pair_git_cannot_merge_does_not_stop_the_others(team):
    from agent_registry.forecast import merges
    edit(team["a"] / "src/billing.py", "return 8\n", "return 80\n")
    commit_all(team["a"], "a")
    edit(team["b"] / "src/billing.py", "return 8\n", "return 800\n")
    commit_all(team["b"], "b")
    a, b = (git(team[n], "rev-parse", "HEAD").strip() for n in ("a", "b"))
    orphan = git(team["a"], "commit-tree", "-m", "unrelated", f"{a}^{{tree}}").strip()
    pairs = sorted([(orphan, a), (a, b), (orphan, b)], key=lambda p: merges.pair_key(*p))
    with open_at(team["a"]) as registry:
        found, _ = merges.changes(registry.repo, pairs, {})
    assert found[merges.pair_key(a, b)]["conflicts"] == ["src/billing.py"]
    assert found[merges.pair_key(orphan, a)]["conflicts"] == []
    assert found[merges.pair_key(orphan, b)][orphan] == []


def test_a_worktree_git_cannot_read_is_skipped_and_the_others_still_count(team, repo, tmp_path):
    """One worktree whose index git cannot read: its session is listed under `skipped`
    with git's reason, and the pair of the two others is still forecast."""
    wc = tmp_path / "wt-c"
    git(repo, "worktree", "add", "-q", "-b", "feat-c", str(wc))
    with open_at(wc) as registry:
        registry.register("c1", provider="Kimi", working_on="task c")
    edit(team["a"] / "src/billing.py", "return 3\n", "return 30\n")
    commit_all(team["a"], "a")
    edit(wc / "src/billing.py", "return 3\n", "return 300\n")
    commit_all(wc, "c")
    index = Path(git(team["b"], "rev-parse", "--git-path", "index").strip())
    index = index if index.is_absolute() else team["b"] / index
    index.write_bytes(b"DIRC not an index")
    report = forecast(team["a"])
    (skipped,) = report["skipped"]
    assert skipped["session"] == "b1" and "could not be read" in skipped["reason"]
    assert [o["sessions"] for o in report["overlaps"]] == [["a1", "c1"]]
    assert paths_of(report) == {"src/billing.py": "conflict"}


@pytest.mark.parametrize("registry_remote", [None, "origin", "team/origin"])
def test_a_branch_pushed_to_a_remote_whose_name_has_a_slash_is_found(tmp_path, registry_remote):
    """A remote may be named `team/origin`: its branches are under
    refs/remotes/team/origin/, found from git's list of remotes, the registry's first."""
    from agent_registry.forecast.sides import pushed, remotes
    from helpers import make_repo
    repo = make_repo(tmp_path / "repo")
    for name, bare in (("team/origin", "slashed.git"), ("origin", "plain.git")):
        git(tmp_path, "init", "-q", "--bare", bare)
        git(repo, "remote", "add", name, str(tmp_path / bare))
    git(repo, "checkout", "-q", "-b", "feat")
    git(repo, "push", "-q", "team/origin", "feat")
    git(repo, "fetch", "-q", "team/origin")
    with open_at(repo) as registry:
        names = remotes(registry.repo, registry_remote)
        assert names[0] == (registry_remote or "origin")
        assert pushed(registry.repo, "feat", names) == "refs/remotes/team/origin/feat"
        git(repo, "push", "-q", "origin", "feat")
        git(repo, "fetch", "-q", "origin")
        expected = "team/origin" if registry_remote == "team/origin" else "origin"
        assert pushed(registry.repo, "feat", names) == f"refs/remotes/{expected}/feat"


BRANCH_NAMES = ["feat", "feat/x", "a@b", "ü/ß", "x.lock.y", "a{b}", "@", "@@", "a/@/b",
                "", "-x", "HEAD", "a b", "a..b", "a/.b", ".a", "a.lock", "a/b.lock/c",
                "a.", "/a", "a/", "a//b", "@{x", "a@{1}", "a\\b", "a\tb", "a\x7fb", "a~1",
                "a^", "a:b", "a?", "a*", "a[b", "../../../../src/payload", "a/..", "."]


def test_branch_names_are_judged_as_git_judges_them(tmp_path):
    """store/refname.branch_problem against `git check-ref-format --branch` (run
    outside any repository, where git reads the name as it is)."""
    from agent_registry.store.refname import branch_problem
    env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(tmp_path)}
    for name in BRANCH_NAMES:
        proc = subprocess.run(["git", "check-ref-format", "--branch", name], cwd=tmp_path,
                              env=env, capture_output=True)
        assert (branch_problem(name) is None) == (proc.returncode == 0), (name, proc.stderr)


def test_a_record_naming_a_branch_git_refuses_is_skipped_in_every_clone(team, repo, run,
                                                                      tmp_path):
    """A session record planted with `git_branch: ../../../../src/payload` (issue 34):
    made into refs/remotes/origin/<branch>, it named src/payload of the worktree, read as
    a ref (`overlap` exit 1 in every clone).  It is skipped, saying why, and the others'
    forecast stands, here and in another clone."""
    from test_core_api import edit_session
    (repo / "src" / "payload").write_text("not a commit\n")
    commit_all(repo, "payload")
    edit(team["a"] / "src/billing.py", "return 4\n", "return 40\n")
    commit_all(team["a"], "a")
    edit(team["b"] / "src/billing.py", "return 4\n", "return 400\n")
    commit_all(team["b"], "b")
    with open_at(repo) as registry:
        registry.register("x1", provider="Kimi", working_on="planted")
    edit_session(repo, "x1", git_branch="../../../../src/payload", host="elsewhere")
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(repo, "remote", "add", "origin", str(remote))
    git(repo, "push", "-q", "origin", "main", "feat-a", "feat-b")
    assert run("sync").returncode == 0
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(remote), str(other))
    assert run("sync", cwd=other).returncode == 0
    why = ("its branch '../../../../src/payload' is not a name git allows: it holds '..'")
    for where in (repo, other):
        proc = run("--json", "overlap", cwd=where)
        assert proc.returncode == 0, proc.stderr
        report = json.loads(proc.stdout)
        assert report["skipped"] == [{"session": "x1", "reason": why}], report["skipped"]
        assert [o["sessions"] for o in report["overlaps"]] == [["a1", "b1"]]
        assert paths_of(report) == {"src/billing.py": "conflict"}
