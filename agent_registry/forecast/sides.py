"""Where each live session works, and the commit that stands for its work.

A session on this host whose recorded worktree (``project``) is a worktree of this
repository is read there: its HEAD (read from files, no process) and, when ``git status``
says the worktree has uncommitted changes, a temporary commit of them on top of HEAD.  That
commit is built with a temporary index file (a copy of the worktree's, so only changed
files are hashed): ``git add -A`` and ``git write-tree`` write that file and objects,
never the worktree's own index, HEAD or files.  Its date is HEAD's, so the same changes
give the same commit and the pair cache (merges.py) still hits.

A session of another clone (another host, or a checkout that is not ours) is read through
its pushed branch: ``refs/remotes/<remote>/<branch>``, the registry's remote first.  One
that pushed nothing, or whose record names a branch git would refuse, is skipped, saying
why.
"""
from __future__ import annotations

import os
from collections import namedtuple

from ..store.git import GitError, Repo, clean_env, run_git
from ..store.refname import branch_problem
from ..store.spawn import TimedOut

# key: what makes two sessions work on the same thing (the same worktree, or the same
# pushed ref); tip: the commit compared; head: the committed tip (what a claim compares)
Side = namedtuple("Side", "key branch worktree host tip head dirty source")
WORKTREE_TIMEOUT = 60  # seconds for one git command reading another worktree's changes


def head(repo: Repo, git_dir: str) -> tuple[str, str | None]:
    """(branch or "", commit or None) of a worktree's HEAD, read from its files."""
    try:
        with open(os.path.join(git_dir, "HEAD")) as f:
            text = f.read().strip()
    except OSError:
        return "", None
    if text.startswith("ref: "):
        ref = text[5:]
        return ref.removeprefix("refs/heads/"), repo.read_ref(ref)
    return "", text or None


def remotes(repo: Repo, remote: str | None) -> list[str]:
    """The repository's remotes, the registry's *remote* first: git's own list, since a
    name may hold a slash (``team/origin``) and cannot be read off ``refs/remotes``."""
    names = repo.git("remote", check=False).stdout.decode("utf-8", "replace").split()
    return sorted(set(names) | ({remote} if remote else set()), key=lambda n: (n != remote, n))


def pushed(repo: Repo, branch: str, remote_names: list[str]) -> str | None:
    """``refs/remotes/<remote>/<branch>`` of the first of *remote_names* that has one."""
    if not branch:
        return None
    return next((ref for name in remote_names
                 if repo.read_ref(ref := f"refs/remotes/{name}/{branch}")), None)


def committed(repo: Repo, session, trees: dict[str, str], remote_names: list[str],
              host: str) -> Side | str:
    """*session*'s side from files alone (its committed tip), or why it has none
    (*remote_names*: from :func:`remotes`)."""
    project = os.path.realpath(session.project) if session.project else ""
    if session.host == host and project in trees:
        branch, tip = head(repo, trees[project])
        if tip is None:
            return "its worktree has no commit yet"
        return Side(("worktree", project), branch, project, host, tip, tip, False, "worktree")
    if session.git_branch and (why := branch_problem(session.git_branch)):
        # any clone writes session records: a name git refuses is never made into a ref
        # (``../../src/x`` would read a file outside refs/ as one)
        return f"its branch {session.git_branch!r} is not a name git allows: {why}"
    local = session.host == host and not os.path.isdir(project)  # a worktree removed since
    ref = (f"refs/heads/{session.git_branch}" if local and session.git_branch
           and repo.read_ref(f"refs/heads/{session.git_branch}") else None) \
        or pushed(repo, session.git_branch, remote_names)
    if ref is None:
        return (f"branch {session.git_branch} of {session.host} is not pushed here "
                "(no remote-tracking ref)" if session.git_branch else
                f"it works on a detached HEAD in another clone ({session.host})")
    tip = repo.read_ref(ref)
    source = "branch" if ref.startswith("refs/heads/") else "remote-tracking"
    return Side(("ref", ref), session.git_branch, None, session.host, tip, tip, False, source)


