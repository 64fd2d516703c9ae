"""Many clones, one remote: fetch, replay, push.  The remote's ref is the arbiter.

A mutation (under the clone's flock):

1. fetches the remote registry branch into ``refs/remotes/<remote>/<branch>``;
2. replays this clone's unpushed operations (the commits between the previously fetched
   remote tip and the local tip) on top of what was fetched, re-validating each: a claim
   on a path someone else now holds is *refused* and dropped, not merged;
3. applies the new operation on top, moves the local branch (compare-and-swap), and
4. pushes the new tip as a plain fast-forward.  A rejected push means another clone won
   the race: fetch, replay again, retry with jittered backoff until a deadline.

Unreachable remote: the operation stays committed locally (nothing is lost) and is
pushed by the next successful sync; a claim made so is *not confirmed*: exit 3.

Because replays re-run each operation's own logic on the new base, two writers of the same
file resolve by the operation's meaning (a release of a lock that was force-released
elsewhere becomes a no-op), never by git's text merge; a replay that changed the outcome
says so in its commit message.
"""
from __future__ import annotations

import json
import os
import random
import subprocess
import tempfile
import time
from dataclasses import dataclass, field

from .errors import BadInput, NotFound, Refused, RegistryError, Unconfirmed
from .gitstore import CasFailed
from .records import iso
from .registry import Registry, file_lock, parse_op

NETWORK_TIMEOUT = 30.0  # seconds for one fetch or push
DEFAULT_DEADLINE = 120.0  # seconds of retrying rejected pushes
BACKOFF_BASE, BACKOFF_CAP = 0.05, 2.0  # full-jitter exponential backoff, in seconds
MASS_DELETION = 0.5  # a remote keeping less than this share of our sessions is suspect
MIN_GUARDED = 4  # below this many sessions the mass-deletion check stays quiet


class Offline(Exception):
    """The remote could not be reached (network, auth, missing repository)."""


@dataclass
class Replay:
    tip: str | None
    refused: list[dict] = field(default_factory=list)  # ops dropped by re-validation
    results: dict[str, dict] = field(default_factory=dict)  # op id -> replayed result


# -- talking to the remote ------------------------------------------------------------

def _git_net(registry: Registry, *args: str) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["git", *args], env=registry.repo.env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, timeout=NETWORK_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise Offline(f"git {args[0]} timed out after {NETWORK_TIMEOUT:.0f} s") from None


def fetch(registry: Registry) -> str | None:
    """Fetch the remote registry branch into the tracking ref; its tip, or None when
    the remote has no such branch.  Raises Offline when the remote cannot be reached."""
    src = f"refs/heads/{registry.branch}"
    proc = _git_net(registry, "fetch", "--quiet", "--no-tags", "--no-write-fetch-head",
                    registry.remote, f"+{src}:{registry.tracking_ref}")
    if proc.returncode == 0:
        return registry.repo.read_ref(registry.tracking_ref)
    err = proc.stderr.decode(errors="replace")
    if "couldn't find remote ref" in err:  # deleted or never pushed: we will recreate it
        if registry.repo.read_ref(registry.tracking_ref):
            registry.repo.git("update-ref", "-d", registry.tracking_ref)
        return None
    raise Offline(_last_line(err) or f"git fetch exited {proc.returncode}")


@dataclass
class PushResult:
    ok: bool
    retry: bool  # a lost race: fetch and replay, then try again
    reason: str


def push(registry: Registry, commit: str) -> PushResult:
    """Push *commit* as the remote branch: a fast-forward only (no ``+``, no lease)."""
    dst = f"refs/heads/{registry.branch}"
    # --no-verify: a registry push is not the user's code; their pre-push hooks (a test
    # suite, the pre-commit framework) must not run, or fail, on every claim
    proc = _git_net(registry, "push", "--porcelain", "--quiet", "--no-verify", registry.remote,
                    f"{commit}:{dst}")
    out = proc.stdout.decode(errors="replace")
    for line in out.splitlines():
        if line.endswith("\t") or "\t" not in line:
            continue
        flag, _, rest = line.partition("\t")
        if not rest.split("\t")[0].endswith(":" + dst):
            continue
        summary = rest.split("\t")[1] if "\t" in rest else ""
        if flag in (" ", "*", "=", "+"):
            return PushResult(True, False, summary)
        racing = any(word in summary for word in
                     ("fetch first", "non-fast-forward", "stale info", "failed to update ref",
                      "failed to lock", "cannot lock ref"))
        return PushResult(False, racing, summary or "rejected")
    err = _last_line(proc.stderr.decode(errors="replace"))
    if proc.returncode == 0:
        return PushResult(True, False, "pushed")
    raise Offline(err or f"git push exited {proc.returncode}")


