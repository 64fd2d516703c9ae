"""What git knows about a session's work, read before its ``end`` operation is built.

All of it is environment-dependent (the user's branches, remote-tracking refs, the
registry history), so it is computed once and stored in the operation: replaying the
operation on another tip gives the same entry.  Every command here is read-only and runs
through the registry's clean git environment (never the user's index or work tree).
"""
from __future__ import annotations

from ..branch.shards import shard_patterns
from ..branch.trailers import parse_op
from ..store.refname import branch_problem
from ..core import sharded
from ..core.registry import Registry
from ..errors import RegistryError

MAX_FILES = 1000
MAX_PUSHES = 50


def _log(registry: Registry, *args: str) -> str:
    proc = registry.repo.git("log", *args, check=False)
    return proc.stdout.decode(errors="replace") if proc.returncode == 0 else ""


def branch_files(registry: Registry, branch: str, since: str) -> list[str]:
    """Files changed by the commits on *branch* (first-parent line, merges left out, so a
    merge of main does not count as this session's work) since *since*."""
    if not branch or not since or branch_problem(branch) or \
            not registry.repo.read_ref(f"refs/heads/{branch}"):
        return []  # a name from a session record git would refuse is no ref to read
    out = _log(registry, "--first-parent", "--no-merges", f"--since={since}", "-z",
               "--name-only", "--format=", f"refs/heads/{branch}", "--")
    files = dict.fromkeys(out.replace("\n", "\0").split("\0"))
    files.pop("", None)
    return list(files)[:MAX_FILES]


def pushed_commits(registry: Registry, branch: str, since: str) -> list[str]:
    """Commits since *since* that a remote-tracking ref of *branch* has (they were pushed),
    as ``<remote>/<branch> <short sha> <subject>``."""
    if not branch or not since:
        return []
    refs = registry.repo.git("for-each-ref", "--format=%(refname)", "refs/remotes/",
                             check=False).stdout.decode(errors="replace").split()
    out: list[str] = []
    for ref in refs:
        if not ref.endswith("/" + branch):
            continue
        short = ref[len("refs/remotes/"):]
        for line in _log(registry, "--first-parent", "--no-merges", f"--since={since}",
                         "--format=%h %s", ref, "--").splitlines():
            if line.strip():
                out.append(f"{short} {line.strip()}")
    return out[:MAX_PUSHES]


def claimed_paths(registry: Registry, sid: str, since: str) -> list[str]:
    """Every target the session claimed, from the registry branch's operation log (locks
    released before ``end`` still count as touched); in the lock-shard layout from the
    shard branches' logs too, where the claims are committed (the same ``git log``)."""
    if not registry.repo.read_ref(registry.ref):
        return []
    args = ["--format=%B%x00", "--fixed-strings", f"--grep=Registry-Session: {sid}"]
    if since:
        args.append(f"--since={since}")
    try:
        shards = sharded.layout(registry)["format"] != 1
    except RegistryError:
        shards = True  # a marker it cannot read: look there too (absent refs add nothing)
    if shards:
        args += [f"--glob={p}" for p in shard_patterns(registry.branch, None)]
    paths: list[str] = []
    for message in _log(registry, *args, registry.ref, "--").split("\0"):
        op = parse_op(message.strip())
        if op and op.get("op") == "claim" and op.get("session") == sid:
            paths.extend(p for p in op.get("paths", []) if p not in paths)
    return paths[:MAX_FILES]
