"""Index builds say what they do: a progress line on a terminal's stderr (nothing when
stderr is not a terminal), an "index:" line in the text output and an ``index`` object in
the JSON; and a build another process is already running is waited for, not repeated."""
from __future__ import annotations

import json
import os
import pty
import subprocess
from pathlib import Path

import pytest

from agent_registry.store.flock import file_lock
from agent_registry.wiki.index import WikiIndex
from helpers import CLI, wait_for
from test_wiki_support import fixture_files, put_files

QUESTION = "sqlite database is locked"


@pytest.fixture
def wiki_repo(registry):
    put_files(registry, fixture_files())
    return registry


def run_on_terminal(repo: Path, *args: str) -> tuple[int, str, str]:
    """(exit code, stdout, what the terminal on stderr showed) of one CLI process."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([CLI, *args], cwd=repo, stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    shown = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the process closed the terminal
            break
        if not chunk:
            break
        shown += chunk
    os.close(master)
    stdout = proc.stdout.read().decode()  # type: ignore[union-attr]
    return proc.wait(timeout=120), stdout, shown.decode(errors="replace")


def test_a_build_on_a_terminal_shows_progress_with_counts(wiki_repo, repo):
    code, stdout, shown = run_on_terminal(repo, "wiki", "query", QUESTION)
    assert code == 0, shown
    assert "building the wiki index (no index yet)" in shown
    assert "33/33 entries" in shown and "wiki index built: 33 entries in" in shown
    assert stdout.splitlines()[0].startswith("ranker: whoosh")
    assert stdout.splitlines()[-1] == "index: built (no index yet), 33 entries"
    # up to date: the terminal shows nothing and the text output has no index line
    code, stdout, shown = run_on_terminal(repo, "wiki", "query", QUESTION)
    assert (code, shown) == (0, "") and not stdout.splitlines()[-1].startswith("index:")


def test_a_build_without_a_terminal_is_quiet_and_json_says_it_was_built(wiki_repo, run):
    proc = run("--json", "wiki", "query", QUESTION)
    assert proc.returncode == 0 and proc.stderr == ""
    assert json.loads(proc.stdout)["index"] == {
        "built": True, "reason": "no index yet", "updated": 0, "waited": False, "entries": 33}
    text = run("wiki", "rebuild")
    assert text.stderr == "" and text.stdout.startswith("indexed 33 entries in ")


def blocked_on(path: Path) -> int:
    """How many processes wait for the flock on *path* (Linux: /proc/locks)."""
    inode = f":{path.stat().st_ino} "
    with open("/proc/locks") as locks:
        return sum(1 for line in locks if "->" in line and inode in line)


def start_while_locked(registry, commands: list[list[str]], cwd: Path) -> list[dict]:
    """Run *commands* while this test holds the index lock; release it once all of them
    wait for it, so they certainly overlap.  Their JSON outputs."""
    if not os.path.exists("/proc/locks"):
        pytest.skip("needs /proc/locks to see the processes waiting")
    lock = Path(WikiIndex(registry).lock_file)
    with file_lock(str(lock)):
        procs = [subprocess.Popen([CLI, "--json", *c], cwd=cwd, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for c in commands]
        wait_for(lambda: blocked_on(lock) == len(procs), "every process waiting on the lock")
        assert blocked_on(lock) == len(procs)
    outputs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), outputs
    return [json.loads(out) for out, _ in outputs]


def test_two_queries_waiting_for_one_lock_build_the_index_once(wiki_repo, repo):
    answers = start_while_locked(wiki_repo, [["wiki", "query", QUESTION]] * 2, repo)
    assert sorted(a["index"]["built"] for a in answers) == [False, True]
    assert all(a["index"]["waited"] and a["index"]["entries"] == 33 for a in answers)
    assert all(a["results"][0]["session_id"] == "claude-1751000016" for a in answers)
    assert len([d for d in os.listdir(WikiIndex(wiki_repo).root) if d.startswith("ix-")]) == 1


def test_a_rebuild_waiting_for_a_query_build_does_not_build_again(wiki_repo, repo):
    answers = start_while_locked(wiki_repo, [["wiki", "query", QUESTION],
                                             ["wiki", "rebuild"]], repo)
    # whichever got the lock first built; the other used its index
    assert [a["index"]["built"] for a in answers[:1]] + [answers[1]["built"]] in (
        [True, False], [False, True])
    assert answers[1]["entries"] == 33 and answers[1]["waited"]


def test_a_rebuild_alone_still_rebuilds(wiki_repo, run):
    first = json.loads(run("--json", "wiki", "rebuild").stdout)
    again = json.loads(run("--json", "wiki", "rebuild").stdout)
    assert (first["built"], again["built"], again["waited"]) == (True, True, False)
