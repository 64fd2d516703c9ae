"""The guard: refuse a commit or a push that touches a path another live session holds.

It runs on every commit, so it imports the standard library only (no click, no ruamel,
no search or web stack) and looks up only what the commit touches: for each path, the
lock record of the path itself and of each ancestor directory, plus the few glob locks,
all read through one ``git cat-file --batch`` from the registry branch tip.  Over 400
lines: the lookup, who commits, and every hook's entry point in the one module a hook
imports, so a commit loads as little as it can.

    python -m agent_registry.guard pre-commit           # what the pre-commit hook runs
    python -m agent_registry.guard pre-merge-commit     # the same, before `git merge` commits
    python -m agent_registry.guard pre-push REMOTE URL  # refs on stdin, as git gives them
    python -m agent_registry.guard check PATH...        # the same decision for any paths
    python -m agent_registry.guard background-sync      # post-merge / post-checkout

Who commits: ``$AGENT_REGISTRY_SESSION``, else the live session on this host whose
process is an ancestor of the hook, else a person.  Locks held by anyone else block,
unless stale.  ``AGENT_REGISTRY_ALLOW=1`` lets the commit through and records the
override on the registry branch.  The guard never lets a commit through silently: with
no registry branch it says so on stderr; when the branch exists but cannot be read, it
refuses (fail closed) and names the override.  Pre-push checks what each pushed commit,
merges included, and each branch update change, so what no commit hook saw (a merge
made with --no-verify, cherry-pick, revert, rebase, am, a fast-forward) is caught there.
"""
from __future__ import annotations

import os
import sys
import time

from ..branch import paths as P
from ..branch.pathcase import rule_of
from ..errors import Unreadable
from ..store import spawn
from ..store.git import (GitError, Repo, RepoInfo, branch_name, clean_env, discover, read_config,
                         remote_name)
from ..store.procinfo import ancestors, hostname, start_time

SESSION_ENV = "AGENT_REGISTRY_SESSION"
ALLOW_ENV = "AGENT_REGISTRY_ALLOW"
# what each hook lets through, as its refusals name it ("... git commit ...")
ACTIONS = {"pre-commit": "commit", "pre-merge-commit": "merge", "pre-push": "push",
           "check": "commit"}
# set in the environment of the sync the pre-push hook starts, whose own push of the
# registry branch would otherwise run this hook again
IN_HOOK_ENV = "AGENT_REGISTRY_IN_HOOK"
SYNC_TIMEOUT = 20.0
PERSON = "a person"
UNREADABLE = "refusing: "


class Conflict:
    """A path the committer may not touch: who holds it, through which lock target."""
    FIELDS = ("path", "target", "owner", "working_on", "since", "mode", "host")

    def __init__(self, path: str, target: str, owner: str, working_on: str, since: str,
                 mode: str, host: str) -> None:
        self.path, self.target, self.owner = path, target, owner
        self.working_on, self.since, self.mode, self.host = working_on, since, mode, host

    def to_dict(self) -> dict:
        return {name: getattr(self, name) for name in self.FIELDS}


class Report:
    """The guard's answer for a set of paths.  (Plain classes here, not dataclasses:
    importing dataclasses costs the guard, which runs on every commit, several ms.)"""

    def __init__(self, checked: list[str], committer: str | None = None,
                 mode: str = "enforcing") -> None:
        self.checked = checked
        self.committer = committer  # a session id, or None for a person
        # "enforcing"; "off: <why>" when there is no registry branch; "refusing: <why>"
        # when there is one and it cannot be read (fail closed)
        self.mode = mode
        self.conflicts: list[Conflict] = []
        self.stale: list[dict] = []  # locks that no longer count
        self.warnings: list[str] = []
        # with a remote: how old this clone's view is (the guard never fetches)
        self.view: dict = {}

    @property
    def unreadable(self) -> bool:
        return self.mode.startswith(UNREADABLE)

    @property
    def blocked(self) -> bool:
        return bool(self.conflicts) or self.unreadable

    def to_dict(self) -> dict:
        return {"checked": self.checked, "committer": self.committer or PERSON,
                "blocked": self.blocked, "mode": self.mode,
                "conflicts": [c.to_dict() for c in self.conflicts], "stale": self.stale,
                "warnings": self.warnings, **self.view}


