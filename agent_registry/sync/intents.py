"""Helping: a clone that keeps losing the push race gets its operations carried by the
clones that win it (issue 11; docs/design.md, "Fairness").

Random retries do not bound the wait of a clone whose fetch-replay-push cycle is slower
than the others': it can lose the fast-forward race again and again.  So after
``remote.LOSSES`` lost pushes in a row a clone publishes its pending operations as an *intent*:
its local branch tip, wrapped in a commit naming the clone, a sequence number and the
confirmed tip it is based on, force-pushed to ``refs/heads/<branch>-intents/<clone>``
(a ref only that clone writes: one attempt, no race).  Every writer fetches the intents
with the branch and, before its own operations, applies each unsettled intent's
operations on the fetched tip, re-validated by their handlers like any replay, then
records the intent as settled in ``intents/<clone>.json`` on the branch: the sequence
number and, per operation id, ``"applied"`` or the reason it was refused.  The record is
written under the branch's compare-and-swap like everything else, so an intent is
settled once: whoever lands first (a helper, or the clone itself, which writes the same
record when it pushes its own operations while an intent is out) makes every later
attempt a no-op, and each clone skips the operations its record names.  A helped
clone's operations are then confirmed by the next push that lands, whoever makes it;
each push carries every published intent, so one push confirms many operations.

Commits made for another clone carry ``Registry-Helped: <clone> #<seq>``; a helper whose
own push is lost drops them from its pending operations and helps again on the new tip
(never replaying another clone's operations as its own).
"""
from __future__ import annotations

import os

from ..store import freshness, jsontext
from ..store.rawfile import read_bytes
from ..branch.trailers import TRAILER, parse_op
from ..branch.view import View
from ..core.operations import Outcome, operation
from ..core.registry import Registry
from ..core.shapes import COUNT, MAPPING, TEXT
from ..errors import RegistryError
from .replay import (APPLIED, HELPED, Replay, is_ancestor, landed_since, load_operation,
                     own_commits, replay)
from .state import load_state, save_state, state_key

RECORDS = "intents/"  # intents/<clone>.json: the last intent of that clone settled, per op id
HEXDIGITS = "0123456789abcdef"  # of an object id as git writes it
INTENT = "Intent"  # trailer of an intent's wrapper commit: {"clone", "seq", "base"}


def intent_ref(branch: str, clone: str) -> str:
    """Where *clone* publishes its intent: a branch beside the registry's (a forge lists it)."""
    return f"refs/heads/{branch}-intents/{clone}"


def tracking_prefix(registry: Registry) -> str:
    """Where a fetch puts the other clones' intents."""
    return f"refs/remotes/{registry.remote}/{registry.branch}-intents/"


def fetch_refspec(registry: Registry) -> str:
    """What a fetch adds to bring the intents with the branch."""
    return f"+refs/heads/{registry.branch}-intents/*:{tracking_prefix(registry)}*"


def record_path(clone: str) -> str:
    return f"{RECORDS}{clone}.json"


def settled(view: View, clone: str) -> dict:
    """The record of *clone*'s last settled intent at *view*: ``{"seq": n, "handled":
    {id: "applied" | reason}}``; seq 0 when there is none.  An unreadable record counts as
    settled for ever (an infinite seq): helping again could apply an operation twice, so
    no helper touches that clone's intents (fail closed), and the clone, knowing nothing
    was handled for it, replays its own."""
    raw = view.read(record_path(clone))
    if raw is None:
        return {"seq": 0, "handled": {}}
    try:
        data = jsontext.loads(raw)
        if isinstance(data.get("seq"), int) and isinstance(data.get("handled"), dict):
            return data
    except (ValueError, AttributeError):
        pass
    view.warn(f"{record_path(clone)}: unreadable intent record; no clone helps {clone}")
    return {"seq": float("inf"), "handled": {}}


