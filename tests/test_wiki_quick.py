"""A warm `wiki query` answers from the files, without the registry core (wiki/fastpath.py
``quick``), and steps aside whenever the index may be behind: a new entry, an index that is
corrupt, half-updated or gone, a branch moved back, a clone's view due a fetch.  Each
answer is checked (the next query finds the new entry, a fresh clone's first query finds
the entries), and which path answered is read from what the process imported."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import CLI, git
from test_wiki_support import fixture_files, put_files

QUESTION = "sqlite database is locked"
ANSWER = "claude-1751000016"
# what only the whole path imports: the registry core, the git module, Whoosh's readers
# (the quick path reads the index with wiki/segfiles.py)
WHOLE = {"agent_registry.core.registry", "agent_registry.store.git", "whoosh.reading"}


def query(where: Path, text: str = QUESTION) -> tuple[dict, bool]:
    """(the --json answer of a `wiki query` process, whether it took the quick path)."""
    proc = subprocess.run([sys.executable, "-X", "importtime", CLI, "--json", "wiki", "query",
                           text], cwd=where, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines()
                if line.startswith("import time:")}
    quick = not WHOLE & imported
    assert quick or WHOLE <= imported, WHOLE & imported
    return json.loads(proc.stdout), quick


def top(answer: dict) -> str:
    return answer["results"][0]["session_id"]


def index_dir(repo: Path) -> Path:
    root = repo / ".git" / "agent-registry" / "wiki-index"
    return root / (root / "CURRENT").read_text().strip()


@pytest.fixture
def wiki_repo(registry, repo):
    put_files(registry, fixture_files())
    answer, quick = query(repo)  # builds the index
    assert answer["index"]["built"] and not quick and top(answer) == ANSWER
    return registry


def test_a_warm_query_imports_no_registry_core_and_answers_as_the_whole_path(wiki_repo, repo):
    answer, quick = query(repo)
    assert quick and top(answer) == ANSWER
    whole = subprocess.run([sys.executable, "-c", "import sys; from agent_registry.cli.main "
                            "import main; sys.argv[0] = 'agent-registry'; sys.exit(main())",
                            "--json", "wiki", "query", QUESTION], cwd=repo, capture_output=True,
                           text=True)  # the click command: always the whole path
    assert json.loads(whole.stdout) == answer


def test_a_new_entry_is_found_by_the_next_query(wiki_repo, repo):
    new = fixture_files()["wiki/kimi-1751000029.md"].replace("Celery", "Zanzibar")
    put_files(wiki_repo, {"wiki/later-1.md": new})
    answer, quick = query(repo, "zanzibar")
    assert not quick and answer["index"]["updated"] == 1 and top(answer) == "later-1"
    answer, quick = query(repo, "zanzibar")
    assert quick and top(answer) == "later-1"


def test_a_branch_moved_back_is_followed(wiki_repo, repo):
    put_files(wiki_repo, {"wiki/later-1.md": fixture_files()["wiki/kimi-1751000029.md"]
                          .replace("Celery", "Zanzibar")})
    assert top(query(repo, "zanzibar")[0]) == "later-1"
    git(repo, "update-ref", "refs/heads/agent-registry", "agent-registry~1")
    answer, quick = query(repo, "zanzibar")
    assert not quick and "later-1" not in {r["session_id"] for r in answer["results"]}
    answer, quick = query(repo, "zanzibar")
    assert quick and "later-1" not in {r["session_id"] for r in answer["results"]}


@pytest.mark.parametrize("damage", ["garbage", "updating", "gone", "pointer"])
def test_a_corrupt_or_absent_index_is_rebuilt_not_trusted(wiki_repo, repo, damage):
    folder = index_dir(repo)
    if damage == "garbage":
        for item in folder.iterdir():
            item.write_bytes(b"garbage")
    elif damage == "updating":  # what an updater killed half-way leaves
        (folder / "UPDATING").write_text("12345\n")
    elif damage == "gone":
        shutil.rmtree(folder.parent)
    else:
        (folder.parent / "CURRENT").write_text("ix-nowhere\n")
    answer, quick = query(repo)
    assert not quick and answer["index"]["built"] and top(answer) == ANSWER
    answer, quick = query(repo)
    assert quick and top(answer) == ANSWER


def test_packed_refs_are_read_as_git_reads_them(wiki_repo, repo):
    git(repo, "pack-refs", "--all")
    assert not (repo / ".git" / "refs" / "heads" / "agent-registry").exists()
    answer, quick = query(repo)
    assert quick and top(answer) == ANSWER
    # a loose file decides over packed-refs, as in git: the branch moved on since
    put_files(wiki_repo, {"wiki/later-1.md": fixture_files()["wiki/kimi-1751000029.md"]
                          .replace("Celery", "Zanzibar")})
    answer, quick = query(repo, "zanzibar")
    assert not quick and top(answer) == "later-1"


@pytest.fixture
def clone(wiki_repo, repo, tmp_path) -> Path:
    """A plain `git clone` (the registry branch only as refs/remotes/origin/agent-registry,
    in packed-refs) of a bare remote that holds the entries."""
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(repo, "push", "-q", str(remote), "main", "agent-registry")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(remote), str(clone))
    return clone


def test_a_fresh_clone_first_query_finds_the_entries_then_answers_quick(clone):
    answer, quick = query(clone)
    assert not quick and answer["index"]["built"] and top(answer) == ANSWER
    answer, quick = query(clone)  # fetched just now: within agent-registry.readFreshness
    assert quick and top(answer) == ANSWER and answer["stale_view"] is False
    assert git(clone, "for-each-ref", "refs/heads/agent-registry") == ""


def test_a_clone_whose_view_is_due_a_fetch_fetches_before_answering(clone, wiki_repo, repo,
                                                                     tmp_path):
    assert top(query(clone)[0]) == ANSWER  # the first fetch, and the index
    put_files(wiki_repo, {"wiki/later-1.md": fixture_files()["wiki/kimi-1751000029.md"]
                          .replace("Celery", "Zanzibar")})
    git(repo, "push", "-q", str(tmp_path / "remote.git"), "agent-registry")
    answer, quick = query(clone, "zanzibar")  # fresh: answers from the clone's copy
    assert quick and "later-1" not in {r["session_id"] for r in answer["results"]}
    mark = clone / ".git" / "agent-registry" / "fetched" / "agent-registry"
    past = time.time() - 3600
    os.utime(mark, (past, past))  # the last fetch an hour ago: older than the bound
    answer, quick = query(clone, "zanzibar")
    assert not quick and top(answer) == "later-1"


def test_a_symbolic_branch_ref_is_followed_as_the_repo_follows_it(wiki_repo, repo):
    """The quick path and the Repo read a ref with one function (store/layout.py
    ``ref_from_files``): a registry branch that is a symbolic ref is followed by both, so
    a warm query stays quick, with the same answer (issue 35)."""
    tip = git(repo, "rev-parse", "refs/heads/agent-registry").strip()
    git(repo, "update-ref", "refs/heads/kept", tip)
    git(repo, "symbolic-ref", "refs/heads/agent-registry", "refs/heads/kept")
    answer, quick = query(repo)
    assert quick and top(answer) == ANSWER
