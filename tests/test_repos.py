"""One view over every repository (issue 27 item 4): each repository where `init` or
`register` runs is remembered in the user's list, and `status --repos` / `lock list
--repos` read every one, read-only, with a REPOSITORY column; a repository that is gone
is skipped in one line and can be forgotten (`repos forget`)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import CLI, WAITER, Runner, git, make_repo


def repos_file(env_home: Path | None = None) -> Path:
    base = env_home or Path(os.environ["XDG_CONFIG_HOME"]) / "agent-registry"
    return base / "repos"


def snapshot(repo: Path) -> tuple:
    """What a read-only reader must leave as it was: every ref, and the clone's local
    state folder (sync state, fetch marks, the flock file)."""
    refs = git(repo, "for-each-ref", "--format=%(refname) %(objectname)")
    state = repo / ".git" / "agent-registry"
    files = sorted(str(p.relative_to(state)) for p in state.rglob("*")) if state.exists() else []
    return refs, files


@pytest.fixture
def three(tmp_path) -> list[Path]:
    """Three repositories, a session registered (and a lock taken) in each by the CLI."""
    repos = []
    for name, provider in (("alpha", "Kimi"), ("beta", "Codex"), ("gamma", "Claude")):
        repo = make_repo(tmp_path / name)
        run = Runner(repo)
        assert run("register", f"{name}-1", "--provider", provider,
                   "--working-on", f"work in {name}").returncode == 0
        assert run("lock", "acquire", "src/auth.py", "--session", f"{name}-1").returncode == 0
        repos.append(repo)
    return repos


def test_three_repositories_in_one_status(three, tmp_path):
    listed = repos_file().read_text().splitlines()
    assert listed == [str(r.resolve()) for r in three]
    before = [snapshot(r) for r in three]
    elsewhere = tmp_path / "not-a-repo"  # a person runs it from anywhere
    elsewhere.mkdir()
    run = Runner(elsewhere)
    text = run("status", "--repos", check_untouched=False)
    assert text.returncode == 0, text.stderr
    header = text.stdout.splitlines()[0].split()
    assert header[0] == "REPOSITORY" and "SESSION" in header
    for repo in three:
        row = next(line for line in text.stdout.splitlines() if f"{repo.name}-1" in line)
        cell = row.split()[0]  # a long path keeps its end: the repository's name
        assert cell.lstrip("…") and str(repo.resolve()).endswith(cell.lstrip("…")), row
    doc = json.loads(run("--json", "status", "--repos", check_untouched=False).stdout)
    assert {(s["repository"], s["id"]) for s in doc["sessions"]} == \
        {(str(r.resolve()), f"{r.name}-1") for r in three}
    assert [r["repository"] for r in doc["repositories"]] == listed and doc["skipped"] == []
    locks = json.loads(run("--json", "lock", "list", "--repos", check_untouched=False).stdout)
    assert {(l["repository"], l["path"], l["owner"]) for l in locks["locks"]} == \
        {(str(r.resolve()), "src/auth.py", f"{r.name}-1") for r in three}
    table = run("lock", "list", "--repos", check_untouched=False).stdout
    assert table.split()[0] == "REPOSITORY" and table.count("src/auth.py") == 3
    assert [snapshot(r) for r in three] == before  # read-only: no ref, no state file


def test_a_deleted_repository_is_skipped_in_one_line_and_forgotten(tmp_path):
    for name in ("alpha", "beta", "gamma"):
        assert Runner(make_repo(tmp_path / name))("register", f"{name}-1",
                                                  "--provider", "Kimi").returncode == 0
    gone = tmp_path / "beta"
    subprocess.run(["rm", "-rf", str(gone)], check=True)
    run = Runner(tmp_path)
    proc = run("status", "--repos", check_untouched=False)
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and str(gone) in lines[0] and "repos forget" in lines[0], lines
    assert "beta-1" not in proc.stdout and "alpha-1" in proc.stdout and "gamma-1" in proc.stdout
    doc = json.loads(run("--json", "repos", "list", check_untouched=False).stdout)
    assert [r["present"] for r in doc["repositories"]] == [True, False, True]
    forgot = run("-C", str(tmp_path / "alpha"), "repos", "forget", "../beta",
                 check_untouched=False)  # relative to -C, as every path argument
    assert forgot.returncode == 0 and str(gone) in forgot.stdout
    assert str(gone) not in repos_file().read_text()
    again = run("repos", "forget", str(gone), check_untouched=False)
    assert again.returncode == 1 and "not in the list" in again.stderr
    quiet = run("status", "--repos", check_untouched=False)
    assert quiet.returncode == 0 and quiet.stderr.strip() == ""


def test_a_folder_that_is_no_longer_its_own_repository_is_skipped(tmp_path):
    """A remembered repository whose .git went away, inside another repository, is not
    read as that other repository."""
    outer = make_repo(tmp_path / "outer")
    inner = make_repo(outer / "inner")
    assert Runner(inner)("register", "in-1", "--provider", "Kimi").returncode == 0
    assert Runner(outer)("register", "out-1", "--provider", "Kimi").returncode == 0
    subprocess.run(["rm", "-rf", str(inner / ".git")], check=True)
    proc = Runner(tmp_path)("--json", "status", "--repos", check_untouched=False)
    doc = json.loads(proc.stdout)
    assert [s["id"] for s in doc["sessions"]] == ["out-1"]
    assert [s["repository"] for s in doc["skipped"]] == [str(inner.resolve())]


def test_a_worktree_is_its_repository_and_a_second_register_writes_nothing(tmp_path):
    repo = make_repo(tmp_path / "main")
    git(repo, "worktree", "add", "-q", str(tmp_path / "wt"), "-b", "side")
    assert Runner(repo)("init").returncode == 0
    listing = repos_file()
    stamp = listing.stat().st_mtime_ns, listing.stat().st_ino
    time.sleep(0.01)  # so a rewrite would show in the mtime
    assert Runner(tmp_path / "wt")("register", "wt-1", "--provider", "Kimi").returncode == 0
    assert Runner(repo)("register", "main-1", "--provider", "Kimi").returncode == 0
    assert listing.read_text() == f"{repo.resolve()}\n"
    assert (listing.stat().st_mtime_ns, listing.stat().st_ino) == stamp


def test_concurrent_registers_list_every_repository_once(tmp_path):
    repos = [make_repo(tmp_path / f"r{i}") for i in range(4)]
    go, procs = tmp_path / "go", []
    for i in range(8):  # two racers in each repository
        procs.append(subprocess.Popen(
            [sys.executable, "-c", WAITER, str(tmp_path / f"ready-{i}"), str(go), CLI,
             "register", f"racer-{i}", "--provider", "Kimi"],
            cwd=repos[i % 4], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    for _ in range(30_000):  # a watchdog, not a clock: a broken racer fails the test
        if len(list(tmp_path.glob("ready-*"))) == 8:
            break
        assert all(p.poll() is None for p in procs), "a racer died before the start"
        time.sleep(0.01)
    go.touch()
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    lines = repos_file().read_text().splitlines()
    assert sorted(lines) == sorted(str(r.resolve()) for r in repos)


def test_agent_registry_home_names_the_list_and_the_home_import_home_reads(tmp_path):
    home = tmp_path / "predecessor-home"
    (home / "sessions").mkdir(parents=True)
    (home / "sessions" / "kimi-1626451200.yaml").write_text(
        "session_id: kimi-1626451200\nprovider: Kimi\nworking_on: old work\n"
        "status: Finished\nstarted_at: '2025-07-16 14:30:00'\n")
    repo = make_repo(tmp_path / "repo")
    run = Runner(repo)
    env = {"AGENT_REGISTRY_HOME": str(home)}
    assert run("register", "kimi-2", "--provider", "Kimi", env=env).returncode == 0
    assert (home / "repos").read_text() == f"{repo.resolve()}\n"
    assert not repos_file().exists()
    doc = json.loads(run("--json", "status", "--repos", env=env).stdout)
    assert [s["id"] for s in doc["sessions"]] == ["kimi-2"]
    imported = run("import-home", env=env)
    assert imported.returncode == 0, imported.stderr
    assert f"from {home.resolve()}:" in imported.stdout
    assert "kimi-1626451200" in git(repo, "ls-tree", "-r", "--name-only", "agent-registry")


def test_repos_reads_a_clone_as_it_is_without_fetching(tmp_path):
    """A repository with a remote is read from its clone's copy (another clone's newer
    session is not fetched), and says how old that copy is."""
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    first = make_repo(tmp_path / "first")
    git(first, "remote", "add", "origin", str(remote))
    git(first, "push", "-q", "origin", "main")
    assert Runner(first)("register", "first-1", "--provider", "Kimi").returncode == 0
    assert Runner(first)("status").returncode == 0  # a read that fetches: the view's as_of
    git(tmp_path, "clone", "-q", str(remote), str(tmp_path / "second"))
    assert Runner(tmp_path / "second")("--json", "register", "second-1", "--provider", "Kimi",
                                        env={"AGENT_REGISTRY_HOME": str(tmp_path / "other")}
                                        ).returncode == 0
    before = snapshot(first)
    doc = json.loads(Runner(tmp_path)("--json", "status", "--repos",
                                      check_untouched=False).stdout)
    assert [s["id"] for s in doc["sessions"]] == ["first-1"]
    assert doc["repositories"][0]["remote"] == "origin" and doc["repositories"][0]["as_of"]
    text = Runner(tmp_path)("status", "--repos", check_untouched=False).stdout
    assert "this clone's copy, as of" in text
    assert snapshot(first) == before


def test_repos_is_not_combined_with_remote_or_room(tmp_path):
    proc = Runner(tmp_path)("status", "--repos", "--room", "room:x", check_untouched=False)
    assert proc.returncode == 2 and "--repos reads every repository" in proc.stderr


def test_no_list_yet_says_how_one_is_made(tmp_path):
    proc = Runner(tmp_path)("status", "--repos", check_untouched=False)
    assert proc.returncode == 0 and "init" in proc.stdout
    assert json.loads(Runner(tmp_path)("--json", "repos", "list",
                                       check_untouched=False).stdout)["repositories"] == []


def test_a_registry_made_before_the_list_joins_it_when_repos_runs_there(tmp_path):
    repo = make_repo(tmp_path / "older")
    run = Runner(repo)
    assert run("register", "old-1", "--provider", "Kimi").returncode == 0
    repos_file().unlink()  # as a registry made by an earlier version has none
    doc = json.loads(run("--json", "lock", "list", "--repos").stdout)
    assert [r["repository"] for r in doc["repositories"]] == [str(repo.resolve())]
    assert repos_file().read_text() == f"{repo.resolve()}\n"


def test_a_heartbeat_dated_ahead_in_another_repository_writes_nothing_there(tmp_path):
    from agent_registry import Registry
    from helpers import FakeClock
    repo = make_repo(tmp_path / "ahead")
    assert Runner(repo)("init").returncode == 0
    with Registry.open(str(repo), clock=FakeClock(time.time() + 86400)) as registry:
        registry.register("ahead-1", provider="Kimi")
        registry.claim("ahead-1", ["src/auth.py"])
    state = repo / ".git" / "agent-registry" / "heartbeats-seen.json"
    assert not state.exists()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    locks = json.loads(Runner(elsewhere)("--json", "lock", "list", "--repos",
                                          check_untouched=False).stdout)
    assert [(l["path"], l["owner"]) for l in locks["locks"]] == [("src/auth.py", "ahead-1")]
    assert not state.exists()  # read-only: no first sighting recorded there


def two_clones(tmp_path: Path) -> tuple[Path, Path]:
    """Two clones, first and second, of one bare remote."""
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    first = make_repo(tmp_path / "first")
    git(first, "remote", "add", "origin", str(remote))
    git(first, "push", "-q", "origin", "main")
    git(tmp_path, "clone", "-q", str(remote), str(tmp_path / "second"))
    return first, tmp_path / "second"


def test_two_clones_of_one_repository_list_each_session_and_lock_once(tmp_path):
    """Two clones of one remote are two copies of one registry: a session (and its lock)
    both copies hold is one row, under the clone it works in; what only one copy holds
    (a session the other clone has not fetched yet) is there too."""
    first, second = two_clones(tmp_path)
    for repo, sid in ((first, "first-1"), (second, "second-1")):
        run = Runner(repo)
        assert run("register", sid, "--provider", "Kimi").returncode == 0
        assert run("lock", "acquire", f"src/{sid}.py", "--session", sid).returncode == 0
    assert Runner(second)("status").returncode == 0  # second has fetched first-1 too
    listed = repos_file().read_text().splitlines()
    assert listed == [str(first.resolve()), str(second.resolve())]
    doc = json.loads(Runner(tmp_path)("--json", "status", "--repos",
                                      check_untouched=False).stdout)
    assert sorted((s["id"], s["repository"]) for s in doc["sessions"]) == [
        ("first-1", str(first.resolve())), ("second-1", str(second.resolve()))]
    assert [r["count"] for r in doc["repositories"]] == [1, 1]
    text = Runner(tmp_path)("status", "--repos", check_untouched=False).stdout
    assert text.count("first-1") == 1 and text.count("second-1") == 1
    locks = json.loads(Runner(tmp_path)("--json", "lock", "list", "--repos",
                                        check_untouched=False).stdout)["locks"]
    assert sorted((l["path"], l["owner"]) for l in locks) == [
        ("src/first-1.py", "first-1"), ("src/second-1.py", "second-1")]
    # a repository of its own (no remote) is never taken for another one's copy
    alone = make_repo(tmp_path / "alone")
    assert Runner(alone)("register", "first-1", "--provider", "Kimi").returncode == 0
    doc = json.loads(Runner(tmp_path)("--json", "status", "--repos",
                                      check_untouched=False).stdout)
    assert sorted(s["repository"] for s in doc["sessions"] if s["id"] == "first-1") == [
        str(alone.resolve()), str(first.resolve())]


def test_the_dashboard_shows_a_session_two_clones_hold_once(tmp_path):
    """`dashboard --repos` served from one clone does not read the other clone of its
    repository again (a copy of the registry it serves), so no row shows twice; another
    repository still shows."""
    import urllib.request
    from test_dashboard_support import served
    first, second = two_clones(tmp_path)
    other = make_repo(tmp_path / "other")
    for repo, sid in ((first, "first-1"), (second, "second-1"), (other, "other-1")):
        assert Runner(repo)("register", sid, "--provider", "Kimi").returncode == 0
        assert Runner(repo)("lock", "acquire", f"src/{sid}.py", "--session", sid).returncode == 0
    assert Runner(first)("sync").returncode == 0  # first has fetched second-1 too
    with served(first, "--repos") as info:
        def get(path: str) -> dict:
            with urllib.request.urlopen(info["url"] + path, timeout=60) as answer:
                return json.loads(answer.read())
        sessions = get("api/sessions")["sessions"]
        ids = sorted(s["id"] for s in sessions)
        assert ids == ["first-1", "other-1", "second-1"], sessions
        locks = sorted(l["path"] for l in get("api/locks")["locks"])
        assert locks == ["src/first-1.py", "src/other-1.py", "src/second-1.py"], locks