@operation("intents", {"clone": TEXT, "seq": COUNT, "handled": MAPPING})
def _op_intents(registry: Registry, view: View, op: dict) -> Outcome:
    """Record *clone*'s intent number *seq* as settled (a later or equal one already
    recorded wins: settling is idempotent)."""
    result = {"clone": op["clone"], "seq": op["seq"], "handled": op["handled"]}
    if settled(view, op["clone"])["seq"] >= op["seq"]:
        return Outcome(result, None)
    view.write(record_path(op["clone"]), (jsontext.dumps(result, indent=1, sort_keys=True)
                                         + "\n").encode())
    applied = sum(1 for v in op["handled"].values() if v == APPLIED)
    return Outcome(result, f"intent #{op['seq']} of clone {op['clone']} settled: "
                           f"{applied} applied, {len(op['handled']) - applied} refused")


def new_clone_id() -> str:
    return os.urandom(6).hex()


def intent_meta(message: str) -> dict | None:
    for line in message.splitlines():
        if line.startswith(f"{TRAILER}{INTENT}: "):
            try:
                meta = jsontext.loads(line.split(": ", 1)[1])
            except ValueError:
                return None
            if isinstance(meta, dict) and isinstance(meta.get("clone"), str) \
                    and isinstance(meta.get("seq"), int) and isinstance(meta.get("base"), str):
                return meta
    return None


def wrap(registry: Registry, tip: str, clone: str, seq: int, base: str, count: int) -> str:
    """The intent commit: *tip* (the pending operations, based on *base*) with a parent
    of nothing new, a message naming the clone and the sequence number."""
    meta = jsontext.dumps({"clone": clone, "seq": seq, "base": base}, sort_keys=True)
    message = (f"intent #{seq} of clone {clone}: {count} pending operation(s)\n\n"
               f"{TRAILER}{INTENT}: {meta}\n")
    return registry.repo.commit_tree(registry.repo.commit_info(tip)[0], [tip], message,
                                     "agent-registry <agent-registry@localhost>",
                                     int(registry.clock()))


def published(registry: Registry, own: str | None) -> list[tuple[str, dict, str]]:
    """Other clones' intents as last fetched: (clone, meta, tip of its operations),
    oldest first (an intent that waited longer is helped first)."""
    prefix = tracking_prefix(registry)
    out = registry.repo.git("for-each-ref", "--sort=committerdate",
                            "--format=%(refname) %(objectname)", prefix).stdout.decode()
    found = []
    for line in out.splitlines():
        ref, oid = line.split()
        clone = ref[len(prefix):]
        if clone == own:
            continue
        _, parents, message = registry.repo.commit_info(oid)
        meta = intent_meta(message)
        if meta and meta["clone"] == clone and parents:
            found.append((clone, meta, parents[0]))
    return found


def any_fetched(registry: Registry) -> bool:
    """Whether another clone's intent on *registry*'s branch may have been fetched."""
    return _any_under(registry, tracking_prefix(registry))


def _any_under(registry: Registry, prefix: str) -> bool:
    """Whether any ref may exist under *prefix*, without a process: its loose folder, or
    a mention in packed-refs (most rebases, with no intent out, stop here).  A repository
    whose refs are not files (reftable) is asked through git."""
    if registry.repo.ref_format != "files":
        return bool(registry.repo.refs_in(prefix))
    common = registry.repo.info.common_dir
    if os.path.isdir(os.path.join(common, prefix)):
        return True
    try:
        return prefix.encode() in read_bytes(os.path.join(common, "packed-refs"))
    except OSError:
        return False


# -- the helpers learning of an intent --------------------------------------------------

def push_trace(registry: Registry) -> str:
    """Where a push writes git's packet trace (GIT_TRACE_PACKET): the refs the remote
    advertised to it, read by ``note_advertised``."""
    return registry.repo.state_path(f"push-{os.getpid()}-{os.urandom(4).hex()}.trace")


