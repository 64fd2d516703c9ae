"""The remote going back in time: a force-push of the registry branch or a lock shard to
an older state (a person restoring a backup, ``git push --force --all`` from a stale
clone), which drops claims that were confirmed.

Any clone that saw the lost state puts it back, not only the clones whose claims it held:

1. A fetch never moves a tracking ref of the main branch or of a lock shard back by
   itself (its refspecs have no ``+``).  When git refuses one, sync/remote.py fetches
   the remote's tips into ``refs/agent-registry/incoming/…`` and :func:`settle` keeps
   what each rewound ref held: the branch's local ref is moved to the lost tip when it
   has nothing of its own beyond it (reads then see the lost claims: fail closed), the
   lost tip becomes the confirmed tip, and only then does the tracking ref move.  A
   local ref with pending commits of its own on an older tip keeps them: the lost tip
   is recorded (``lost_tips``) and that branch rebased at once, as in 2.
2. The next rebase of that branch (a claim, a fresh read, `sync`) finds the confirmed
   tip no longer in the remote's history (:func:`rewound`) and re-applies every live
   session and lock of the lost tip on the remote's new tip (:func:`reapply`), each
   refused only where another session took the path meanwhile, or where its holder let
   it go on the rewound remote.  A remote that only went back takes the clone's next push
   as a fast-forward, the lost commits with it.

A ``gc`` commit that rewrote a history holding the lost tip explains the rewrite, and
nothing is kept or re-applied.
"""
from __future__ import annotations

import os

from ..branch.records import Holder, Lock, Session, iso
from ..branch.trailers import parse_op
from ..branch.view import View
from ..core.conflicts import describe_conflicts
from ..core.operations import Outcome, operation
from ..core.registry import Registry
from .replay import commit_exists, is_ancestor
from .state import confirm, confirmed_tip, load_state, save_state, state_key

RESTORE_OP = "restore"
INCOMING = "refs/agent-registry/incoming/"  # where a fetch that met a rewind puts the tips


def gc_explains(registry: Registry, confirmed: str | None, remote: str) -> bool:
    """Whether a ``gc`` commit on *remote* (not in *confirmed*'s history; without it, in
    the last 50 commits) rewrote a history that held *confirmed*: then the state we
    confirmed is all there, squashed, and what is missing since was removed by later
    operations, not by a rewind or a wipe."""
    spec = ["--not", confirmed] if confirmed and commit_exists(registry, confirmed) else ["-n", "50"]
    found = registry.repo.git("log", "--format=%B%x00", "--grep=^Registry-Op: gc$", remote,
                              *spec).stdout.decode(errors="replace")
    for message in filter(str.strip, found.split("\0")):
        rewrote = (parse_op(message) or {}).get("rewrote")
        if not (confirmed and rewrote and commit_exists(registry, rewrote)) or \
                is_ancestor(registry, confirmed, rewrote):
            return True  # a rewritten tip we never fetched came after what we confirmed
    return False


def rewound(registry: Registry, tip: str | None, remote: str) -> bool:
    """*tip* (the confirmed tip, a lost one) vanished from the remote's history, and gc
    does not explain it."""
    return bool(tip and tip != remote and commit_exists(registry, tip)
                and not is_ancestor(registry, tip, remote)
                and not gc_explains(registry, tip, remote))


# -- a fetch that met a rewind ---------------------------------------------------------

def incoming(tracking: str) -> str:
    """Where the remote's tip of *tracking* (``refs/remotes/R/X``) is fetched to when a
    plain fetch refused to move it back."""
    return INCOMING + tracking.removeprefix("refs/remotes/")