def _last_line(text: str) -> str:
    """The line of git's stderr that says what went wrong."""
    lines = [l.strip() for l in text.strip().splitlines() if l.strip()]
    for line in lines:
        if line.startswith(("fatal: ", "error: ")):
            return line.split(": ", 1)[1]
    return lines[-1] if lines else ""


# -- replay ---------------------------------------------------------------------------

def pending_commits(registry: Registry, upstream: str | None, tip: str | None) -> list[str]:
    """This clone's commits not yet on the remote, oldest first."""
    if tip is None or tip == upstream:
        return []
    spec = [tip, f"^{upstream}"] if upstream and _exists(registry, upstream) else [tip]
    proc = registry.repo.git("rev-list", "--reverse", "--topo-order", *spec)
    return proc.stdout.decode().split()


def _exists(registry: Registry, oid: str) -> bool:
    found = registry.repo.reader.read(oid)
    return bool(found and found[0] == "commit")


def is_ancestor(registry: Registry, ancestor: str | None, descendant: str | None) -> bool:
    if ancestor is None:
        return True
    if descendant is None:
        return False
    return registry.repo.git("merge-base", "--is-ancestor", ancestor, descendant,
                             check=False).returncode == 0


def replay(registry: Registry, commits: list[str], onto: str | None) -> Replay:
    """Re-apply the operations recorded in *commits* on top of *onto*."""
    state = Replay(onto)
    for commit in commits:
        _, parents, message = registry.repo.commit_info(commit)
        op = parse_op(message)
        if op is None or not registry.knows(op):
            # a hand-made commit, or one from a newer version: carry its changes over
            state.tip = _replay_raw(registry, commit, parents, state.tip, message)
            continue
        note = f"Replayed on {state.tip[:12]}, first made as {commit[:12]}." if state.tip else ""
        subject = message.split("\n", 1)[0]
        try:
            new, result = registry.build(state.tip, op, note)
        except Refused as exc:
            state.refused.append({"op": op.get("op"), "id": op.get("id"),
                                  "session": op.get("session"), "paths": op.get("paths"),
                                  "reason": exc.message, **exc.details})
            state.tip = _resolution(registry, state.tip, op, f"{subject}: refused on replay",
                                    f"{note} {exc.message}")
            continue
        state.results[op.get("id", commit)] = result
        state.tip = new or _resolution(registry, state.tip, op,
                                       f"{subject}: nothing left to do on replay",
                                       f"{note} The remote had already made this change.")
    return state


def _resolution(registry: Registry, tip: str | None, op: dict, subject: str,
                detail: str) -> str | None:
    """A commit that changes nothing and says how a replayed operation was resolved,
    so `git log` shows it.  Its recorded operation is ``resolved``, which replays as a
    no-op: the original is never retried."""
    if tip is None:
        return None
    record = {"op": "resolved", "of": op, "at": registry.clock()}
    message = (f"{subject}\n\n{detail.strip()}\n\nRegistry-Op: resolved\n"
               + (f"Registry-Session: {op['session']}\n" if op.get("session") else "")
               + f"Registry-Data: {json.dumps(record, sort_keys=True)}\n")
    return registry.repo.commit_tree(registry.repo.commit_info(tip)[0], [tip], message,
                                     "agent-registry <agent-registry@localhost>",
                                     int(registry.clock()))