def note_advertised(registry: Registry, trace: str) -> bool:
    """After a push: when the remote advertised an intent of another clone on this
    branch that this clone's fetches have not brought (new, or republished), owe a
    fetch, so the next claim fetches and carries it instead of deciding on its own tip
    (sync/remote._decided_here); whether it did (a push that landed carries it at once:
    sync/remote.carry_now).  Without this, a clone claiming back to back learns of
    an intent only when FRESH runs out, and the clone that published it, losing the race
    to those very claims, waits that long.  The trace is git's, read line by line; a
    transport that does not trace the advertisement owes nothing (FRESH still bounds).
    It runs after every push, whatever came of it, so it never raises: a tracking ref it
    cannot read owes a fetch (the fetch then says what is wrong), and the push's own
    outcome stands."""
    try:
        with open(trace, encoding="utf-8", errors="replace") as f:
            text = f.read()
        os.unlink(trace)
    except OSError:
        return False
    prefix, tracking = f"refs/heads/{registry.branch}-intents/", tracking_prefix(registry)
    own = None
    for line in text.splitlines():
        fields = _advertised(line)
        if fields is None or not fields[1].startswith(prefix):
            continue
        clone = fields[1][len(prefix):]
        own = own or load_state(registry).get("clone_id") or ""
        try:
            known = registry.repo.read_ref(tracking + clone)
        except (OSError, RegistryError):
            known = None  # cannot tell what this clone has of it: fetch and see
        if clone != own and known != fields[0]:
            owe_fetch(registry)
            return True
    return False


def _advertised(line: str) -> tuple[str, str] | None:
    """(object id, ref) of a line of the packet trace that is one ref the remote
    advertised, else None.  Whoever read it names the line: ``push<`` over a path, ssh
    or git://, ``git<`` over smart HTTP(S), where git-remote-https reads the refs (and
    hands them to push again, traced twice); only an ``<oid> <ref>`` packet is one."""
    _, traced, rest = line.partition(" packet: ")
    who, read, packet = rest.lstrip().partition("< ")
    if not traced or not read or who not in ("push", "git"):
        return None
    fields = packet.split("\0", 1)[0].split()
    if len(fields) != 2 or len(fields[0]) not in (40, 64) or fields[0].strip(HEXDIGITS):
        return None
    return fields[0], fields[1]


def owe_fetch(registry: Registry) -> None:
    """Make the next claim on this branch fetch first (and carry what it finds): an
    intent is out there that this clone knows of and did not carry."""
    try:
        with open(_owed(registry), "w"):
            pass
    except OSError:
        pass  # no mark: the claims fetch when FRESH runs out, as before


def fetch_owed(registry: Registry) -> bool:
    """Whether a push saw an intent to carry here that no fetch has brought since."""
    return os.path.exists(_owed(registry))


def fetch_paid(registry: Registry) -> None:
    """A fetch of the branch landed: it brought every intent published before it."""
    try:
        os.unlink(_owed(registry))
    except OSError:
        pass


def _owed(registry: Registry) -> str:
    return freshness.mark_path(registry.repo.info.common_dir, registry.branch) + ".intent"


# -- the helped clone ------------------------------------------------------------------

def own_ops(registry: Registry, base: str, tip: str) -> list[dict]:
    ops = [parse_op(registry.repo.commit_info(c)[2]) for c in own_commits(registry, base, tip)]
    return [op for op in ops if op and op.get("op") != "resolved" and op.get("id")]


