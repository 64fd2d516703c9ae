"""Helpers the tests import (``from helpers import git``); the fixtures built on them are
in conftest.py, which pytest loads by itself and tests never import."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CLI = shutil.which("agent-registry", path=str(Path(sys.executable).parent)) or "agent-registry"

# A racer: waits at the barrier (creates READY, waits for GO), then becomes the command.
WAITER = """
import os, sys, time
ready, go = sys.argv[1], sys.argv[2]
open(ready, "w").close()
while not os.path.exists(go):
    time.sleep(0.002)
os.execv(sys.argv[3], sys.argv[3:])
"""


class FakeClock:
    """An injectable clock: tests of staleness move time instead of sleeping."""

    def __init__(self, start: float = 1_790_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def git(repo: Path | str, *args: str, check: bool = True) -> str:
    proc = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True)
    if check and proc.returncode:
        raise AssertionError(f"git {' '.join(args)}: {proc.stderr}")
    return proc.stdout


def make_repo(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q")
    (path / "README.md").write_text("project\n")
    (path / "src").mkdir()
    (path / "src" / "auth.py").write_text("auth = 1\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    return path


_INDEX_FILES: dict[Path, Path] = {}


def user_state(repo: Path) -> tuple[str, str]:
    """What registry code must never change: working tree and index status, HEAD (its
    branch and commit: status's branch header), the index file's bytes.  Two git processes
    the first time for a folder, one after: every CLI call of the suite takes it twice."""
    status = git(repo, "status", "--porcelain=v2", "--branch", "--untracked-files=all", "--ignored")
    # HEAD, and not the ahead/behind counts of an upstream, which any fetch may move
    status = "\n".join(line for line in status.splitlines()
                        if not line.startswith(("# branch.upstream", "# branch.ab")))
    where = Path(repo).resolve()
    if where not in _INDEX_FILES:
        index = Path(git(repo, "rev-parse", "--git-path", "index").strip())
        _INDEX_FILES[where] = index if index.is_absolute() else where / index
    index_path = _INDEX_FILES[where]
    return status, index_path.read_bytes().hex() if index_path.exists() else ""


class Runner:
    """Runs the installed ``agent-registry`` command as a one-shot process, the way
    agents do, and checks that it left the working tree, index and HEAD alone."""

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd

    def __call__(self, *args: str, cwd: Path | None = None, env: dict | None = None,
                 input: str | None = None, check_untouched: bool = True) -> subprocess.CompletedProcess:
        where = cwd or self.cwd
        before = user_state(where) if check_untouched else None
        proc = subprocess.run([CLI, *args], cwd=where, capture_output=True, text=True,
                              env={**os.environ, **(env or {})}, timeout=120,
                              # no terminal, whoever runs the suite: what an agent has
                              **({"input": input} if input is not None
                                 else {"stdin": subprocess.DEVNULL}))
        if check_untouched:
            assert user_state(where) == before, f"agent-registry {args} touched the user's tree"
        return proc


def wait_for(condition: Callable[[], object], what: str, *, alive: Iterable = (),
             polls: int = 1200) -> None:
    """Poll *condition* until it holds, for a process the test drives to get somewhere.
    A watchdog, not a claim about speed: after *polls* polls (about a minute), or as soon
    as a process in *alive* has exited, the test fails naming what never happened."""
    for _ in range(polls):
        if condition():
            return
        if any(proc.poll() is not None for proc in alive):
            pytest.fail(f"{what}: the process exited first")
        time.sleep(0.05)
    pytest.fail(f"gave up waiting for {what}")


def single_branch(repo: Path | str, **kwargs):
    """A registry as versions before the one layout made it with `init --shards 0`: one
    branch (layout format 1), opened as the core's Registry, which writes whatever layout
    it meets (no face does: their first write converts it, sync/convert.py).  What tests
    of that conversion start from; the caller closes it."""
    from agent_registry.core.registry import Registry as CoreRegistry
    from agent_registry.store.git import Repo, discover
    registry = CoreRegistry(Repo(discover(str(repo))), **kwargs)
    if registry.remote:
        from agent_registry.sync.remote import COMMITTER
        registry.committer = COMMITTER
    registry.init()
    return registry


# -- reading a registry as its readers do (issue 32: the layout `init` makes) ----------

def registry_refs(repo: Path | str, branch: str = "agent-registry") -> dict[str, str]:
    """ref -> tip of every registry branch here: the main branch, its lock shards and the
    clone refs (not the intent refs beside them, whose commits are still pending)."""
    lines = git(repo, "for-each-ref", "--format=%(refname) %(objectname)",
                f"refs/heads/{branch}", f"refs/heads/{branch}-shards",
                f"refs/heads/{branch}-clones").splitlines()
    tips = dict(line.split() for line in lines if line)
    return {ref: tip for ref, tip in tips.items()
            if (ref == f"refs/heads/{branch}" or ref.startswith(
                (f"refs/heads/{branch}-shards/", f"refs/heads/{branch}-clones/")))
            and "-intents" not in ref}


def registry_log(repo: Path | str, branch: str = "agent-registry",
                 refs: Iterable[str] | None = None) -> list[tuple[str, str]]:
    """(commit, message) of every commit of the registry's branches (*refs*, else every
    one of :func:`registry_refs`), newest first: the audit log, where the history itself
    is what a test checks (trailers, one commit per operation)."""
    refs = list(refs if refs is not None else registry_refs(repo, branch))
    if not refs:
        return []
    out = git(repo, "log", "--format=%H%x1f%B%x1e", *refs)
    return [tuple(entry.strip("\n").split("\x1f", 1)) for entry in out.split("\x1e")
            if entry.strip()]


def registry_ops(repo: Path | str, kind: str | None = None,
                 branch: str = "agent-registry") -> list[tuple[dict, str]]:
    """(operation, message) of each registry commit carrying one (parse_op), newest
    first; only operations *kind* when given."""
    from agent_registry.branch.trailers import parse_op
    found = []
    for _commit, message in registry_log(repo, branch):
        op = parse_op(message)
        if op is not None and (kind is None or op.get("op") == kind):
            found.append((op, message))
    return found


def read_lock(repo: Path | str, target: str, **kwargs) -> dict | None:
    """The lock on *target* as the library reads it (``Registry.view().lock``: every
    shard overlaid): ``{"path", "mode", "holders"}``, or None when nothing locks it."""
    import json
    from agent_registry import Registry
    with Registry.open(str(repo), **kwargs) as registry:
        lock = registry.view().lock(target)
    return json.loads(lock.to_bytes()) if lock is not None else None


def read_diary(repo: Path | str, sid: str, **kwargs) -> str | None:
    """*sid*'s diary as ``context show`` reads it (``Registry.diary``: the main branch's
    followed by what the clone refs added), or None when it has none."""
    from agent_registry import Registry
    from agent_registry.errors import NotFound
    with Registry.open(str(repo), **kwargs) as registry:
        try:
            return registry.diary(sid)["diary"]
        except NotFound:
            return None


def shard_refs_of(repo: Path | str, target: str, branch: str = "agent-registry") -> list[str]:
    """The refs of the lock shards recording a lock on *target* in this registry (its
    layout.json's count): for the few tests that put a record there by hand."""
    import json
    from agent_registry.branch import shards as S
    count = json.loads(git(repo, "show", f"refs/heads/{branch}:{S.LAYOUT}"))["shards"]
    return [S.shard_ref(branch, index) for index in S.lock_shards(target, count)]


def put_on_ref(repo: Path | str, ref: str, files: dict[str, bytes | None],
               message: str = "hand edit") -> None:
    """Commit *files* (None: remove) onto registry ref *ref* with plumbing, as a person
    editing the branch by hand (or another tool) would: a scratch index, never the user's."""
    repo = Path(repo)
    index = repo / ".git" / "hand-edit-index"
    env = {**os.environ, "GIT_INDEX_FILE": str(index)}

    def g(*args: str, data: bytes | None = None) -> str:
        proc = subprocess.run(["git", *args], cwd=repo, env=env, input=data, capture_output=True)
        assert proc.returncode == 0, proc.stderr.decode()
        return proc.stdout.decode().strip()

    old = g("rev-parse", "--verify", ref)
    g("read-tree", old)
    for path, data in files.items():
        if data is None:
            g("update-index", "--force-remove", path)
        else:
            blob = g("hash-object", "-w", "--stdin", data=data)
            g("update-index", "--add", "--cacheinfo", f"100644,{blob},{path}")
    new = g("commit-tree", g("write-tree"), "-p", old, "-m", message)
    g("update-ref", ref, new, old)
    index.unlink()
