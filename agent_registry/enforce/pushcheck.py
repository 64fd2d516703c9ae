"""Which paths a push, or a range of commits, changes that another live session holds: the
one decision of the server's pre-receive hook (enforce/receive.py) and of ``guard
--range`` (a pull request's check).  Standard library only: the pre-receive hook carries
this module with it (enforce/server.py) to a server that has python3 and git, nothing
installed.

Who makes the change: the session the push names (``git push -o
agent-registry.session=SID``, ``guard --range --session SID``), and, on a branch that is
one session's own, that session: the only live session working on it (its
``git_branch``), when it is not the repository's default branch, which everyone shares.
Anyone else, a person included, is refused, as the pre-commit guard refuses them.
"""
from __future__ import annotations

from ..errors import BadInput
from ..store.git import remote_name, run_git
from .guard import Conflict, Guard, Report, commit_changes

ZERO = "0" * 40


def is_code_ref(ref: str, branch: str) -> bool:
    """Is *ref* a branch of the project's code, not one of the registry's own refs (the
    main branch, its lock shards, clone refs, intents and the messages branch)?"""
    if not ref.startswith("refs/heads/"):
        return False
    name = ref[len("refs/heads/"):]
    return name != branch and not name.startswith(
        (f"{branch}-shards/", f"{branch}-clones/", f"{branch}-messages"))


def default_branch(guard: Guard) -> str | None:
    """The branch everyone shares: a bare repository's HEAD, a clone's ``<remote>/HEAD``."""
    remote = remote_name(guard.config)
    ref = "HEAD" if guard.info.toplevel is None else f"refs/remotes/{remote}/HEAD"
    if guard.info.toplevel is not None and not remote:
        return None
    proc = guard.repo.git("symbolic-ref", "-q", ref, check=False)
    name = proc.stdout.decode().strip()
    prefix = "refs/heads/" if ref == "HEAD" else f"refs/remotes/{remote}/"
    return name[len(prefix):] if proc.returncode == 0 and name.startswith(prefix) else None


def branch_owner(guard: Guard, branch: str | None) -> str | None:
    """The session whose own branch *branch* is: the only live session working on it,
    never on the default branch."""
    if not branch or guard.lookup is None or branch == default_branch(guard):
        return None
    on_it = [s.id for s in guard.lookup.open().live_sessions() if s.git_branch == branch]
    return on_it[0] if len(on_it) == 1 else None


def judge(guard: Guard, changes: dict[str, list[str]], session: str | None,
          branch: str | None) -> tuple[Report, dict[str, list[str]]]:
    """The guard's report on every path in *changes* (source -> paths), made by
    *session* on *branch* (a branch that is one session's own: that session changes it),
    and each held path -> the sources that change it."""
    paths = sorted({p for changed in changes.values() for p in changed})
    report = guard.check(paths, committer=session)
    if report.conflicts and (owner := branch_owner(guard, branch)) is not None:
        report.conflicts = [c for c in report.conflicts if c.owner != owner]
    held = {c.path for c in report.conflicts}
    return report, {path: [source for source, changed in changes.items() if path in changed]
                    for path in sorted(held)}


def reach(conflicts: list[Conflict]) -> list[str]:
    """How to reach each holder: the message that asks them to release what they hold."""
    owners = list(dict.fromkeys(c.owner for c in conflicts))
    return [f"reach {owner}: agent-registry send --to {owner} 'please release "
            f"{', '.join(c.path for c in conflicts if c.owner == owner)}' (they run "
            "agent-registry lock release PATH)" for owner in owners]


def _resolve(guard: Guard, name: str) -> str:
    proc = guard.repo.git("rev-parse", "--verify", "--quiet", "--end-of-options",
                          f"{name}^{{commit}}", check=False)
    if proc.returncode != 0:
        raise BadInput(f"--range: {name!r} is not a commit in this repository "
                       "(fetch it first: the check needs the base and the head)")
    return proc.stdout.decode().strip()


def range_changes(guard: Guard, spec: str) -> dict[str, list[str]]:
    """Each commit of BASE..HEAD (on HEAD, not on BASE: a pull request's commits) ->
    the paths it changes, labelled with its author: who changed it."""
    base, sep, head = spec.partition("..")
    if not sep or not base or not head or head.startswith("."):
        raise BadInput(f"--range: expected BASE..HEAD, got {spec!r}")
    base, head = _resolve(guard, base), _resolve(guard, head)
    commits = guard.repo.git("rev-list", head, f"^{base}", "--").stdout.decode().split()
    changes = commit_changes(guard.repo.git, commits)
    if not changes:
        return changes
    authors = dict(line.split(" ", 1) for line in guard.repo.git(
        "show", "-s", "--format=%h %an <%ae>", "--abbrev=12", *commits
    ).stdout.decode("utf-8", "replace").splitlines() if " " in line)
    return {f"{label} by {authors.get(label[7:], '?')}": paths
            for label, paths in changes.items()}


def received_changes(env: dict[str, str], old: str, new: str) -> dict[str, list[str]]:
    """What one ref update received by the server changes: each commit new to the
    repository (read with the hook's own environment, which points git at the pushed
    objects still in quarantine) and the update as a whole (a fast-forward onto commits
    the server has on another branch sends none).  GitError when git cannot say."""
    def git(*args: str, input: bytes | None = None):
        return run_git(list(args), env=env, input=input)
    known = [] if old == ZERO else [f"^{old}"]
    commits = git("rev-list", new, *known, "--not", "--all", "--").stdout.decode().split()
    changes = commit_changes(git, commits)
    if old != ZERO and old != new:
        seen = {p for changed in changes.values() for p in changed}
        names = [n for n in git("diff-tree", "-r", "--name-only", "-z", "--no-renames", old,
                                new).stdout.decode("utf-8", "surrogateescape").split("\0")
                 if n.strip("\n") and n not in seen]  # what no received commit brings
        if names:
            changes[f"the update {old[:12]}..{new[:12]}"] = names
    return changes