def hook_repo_info() -> RepoInfo | None:
    """The repository layout read from the files, inside a pre-commit hook: git runs
    hooks at the top of the worktree and exports GIT_INDEX_FILE (and GIT_DIR for a
    linked worktree).  Saves the ``git rev-parse`` process on every commit; None (ask
    git) whenever the layout is anything but the plain one."""
    if "GIT_INDEX_FILE" not in os.environ or any(
            os.environ.get(v) for v in ("GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY")):
        return None
    top = os.path.realpath(os.getcwd())
    git_dir = os.environ.get("GIT_DIR") or os.path.join(top, ".git")
    if os.path.isfile(git_dir):
        with open(git_dir) as f:
            line = f.readline().strip()
        if not line.startswith("gitdir: "):
            return None
        git_dir = line[8:]
    git_dir = os.path.realpath(os.path.join(top, git_dir))
    if not os.path.isfile(os.path.join(git_dir, "HEAD")):
        return None
    common = git_dir
    try:
        with open(os.path.join(git_dir, "commondir")) as f:
            common = os.path.realpath(os.path.join(git_dir, f.read().strip()))
    except OSError:
        pass
    try:
        with open(os.path.join(common, "config"), "rb") as f:
            config = f.read().lower()
    except OSError:
        return None
    if any(word in config for word in (b"objectformat", b"worktree", b"bare = true",
                                       b"refstorage")):
        return None  # sha256, core.worktree, bare, reftable: let git say
    return RepoInfo(git_dir, common, top, "", "sha1", "files")


def registry_refs(config: dict[str, str]) -> list[str]:
    """The refs the guard judges by, in order: the local branch, else, in a clone that
    never had it, the remote-tracking branch git clone made (as the registry does)."""
    branch = branch_name(config)
    remote = remote_name(config)
    return [f"refs/heads/{branch}"] + ([f"refs/remotes/{remote}/{branch}"] if remote else [])


def registry_tip(repo: Repo, config: dict[str, str]) -> str | None:
    """The registry tip the guard judges by (registry_refs), or None."""
    return next((tip for ref in registry_refs(config)
                 if (tip := repo.read_ref(ref)) is not None), None)


class LockLookup:
    """The registry as of one tip, read path by path through a :class:`View` (the
    registry's own reader, so the guard and claims agree on every record): never a
    scan of all locks.  A record that cannot be read is reported and fails closed, as
    in the registry (branch/view.py)."""

    def __init__(self, repo: Repo, tip: str, now: float, host: str, branch: str,
                 remote: str | None) -> None:
        self.repo = repo
        self.tip = tip
        self.branch, self.remote = branch, remote  # where the lock shards are
        self.now = now
        self.host = host
        self._view = None

    def open(self):
        """The View of the tip, opened on first use, inside Guard.check: a tip whose
        commit or root tree is missing raises there (unreadable) instead of reading as
        an empty registry."""
        if self._view is None:
            from ..branch.view import View
            view = View(self.repo, self.tip)
            if self.repo.reader.read(view.tree) is None:
                raise GitError(f"the tree {view.tree} of {self.tip} is missing")
            # the lock shards, also when only the remote's copy was converted yet (the
            # claims since then are there); a layout it does not know refuses
            tracking = f"refs/remotes/{self.remote}/{self.branch}" if self.remote else None
            # the core's layout detection, as claims read it (each marker by object name:
            # a missing object is then damage, not absence: store/git.py)
            from ..branch import shards
            layout = shards.newest_layout(self.repo, (
                self.tip, self.repo.read_ref(tracking) if tracking else None))
            if layout["format"] > 1:
                from ..branch.shardview import open_whole
                view = open_whole(self.repo, self.branch, self.remote, self.tip,
                                  layout["shards"])
                view.trees()  # a shard git cannot read refuses, whatever the commit touches
            self._view = view
        return self._view

    @property
    def warnings(self) -> list[str]:
        return self._view.warnings if self._view is not None else []

    def session(self, sid: str):
        """(live session or None, unreadable?)"""
        view = self.open()
        return view.session(sid, strict=False), sid in view.unreadable

    def covering(self, path: str) -> list:
        """Lock records whose target covers *path* (View.covering, as claims ask)."""
        return self.open().covering(path)

    def stale_reason(self, holder, session, unreadable: bool) -> str | None:
        """Why this holder's claim no longer counts, by the registry's rule (a heartbeat
        dated in the future ages from this clone's first sight of it), or None."""
        if unreadable:
            return None  # an unreadable session file keeps its locks held, as in the registry
        from ..branch.staleness import FirstSeen, stale_reason
        seen = FirstSeen(self.repo.state_path("heartbeats-seen.json"))
        ended = None
        if session is None:  # ended, or never registered here: said apart
            try:
                ended = self.open().done_session(holder.session)
            except Exception:
                ended = None
        return stale_reason(holder, session, self.now, self.host, seen, ended=ended)


