"""Replaying operations: a clone's pending commits re-applied, each by its own handler
and re-validated, on a tip the remote moved (docs/design.md, "Concurrency").  What sync,
its helping (sync/intents.py) and gc share."""
from __future__ import annotations

from ..branch.trailers import TRAILER, parse_op, trailers
from ..core.registry import Registry
from ..errors import BadInput, Refused

HELPED = "Helped"  # trailer of a commit a clone made for another (sync/intents.py)
APPLIED = "applied"  # an intent record's word for an operation a helper applied


class Replay:
    """Where a replay ended (*tip*), and what it met on the way (a plain class: every
    claim through a remote imports this module, and dataclasses costs it ~5 ms)."""

    def __init__(self, tip: str | None) -> None:
        self.tip = tip
        self.refused: list[dict] = []  # ops dropped by re-validation
        self.results: dict[str, dict] = {}  # op id -> replayed result
        self.rewind: dict | None = None  # the remote went back in time: what was re-applied



def is_ours(message: str) -> bool:
    """Whether a pending commit is this clone's own operation to replay: not one made for
    another clone, and not an intent record (both are made anew on each rebase)."""
    if f"\n{TRAILER}{HELPED}: " in message:
        return False
    op = parse_op(message)
    return not (op and op.get("op") == "intents")


def pending_commits(registry: Registry, upstream: str | None, tip: str | None,
                    landed: str | None = None) -> list[str]:
    """This clone's commits not yet on the remote, oldest first: after *upstream* (the
    confirmed tip) and, when given, not in *landed*'s history (the fetched remote tip: a
    commit another process of this clone pushed, or a push that landed after its client
    gave up, is there already and must not be applied twice)."""
    if tip is None or tip == upstream:
        return []
    if landed in (None, upstream) and upstream:
        line = _line(registry, upstream, tip)
        if line is not None:
            return line
    spec = [tip, f"^{upstream}"] if upstream and commit_exists(registry, upstream) else [tip]
    if landed and landed != upstream:
        spec.append(f"^{landed}")
    proc = registry.repo.git("rev-list", "--reverse", "--topo-order", *spec)
    return proc.stdout.decode().split()


WALK = 32  # commits a walk through the open cat-file follows before it asks git


def _line(registry: Registry, upstream: str, tip: str) -> list[str] | None:
    """*tip*'s commits after *upstream*, oldest first, when *tip* descends from it by a
    line of single-parent commits (a clone's own operations, which every claim checks
    for before it pushes): read through the open ``cat-file``, so no ``rev-list``
    process.  None (ask git) at a merge, a root, or after WALK commits."""
    out, commit = [], tip
    while commit != upstream:
        if len(out) == WALK or not commit_exists(registry, commit):
            return None
        parents = registry.repo.commit_info(commit)[1]
        if len(parents) != 1:
            return None
        out.append(commit)
        commit = parents[0]
    return out[::-1]


def commit_exists(registry: Registry, oid: str) -> bool:
    found = registry.repo.reader.read(oid)
    return bool(found and found[0] == "commit")


def landed_since(registry: Registry, tip: str | None, *before: str | None) -> set[str]:
    """The ids of the operations decided in *tip*'s history and not in any of *before*'s:
    applied, or resolved by a replay (refused, or nothing left to do).  What a replay
    skips, so an operation that reached the remote by another path (another process's
    push, a helper, a push that landed after a timeout) is applied once."""
    if tip is None:
        return set()
    bases = [f"^{b}" for b in before if b and commit_exists(registry, b)]
    out = registry.repo.git("log", "--format=%B%x00", tip, *bases).stdout.decode(
        errors="replace")
    ops = [parse_op(message) for message in out.split("\0")]
    ops += [op["of"] for op in ops if op and op.get("op") == "resolved"
            and isinstance(op.get("of"), dict)]
    return {op["id"] for op in ops if op and isinstance(op.get("id"), str)}


def is_ancestor(registry: Registry, ancestor: str | None, descendant: str | None) -> bool:
    if ancestor is None:
        return True
    if descendant is None:
        return False
    return registry.repo.git("merge-base", "--is-ancestor", ancestor, descendant,
                             check=False).returncode == 0


# Where the operations defined outside the core live, so a process that never imported
# them (a `sync` replaying another command's "end") still finds them: name -> module
OPERATION_MODULES: dict[str, str] = {
    "end": "agent_registry.wiki.ops", "wiki-ingest": "agent_registry.wiki.ops",
    "import-home": "agent_registry.wiki.importer", "override": "agent_registry.core.override",
    "send": "agent_registry.core.messages", "ack": "agent_registry.core.messages",
}


