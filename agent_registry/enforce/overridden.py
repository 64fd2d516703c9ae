"""A commit let through with ``AGENT_REGISTRY_ALLOW=1`` is not refused again at push.

The pre-commit hook runs before the commit exists, so its override record names the
commit to be by what it will be made of: the tree the index writes and its first parent
(``HEAD``).  The pre-push guard reads the override records of the registry branch and
lets a held path through when every commit of the push that changes it is such a commit,
overridden for that path: one override per commit, not one at commit and another at push.
A commit the push brings that nobody overrode (``--no-verify``, an amend of it, a rebase)
is still refused.  Standard library only: the guard's module imports this one.
"""
from __future__ import annotations

import os
import tempfile
import time

from ..store import jsontext
from ..store.git import clean_env, run_git

TYPE_CHECKING = False
if TYPE_CHECKING:  # the guard imports this module: no import back at run time
    from .guard import Guard, Report

FOLDER = "overrides"
MONTHS = 2  # the records of this month and the last: a push comes days after its commit


def commit_to_be(guard: Guard) -> dict[str, str] | None:
    """``{"tree", "parent"}`` of the commit the hook is about to let through, or None
    when git cannot say.  The tree is written from a copy of the index (git's own, or
    the temporary one ``git commit FILE`` uses): the user's index is never touched."""
    index = os.environ.get("GIT_INDEX_FILE") or os.path.join(guard.info.git_dir, "index")
    index = os.path.join(guard.info.toplevel or "", index)
    env = {**clean_env(), "GIT_DIR": guard.info.git_dir}
    try:
        with open(index, "rb") as f:
            data = f.read()
        with tempfile.TemporaryDirectory(prefix="agent-registry-") as folder:
            copy = os.path.join(folder, "index")
            with open(copy, "wb") as f:
                f.write(data)
            tree = run_git(["write-tree"], env={**env, "GIT_INDEX_FILE": copy}).stdout
        head = run_git(["rev-parse", "-q", "--verify", "HEAD^{commit}"], env=env, check=False)
    except Exception:
        return None
    return {"tree": tree.decode().strip(), "parent": head.stdout.decode().strip()}


def _records(guard: Guard, now: float) -> list[dict]:
    """The override records of the last MONTHS months on the registry tip."""
    if guard.tip is None:
        return []
    out = []
    for back in range(MONTHS):
        month = time.strftime("%Y-%m", time.gmtime(now - back * 31 * 86400))
        try:
            names = guard.repo.list_tree(f"{guard.tip}:{FOLDER}/{month}")
        except Exception:
            continue  # no override that month
        for name, is_tree, _ in names:
            raw = None if is_tree else guard.lookup.open().read(f"{FOLDER}/{month}/{name}")
            try:
                record = jsontext.loads(raw) if raw else None
            except ValueError:
                record = None  # a damaged record excuses nothing
            if isinstance(record, dict) and record.get("tree"):
                out.append(record)
    return out


def excuse(guard: Guard, report: Report, changes: dict[str, list[str]]) -> list[str]:
    """Drop from *report* the held paths that only commits overridden at their commit
    change in this push (*changes*: the guard's ``pushed_changes``); the lines saying
    which.  The update of a branch as a whole brings nothing else when a commit of the
    push changes the path."""
    held = {c.path for c in report.conflicts}
    commits = {label[7:]: paths for label, paths in changes.items()
               if label.startswith("commit ") and held & set(paths)}
    if not commits:
        return []
    records = _records(guard, guard.now)
    if not records:
        return []
    made = {}
    out = guard.repo.git("show", "-s", "--format=%h %T %P", "--abbrev=12", *commits).stdout
    for line in out.decode().splitlines():
        short, tree, *parents = line.split()
        made[short[:12]] = (tree, parents[0] if parents else "")
    excused = set()
    for path in held:
        by = [short for short, paths in commits.items() if path in paths]
        if by and all(any(record.get("tree") == made.get(short, ("", ""))[0]
                          and record.get("parent") == made[short][1]
                          and path in record.get("paths", ())
                          for record in records) for short in by):
            excused.add(path)
    report.conflicts = [c for c in report.conflicts if c.path not in excused]
    return [f"agent-registry: {path}: let through at its commit with AGENT_REGISTRY_ALLOW=1 "
            "(recorded then); not refused again" for path in sorted(excused)]