def _is_my_process(session, host: str, mine: set[int]) -> bool:
    """Is *session*'s owner exactly one of *mine* (the hook's ancestors)?  Only a
    vouched-for owner counts: a pid nobody vouched for may be a process every window
    shares (a tmux server), and a shared ancestor proves nothing about who commits."""
    return (session.host == host and session.vouched and session.pid in mine
            and (session.pid_start is None or start_time(session.pid) == session.pid_start))


def evaluate(lookup: LockLookup, paths: list[str], committer: str | None,
             my_pids: list[int]) -> Report:
    """Which of *paths* are held by a live session other than the committer (without
    one named: the session whose process is the nearest of *my_pids*, the hook's
    ancestors nearest first)."""
    report = Report(checked=list(paths), committer=committer)
    seen: set[tuple[str, str, str]] = set()
    mine, nearest = set(my_pids), None
    for path in paths:
        for lock in lookup.covering(path):
            for holder in lock.holders:
                owner = holder.session
                key = (path, lock.path, owner)
                if key in seen or (committer is not None and owner == committer):
                    continue
                seen.add(key)
                session, unreadable = lookup.session(owner)
                if committer is None and session is not None and \
                        _is_my_process(session, lookup.host, mine):
                    # an ancestor's session; the agent that runs this commit only if no
                    # session's process is nearer (an agent started by another agent)
                    if nearest is None:
                        nearest = identify(lookup, my_pids) or ""
                    if nearest == owner:
                        continue
                reason = lookup.stale_reason(holder, session, unreadable)
                if reason:
                    report.stale.append({"path": path, "target": lock.path,
                                         "owner": owner, "reason": reason})
                    continue
                report.conflicts.append(Conflict(
                    path, lock.path, owner, session.working_on if session else "",
                    holder.acquired_at, lock.mode, session.host if session else ""))
    report.warnings = lookup.warnings
    return report


def identify(lookup: LockLookup | None, my_pids: list[int]) -> str | None:
    """The committing session: the env var, else the live session of this host whose
    vouched-for owner process is the nearest of our ancestors *my_pids* (an exact owner
    match, never a shared ancestor; an agent started by another agent commits as
    itself); None for a person.  Lists live sessions (not locks), so it is only called
    when its answer is needed."""
    sid = os.environ.get(SESSION_ENV)
    if sid:
        return sid
    if lookup is None:
        return None
    mine, found = set(my_pids), {}
    for name, is_tree, _ in lookup.repo.list_tree(f"{lookup.tip}:sessions/live"):
        if is_tree or not name.endswith(".yaml"):
            continue
        session, _ = lookup.session(name[:-5])
        if session is not None and _is_my_process(session, lookup.host, mine):
            found.setdefault(session.pid, session.id)
    return next((found[pid] for pid in my_pids if pid in found), None)