def load_operation(op: dict) -> None:
    """Import the module that registers *op*'s operation, if it is one of those above."""
    module = OPERATION_MODULES.get(op.get("op")) if isinstance(op, dict) else None
    if module:
        import importlib
        importlib.import_module(module)


def replay(registry: Registry, commits: list[str], onto: str | None,
           extra: tuple[str, ...] = (), handled: dict | None = None) -> Replay:
    """Re-apply the operations recorded in *commits* on top of *onto*, with *extra*
    trailers.  Commits made for another clone are left out (sync/intents.py helps anew
    on each tip), and so are operations *handled* names (id -> "applied", or the reason
    it was refused): a helper already applied them."""
    state = Replay(onto)
    for commit in commits:
        _, parents, message = registry.repo.commit_info(commit)
        if not is_ours(message):
            continue
        op = parse_op(message)
        if op is not None and made_apart(registry, op, state.tip):
            continue  # the remote's registry stands in its place: adopted
        if op is not None:
            load_operation(op)
        decided = (handled or {}).get(op.get("id")) if isinstance(op, dict) else None
        if decided is not None:
            if decided != APPLIED:
                state.refused.append({"op": op.get("op"), "id": op.get("id"),
                                      "session": op.get("session"), "paths": op.get("paths"),
                                      "reason": f"refused when another clone applied it for "
                                                f"this one: {decided}"})
            continue
        if op is None or not registry.knows(op):
            # a hand-made commit, or one from a newer version: carry its changes over
            state.tip = _replay_raw(registry, commit, parents, state.tip, message)
            continue
        note = f"Replayed on {state.tip[:12]}, first made as {commit[:12]}." if state.tip else ""
        subject = message.split("\n", 1)[0]
        try:
            new, result = registry.build(state.tip, op, note, extra)
        except (Refused, BadInput) as exc:  # refused now, or a malformed record (shapes)
            # the refusal's details first: the operation's own id must win (a refused
            # send's details carry the message id, and the sender watches its op id)
            state.refused.append({**exc.details, "op": op.get("op"), "id": op.get("id"),
                                  "session": op.get("session"), "paths": op.get("paths"),
                                  "reason": exc.message})
            if not exc.details.get("resharded"):
                # a lock operation that met the shards' marker never lands on this branch
                # (build refuses it on every tip) and is routed to the shards anew:
                # nothing needs recording here
                state.tip = _resolution(registry, state.tip, op, f"{subject}: refused on replay",
                                        f"{note} {exc.message}", extra)
            continue
        state.results[op.get("id", commit)] = result
        state.tip = new or _resolution(registry, state.tip, op,
                                       f"{subject}: nothing left to do on replay",
                                       f"{note} The remote had already made this change.", extra)
    return state


def made_apart(registry: Registry, op: dict, onto: str | None) -> bool:
    """Whether *op* made this clone's own registry and is replayed onto a registry made
    apart from it: two clones ran `init` before either pushed, and the loser of the race
    to publish adopts the winner's.  Its ``init`` changes nothing on a registry that
    exists (core/sessions.py); its ``convert`` is the remote's already: a lock shard's
    root commit replayed onto the remote's shard, or a conversion of the registry branch
    onto a tip in that layout already (or not holding the tip it converted).  Carried
    over as they are, they would overwrite the winner's layout.json (its shard count) and
    pages.  Its other operations (sessions, claims) replay as any others."""
    if onto is None or op.get("op") not in ("init", "convert"):
        return False
    if op["op"] == "init" or "shard" in op:
        return True
    from ..branch import shards as S
    try:
        there = S.layout_of(registry.repo.read_blob(f"{onto}:{S.LAYOUT}"))["format"]
    except S.NewerFormat:
        return True
    return there >= op.get("format", S.FORMAT) or not is_ancestor(registry, op.get("from"), onto)


def _resolution(registry: Registry, tip: str | None, op: dict, subject: str,
                detail: str, extra: tuple[str, ...] = ()) -> str | None:
    """A commit that changes nothing and says how a replayed operation was resolved,
    so `git log` shows it.  Its recorded operation is ``resolved``, which replays as a
    no-op: the original is never retried."""
    if tip is None:
        return None
    record = {"op": "resolved", "of": op, "at": registry.clock()}
    message = f"{subject}\n\n{detail.strip()}\n\n" + trailers(record, session=op.get("session"),
                                                               extra=extra)
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


def own_commits(registry: Registry, base: str | None, tip: str | None) -> list[str]:
    """This clone's own commits between *base* and *tip*, oldest first: not those it
    carries for other clones (sync/intents.py)."""
    return [c for c in pending_commits(registry, base, tip)
            if is_ours(registry.repo.commit_info(c)[2])]