def settle(registry: Registry, parts: dict[str, Registry]) -> tuple[list[str], list[Registry]]:
    """Move each tracking ref of *parts* (tracking ref -> its branch's registry) to the
    tip fetched into :func:`incoming`, keeping first what a rewound one held (caller
    holds the flock): the branches found rewound, and those of them to rebase now."""
    repo, found, rebase = registry.repo, [], []
    for tracking, part in parts.items():
        new = repo.read_ref(incoming(tracking))
        if new is None:
            continue
        old = repo.read_ref(tracking)
        if old not in (None, new) and rewound(part, old, new):
            found.append(part.branch)
            if not _keep(part, old):
                rebase.append(part)
        if old != new:
            repo.git("update-ref", "-m", "agent-registry: fetch", tracking, new, old or "",
                     check=False)  # moved meanwhile by another process: it settled it
        repo.git("update-ref", "-d", incoming(tracking), new, check=False)
    return found, rebase


def _keep(part: Registry, lost: str) -> bool:
    """Keep *lost*, a tip the remote dropped, as what this clone reads of *part* until its
    next rebase re-applies it.  False: the local ref holds commits of its own on an older
    tip; the lost tip is recorded, and the branch must be rebased now to be read whole."""
    repo, local = part.repo, part.repo.read_ref(part.ref)
    if local is None or local == lost or is_ancestor(part, local, lost):
        if local != lost:
            repo.update_ref(part.ref, lost, local, "agent-registry: keep what the remote lost")
        confirm(part, lost)
        return True
    if is_ancestor(part, lost, local):
        confirmed = confirmed_tip(part)
        if confirmed is None or is_ancestor(part, confirmed, lost):
            confirm(part, lost)  # the commits after it are this clone's own
        return True
    tips = load_state(part).get("lost_tips", {})
    key = state_key(part)
    save_state(part, lost_tips={**tips, key: [*tips.get(key, []), lost][-8:]})
    return False


def lost_tips(registry: Registry) -> list[str]:
    """The tips :func:`_keep` recorded for *registry*'s branch."""
    return list(load_state(registry).get("lost_tips", {}).get(state_key(registry), []))


def forget_lost_tips(registry: Registry) -> dict:
    """The sync state's change that drops *registry*'s recorded lost tips."""
    tips = dict(load_state(registry).get("lost_tips", {}))
    return {"lost_tips": tips} if tips.pop(state_key(registry), None) is not None else {}


# -- putting it back -------------------------------------------------------------------

def local_sessions(registry: Registry, view: View) -> list:
    """The live sessions of *view* that live in this clone (this host, one of its
    worktrees)."""
    ours = _our_worktrees(registry)
    return [s for s in view.live_sessions() if s.host == registry.host
            and os.path.realpath(s.project or "/") in ours]


def _our_worktrees(registry: Registry) -> set[str]:
    """Where sessions of this clone live (their ``project``): each worktree, or the
    git dir of a bare repository."""
    out = registry.repo.git("worktree", "list", "--porcelain", check=False).stdout.decode()
    places = {line[9:] for line in out.splitlines() if line.startswith("worktree ")}
    places |= {registry.repo.info.git_dir, registry.repo.info.common_dir}
    return {os.path.realpath(p) for p in places}



def restore_ops(registry: Registry, lost: str, onto: str) -> list[dict]:
    """One ``restore`` operation per live session at *lost*, with the locks it held there
    (its generation tokens and claim times kept), but for the paths its holder let go on
    *onto* since.  Read as the registry's operations read that tip: a lock shard's
    sessions are those its held lists name, with their records from the main branch."""
    view, let_go = registry.view_at(lost), _let_go(registry, lost, onto)
    ops = []
    for session in view.live_sessions():
        locks = []
        for target in session.locks:
            lock = view.lock(target)
            holder = lock.holder(session.id) if lock else None
            if holder is not None and not let_go & {(session.id, target), ("*", target)}:
                locks.append({"path": target, "mode": lock.mode, **holder.to_dict()})
        ops.append(registry.new_op(RESTORE_OP, session=session.id, record=session.to_dict(),
                                   locks=locks, confirmed=lost))
    return ops