def with_changes(repo: Repo, side: Side, git_dir: str, scratch: str, memo: dict) -> Side:
    """*side* with its worktree's uncommitted changes (tracked and untracked, as
    ``git add -A`` takes them) as a temporary commit on top of HEAD.  *git_dir*: the
    worktree's; *scratch*: a folder for the temporary index; *memo*: what the last run
    found per worktree, reused while HEAD, the changed paths, their sizes and times and
    the index file are as they were then.  One process for a worktree, two more when its
    changes are new."""
    if side.source != "worktree":
        return side
    env = _read_only_env()
    status = worktree_status(side)
    if not status:
        memo.pop(side.worktree, None)
        return side
    stamp = _stamp(side.worktree, git_dir, status)
    known = memo.get(side.worktree)
    if isinstance(known, dict) and known.get("head") == side.head and \
            known.get("stamp") == stamp and repo.reader.read(str(known.get("tip"))):
        return side._replace(tip=known["tip"], dirty=True)
    index = os.path.join(scratch, f"index.{os.getpid()}.{os.urandom(4).hex()}")
    try:
        _copy(os.path.join(git_dir, "index"), index)  # a read of the real one
        env = {**env, "GIT_INDEX_FILE": index}
        # a split index would write a shared index file beside the real one: not here
        _in_worktree(["-c", "core.splitIndex=false", "add", "-A"], side, env)
        tree = _in_worktree(["write-tree"], side, env).decode().strip()
    finally:
        for leftover in (index, index + ".lock"):
            if os.path.exists(leftover):
                os.unlink(leftover)
    when = commit_time(repo, side.head)
    commit = repo.commit_tree(tree, [side.head], "agent-registry overlap: uncommitted changes",
                              "agent-registry <agent-registry@localhost>", when)
    memo[side.worktree] = {"head": side.head, "stamp": stamp, "tip": commit}
    return side._replace(tip=commit, dirty=True)


def _read_only_env() -> dict[str, str]:
    env = clean_env()
    env["GIT_OPTIONAL_LOCKS"] = "0"  # --no-optional-locks: no index refresh written there
    return env


def worktree_status(side: Side) -> bytes:
    """``git status --porcelain -z`` of *side*'s worktree (untracked files each named),
    read without writing its index."""
    return _in_worktree(["status", "--porcelain", "-z", "--untracked-files=all",
                         "--ignore-submodules"], side, _read_only_env())


def status_paths(status: bytes) -> list[str]:
    """The paths a ``git status --porcelain -z`` output names (a rename's both)."""
    fields, out, second = status.split(b"\0"), [], False
    for field in fields:
        if field:
            out.append(os.fsdecode(field if second else field[3:]))
        second = not second and field[:1] in (b"R", b"C")
    return out


def _in_worktree(args: list[str], side: Side, env: dict[str, str]) -> bytes:
    """git *args* in *side*'s worktree, its output; GitError when it fails or takes
    longer than WORKTREE_TIMEOUT (a worktree on a hung network mount must not hang
    the forecast, nor a claim's warning)."""
    try:
        return run_git(args, cwd=side.worktree, env=env, timeout=WORKTREE_TIMEOUT).stdout
    except TimedOut:
        raise GitError(f"git in {side.worktree} took longer than {WORKTREE_TIMEOUT} s "
                       "to read its changes") from None


def _copy(source: str, target: str) -> None:
    """Copy a file, if it exists (shutil's import would cost every claim's forecast)."""
    try:
        with open(source, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return
    with open(target, "xb") as out:
        out.write(data)


def _stamp(worktree: str, git_dir: str, status: bytes) -> str:
    """What the uncommitted changes look like from outside: ``git status``'s list, and
    the size and modification time of each path on it and of the index file."""
    import hashlib  # here: a claim's forecast never needs it
    digest = hashlib.sha1(status)
    names = [os.path.join(git_dir, "index")] + \
        [os.path.join(worktree, path) for path in status_paths(status)]
    for name in names:
        try:
            info = os.lstat(name)
            digest.update(f"{info.st_size} {info.st_mtime_ns}\n".encode())
        except OSError:
            digest.update(b"-\n")
    return digest.hexdigest()


def commit_time(repo: Repo, oid: str) -> int:
    found = repo.reader.read(oid)
    for line in (found[1] if found else b"").split(b"\n"):
        if line.startswith(b"committer "):
            return int(line.rsplit(b" ", 2)[-2])
        if not line:
            break
    return 0