class Guard:
    """One repository's guard: the repo, its registry tip, and the committer."""

    def __init__(self, info: RepoInfo, *, now: float | None = None,
                 host: str | None = None) -> None:
        self.info = info
        self.repo = Repo(info)
        self.config = read_config(info.git_dir)  # from the files unless one mentions us
        self.repo.path_rule = rule_of(self.config)
        self.branch = branch_name(self.config)
        self.host = host or hostname()
        self.now = time.time() if now is None else now
        self.my_pids = ancestors()  # nearest first
        self.refresh()

    def refresh(self) -> None:
        """Read the registry tip (again).  A ref that is there but cannot be read (an
        empty file, a loop) is kept to refuse with: never "no registry branch"."""
        self.damaged: Unreadable | None = None
        try:
            self.tip = registry_tip(self.repo, self.config)
        except Unreadable as exc:
            self.tip, self.damaged = None, exc
        self.lookup = LockLookup(self.repo, self.tip, self.now, self.host, self.branch,
                                 remote_name(self.config)) if self.tip else None

    def close(self) -> None:
        self.repo.close()

    def view_age(self) -> dict:
        """With a remote: when this clone last fetched the registry (``as_of``), and
        whether that is older than agent-registry.readFreshness (``stale_view``).  The
        guard stays local (a commit never waits on the network): it only says it."""
        if not remote_name(self.config):
            return {}
        from ..store import freshness
        last = freshness.last_fetch(self.info.common_dir, self.branch)
        age = None if last is None else max(0, int(time.time() - last))  # pre-push syncs first
        return {"as_of": freshness.iso(last) if last else None,
                "stale_view": age is None or age > freshness.bound(self.config),
                "view_age_seconds": age}

    def check(self, paths: list[str], committer: str | None = None) -> Report:
        """Which of *paths* another live session holds.  The committer is *committer*,
        else $AGENT_REGISTRY_SESSION, else found by process ancestry."""
        report = self._check(paths, committer)
        report.view = self.view_age()
        return report

    def _check(self, paths: list[str], committer: str | None = None) -> Report:
        env_sid = committer or os.environ.get(SESSION_ENV) or None
        if self.lookup is None and self.damaged is None and not self._ref_exists():
            return Report(paths, env_sid, mode=f"off: no registry branch {self.branch!r} "
                                               "in this repository")
        try:
            if self.lookup is None:
                raise self.damaged or GitError(f"{' / '.join(registry_refs(self.config))}: "
                                               "no commit")
            self.lookup.open()
            report = evaluate(self.lookup, paths, env_sid, self.my_pids)
            if report.blocked:
                report.committer = identify(self.lookup, self.my_pids)
        except Exception as exc:  # a registry that exists but cannot be read: fail closed
            reason = " ".join(str(exc).split()) or type(exc).__name__
            return Report(paths, env_sid, mode=f"{UNREADABLE}the registry branch "
                                               f"{self.branch!r} is unreadable ({reason})")
        return report

    def _ref_exists(self) -> bool:
        """Is there a ref file that read_ref could not read (empty, a dangling symref),
        local or remote-tracking, or are the branch's lock shards there without it (its
        ref deleted)?  Then the registry is broken, not absent."""
        common = self.info.common_dir
        if any(os.path.lexists(os.path.join(common, *ref.split("/")))
               for ref in registry_refs(self.config)):
            return True
        shards = f"refs/heads/{self.branch}-shards/"
        try:
            if os.listdir(os.path.join(common, *shards.split("/"))):
                return True
        except OSError:
            pass
        try:
            with open(os.path.join(common, "packed-refs"), "rb") as packed:
                return f" {shards}".encode() in packed.read()
        except OSError:
            return False

    def staged_paths(self) -> list[str]:
        """Paths the commit being made changes, read with the hook's own environment
        (git may point GIT_INDEX_FILE at a temporary index).  Without rename detection
        a rename is a deletion plus an addition, so both sides are checked."""
        # through store/spawn.py, not subprocess (which with locale, re, enum, threading
        # and signal cost every commit some 10 ms of imports: tests/test_import_budget.py)
        diff = spawn.Running(
            ["git", "-C", self.info.toplevel or ".", "diff", "--cached", "--raw", "-z",
             "--no-renames", "--no-color", "--no-ext-diff", "--ignore-submodules=none"])
        if self.lookup is not None:
            # while git diffs: start cat-file and read the glob locks, which every path
            # needs; a failure here is met again, and reported, by check()
            try:
                self.lookup.open().pattern_locks()
            except Exception:
                pass
        done = diff.finish()
        if done.returncode != 0:
            raise RuntimeError(done.stderr.decode(errors="replace").strip())
        return _raw_paths(_names(done.stdout))

    def pushed_changes(self, remote: str, updates: list[tuple[str, str, str, str]]
                       ) -> dict[str, list[str]]:
        """What a push changes, by where it comes from: each commit the remote does not
        have (a merge against its first parent: what it brings into that line, the other
        side's changes included even when the remote has them on another branch), and
        each branch update as a whole, the remote's tip against ours (a fast-forward onto
        commits the remote has elsewhere sends no commit, yet changes the branch)."""
        updates = [u for u in updates
                   if set(u[1]) != {"0"} and u[2] != f"refs/heads/{self.branch}"]
        if not updates:
            return {}
        known = {old for _, _, _, old in updates
                 if set(old) != {"0"} and self.repo.reader.read(old) is not None}
        commits = self.repo.git("rev-list", *[u[1] for u in updates], *[f"^{o}" for o in known],
                                "--not", f"--remotes={remote}", "--").stdout.decode().split()
        changed = commit_changes(self.repo.git, commits)
        for _, local, ref, old in updates:
            if old in known and old != local:
                names = _names(self.repo.git("diff-tree", "-r", "--name-only", "-z",
                                             "--no-renames", old, local).stdout)
                if names:
                    changed[f"the update of {ref} ({old[:12]}..{local[:12]})"] = names
        return changed