def _let_go(registry: Registry, lost: str, onto: str) -> set[tuple[str, str]]:
    """(session, path) released on *onto* since it parted from *lost* (session ``*``: a
    force-release, of every holder): a lock let go on the rewound remote is not brought
    back."""
    out = registry.repo.git("log", "--format=%B%x00", onto, "--not", lost).stdout.decode(
        errors="replace")
    gone: set[tuple[str, str]] = set()
    for op in filter(None, (parse_op(m) for m in out.split("\0") if m.strip())):
        if op.get("op") == "release":
            gone |= {(op.get("session"), p) for p in op.get("paths") or []}
        elif op.get("op") == "force-release":
            gone.add(("*", op.get("path")))
    return gone


@operation(RESTORE_OP)
def _op_restore(registry: Registry, view: View, op: dict) -> Outcome:
    """Re-apply a session and its locks that the remote lost by going back in time.
    Each lock is refused only where another live session holds the path now; a session
    that ended on the remote is not brought back."""
    sid, at, record = op["session"], op["at"], op["record"]
    ended = view.done_session(sid)
    if ended is not None:
        return Outcome({"session": sid, "reapplied": [], "refused": [
            {"session": sid, "path": None, "owner": None,
             "reason": f"session {sid} is {ended.status} on the remote"}]}, None)
    session, reapplied, refused = view.session(sid, strict=False), [], []
    saved = Session.from_dict({**record, "locks": []})
    if session is None or session.heartbeat_ts() < saved.heartbeat_ts():
        saved.locks = session.locks if session else []
        session = saved
        reapplied.append({"session": sid, "path": None})
    for held in op["locks"]:
        path, mode = held["path"], held["mode"]
        lock = view.lock(path) or Lock(path, mode)
        if lock.holder(sid) is None:
            conflicts = registry.conflicts(view, sid, path, mode, at)
            if conflicts:
                refused.append({"session": sid, "path": path, "owner": conflicts[0]["owner"],
                                "reason": describe_conflicts(conflicts)})
                continue
            stale = [h for h in lock.holders if registry.judge(view, h, at) is not None]
            for holder in stale:
                registry.forget(view, holder.session, path)
            lock.holders = [h for h in lock.holders if h not in stale]
            lock.holders.append(Holder(sid, held["generation"], held["acquired_at"], held["ttl"]))
            lock.mode = mode
            view.put_lock(lock)
            reapplied.append({"session": sid, "path": path})
        if path not in session.locks:
            session.locks.append(path)
    if reapplied:
        view.put_session(session)
    paths = [r["path"] for r in reapplied if r["path"]]
    subject = (f"re-apply {sid}" + (f" and {', '.join(paths)}" if paths else "")
               + " lost when the remote went back in time")
    return Outcome({"session": sid, "reapplied": reapplied, "refused": refused},
                   subject if reapplied else None)


def reapply(registry: Registry, lost: list[str], onto: str) -> tuple[str, dict]:
    """Re-apply the live sessions and locks of each tip in *lost* on *onto*."""
    tip, reapplied, refused = onto, [], []
    for source in dict.fromkeys(lost):
        ours = {s.id for s in local_sessions(registry, registry.view_at(source))}
        for op in restore_ops(registry, source, onto):
            commit, result = registry.build(tip, op)
            tip = commit or tip
            reapplied += [r for r in result["reapplied"] if r not in reapplied]
            # another clone's session that ended on the remote was ended by its owner
            refused += [r for r in result["refused"] if r not in refused
                        and (r["path"] or r["session"] in ours)]
    return tip, {"from": lost[-1], "to": onto, "at": iso(registry.clock()),
                 "reapplied": reapplied, "refused": refused}


def rewind_lines(rewind: dict) -> list[str]:
    """What `sync`, a claim's stderr and `status` say about a rewind."""
    lines = [f"the remote went back in time ({rewind['from'][:12]} is no longer in its "
             f"history; now {rewind['to'][:12]}): re-applied the sessions and locks this "
             f"clone had seen there"]
    for r in rewind["reapplied"]:
        lines.append(f"re-applied: {r['path']} by {r['session']}" if r["path"]
                     else f"re-applied: session {r['session']}")
    lines += [f"not re-applied: {r['path'] or 'session ' + r['session']}: {r['reason']}"
              for r in rewind["refused"]]
    return lines
