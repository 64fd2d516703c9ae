"""Loose objects read without git (store/loose.py): what the registry wrote loose is
read from the object files, anything else (packed by `git gc`, in an alternate) by
`git cat-file --batch` as before, and both give the same answers."""
from __future__ import annotations

import subprocess

import pytest

from helpers import CLI, Runner, git, make_repo
from test_paths_case import git_spy

BRANCH = "refs/heads/agent-registry"


@pytest.fixture(params=["sha1", "sha256"])
def repo(tmp_path, request):
    repo = tmp_path / "repo"
    if request.param == "sha256":
        repo.mkdir()
        git(repo, "init", "-q", "--object-format=sha256")
    repo = make_repo(repo)  # (a second `git init` keeps the format)
    run = Runner(repo)
    for args in (["init", "--shards", "0"], ["register", "s1", "--provider", "test"],
                 ["register", "s2", "--provider", "test"],
                 ["lock", "acquire", "src/auth.py", "docs/a/b.md", "--session", "s2"]):
        assert run(*args).returncode == 0
    return repo


def check(repo, env, path="src/auth.py"):
    proc = subprocess.run([CLI, "lock", "check", path, "--session", "s1"], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=120)
    return proc.returncode, proc.stdout + proc.stderr


def reader(repo):
    from agent_registry.store.git import Repo, discover
    return Repo(discover(str(repo)))


def every_rev(repo) -> list[str]:
    """The tip, the tip with every path of its tree (trees too), and names that are not
    there, through trees and through a blob."""
    tip = git(repo, "rev-parse", BRANCH).strip()
    paths = git(repo, "ls-tree", "-r", "-t", "--name-only", tip).split()
    tree = git(repo, "rev-parse", f"{tip}^{{tree}}").strip()
    return [tip, tree, f"{tip}:", f"{tree}:sessions", *(f"{tip}:{p}" for p in paths),
            f"{tip}:nothing", f"{tip}:sessions/none.yaml", f"{tip}:registry.md/x",
            f"{tip}:sessions//live", f"{tip}:./registry.md", "0" * len(tip),
            tip[:12], "agent-registry"]


def test_loose_reads_answer_as_cat_file_does(repo):
    """Every name, loose and then packed, read through the reader equals git's own
    answer (missing as None)."""
    revs = every_rev(repo)
    batch = subprocess.run(["git", "cat-file", "--batch"], cwd=repo, capture_output=True,
                           input="".join(r + "\n" for r in revs).encode(), check=True).stdout
    want = []
    for _ in revs:
        header, _, batch = batch.partition(b"\n")
        parts = header.split()
        if parts[-1] in (b"missing", b"ambiguous"):
            want.append(None)
            continue
        size = int(parts[2])
        want.append((parts[1].decode(), batch[:size]))
        batch = batch[size + 1:]
    from agent_registry.store.loose import UNKNOWN
    for packed in (False, True):
        if packed:
            git(repo, "gc", "-q", "--prune=now")
        store = reader(repo)
        try:
            assert [store.reader.read(rev) for rev in revs] == want
            assert store.reader.read_many(revs) == want
            loose = [store.reader._loose.read(rev) for rev in revs]
            if packed:  # nothing decided without git, nothing wrong
                assert all(found is UNKNOWN or found is None for found in loose)
            else:
                assert loose[0] is not UNKNOWN  # it did read the objects itself
        finally:
            store.close()


def test_lock_check_starts_no_git_and_reads_packed_objects_through_git(repo, tmp_path):
    env, log = git_spy(tmp_path)
    log.write_text("")
    before = check(repo, env)
    assert before[0] == 1 and "s2" in before[1]
    # every object it read was loose (a sha256 repository is found by git rev-parse)
    assert set(log.read_text().split()) <= {"rev-parse"}
    git(repo, "gc", "-q", "--prune=now")
    assert check(repo, env) == before
    assert "cat-file" in log.read_text().split()
    # a claim after the gc: a loose tip over packed trees, read partly each way
    assert Runner(repo)("lock", "acquire", "docs/a/c.md", "--session", "s2").returncode == 0
    code, out = check(repo, env, "docs/a/c.md")
    assert code == 1 and "s2" in out
    code, out = check(repo, env, "docs/a/b.md")
    assert code == 1 and "s2" in out