def commit_changes(git, commits: list[str]) -> dict[str, list[str]]:
    """``"commit <12 hex>"`` -> the paths each of *commits* changes (a merge against its
    first parent: what it brings into that line), in one ``diff-tree --stdin``; *git*
    runs git (``Repo.git``'s signature).  The pre-push guard, the server's pre-receive
    hook and ``guard --range`` share it (enforce/pushcheck.py)."""
    changed: dict[str, list[str]] = {}
    if not commits:
        return changed
    out = git("diff-tree", "--stdin", "-r", "--root", "--raw", "-z", "--no-renames",
              "--always", "--diff-merges=first-parent",
              input="\n".join(commits).encode() + b"\n").stdout
    listed = set(commits)  # a big push lists many commits: no list scan per path
    current: list[str] | None = None
    items: list[str] = []
    for item in _names(out) + [""]:
        if not item or (item in listed and len(items) % 2 == 0):  # not a record's path
            if current is not None:
                current += _raw_paths(items)
            current, items = (changed.setdefault(f"commit {item[:12]}", []) if item else None), []
        else:
            items.append(item)
    return changed


GITLINK = "160000"  # a submodule's entry: its paths are the files below it


def _raw_paths(items: list[str]) -> list[str]:
    """The paths of git's ``--raw -z`` records *items* (``:MODES SHAS STATUS``, then the
    path; no renames), a submodule's as a folder (``sub/``): a commit that moves it
    changes the files below it, which a lock may hold."""
    paths = []
    for meta, path in zip(items[::2], items[1::2]):
        if not meta.startswith(":") or not path:
            raise RuntimeError(f"git's diff said {meta!r} {path!r}, not a --raw record")
        paths.append(path + "/" if GITLINK in meta[1:].split(" ", 2)[:2] else path)
    if len(items) % 2:
        raise RuntimeError(f"git's diff ended in the middle of a record: {items[-1]!r}")
    return paths