def _replay_raw(registry: Registry, commit: str, parents: list[str], onto: str | None,
                message: str) -> str | None:
    diff = registry.repo.git("diff-tree", "-r", "-z", "--no-renames", "--no-commit-id",
                             *(parents[:1] or ["--root"]), commit).stdout.split(b"\0")
    changes: dict[str, bytes | None] = {}
    for meta, path in zip(diff[0::2], diff[1::2]):
        if not meta:
            continue
        new_oid, status = meta.split()[3].decode(), meta.split()[4].decode()
        changes[path.decode()] = None if status == "D" else registry.repo.read_blob(new_oid)
    base_tree = registry.repo.commit_info(onto)[0] if onto else None
    tree = registry.repo.edit_tree(base_tree, changes)
    if onto and tree == base_tree:
        return onto
    return registry.repo.commit_tree(tree, [onto] if onto else [], message,
                                     "agent-registry <agent-registry@localhost>",
                                     int(registry.clock()))


# -- the mass-deletion guard ----------------------------------------------------------

def _population(registry: Registry, commit: str) -> int:
    """Sessions and wiki entries at *commit*."""
    names = registry.repo.git("ls-tree", "-r", "--name-only", commit, "--",
                              "sessions", "wiki").stdout.decode().split("\n")
    return sum(1 for n in names if n.endswith((".yaml", ".md")))


def _has_gc_marker(registry: Registry, old: str | None, new: str) -> bool:
    spec = [new, f"^{old}"] if old and is_ancestor(registry, old, new) else [new, "-n", "50"]
    log = registry.repo.git("log", "--format=%B%x00", *spec).stdout.decode(errors="replace")
    return any(l.strip() == "Registry-Op: gc" for l in log.splitlines())


def check_adoptable(registry: Registry, local: str | None, previous: str | None,
                    remote: str) -> None:
    """Refuse a remote tip that silently drops most sessions or wiki entries.  The
    common case costs one diff: the files we have that the remote lacks."""
    if local is None or remote in (local, previous):
        return
    missing = registry.repo.git("diff-tree", "-r", "--no-renames", "--name-only",
                                "--diff-filter=D", local, remote, "--", "sessions", "wiki"
                                ).stdout.decode().split()
    if len(missing) < MIN_GUARDED:
        return
    ours, theirs = _population(registry, local), _population(registry, remote)
    if theirs < ours * MASS_DELETION and not _has_gc_marker(registry, previous, remote):
        raise MassDeletion(
            f"{registry.remote}/{registry.branch} has {theirs} sessions and wiki entries where "
            f"this clone has {ours}, and no gc commit explains it: not adopted, local state "
            f"kept. Inspect it (git log {registry.tracking_ref}); if the deletion was a "
            f"mistake, restore the remote with `git push --force-with-lease="
            f"{registry.branch}:{remote} {registry.remote} {registry.branch}`.")


class MassDeletion(RegistryError):
    pass


# -- the synced transaction -----------------------------------------------------------

def _state_path(registry: Registry) -> str:
    return registry.repo.state_path("sync.json")


