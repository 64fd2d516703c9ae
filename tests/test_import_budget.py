"""The one-shot commands agents run all the time import only what they run (issue 26).

Each command runs as agents run it: the installed console script, a real repository, a
fresh process; ``python -X importtime`` lists every module it imported.  None of them may
import click (the click-free fast path, cli/fast.py), subprocess and what it brings
(store/spawn.py runs git), hashlib with OpenSSL (store/digest.py), nor the other heavy
modules a claim does not need.  A module named here that a command starts to need
belongs behind a lazy import where it is used.  tests/test_import_budget_wheel.py runs
the same budget on a wheel installed as users install it.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pytest

from helpers import CLI, Runner, make_repo, single_branch

NEVER = {
    "click",                                     # the fast path parses these by hand
    "subprocess", "threading", "locale", "signal", "selectors",  # git runs through spawn
    "hashlib", "_hashlib",                       # names and objects hash with _sha1
    "typing", "dataclasses", "inspect", "ast", "tempfile", "shutil", "pathlib",
    "importlib.metadata", "email", "zipfile", "datetime", "uuid", "random",
    "ruamel", "yaml", "psutil",
}
COMMANDS = {
    "acquire": ["lock", "acquire", "src/new.py", "--session", "s1"],
    "check": ["lock", "check", "src/auth.py", "--session", "s1"],  # s2 holds it: exit 1
    "heartbeat": ["lock", "heartbeat", "src/mine.py", "--session", "s1"],
    "status": ["status"],
}


def made(repo, *init: str):
    """A repository whose registry (made by `agent-registry init INIT...`) has s2 holding
    src/auth.py and s1 holding src/mine.py."""
    repo = make_repo(repo)
    run = Runner(repo)
    for args in (["init", *init], ["register", "s1", "--provider", "test"],
                 ["register", "s2", "--provider", "test"],
                 ["lock", "acquire", "src/auth.py", "--session", "s2"],
                 ["lock", "acquire", "src/mine.py", "--session", "s1"]):
        proc = run(*args)
        assert proc.returncode == 0, proc.stderr
    return repo


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    return made(tmp_path_factory.mktemp("budget") / "repo")


def imported(repo, args: list[str], *, script: tuple[str, ...] = (CLI,),
             python: str = sys.executable, env: dict[str, str] | None = None
             ) -> tuple[set[str], subprocess.CompletedProcess]:
    """The modules `agent-registry ARGS` imports in *repo*, run as *script* by *python*
    (tests/test_import_budget_wheel.py: a wheel's venv)."""
    proc = subprocess.run([python, "-X", "importtime", *script, *args], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=120)
    names = {line.split("|")[2].strip() for line in proc.stderr.splitlines()
             if line.startswith("import time:") and "|" in line}
    return names - {"cumulative"}, proc


# Every module of the package a hot command may import (issue 35: at their floor on a
# wheel install, and held there): a module new on the path of `lock acquire`, `lock
# check`, `lock heartbeat` or `status` fails here by name (tests/test_import_budget_wheel.py
# says which line imported it).  Each costs a one-shot command 0.1-0.3 ms; one the
# command does not run belongs behind a lazy import where it is used.
HOT_PATH = frozenset(f"agent_registry{name}" for name in (
    "", ".errors", ".cli", ".cli.console", ".cli.fast", ".cli.output", ".cli.reports",
    ".cli.table", ".forecast", ".forecast.gate", ".sync", ".sync.fresh",
    ".core", ".core.cloned", ".core.committer", ".core.diary",
    ".core.kill", ".core.locks", ".core.operations", ".core.refs", ".core.registry",
    ".core.routing", ".core.sessions", ".core.shapes", ".core.sharded", ".branch",
    ".branch.clones", ".branch.lockcheck", ".branch.pathcase", ".branch.pathforms",
    ".branch.paths", ".branch.reasonless", ".branch.records", ".branch.render",
    ".branch.shards", ".branch.shardview", ".branch.staleness", ".branch.trailers", ".branch.view",
    ".store", ".store.atomic", ".store.digest", ".store.flock",
    ".store.freshness", ".store.git", ".store.gitconfig", ".store.jsontext", ".store.layout",
    ".store.lazyre", ".store.loose", ".store.procbackends", ".store.procinfo",
    ".store.rawfile", ".store.refupdates", ".store.shipped", ".store.spawn", ".store.tuples",
    ".store.liveness", ".store.looseref"))
# what only a write needs (its commit, its page, its route to a shard): `lock check` and
# `status` write nothing, and import none of it (issue 35: check at its floor)
WRITE_PATH = frozenset(f"agent_registry{name}" for name in (
    ".branch.render", ".branch.trailers", ".core.committer", ".core.routing", ".forecast",
    ".forecast.gate", ".store.flock", ".store.looseref", ".store.refupdates", ".store.shipped"))
# what keeps a read fresh from a remote: the test's repository has none
FRESH = frozenset({"agent_registry.sync.fresh", "agent_registry.store.freshness"})
# what status keeps of the lock records it found without a reason (branch/reasonless.py)
REASONLESS = frozenset({"agent_registry.branch.reasonless", "agent_registry.store.atomic"})
# `lock check` without a remote reads through cli/quickcheck.py and branch/lockcheck.py,
# without the core's Registry and the operation families it mixes in (issue 35)
CORE = frozenset(f"agent_registry{name}" for name in (
    ".core", ".core.cloned", ".core.diary", ".core.kill", ".core.locks", ".core.operations",
    ".core.refs", ".core.registry", ".core.sessions", ".core.shapes", ".core.sharded",
    ".sync", ".cli.reports", ".cli.table"))
# what runs a git process: a check reads loose objects and ref files itself (store/loose.py)
SPAWN = frozenset({"agent_registry.store.spawn"})
# what tells whether a process runs: a check reads it only for a holder vouched for on
# this host (branch/staleness.py; the test's sessions are bound to no process)
PROCESSES = frozenset({"agent_registry.store.procinfo", "agent_registry.store.procbackends"})
PATHS = {"acquire": HOT_PATH - REASONLESS, "heartbeat": HOT_PATH - REASONLESS,
         "check": (HOT_PATH | {"agent_registry.cli.quickcheck"}) - WRITE_PATH - FRESH
         - REASONLESS - CORE - SPAWN - PROCESSES,
         "status": HOT_PATH - WRITE_PATH}
# a module each command imports only when it did run (not just parse) the command
RAN = {"acquire": "agent_registry.core.registry", "heartbeat": "agent_registry.core.registry",
       "status": "agent_registry.core.registry", "check": "agent_registry.cli.quickcheck"}
# and the pre-commit guard's, letting a commit through or refusing it
GUARD_PATH = frozenset(f"agent_registry{name}" for name in (
    "", ".errors", ".enforce", ".enforce.guard", ".branch", ".branch.clones", ".branch.pathcase",
    ".branch.pathforms", ".branch.paths", ".branch.records", ".branch.shards",
    ".branch.shardview", ".branch.staleness", ".branch.view", ".store", ".store.digest",
    ".store.git", ".store.gitconfig", ".store.jsontext", ".store.layout", ".store.lazyre",
    ".store.loose", ".store.procbackends", ".store.procinfo", ".store.rawfile",
    ".store.spawn", ".store.tuples", ".store.liveness"))


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_hot_command_imports_only_what_it_runs(repo, command):
    names, proc = imported(repo, COMMANDS[command])
    assert proc.returncode == (1 if command == "check" else 0), proc.stderr[-2000:]
    assert RAN[command] in names  # it did run the command
    heavy = sorted(n for n in names if n in NEVER or n.split(".")[0] in NEVER)
    assert heavy == [], f"`agent-registry {' '.join(COMMANDS[command])}` imported {heavy}"
    beyond = sorted(n for n in names if n.startswith("agent_registry") and n not in PATHS[command])
    assert beyond == [], f"`agent-registry {' '.join(COMMANDS[command])}` imported {beyond} (PATHS)"


def test_lock_check_imports_neither_future_nor_errno(repo):
    """Every module on `lock check`'s path leaves out ``from __future__ import
    annotations`` (Python >= 3.10 reads their annotations as written; a TYPE_CHECKING
    name or a forward reference is quoted): one of them would import ``__future__``,
    ~0.15 ms of a check; errno only where an OSError is said (issue 35 item 3)."""
    names, proc = imported(repo, COMMANDS["check"])
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert RAN["check"] in names
    assert "__future__" not in names, "a module on `lock check`'s path imports __future__"
    assert "errno" not in names  # errors.py's os_failure imports it: on that path only


def test_lock_check_of_a_registry_on_one_branch_imports_no_shard_reader(tmp_path):
    """A registry still on one branch (layout format 1, as versions before the one layout
    left it: no face has written to it since) is checked without the lock shards' reader
    (branch/shardview.py, ~0.25 ms of a check: issue 35 item 3); the answer is the same."""
    repo = make_repo(tmp_path / "repo")
    with single_branch(repo) as old:
        old.register("s2", provider="test")
        old.claim("s2", ["src/auth.py"])
    names, proc = imported(repo, ["lock", "check", "src/auth.py", "src/free.py"])
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "locked: src/auth.py by s2" in proc.stdout and "free: src/free.py" in proc.stdout
    assert RAN["check"] in names
    assert "agent_registry.branch.shardview" not in names


# What the console script itself may not bring either, run as pip 25.2 and later (and uv)
# write it: without `import re` (older pips import it, and the Makefile upgrades pip)
LAUNCHER = ("import sys; from agent_registry.cli.fast import run; "
            "sys.argv[0] = 'agent-registry'; sys.exit(run())")
NOR = {"re", "json", "enum", "collections", "functools", "contextlib", "operator"}


@pytest.fixture(scope="module", params=["default", "one-shard"])
def layouts(request, tmp_path_factory):
    """The layout a new registry gets (16 lock shards, clone refs), and it with one shard."""
    return made(tmp_path_factory.mktemp("strict") / "repo",
                *([] if request.param == "default" else ["--shards", "1"]))


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_hot_command_reads_and_writes_json_without_json_re_or_collections(layouts, command):
    """Records go through store/jsontext.py, names are checked without patterns, and
    nothing on the way imports collections, functools or contextlib (tests/test_jsontext.py)."""
    names, proc = imported(layouts, COMMANDS[command], script=("-c", LAUNCHER))
    assert proc.returncode == (1 if command == "check" else 0), proc.stderr[-2000:]
    assert RAN[command] in names
    assert sorted(names & NOR) == [], f"`agent-registry {' '.join(COMMANDS[command])}` imported them"


def test_lock_check_of_a_holder_vouched_for_here_asks_only_whether_it_runs(tmp_path):
    """A holder whose process this host vouched for is judged by store/liveness.py and
    its backend (store/procbackends.py), without procinfo's tables of agent runtimes and owner choice (issue 35
    item 3): it still counts while its process runs."""
    from agent_registry.sync import Registry
    repo = make_repo(tmp_path / "repo")
    with Registry.open(str(repo)) as registry:
        registry.init()
        registry.register("s1", provider="test")  # who checks
        registry.register("s2", provider="test", pid=os.getpid())
        registry.claim("s2", ["src/auth.py"])
    names, proc = imported(repo, ["lock", "check", "src/auth.py", "--session", "s1"])
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "locked: src/auth.py by s2" in proc.stdout
    assert "agent_registry.store.procbackends" in names  # it did ask whether s2's process runs
    assert "agent_registry.store.procinfo" not in names


def test_lock_check_with_a_trailing_word_reads_it_without_re(repo):
    """`lock check A B` without --session asks whether B is the predecessor's trailing
    SID (branch/sessionids.py): that is read without re, which cost such a check some
    8 ms, and without __future__ (issue 35 item 3)."""
    names, proc = imported(repo, ["lock", "check", "src/auth.py", "src/free.py"],
                           script=("-c", LAUNCHER))
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "agent_registry.branch.sessionids" in names  # it did read the last word
    assert sorted(names & (NOR | {"__future__"})) == []


THROUGH_A_REMOTE = NOR | {"subprocess", "dataclasses", "inspect", "tempfile", "random",
                          "threading", "signal", "selectors"}


def test_a_claim_through_a_remote_imports_only_what_it_runs(tmp_path):
    """Fetch and push run through store/spawn.py with their network timeout; the sync
    modules a claim through a remote imports hold no dataclass and import tempfile, re
    and random only where they are used (a snapshot, an error, a lost race)."""
    subprocess.run(["git", "init", "-q", "--bare", str(tmp_path / "remote.git")], check=True)
    repo = make_repo(tmp_path / "repo")
    subprocess.run(["git", "-C", str(repo), "remote", "add", "origin", str(tmp_path / "remote.git")],
                   check=True)
    run = Runner(repo)
    for args in (["init"], ["register", "s1", "--provider", "test"],
                 ["lock", "acquire", "src/first.py", "--session", "s1"]):
        proc = run(*args)
        assert proc.returncode == 0, proc.stderr
    for path in ("src/second.py", "src/third.py"):  # within FRESH of a fetch, then after none
        names, proc = imported(repo, ["lock", "acquire", path, "--session", "s1"],
                               script=("-c", LAUNCHER))
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "agent_registry.sync.remote" in names  # it did go through the remote
        assert sorted(names & THROUGH_A_REMOTE) == []
        marks = repo / ".git" / "agent-registry" / "fetched"  # the next claim fetches first
        for mark in marks.iterdir() if marks.is_dir() else ():
            mark.unlink()
    out = subprocess.run(["git", "--git-dir", str(tmp_path / "remote.git"), "log", "--all",
                          "--format=%s"], capture_output=True, text=True, check=True).stdout
    assert "src/third.py" in out and "src/second.py" in out


def test_hot_commands_find_a_plain_repository_without_git_rev_parse(repo, tmp_path):
    """In the plain layout the repository is read from the files (store/git.plain_layout):
    the commands start git only for the registry's reads and writes."""
    log = tmp_path / "git.log"
    real = shutil.which("git")
    wrapper = tmp_path / "bin" / "git"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\necho "$1 $2 $3" >> "{log}"\nexec "{real}" "$@"\n')
    wrapper.chmod(0o755)
    env = {**os.environ, "PATH": f"{wrapper.parent}{os.pathsep}{os.environ['PATH']}"}
    for command, args in COMMANDS.items():
        proc = subprocess.run([CLI, *args], cwd=repo, env=env, capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == (1 if command == "check" else 0), proc.stderr
    started = log.read_text()
    assert "rev-parse" not in started and "update-ref" in started, started


@pytest.mark.parametrize("where", ["top", "sub", "worktree", "bare", "in-git-dir", "GIT_DIR"])
def test_plain_layout_agrees_with_git(tmp_path, monkeypatch, where):
    """Read from the files or asked of git, discover() answers the same; anything but the
    plain layout is left to git."""
    from agent_registry.store import git as store
    main = make_repo(tmp_path / "main")
    subprocess.run(["git", "-C", str(main), "worktree", "add", "-q", str(tmp_path / "wt")],
                   check=True, capture_output=True)
    subprocess.run(["git", "init", "-q", "--bare", str(tmp_path / "bare.git")], check=True)
    path = {"top": main, "sub": main / "src", "worktree": tmp_path / "wt" / "src",
            "bare": tmp_path / "bare.git", "in-git-dir": main / ".git" / "refs",
            "GIT_DIR": main / "src"}[where]
    if where == "GIT_DIR":
        monkeypatch.setenv("GIT_DIR", str(main / ".git"))
    plain = store.plain_layout(str(path))
    assert (plain is not None) == (where in ("top", "sub", "worktree"))
    monkeypatch.setattr(store, "plain_layout", lambda _path: None)
    assert store.discover(str(path)) == (plain or store.discover(str(path)))


@pytest.mark.parametrize("key,value", [("core.bare", "1"), ("core.bare", "yes"),
                                       ("extensions.worktreeConfig", "true")])
def test_plain_layout_leaves_other_spellings_of_bare_and_extensions_to_git(tmp_path, key, value):
    from agent_registry.store import git as store
    main = make_repo(tmp_path / "main")
    if key.startswith("extensions."):
        subprocess.run(["git", "-C", str(main), "config", "core.repositoryformatversion", "1"],
                       check=True)
    subprocess.run(["git", "-C", str(main), "config", key, value], check=True)
    assert store.plain_layout(str(main)) is None


@pytest.mark.parametrize("args,collecting", [(["lock", "check", "src/auth.py"], "False"),
                                             (["watch", "--once"], "True")])
def test_only_the_one_shot_commands_run_without_the_garbage_collector(repo, args, collecting):
    """The hot commands skip the collector's passes (cli/fast.run); what click runs, which
    may run for hours (watch, mcp, dashboard), keeps it."""
    code = ("import gc, sys\nfrom agent_registry.cli import fast, main\n"
            "fast.serve = main.main = lambda *a: print(gc.isenabled()) or 0\n"
            f"sys.argv = ['agent-registry', *{args!r}]\nfast.run()\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True,
                          text=True, timeout=120)
    assert proc.stdout.strip() == collecting, proc.stderr


# a shell call the gate cannot see into, which writes nothing: the backstop notes the
# held files around it (one of programs that write no file, such as ls, is not noted)
HOOK_EVENTS = {
    "claude": '{"session_id": "native-1", "cwd": "%s", "hook_event_name": "PreToolUse", '
              '"tool_name": "Bash", "tool_use_id": "call-1", '
              '"tool_input": {"command": "python3 -c pass"}}',
    "opencode": '{"sessionID": "native-1", "cwd": "%s", "project": "%s", "tool": "bash", '
                '"callID": "call-1", "args": {"command": "python3 -c pass"}}'}


# what the hooks' quick path does not import either, each ~0.1 ms of every hook (issue 35):
# the lazy patterns (harness/shellwrites.py and adapter.py import re where a command
# assigns, expands a variable or carries a patch), and the writer of a high message's
# marks (harness/ids.urgent_waits looks for one with store/layout.py alone)
QUICK_NEVER = {"agent_registry.store.lazyre", "agent_registry.store.urgent"}


@pytest.mark.parametrize("harness, event", [("claude", "pre-tool-use"),
                                            ("opencode", "post-tool-use")])
def test_a_harness_hook_imports_only_its_own_adapter_and_no_json_re_or_dataclasses(
        repo, harness, event):
    """Every shell call of an agent runs the gate before it and the backstop after it
    (issue 35: a hook that only says "allowed" at its floor): with a file held by another
    session, the gate and the note of a command that writes nothing, and the after-tool
    check (OpenCode's too), import neither json, re nor collections, nor dataclasses or
    pathlib, nor the other harnesses' adapters."""
    raw = HOOK_EVENTS[harness].replace("%s", str(repo))
    args = ["harness", "hook", harness, event]
    # a held file changed in the second of a note is hashed at the next (git's racy rule,
    # harness/after.py), which imports the digest: note it from the second after
    changed = os.lstat(repo / "src" / "auth.py")
    while time.time() < int(max(changed.st_mtime, changed.st_ctime)) + 1:
        time.sleep(0.05)
    warm = subprocess.run([CLI, "harness", "hook", harness, "pre-tool-use"], cwd=repo,
                          input=raw, capture_output=True, text=True, timeout=120)
    assert warm.returncode == 0, warm.stderr  # what is held is read once, and kept
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", LAUNCHER, *args],
                          cwd=repo, input=raw, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    names = {line.split("|")[2].strip() for line in proc.stderr.splitlines()
             if line.startswith("import time:") and "|" in line}
    assert "agent_registry.harness.hook" in names  # it did run the hook
    heavy = sorted(n for n in names if n in NOR | NEVER or n.split(".")[0] in NEVER)
    assert heavy == [], f"harness hook {harness} {event} imported {heavy}"
    others = sorted(n for n in names if n.rsplit(".", 1)[-1] in (
        "claude", "codex", "gemini", "cursor", "opencode_hook", "copilot", "qwen")
        and not n.endswith(harness))
    assert others == [], f"harness hook {harness} {event} imported {others}"
    spare = sorted(names & QUICK_NEVER)
    assert spare == [], f"harness hook {harness} {event} imported {spare}"
    if event == "post-tool-use":  # nothing changed: the quick path finds the repository
        # from its files without the git module and its object writers (store/layout.py)
        git = sorted(names & {"agent_registry.store.git", "zlib", "agent_registry.store.spawn"})
        assert git == [], f"harness hook {harness} {event} imported {git}"
        assert "agent_registry.errors" not in names  # its error classes: on failure only
    else:  # the note of the held file: the registry's refs compared as read, no digest
        # a command that writes nothing and no message marked: decided without the
        # decision or the shell parser's write rules (harness/where.py, shellwrites.RULED)
        gate = sorted(names & {"agent_registry.harness.decision",
                               "agent_registry.harness.shellrules",
                               "agent_registry.harness.gitwrites",
                               "agent_registry.harness.shellops"})
        assert gate == [], f"harness hook {harness} {event} imported {gate}"
        assert "agent_registry.harness.heldcache" in names and "_sha1" not in names


def test_agents_sharing_a_working_tree_each_keep_what_is_held(repo):
    """What is held by others is remembered per session (harness/heldcache.py): two
    agents' calls in one working tree, alternating, read the registry once each, not
    again at every call of the other (the note then needs no guard, no view)."""
    events = {n: HOOK_EVENTS["claude"].replace("%s", str(repo)).replace("native-1", n)
              for n in ("agent-a", "agent-b")}
    for native in ("agent-a", "agent-b"):
        warm = subprocess.run([CLI, "harness", "hook", "claude", "pre-tool-use"], cwd=repo,
                              input=events[native], capture_output=True, text=True, timeout=120)
        assert warm.returncode == 0, warm.stderr
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", LAUNCHER, "harness",
                           "hook", "claude", "pre-tool-use"], cwd=repo, input=events["agent-a"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    names = {line.split("|")[2].strip() for line in proc.stderr.splitlines()
             if line.startswith("import time:") and "|" in line}
    assert "agent_registry.harness.backstop" in names  # the note was taken
    assert "agent_registry.enforce.guard" not in names  # from what agent-a's call kept


@pytest.mark.parametrize("staged, refused", [("src/free.py", False), ("src/auth.py", True)])
def test_a_commit_through_the_pre_commit_hook_imports_only_what_the_guard_runs(
        tmp_path, staged, refused):
    """Every commit runs the guard (issue 35: at most 2.5x a bare interpreter at 10,000
    locks): it lists the staged paths through store/spawn.py, not subprocess (which brings
    locale, re, enum, functools, threading and signal: some 10 ms), and reads records
    without json, re or collections, whether it lets the commit through or refuses it."""
    repo = made(tmp_path / "repo")
    done = Runner(repo)("hooks", "install")
    assert done.returncode == 0, done.stderr
    (repo / staged).write_text("changed = 1\n")
    subprocess.run(["git", "add", staged], cwd=repo, check=True)
    env = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1", "AGENT_REGISTRY_SESSION": "s1"}
    proc = subprocess.run(["git", "commit", "-q", "-m", "edit"], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == (1 if refused else 0), proc.stderr[-2000:]
    names = {line.split("|")[2].strip() for line in proc.stderr.splitlines()
             if line.startswith("import time:") and "|" in line} - {"cumulative"}
    assert "agent_registry.branch.view" in names  # it did look the paths up
    heavy = sorted(n for n in names if n in NEVER | NOR or n.split(".")[0] in NEVER)
    assert heavy == [], f"the pre-commit guard imported {heavy}"
    beyond = sorted(n for n in names if n.startswith("agent_registry") and n not in GUARD_PATH)
    assert beyond == [], f"the pre-commit guard imported {beyond} (GUARD_PATH)"


# what the hooks around every tool call import when the call writes nothing and nothing
# held changed (Claude's gate and note, each harness's adapter, the after-tool check)
HOOK_QUICK_PATH = ("", ".harness", ".harness.launching", ".harness.hook", ".store", ".store.jsontext",
                   ".store.tuples", ".harness.ctx", ".harness.ids",
                   ".harness.shelltokens", ".harness.shellwrites", ".harness.shellreads",
                   ".harness.adapter",
                   ".harness.claude", ".harness.codex", ".harness.gemini", ".harness.qwen",
                   ".harness.cursor", ".harness.copilot", ".harness.opencode_hook",
                   ".store.layout", ".harness.where", ".harness.after",
                   ".harness.backstop", ".harness.storedblobs", ".store.rawfile",
                   ".harness.heldcache", ".store.gitconfig")


@pytest.mark.parametrize("name", HOOK_QUICK_PATH)
def test_the_hooks_quick_path_imports_no_future_module(name):
    """The modules of a hook's quick path leave out ``from __future__ import
    annotations`` (Python >= 3.10 reads their annotations as written): one of them would
    import ``__future__``, ~0.1 ms of a hook around every tool call (issue 35 item 2)."""
    import importlib.util
    origin = importlib.util.find_spec(f"agent_registry{name}").origin
    with open(origin, encoding="utf-8") as f:
        assert "from __future__ import" not in f.read(), f"agent_registry{name} imports it"