def _names(out: bytes) -> list[str]:
    """The NUL-separated names git printed (``-z``)."""
    return [item.strip("\n") for item in out.decode("utf-8", "surrogateescape").split("\0")
            if item.strip("\n")]


# -- messages -------------------------------------------------------------------------

def describe(conflict: Conflict) -> str:
    via = f" (via {conflict.target})" if conflict.target != conflict.path else ""
    what = f', working on "{conflict.working_on}"' if conflict.working_on else ""
    where = f" on {conflict.host}" if conflict.host else ""
    return f"{conflict.path}: locked by {conflict.owner}{where}{via} since {conflict.since}{what}"


def how_to_proceed(action: str, conflicts: list[Conflict] = ()) -> str:  # type: ignore[assignment]
    """The way on after a refusal: the message that asks each owner, then the override."""
    owners = list(dict.fromkeys(c.owner for c in conflicts))
    asks = "; ".join(f"agent-registry send --to {owner} 'please release "
                     f"{', '.join(c.path for c in conflicts if c.owner == owner)}'"
                     for owner in owners[:3])
    return (f"agent-registry: ask the owner to release it ({asks or 'agent-registry send --to OWNER'}"
            f"; they run agent-registry lock release PATH), "
            f"or override deliberately: {ALLOW_ENV}=1 git {action} ... (recorded on the "
            f"registry branch) or git {action} --no-verify (not recorded"
            + ("; the pre-push guard still checks it)" if action != "push" else ")"))


def view_text(report: Report, now: float | None = None) -> str:
    """The line saying how old the guard's view is ("" without a remote)."""
    if not report.view:
        return ""
    from ..store import freshness
    last = report.view.get("view_age_seconds")
    now = time.time() if now is None else now
    when = freshness.as_of_text(None if last is None else now - last, now)
    return (f"agent-registry: this clone's view of the registry is {when}; the guard does "
            f"not fetch (`agent-registry sync` brings it up to date)")


def refusal_text(report: Report, action: str) -> str:
    if report.unreadable:  # one line: the reason and the way through
        return (f"agent-registry: {action} refused: {report.mode[len(UNREADABLE):]}; repair "
                f"it (git fsck; agent-registry sync), or override deliberately: "
                f"{ALLOW_ENV}=1 git {action} ...")
    who = report.committer or PERSON
    lines = [f"agent-registry: {action} refused: {len(report.conflicts)} path(s) locked by "
             f"another live session (committing as {who}):"]
    lines += ["  " + describe(c) for c in report.conflicts]
    lines.append(how_to_proceed(action, report.conflicts))
    return "\n".join(lines + [line for line in (view_text(report),) if line])


def say(message: str) -> None:
    print(message, file=sys.stderr)


# -- hook entry points ----------------------------------------------------------------

def override(guard: Guard, report: Report, action: str) -> None:
    """Let the change through and record who overrode which locks (rare: imports the
    registry only here)."""
    from ..core.override import record_override
    from ..sync import Registry
    say(f"agent-registry: {ALLOW_ENV}=1: {action} allowed over {len(report.conflicts)} "
        "lock(s) held by others:")
    for conflict in report.conflicts:
        say("  " + describe(conflict))
    made = None
    if action in ("commit", "merge"):  # named so that the pre-push guard lets it through
        from .overridden import commit_to_be
        made = commit_to_be(guard)
    try:
        with Registry.open(guard.info.toplevel or guard.info.git_dir) as registry:
            record_override(registry, report, action, by=report.committer or PERSON,
                            switch=ALLOW_ENV, commit=made)
        say("agent-registry: the override is recorded on the registry branch")
    except Exception as exc:  # recording must never turn an allowed commit into a failure
        say(f"agent-registry: could not record the override: {exc}")