def _load_state(registry: Registry) -> dict:
    try:
        with open(_state_path(registry)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def _save_state(registry: Registry, **changes) -> dict:
    state = {**_load_state(registry), **changes, "remote": registry.remote}
    os.makedirs(os.path.dirname(_state_path(registry)), exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(_state_path(registry)), prefix="sync.")
    with os.fdopen(fd, "w") as f:
        json.dump(state, f, indent=1)
    os.replace(tmp, _state_path(registry))
    return state


def _record_refused(registry: Registry, refused: list[dict]) -> None:
    if refused:
        old = _load_state(registry).get("refused", [])
        _save_state(registry, refused=(old + [{**r, "at": iso(registry.clock())}
                                              for r in refused])[-50:])


def _move_local(registry: Registry, new: str | None, old: str | None) -> None:
    if new is not None and new != old:
        registry.repo.update_ref(registry.ref, new, old, "agent-registry: sync")


def _rebase(registry: Registry, previous: str | None, remote: str | None) -> Replay:
    """Put this clone's unpushed operations on top of *remote*; moves the local ref."""
    local = registry.repo.read_ref(registry.ref)
    if remote is not None:
        try:
            check_adoptable(registry, local, previous, remote)
        except MassDeletion:  # forget what we fetched, so the next sync checks it again
            if previous:
                registry.repo.git("update-ref", registry.tracking_ref, previous)
            else:
                registry.repo.git("update-ref", "-d", registry.tracking_ref)
            raise
    if local is None or is_ancestor(registry, remote, local):
        state = Replay(local if local is not None else remote)
    else:
        state = replay(registry, pending_commits(registry, previous, local), remote)
    if local is None and state.tip is not None:
        registry.repo.update_ref(registry.ref, state.tip, None, "agent-registry: sync")
    else:
        _move_local(registry, state.tip, local)
    _record_refused(registry, state.refused)
    return state


def apply_synced(registry: Registry, op: dict, deadline: float = DEFAULT_DEADLINE) -> dict:
    """Apply *op* and get it confirmed by the remote (caller holds the flock)."""
    try:
        previous = registry.repo.read_ref(registry.tracking_ref)
        _rebase(registry, previous, fetch(registry))
    except Offline as exc:
        _save_state(registry, last_error=str(exc), last_attempt=iso(registry.clock()))
        result = registry.apply_locally(op)
        return _unconfirmed(registry, op, result, str(exc))
    except MassDeletion as exc:
        result = registry.apply_locally(op)
        _save_state(registry, last_error=exc.message, last_attempt=iso(registry.clock()))
        return _unconfirmed(registry, op, result, exc.message)
    result = registry.apply_locally(op)
    outcome = publish(registry, deadline, watch=op.get("id"))
    if outcome.get("dropped"):
        dropped = outcome["dropped"]
        raise Refused(dropped["reason"], details={k: v for k, v in dropped.items()
                                                  if k not in ("reason",)})
    result = outcome.get("result") or result
    if not outcome["pushed"]:
        return _unconfirmed(registry, op, result, outcome["error"])
    return result


def _unconfirmed(registry: Registry, op: dict, result: dict, why: str) -> dict:
    if op["op"] != "claim":
        return result  # kept locally; pushed by the next successful sync
    raise Unconfirmed(
        f"claimed locally, not confirmed by {registry.remote} ({why}); run "
        f"`agent-registry sync` once {registry.remote} is reachable: it confirms or refuses "
        f"the claim. Until then another machine may hold the same path.",
        details={"confirmed": False, **result})


def publish(registry: Registry, deadline: float = DEFAULT_DEADLINE,
            watch: str | None = None) -> dict:
    """Push the local tip; on a lost race fetch, replay and retry until *deadline*.
    *watch* is the id of an operation whose fate the caller wants to know: its
    replayed result, or the refusal that dropped it."""
    start, attempt = time.monotonic(), 0
    outcome: dict = {}
    while True:
        tip = registry.repo.read_ref(registry.ref)
        remote_before = registry.repo.read_ref(registry.tracking_ref)
        if tip is None or tip == remote_before:
            _save_state(registry, last_success=iso(registry.clock()), last_error=None)
            return {**outcome, "pushed": True, "tip": tip}
        try:
            pushed = push(registry, tip)
        except Offline as exc:
            _save_state(registry, last_error=str(exc), last_attempt=iso(registry.clock()))
            return {**outcome, "pushed": False, "error": str(exc)}
        if pushed.ok:
            registry.repo.git("update-ref", registry.tracking_ref, tip)
            _save_state(registry, last_success=iso(registry.clock()), last_error=None,
                        last_push_attempts=attempt + 1)
            return {**outcome, "pushed": True, "tip": tip, "attempts": attempt + 1}
        if not pushed.retry or time.monotonic() - start > deadline:
            error = f"push rejected by {registry.remote}: {pushed.reason}"
            _save_state(registry, last_error=error, last_attempt=iso(registry.clock()))
            return {**outcome, "pushed": False, "error": error}
        attempt += 1
        # full jitter: losers spread out instead of stampeding the remote together
        time.sleep(random.uniform(0, min(BACKOFF_CAP, BACKOFF_BASE * 2 ** attempt)))
        try:
            state = _rebase(registry, remote_before, fetch(registry))
        except Offline as exc:
            _save_state(registry, last_error=str(exc), last_attempt=iso(registry.clock()))
            return {**outcome, "pushed": False, "error": str(exc)}
        except CasFailed:
            continue
        if watch:
            dropped = next((r for r in state.refused if r.get("id") == watch), None)
            if dropped:
                outcome = {"dropped": dropped}
            elif watch in state.results:
                outcome = {"result": state.results[watch]}


def sync(registry: Registry, deadline: float = DEFAULT_DEADLINE) -> dict:
    """Fetch, replay and push by hand.  Reports each pending claim as confirmed or
    refused, as the remote decided."""
    if not registry.remote:
        raise RegistryError("sync is off: no remote (set `git config agent-registry.remote NAME`)")
    with file_lock(registry.lock_file):
        previous = registry.repo.read_ref(registry.tracking_ref)
        pending = [parse_op(registry.repo.commit_info(c)[2]) or {} for c in
                   pending_commits(registry, previous, registry.repo.read_ref(registry.ref))]
        claims = {op["id"]: op for op in pending if op.get("op") == "claim" and op.get("id")}
        try:
            state = _rebase(registry, previous, fetch(registry))
        except Offline as exc:
            _save_state(registry, last_error=str(exc), last_attempt=iso(registry.clock()))
            raise Unconfirmed(f"{registry.remote} is unreachable ({exc}); "
                              f"{len(pending)} operation(s) wait to be pushed",
                              details={"pending": len(pending)}) from None
        except MassDeletion as exc:
            _save_state(registry, last_error=exc.message, last_attempt=iso(registry.clock()))
            raise
        outcome = publish(registry, deadline)
        refused_ids = {r.get("id") for r in state.refused}
        report = {"remote": registry.remote, "pushed": outcome["pushed"],
                  "error": outcome.get("error"), "tip": registry.repo.read_ref(registry.ref),
                  "pending": len(pending), "refused": state.refused,
                  "confirmed": [{"session": op.get("session"), "paths": op.get("paths")}
                                for i, op in claims.items()
                                if i not in refused_ids and outcome["pushed"]]}
        return report


def sync_state(registry: Registry) -> dict:
    """The sync line: remote, ahead/behind, last success, last error."""
    state = _load_state(registry)
    local = registry.repo.read_ref(registry.ref)
    remote = registry.repo.read_ref(registry.tracking_ref)
    ahead = behind = 0
    if local and remote and local != remote:
        counts = registry.repo.git("rev-list", "--left-right", "--count",
                                   f"{local}...{remote}", check=False).stdout.split()
        if len(counts) == 2:
            ahead, behind = int(counts[0]), int(counts[1])
    elif local and not remote:
        ahead = len(pending_commits(registry, None, local))
    return {"enabled": True, "remote": registry.remote, "ahead": ahead, "behind": behind,
            "last_success": state.get("last_success"), "last_error": state.get("last_error"),
            "refused": state.get("refused", [])[-5:]}


def unconfirmed_claims(registry: Registry) -> set[tuple[str, str]]:
    """(session, path) of claims committed here but not yet on the remote."""
    if not registry.remote:
        return set()
    out = set()
    for commit in pending_commits(registry, registry.repo.read_ref(registry.tracking_ref),
                                  registry.repo.read_ref(registry.ref)):
        op = parse_op(registry.repo.commit_info(commit)[2]) or {}
        if op.get("op") == "claim":
            out.update((op["session"], p) for p in op.get("paths", []))
    return out


# -- reading a remote without a clone -------------------------------------------------

def remote_snapshot(url: str, branch: str = "agent-registry") -> dict:
    """Sessions and locks straight from *url*, fetched into a temporary object store."""
    if url.startswith("-"):  # would be read as an option by git
        raise BadInput(f"invalid remote URL {url!r}")
    with tempfile.TemporaryDirectory(prefix="agent-registry-remote-") as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") or
               k.startswith(("GIT_CONFIG", "GIT_SSH", "GIT_ASKPASS", "GIT_TERMINAL"))}
        subprocess.run(["git", "init", "--bare", "-q", tmp], env=env, check=True)
        proc = subprocess.run(
            ["git", "--git-dir", tmp, "fetch", "--quiet", "--depth", "1", "--no-tags", url,
             f"+refs/heads/{branch}:refs/heads/{branch}"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=NETWORK_TIMEOUT)
        if proc.returncode != 0:
            raise NotFound(f"cannot read {branch} from {url}: "
                           f"{_last_line(proc.stderr.decode(errors='replace'))}")
        with Registry.open(tmp, branch=branch, config={}) as registry:
            sessions = registry.sessions()
            return {"remote": url, "tip": registry.repo.read_ref(registry.ref),
                    "sessions": [s.to_dict() for s in sessions], "locks": registry.locks()}
