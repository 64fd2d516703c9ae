"""An unexpected error is not a refusal (issue 32): the console script exits 70
(errors.CRASHED, sysexits' EX_SOFTWARE), never 1, which an agent reads as "held", and
says in one line what broke and which file holds the traceback, on both routes (the
click-free fast path and the click commands).  The git hooks still refuse the commit.

Each crash is a real process: a ``sitecustomize`` on PYTHONPATH replaces one function of
the package, named by $CRASH_AT, with one that raises, the moment its module is loaded.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from helpers import CLI, Runner, git, make_repo

BREAKER = '''
import importlib.util, os, sys

MODULE, _, ATTR = os.environ["CRASH_AT"].partition(":")


class Breaker:
    """Loads MODULE as usual, then makes MODULE.ATTR raise."""

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name != MODULE:
            return None
        sys.meta_path.remove(cls)
        spec = importlib.util.find_spec(name)
        load = spec.loader.exec_module

        def exec_module(module):
            load(module)
            *outer, last = ATTR.split(".")
            owner = module
            for part in outer:
                owner = getattr(owner, part)

            def broken(*args, **kwargs):
                if os.environ.get("CRASH_WITH") == "BrokenPipeError":
                    raise BrokenPipeError(32, "Broken pipe")
                raise RuntimeError("injected failure")
            setattr(owner, last, broken)
        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, Breaker)
'''
ONE_LINE = re.compile(r"agent-registry: internal error \(RuntimeError: injected failure\); "
                      r"its traceback is in (\S+): please report it")


@pytest.fixture
def repo(tmp_path):
    repo = make_repo(tmp_path / "repo")
    run = Runner(repo)
    for args in (["init"], ["register", "s1", "--provider", "test"],
                 ["lock", "acquire", "src/auth.py", "--session", "s1"]):
        proc = run(*args)
        assert proc.returncode == 0, proc.stderr
    return repo


@pytest.fixture
def breaking(tmp_path):
    """The environment that makes $CRASH_AT (module:attribute) raise."""
    folder = tmp_path / "breaker"
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(BREAKER)
    temp = tmp_path / "tmp"
    temp.mkdir()

    def env(target: str) -> dict[str, str]:
        return {**os.environ, "PYTHONPATH": str(folder), "CRASH_AT": target,
                "TMPDIR": str(temp)}
    return env


def crash(cwd: Path, env: dict[str, str], *args: str) -> tuple[subprocess.CompletedProcess, Path]:
    proc = subprocess.run([CLI, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 70, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    found = ONE_LINE.fullmatch(lines[0])
    assert found, lines[0]
    trace = Path(found.group(1))
    text = trace.read_text()
    assert "Traceback (most recent call last)" in text and "injected failure" in text
    assert repr(args[-1]) in text  # the command it ran
    return proc, trace


def test_a_crash_on_the_fast_path_exits_70_naming_the_trace_in_the_state_folder(repo, breaking):
    proc, trace = crash(repo, breaking("agent_registry.cli.output:check_text"),
                        "lock", "check", "src/auth.py", "--session", "s1")
    assert trace.parent == repo / ".git" / "agent-registry" / "crashes"
    assert "agent_registry/cli/fast.py" in trace.read_text()  # it went the fast route


def test_a_crash_in_a_click_command_exits_70_with_the_json_error(repo, breaking):
    proc, trace = crash(repo, breaking("agent_registry.cli.output:claim_text"),
                        "--json", "lock", "release", "src/auth.py", "--session", "s1")
    assert "agent_registry/cli/main.py" in trace.read_text()  # it went through click
    error = json.loads(proc.stdout)["error"]
    assert error["code"] == 70 and error["trace"] == str(trace)
    assert ONE_LINE.fullmatch("agent-registry: " + error["message"])


def test_a_crash_in_the_error_report_itself_is_still_one_line_and_exit_70(repo, breaking):
    proc, _ = crash(repo, breaking("agent_registry.cli.output:error_json"),
                    "--json", "lock", "release", "src/auth.py", "--session", "s2")  # s1 holds it
    assert proc.stdout == ""


def test_a_crash_outside_a_repository_puts_the_trace_in_a_temporary_file(tmp_path, breaking):
    nowhere = tmp_path / "not-a-repo"
    nowhere.mkdir()
    env = breaking("agent_registry.cli.fast:parse")
    _, trace = crash(tmp_path, env, "-C", str(nowhere), "status")
    assert trace.parent == Path(env["TMPDIR"])


def test_the_state_folder_keeps_the_latest_twenty_traces(repo, breaking):
    crashes = repo / ".git" / "agent-registry" / "crashes"
    crashes.mkdir(parents=True)
    for n in range(25):
        (crashes / f"crash-20000101T0000{n:02d}Z-1.txt").write_text("old\n")
    _, trace = crash(repo, breaking("agent_registry.cli.output:check_text"),
                     "lock", "check", "src/auth.py")
    kept = sorted(p.name for p in crashes.iterdir())
    assert len(kept) == 20 and kept[-1] == trace.name and kept[0] == "crash-20000101T000006Z-1.txt"


def test_a_crash_in_the_pre_commit_hook_still_refuses_the_commit(repo, breaking):
    """The hooks run the guard itself, not the console script: a crash there is a
    traceback and exit 1, and git refuses the commit (fails closed)."""
    assert Runner(repo)("hooks", "install").returncode == 0
    (repo / "README.md").write_text("changed\n")  # a path nobody holds: allowed without the crash
    git(repo, "add", "README.md")
    done = subprocess.run(["git", "commit", "-q", "-m", "edit"], cwd=repo,
                          env=breaking("agent_registry.enforce.guard:pre_commit"),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "injected failure" in done.stderr, done.stderr
    assert git(repo, "rev-list", "--count", "HEAD").strip() == "1"


def test_a_broken_pipe_to_git_is_a_failure_not_a_reader_that_stopped(repo, breaking):
    """Only a closed standard output is a reader that has what it wanted (exit 0): a
    broken pipe under a claim (git's) is one line and exit 1, and nothing is held."""
    env = {**breaking("agent_registry.store.git:Repo.update_ref"), "CRASH_WITH": "BrokenPipeError"}
    proc = subprocess.run([CLI, "lock", "acquire", "src/other.py", "--session", "s1"], cwd=repo,
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    assert "Broken pipe" in proc.stderr and len(proc.stderr.splitlines()) == 1, proc.stderr
    check = subprocess.run([CLI, "lock", "check", "src/other.py"], cwd=repo,
                           capture_output=True, text=True, timeout=120)
    assert check.returncode == 0 and "free" in check.stdout, check.stdout