def pre_commit(guard: Guard, action: str = "commit") -> int:
    """The pre-commit hook, and the pre-merge-commit hook (*action* "merge"): git runs
    it before `git merge` commits, with the merge result in the index."""
    try:
        paths = guard.staged_paths()
    except RuntimeError as exc:
        return _unknown(action, f"cannot read the staged paths ({exc})")
    return _decide(guard, guard.check(paths), action)


def _unknown(action: str, why: str) -> int:
    """What the change touches cannot be listed: fail closed, in one line naming the
    override; with the override, let it through unchecked, with a notice."""
    why = " ".join(why.split())
    if os.environ.get(ALLOW_ENV) == "1":
        say(f"agent-registry: {ALLOW_ENV}=1: {action} allowed unchecked ({why}; not recorded)")
        return 0
    say(f"agent-registry: {action} refused: {why}; override deliberately: "
        f"{ALLOW_ENV}=1 git {action} ...")
    return 1


def _decide(guard: Guard, report: Report, action: str, details: list[str] = ()) -> int:
    """Print what the guard found; 0 to let the change through, 1 to refuse it."""
    for warning in report.warnings:
        say(f"agent-registry: warning: {warning}")
    if report.mode.startswith("off"):
        say(f"agent-registry: guard {report.mode}: {action} not checked")
        return 0
    if not report.blocked:
        if report.view.get("stale_view"):  # older than agent-registry.readFreshness
            say(view_text(report).replace("agent-registry: ", "agent-registry: warning: ", 1))
        return 0
    if os.environ.get(ALLOW_ENV) == "1" and report.unreadable:
        say(f"agent-registry: {ALLOW_ENV}=1: {action} allowed unchecked "
            f"({report.mode[len(UNREADABLE):]}; not recorded)")
        return 0
    if os.environ.get(ALLOW_ENV) == "1":
        override(guard, report, action)
        return 0
    say("\n".join([refusal_text(report, action), *(details if report.conflicts else [])]))
    return 1


def _sync_call(info: RepoInfo) -> dict:
    """`agent-registry sync` as a child of a hook: marked, so that its own push of the
    registry branch does not run the pre-push guard again."""
    import subprocess
    return {"args": [sys.executable, "-m", "agent_registry", "--quiet", "sync"],
            "cwd": info.toplevel or info.git_dir, "env": {**clean_env(), IN_HOOK_ENV: "1"},
            "stdin": subprocess.DEVNULL, "stdout": subprocess.DEVNULL}


def sync_registry(info: RepoInfo) -> str | None:
    """Bring the registry branch up to date from the remote; None when done, else why
    not (the guard then uses local state)."""
    import subprocess  # a push, or a merge's background sync: not on the commit's path
    try:
        proc = subprocess.run(**_sync_call(info), stderr=subprocess.PIPE, timeout=SYNC_TIMEOUT)
    except subprocess.TimeoutExpired:
        return f"sync took longer than {SYNC_TIMEOUT:.0f} s"
    except OSError as exc:
        return str(exc)
    if proc.returncode != 0:
        lines = proc.stderr.decode(errors="replace").strip().splitlines()
        return lines[-1] if lines else f"sync exited {proc.returncode}"
    return None


def push_guard_enabled(config: dict[str, str], remote: str) -> bool:
    for key in (f"agent-registry.{remote.lower()}.guardpush", "agent-registry.guardpush"):
        if key in config:
            return config[key].strip().lower() not in ("false", "no", "off", "0")
    return True