def settle_own(registry: Registry, onto: str | None, state: Replay) -> None:
    """After this clone replayed its pending operations on *onto*: when an intent of ours
    is out and not yet settled there, record it settled (with what our replay decided)
    on the new tip, so no helper applies those operations again; once settled on the
    remote, forget it.  *state*'s tip moves; its refusals gain those a helper decided."""
    saved = load_state(registry)
    key, clone = state_key(registry), saved.get("clone_id")
    out = saved.get("intents", {}).get(key)
    if not out or not clone or onto is None:
        return
    record = settled(View(registry.repo, onto), clone)
    if record["seq"] >= out["seq"]:
        save_state(registry, intents={k: v for k, v in saved.get("intents", {}).items()
                                      if k != key})
        return
    refused = {r.get("id"): r.get("reason", "refused") for r in state.refused}
    handled = {i: record["handled"].get(i) or refused.get(i) or APPLIED for i in out["ids"]}
    op = registry.new_op("intents", clone=clone, seq=out["seq"], handled=handled)
    state.tip = registry.build(state.tip, op)[0] or state.tip


def carried(registry: Registry, onto: str | None) -> bool:
    """Whether the intent this clone has out on *registry*'s branch is settled at *onto*
    (a helper applied or refused its operations there); True when none is out or it
    cannot tell: the caller then replays, which finds out."""
    saved = load_state(registry)
    out, clone = saved.get("intents", {}).get(state_key(registry)), saved.get("clone_id")
    if not out or not clone or onto is None:
        return True
    return settled(View(registry.repo, onto), clone)["seq"] >= out["seq"]


# -- the helpers -----------------------------------------------------------------------

def unsettled(registry: Registry, onto: str | None) -> list[tuple[str, dict, str, dict]]:
    """The intents of other clones, as last fetched, that *onto* has not settled and can
    be applied on it: (clone, meta, tip of its operations, its record at *onto*)."""
    if onto is None or not _any_under(registry, tracking_prefix(registry)):
        return []  # no intent was ever fetched: what nearly every rebase finds
    own = load_state(registry).get("clone_id")
    view = View(registry.repo, onto)
    found = []
    for clone, meta, tip in published(registry, own):
        record = settled(view, clone)
        # an intent based on a history *onto* does not hold (rewritten by gc, rewound):
        # its clone replays its own operations
        if record["seq"] < meta["seq"] and is_ancestor(registry, meta["base"], onto):
            found.append((clone, meta, tip, record))
    return found


def help_others(registry: Registry, onto: str | None,
                intents: list[tuple[str, dict, str, dict]]) -> str | None:
    """Apply each unsettled intent on *onto*, oldest first, and record it settled; the
    new tip.  An intent holding an operation this version cannot apply (a newer tool's,
    a hand-made commit) is left to its clone, whole: it must be applied in order."""
    tip = onto
    for clone, meta, intent_tip, record in intents:
        commits = own_commits(registry, meta["base"], intent_tip)  # the clone's own
        ops = [parse_op(registry.repo.commit_info(c)[2]) for c in commits]
        for op in ops:
            load_operation(op)
        if not ops or any(op is None or not registry.knows(op) for op in ops):
            continue
        marker = (f"{HELPED}: {clone} #{meta['seq']}",)
        # decided already: by a record, or in the history helped on since the intent
        # forked from its base: landed after the base (a push of the clone made from a
        # tip older than its intent, by another process), or held by the base itself
        # while the intent carries a copy another process of the clone rebuilt on an
        # older remote tip
        fork = registry.repo.git("merge-base", meta["base"], intent_tip,
                                 check=False).stdout.decode().strip()
        known = {**dict.fromkeys(landed_since(registry, onto, fork or None), APPLIED),
                 **record["handled"]}
        done = replay(registry, commits, tip, extra=marker, handled=known)
        refused = {r.get("id"): r.get("reason", "refused") for r in done.refused}
        handled = {op["id"]: known.get(op["id"]) or refused.get(op["id"]) or APPLIED
                   for op in ops if op.get("op") != "resolved" and op.get("id")}
        settle = registry.new_op("intents", clone=clone, seq=meta["seq"], handled=handled)
        tip = registry.build(done.tip, settle, extra=marker)[0] or done.tip
    return tip