def pre_push(guard: Guard, remote: str, stdin_text: str) -> int:
    if not push_guard_enabled(guard.config, remote):
        return 0
    updates = [tuple(line.split()) for line in stdin_text.splitlines() if len(line.split()) == 4]
    if not updates or all(u[2] == f"refs/heads/{guard.branch}" for u in updates):
        return 0  # nothing to push, or only the registry branch itself (sync's own push)
    why = sync_registry(guard.info)
    if why:
        say(f"agent-registry: could not bring the registry branch up to date ({why}); "
            "the guard uses local state")
    else:
        guard.refresh()  # the sync may have moved the ref
    try:
        changes = guard.pushed_changes(remote, updates)  # type: ignore[arg-type]
    except GitError as exc:
        return _unknown("push", f"cannot list what the push changes ({exc})")
    report = guard.check(sorted({p for changed in changes.values() for p in changed}))
    if report.conflicts:  # a commit let through with the override at its commit passes
        from .overridden import excuse
        for line in excuse(guard, report, changes):
            say(line)
    held = {c.path for c in report.conflicts}
    details = [f"  {source} touches {', '.join(hit)}" for source, changed in changes.items()
               if (hit := [p for p in changed if p in held])]
    return _decide(guard, report, "push",
                   ["agent-registry: what brings them:", *details] if details else [])


def background_sync(info: RepoInfo) -> None:
    """Start a sync detached from this process, so the user's command never waits."""
    import subprocess
    subprocess.Popen(**_sync_call(info), stderr=subprocess.DEVNULL, start_new_session=True)


USAGE = ("usage: python -m agent_registry.guard pre-commit | pre-merge-commit | "
         "pre-push REMOTE [URL] | check PATH... | background-sync | framework")
HOOKS = ("pre-commit", "pre-merge-commit", "pre-push", "check", "background-sync")


def framework_args(environ: dict[str, str]) -> tuple[list[str], str]:
    """The hook's arguments and stdin, as git would give them, when the pre-commit
    framework runs us: it passes neither, but tells the push in PRE_COMMIT_* variables."""
    remote = environ.get("PRE_COMMIT_REMOTE_NAME")
    if not remote:
        return ["pre-commit"], ""
    local = environ.get("PRE_COMMIT_LOCAL_BRANCH") or "HEAD"
    line = " ".join([local, environ.get("PRE_COMMIT_TO_REF") or local,
                     environ.get("PRE_COMMIT_REMOTE_BRANCH") or local,
                     environ.get("PRE_COMMIT_FROM_REF") or "0" * 40])
    return ["pre-push", remote, environ.get("PRE_COMMIT_REMOTE_URL", "")], line + "\n"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    stdin_text = None
    if args[:1] == ["framework"]:
        args, stdin_text = framework_args(dict(os.environ))
    if not args or args[0] not in HOOKS:
        say(USAGE)
        return 2
    if os.environ.get(IN_HOOK_ENV) and args[0] in ("pre-push", "background-sync"):
        return 0
    try:
        info = (hook_repo_info() if args[0] in ("pre-commit", "pre-merge-commit") else None
                ) or discover(".")
    except Exception as exc:
        if args[0] == "background-sync":  # not a gate: nothing to refuse
            return 0
        # git could not say which repository this is: the guard cannot tell what the
        # change touches or who holds it, so it refuses (with the override), never "off"
        return _unknown(ACTIONS.get(args[0], "commit"), f"cannot read the repository ({exc})")
    if args[0] == "background-sync":
        background_sync(info)
        return 0
    if args[0] == "pre-push" and len(args) < 2:
        say(USAGE)
        return 2
    guard = Guard(info)
    try:
        if args[0] in ("pre-commit", "pre-merge-commit"):
            return pre_commit(guard, ACTIONS[args[0]])
        if args[0] == "pre-push":
            return pre_push(guard, args[1], sys.stdin.read() if stdin_text is None else stdin_text)
        from ..errors import BadInput
        try:
            paths = [P.normalize(P.plain(p), toplevel=info.toplevel, prefix=info.prefix,
                                 rule=guard.repo.path_rule) for p in args[1:]]
        except BadInput as exc:
            say(f"agent-registry: {exc.message}")
            return 2
        return _decide(guard, guard.check(paths), "commit")
    finally:
        guard.close()


if __name__ == "__main__":
    sys.exit(main())
