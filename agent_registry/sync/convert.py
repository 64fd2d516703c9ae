"""Converting a single-branch registry (layout format 1) to lock shards (layout format
``shards.FORMAT``, 3): the main branch keeps everything but the lock records, which move to
the shard branches ``<branch>-shards/NN`` with each live session's held list
(``branch/shards.py``, ``split``; docs/shards.md).  A registry in lock shards without
clone refs (format 2, made by 0.2) is upgraded instead: one main-branch commit rewrites
``layout.json`` (format 3, the same shards and key depth) and the fence's text; no lock
or shard moves, and heartbeats and diary lines go to clone refs from then on.

Converting (and upgrading) is a function of the main tip it starts from, so it is
idempotent:

- Locally (no remote), under the clone's flock: the shard refs are written first (root
  commits, one per shard, even an empty one, so every ref exists), then the main branch
  moves by compare-and-swap to a commit (parent: the tip converted) that writes
  ``layout.json`` and the fence and removes the lock records.  A crash between the two
  leaves shard refs that nothing reads (no marker yet); the next run writes them again.
- With a remote: this clone's pending operations are pushed first (sync), then the same
  commits are built from the remote's tip and pushed in one ``git push --atomic``: the
  main branch as a fast-forward, the shard refs as new refs.  The flock is held from
  the build to the local refs' update (as gc does): no commit of this clone lands on
  the tip being converted.  Two clones converting at once cannot both land; the loser
  fetches, finds ``layout.json`` and adopts the winner's refs.  Local refs move only
  after the push landed, so a crash before that leaves a remote the next run adopts.

The upgrade goes the same ways with no shard ref: locally a compare-and-swap of the
main branch under the flock; with a remote, after a sync, a fast-forward push of the
main branch alone (two clones upgrading at once: one lands, the other adopts it).

The commits record the operation ``convert`` in their trailers (branch/trailers.py;
an upgrade's says ``"from_format": 2``): no handler applies it, so a replay would carry
its changes over as they are.

``git config agent-registry.shards N`` makes any operation of this version convert a
format-1 registry, or upgrade a format-2 one, before it is applied
(sync.Registry.apply): once per process.

A new registry (``init``, or the first write where there is no registry branch) is made
in format 3 directly (``create``): the init commit and the conversion built from it, the
shard refs written before the main branch (locally), or all pushed in one ``git push
--atomic`` that creates the main branch (with a remote: a clone that loses the race
adopts the winner's registry, in whatever layout it has).  ``init --shards 0`` or ``git
config agent-registry.shards 0`` asks for one branch instead (docs/shards.md, "What a new
registry gets").

The module is over 400 lines because converting, upgrading and creating are one
procedure with three starting points: the same build of the shard commits, the same
local compare-and-swap order, the same atomic push and the same adoption of a winner's
refs; split, each part would have to re-derive what the others decided.
"""
from __future__ import annotations

import os

from ..store import jsontext
from ..branch import shards as S
from ..branch.records import UnreadableRecord, dump_session, iso, load_session
from ..branch.shardview import ShardView
from ..branch.trailers import trailers
from ..branch.view import View
from ..core.registry import Registry
from ..store.flock import file_lock
from ..core.sharded import count_of, main_pages, shard_pages
from ..errors import BadInput, NotFound, RegistryError
from ..store.git import CasFailed

CONFIG = S.CONFIG
ENV = "AGENT_REGISTRY_SHARDS"  # the layout of a registry this process makes (0: one branch)
MIN_COUNT, MAX_COUNT = 1, 64
ATTEMPTS = 5  # rounds of sync, build and atomic push before giving up (the remote kept moving)
CONVERT_OP = "convert"
AUTHOR = "agent-registry <agent-registry@localhost>"
_CHECKED: set[tuple[str, str]] = set()  # (common dir, branch) an operation checked this process
_NO_BRANCH = ("one branch (layout format 1) is no longer a layout any command writes: "
              "a registry keeps its locks on lock shards")


def shard_count(value: object, what: str = "--count") -> int:
    """*value* as a shard count (a whole number from MIN_COUNT to MAX_COUNT); BadInput,
    in one line, otherwise (0, the single branch of older versions, says why)."""
    text = str(value).strip()
    if text.isdigit() and MIN_COUNT <= int(text) <= MAX_COUNT:
        return int(text)
    raise BadInput(f"{what}: {text!r} is not a shard count (a whole number from "
                   f"{MIN_COUNT} to {MAX_COUNT})" + (f"; {_NO_BRANCH}" if text == "0" else ""))


def configured(registry: Registry) -> int | None:
    """The shard count ``git config agent-registry.shards`` asks for, or None."""
    raw = registry.config.get(CONFIG)
    return None if raw is None else shard_count(raw, f"git config {CONFIG}")


def new_count(registry: Registry, asked: int | None = None) -> int:
    """The shards a new registry gets: *asked* (``init --shards``), else
    ``$AGENT_REGISTRY_SHARDS``, else git config, else shards.DEFAULT_COUNT."""
    if asked is not None:
        return asked
    if os.environ.get(ENV, "").strip():
        return shard_count(os.environ[ENV], f"${ENV}")
    return configured(registry) or S.DEFAULT_COUNT


def auto_convert(registry: Registry) -> list[str]:
    """Before an operation: convert a format-1 registry (to the configured count, else
    shards.DEFAULT_COUNT), or upgrade a format-2 one: the layout ``init`` makes is the
    only one an operation writes (once per process and branch; one read of
    ``layout.json`` when there is nothing to do).  A registry that has no branch yet is
    left to its first operation.  Returns the warnings for the operation's caller: a remote that cannot be
    used leaves the registry as it is (one branch, or format 2), converted or upgraded by
    a later operation.  Only the main branch converts: a registry of this class on a
    shard or on this clone's own ref (core/cloned.py) has no ``layout.json`` of its own."""
    if not registry.part.routes:
        return []
    key = (registry.repo.info.common_dir, registry.branch)
    if key in _CHECKED:
        return []
    count = configured(registry) or S.DEFAULT_COUNT
    tip = registry.tip()
    if tip is None:
        return []
    _CHECKED.add(key)
    raw = registry.repo.read_blob(f"{tip}:{S.LAYOUT}")
    if raw is not None and not _upgradable(raw):
        return []  # format 3 already (or a format convert() refuses: the operation will)
    what = f"converted to {count} lock shards" if raw is None else \
        f"upgraded to layout format {S.FORMAT}"
    from .state import takes_atomic
    if raw is None and registry.remote and takes_atomic(registry) is False:
        return [_no_atomic(registry, f"not {what}")]  # said so by its server (an
        # upgrade pushes one ref: no atomic push)
    try:
        done = convert(registry, count)
    except RemoteUnusable as exc:  # offline: work goes on as it is, converted later
        if exc.kind == "no-atomic":
            return [_no_atomic(registry, f"not {what}")]
        _CHECKED.discard(key)
        return [f"not {what}: {exc.message}; the next operation tries again"]
    if not (done["converted"] or done["upgraded"]):
        return []  # another clone did it meanwhile: its commit says so
    return [f"this registry was {what} with clone refs (layout format {S.FORMAT}), the "
            "one layout this version writes; older versions refuse it (docs/shards.md)"]


def _upgradable(raw: bytes) -> bool:
    """Whether the marker *raw* names lock shards of a format older than FORMAT that this
    version writes (2: no clone refs): what an upgrade rewrites."""
    try:
        found = S.layout_of(raw)["format"]
    except S.NewerFormat:
        return False
    return found in S.WRITES and 1 < found < S.FORMAT


def convert(registry: Registry, count: int | None = None) -> dict:
    """Convert *registry*'s branch to *count* lock shards (default: git config, else
    shards.DEFAULT_COUNT), or upgrade lock shards of format 2 to format 3 (keeping their
    count).  ``converted`` / ``upgraded`` say which this call did; both False when the
    registry is in format 3 already (``by``: "another clone" when one converted or
    upgraded it while this one tried).  A layout this version does not write refuses
    (shards.NewerFormat, exit 1)."""
    count = shard_count(count) if count is not None else configured(registry) or S.DEFAULT_COUNT
    if registry.remote:
        return _convert_remote(registry, count)
    error = ""
    with file_lock(registry.lock_file):
        for _ in range(ATTEMPTS):
            tip = registry.repo.read_ref(registry.ref)
            layout = _layout_at(registry, tip)
            if layout["format"] == S.FORMAT:
                return _already(registry, tip, layout)
            built = _build_for(registry, tip, layout, count)  # type: ignore[arg-type]
            _move_shards(registry, built["shards"])
            try:
                registry.repo.update_ref(registry.ref, built["main"], tip,
                                         f"agent-registry: convert to layout format {S.FORMAT}")
            except CasFailed as exc:  # moved by hand meanwhile: build again
                error = str(exc)
                continue
            return _result(registry, built)
    raise RegistryError(f"could not move {registry.ref} after {ATTEMPTS} attempts: {error}")


# -- building the commits --------------------------------------------------------------

def tree_files(registry: Registry, tip: str) -> dict[str, bytes]:
    """Every file of commit *tip*'s tree, by path."""
    listing = registry.repo.git("ls-tree", "-r", "-z", "--full-tree", tip).stdout.split(b"\0")
    entries = []
    for item in listing:
        if item:
            meta, _, path = item.partition(b"\t")
            mode, kind, oid = meta.decode().split()
            if kind == "blob":
                entries.append((path.decode("utf-8", errors="surrogateescape"), oid))
    blobs = registry.repo.read_blobs([oid for _, oid in entries])
    return {path: data or b"" for (path, _), data in zip(entries, blobs)}


def _layout_at(registry: Registry, tip: str | None) -> dict:
    """The layout of the main commit *tip* (``{"format": 1}``: one branch).  Raises for
    no branch, or a layout this version does not write."""
    if tip is None:
        raise NotFound(f"no registry branch {registry.branch} to convert: "
                       "run `agent-registry init` first")
    raw = registry.repo.read_blob(f"{tip}:{S.LAYOUT}")
    S.require_writable(raw)
    return S.layout_of(raw)


def _already(registry: Registry, tip: str, layout: dict) -> dict:
    """The no-op result: *tip* is in format FORMAT already."""
    return {"branch": registry.branch, "format": layout["format"],
            "shards": layout.get("shards"), "converted": False, "upgraded": False,
            "tip": tip, "moved": {"locks": 0, "held": 0, "sessions": 0}}


def _build_for(registry: Registry, tip: str, layout: dict, count: int) -> dict:
    """What the registry at *tip* needs: a conversion (format 1) or an upgrade."""
    if layout["format"] == 1:
        return _build(registry, tip, count)
    return _build_upgrade(registry, tip, layout)


def _build(registry: Registry, tip: str, count: int, new: bool = False) -> dict:
    """The new main commit (parent *tip*; the init commit of a *new* registry) and one
    root commit per shard, written as objects; no ref moves."""
    repo, at = registry.repo, registry.clock()
    files = tree_files(registry, tip)
    main_files, parts = S.split(files, count, at)
    op = {"op": CONVERT_OP, "at": at, "id": os.urandom(8).hex(), "format": S.FORMAT,
          "shards": count, "from": tip}
    records = sorted(p for p in files if p.startswith("locks/"))
    emptied = sum(1 for p, d in main_files.items() if p in files and files[p] != d)
    held = sum(1 for part in parts for p in part if p.startswith(S.HELD_DIR + "/"))
    subject = f"{'init in' if new else 'convert to'} layout format {S.FORMAT}: {count} lock shards"
    view = View(repo, tip)
    for path in files:
        if path not in main_files and path not in S.RENDERED:
            view.write(path, None)
    for path, data in main_files.items():
        if files.get(path) != data:
            view.write(path, data)
    # the page lists the locks the conversion moves: they are in the tree it converts
    for path, data in main_pages(registry.branch, view, at, subject, View(repo, tip)).items():
        view.write(path, data)
    note = (f"{len(records)} lock record(s) and {held} held list(s) move to "
            f"{S.shard_ref(registry.branch, 0)} … {S.shard_ref(registry.branch, count - 1)}; "
            f"{emptied} live session(s) keep an empty locks: list here.") if not new else (
        f"A new registry: locks are recorded in {S.shard_ref(registry.branch, 0)} … "
        f"{S.shard_ref(registry.branch, count - 1)}, heartbeats and diary lines on each "
        f"clone's own ref (docs/shards.md).")
    main = repo.commit_tree(repo.edit_tree(view.tree, view.writes), [tip],
                            f"{subject}\n\n{note}\n\n" + trailers(op), AUTHOR, int(at))
    shards = []
    for index, part in enumerate(parts):
        # the shard's pages read its held lists, and the sessions from the new main branch
        shard_view = ShardView(repo, None, [View(repo, main)])
        for path, data in part.items():
            shard_view.write(path, data)
        shard_subject = f"shard {index:02d} of {count}: converted from {tip[:12]}"
        pages = shard_pages(registry.branch, index, count, shard_view, at, shard_subject)
        tree = repo.edit_tree(None, {**part, **pages})
        shards.append(repo.commit_tree(tree, [], f"{shard_subject}\n\n" + trailers(
            {**op, "shard": index}), AUTHOR, int(at)))
    return {"main": main, "shards": shards, "count": count, "upgraded": False,
            "moved": {"locks": len(records), "held": held, "sessions": emptied}}


def _build_upgrade(registry: Registry, tip: str, layout: dict) -> dict:
    """The main commit (parent *tip*, lock shards of an older format) that says format
    FORMAT: ``layout.json`` (the same shard count and key depth, REQUIRES) and the fence's
    "working on" (the version a tool older than the layout check must install).  Written
    as an object; no ref moves, and no lock record, held list or shard changes."""
    repo, at = registry.repo, registry.clock()
    count = count_of(layout)
    view = View(repo, tip)
    marker = {**layout, "format": S.FORMAT, "requires": S.REQUIRES}
    view.write(S.LAYOUT, (jsontext.dumps(marker, indent=1) + "\n").encode())
    for path, data in S.fence_files(at).items():
        old = view.read(path)
        if old is not None and not path.endswith(".yaml"):
            continue  # the fence's lock record: as it was
        if old is not None:
            try:
                session = load_session(old)
            except UnreadableRecord:
                pass  # written anew: the fence must stand
            else:
                session.working_on, session.ai_version = S.FENCE_TEXT, S.REQUIRES
                data = dump_session(session, old)
        view.write(path, data)
    subject = f"upgrade to layout format {S.FORMAT}: heartbeats and diary lines on clone refs"
    for path, data in registry.pages(view, at, subject).items():
        view.write(path, data)
    op = {"op": CONVERT_OP, "at": at, "id": os.urandom(8).hex(), "format": S.FORMAT,
          "from_format": layout["format"], "shards": count, "from": tip}
    note = (f"{S.LAYOUT} says format {S.FORMAT} (requires {S.REQUIRES}) and the fence names "
            f"that version; the {count} lock shards stay as they are.")
    main = repo.commit_tree(repo.edit_tree(view.tree, view.writes), [tip],
                            f"{subject}\n\n{note}\n\n" + trailers(op), AUTHOR, int(at))
    return {"main": main, "shards": [], "count": count, "upgraded": True,
            "moved": {"locks": 0, "held": 0, "sessions": 0}}


def _result(registry: Registry, built: dict) -> dict:
    return {"branch": registry.branch, "format": S.FORMAT, "shards": built["count"],
            "converted": not built["upgraded"], "upgraded": built["upgraded"],
            "tip": built["main"], "moved": built["moved"]}


# -- with a remote ---------------------------------------------------------------------

def _fetch_all(registry: Registry) -> str | None:
    """Fetch the remote's main branch and every shard ref in one fetch; the remote main
    tip, or None when it has no registry branch."""
    from .remote import Offline, git_net
    try:
        proc = git_net(registry, "fetch", "--quiet", "--no-tags", "--no-write-fetch-head",
                       "--no-auto-maintenance", registry.remote,
                       *S.fetch_refspecs(registry.remote, registry.branch))
    except Offline as exc:  # a remote that never answers: its timeout, in one line
        raise _unusable(registry, exc) from None
    if proc.returncode != 0:
        err = proc.stderr.decode(errors="replace")
        if "couldn't find remote ref" in err:
            return None
        raise _unusable(registry, Offline.from_stderr(
            registry.remote, err, f"git fetch exited {proc.returncode}", registry.branch))
    return registry.repo.read_ref(registry.tracking_ref)


class RemoteUnusable(RegistryError):
    """The remote could not be used (unreachable, credentials, denied, no atomic pushes:
    ``kind``, as sync/remote.py's Offline says it): nothing was converted.  Exit 1; an
    automatic conversion lets the operation go on without it."""

    def __init__(self, message: str, kind: str = "error") -> None:
        super().__init__(message)
        self.kind = kind


def _unusable(registry: Registry, exc) -> RemoteUnusable:
    from .state import redact
    return RemoteUnusable(f"converting needs {redact(registry.remote)}: {exc.message}; "
                          "nothing was converted", exc.kind)


def _no_atomic(registry: Registry, what: str) -> str:
    """The warning of a registry kept in one branch because its remote does not accept
    atomic pushes, which the lock shards are made and converted with; recorded, so that
    no operation after it asks the remote again (auto_convert: a fetch and a push each)
    until `agent-registry shard` converts it.  Called without the flock."""
    from .remote import ACCEPT_ATOMIC
    from .state import found_atomic, redact, takes_atomic
    if takes_atomic(registry) is not False:
        with file_lock(registry.lock_file):
            found_atomic(registry, False)
    return (f"{what}: {redact(registry.remote)} does not accept atomic pushes, which lock "
            f"shards are made with; {ACCEPT_ATOMIC}, then run "
            "`agent-registry shard`")


def _tracking(registry: Registry, index: int) -> str:
    return f"refs/remotes/{registry.remote}/{S.shard_branch(registry.branch, index)}"


def _convert_remote(registry: Registry, count: int) -> dict:
    from .remote import Offline, sync
    from .replay import own_commits
    from .state import confirm, found_atomic
    from ..errors import Unconfirmed
    lost = False
    for _ in range(ATTEMPTS):
        try:  # this clone's pending operations first: they are decided on the old format
            report = sync(registry)
        except Unconfirmed as exc:
            raise RemoteUnusable(f"{exc.message}; nothing was converted") from None
        if not report["pushed"]:
            raise RemoteUnusable(f"converting needs this clone in sync with its remote "
                                 f"({report.get('error')}); nothing was converted")
        remote = _fetch_all(registry)
        with file_lock(registry.lock_file):
            local = registry.repo.read_ref(registry.ref)
            layout = _layout_at(registry, remote or local)
            if layout["format"] == S.FORMAT:
                _adopt(registry, layout.get("shards") or 0, remote)
                return {**_already(registry, remote or local, layout),  # type: ignore[arg-type]
                        **({"by": "another clone"} if lost else {})}
            if remote is None:
                continue  # the branch is only here: the next sync pushes it
            if local not in (None, remote) and own_commits(registry, remote, local):
                continue  # an operation of this clone committed since the sync: push it first
            built = _build_for(registry, remote, layout, count)
            refs = [f"{built['main']}:{registry.ref}"] + [
                f"{commit}:{S.shard_ref(registry.branch, i)}"
                for i, commit in enumerate(built["shards"])]
            try:
                landed = _push_atomic(registry, refs)
            except Offline as exc:
                raise _unusable(registry, exc) from None
            if not landed:
                lost = True
                continue  # another clone moved the remote (or converted it): look again
            _move_shards(registry, built["shards"], tracking=True)
            registry.repo.git("update-ref", registry.tracking_ref, built["main"])
            # nothing of this clone's own is on it (checked above): what it carried for
            # other clones was based on the old format, and their clones replay it themselves
            registry.repo.update_ref(registry.ref, built["main"], local,
                                     f"agent-registry: convert to layout format {S.FORMAT}")
            confirm(registry, built["main"], last_success=iso(registry.clock()),
                    last_error=None, last_error_kind=None)
            found_atomic(registry, True)  # a remote once found not to take them now does
            return _result(registry, built)
    raise RegistryError(f"could not convert: the remote kept moving ({ATTEMPTS} attempts); "
                        "run `agent-registry shard` again")


def _push_atomic(registry: Registry, refspecs: list[str]) -> bool:
    """Push every refspec or none (no ``+``: main a fast-forward, the shards new refs; an
    upgrade pushes the main branch alone, which needs no ``--atomic``: a remote that
    does not accept atomic pushes takes it).
    False when the remote moved (a lost race); Offline when it cannot be used."""
    from .remote import RACING, Offline, git_net
    atomic = ["--atomic"] if len(refspecs) > 1 else []
    proc = git_net(registry, "push", *atomic, "--porcelain", "--no-verify",
                   registry.remote, *refspecs)
    if proc.returncode == 0:
        return True
    out = proc.stdout.decode(errors="replace")
    rejected = [line for line in out.splitlines() if line.startswith("!\t")]
    # refused, not raced: a remote rejection (a hook) but for a ref another push held or
    # moved meanwhile (one ref's push: no atomic transaction to fail)
    if rejected and not any("[remote rejected]" in line and "atomic" not in line
                            and not any(word in line for word in RACING) for line in rejected):
        return False
    raise Offline.from_stderr(registry.remote, proc.stderr.decode(errors="replace") or out,
                              f"git push --atomic exited {proc.returncode}", registry.branch)


def _adopt(registry: Registry, count: int, remote: str | None) -> None:
    """Take the remote's sharded layout (caller holds the flock): each local shard ref
    that is missing or behind its fetched one moves to it, and so does the main branch
    when this clone has nothing of its own on it (else the next sync replays it)."""
    from .replay import is_ancestor, own_commits
    from .state import confirm
    for index in range(count):
        fetched = registry.repo.read_ref(_tracking(registry, index))
        ref = S.shard_ref(registry.branch, index)
        local = registry.repo.read_ref(ref)
        if fetched and local != fetched and (local is None or is_ancestor(registry, local, fetched)):
            registry.repo.update_ref(ref, fetched, local, "agent-registry: adopt shard")
    local = registry.repo.read_ref(registry.ref)
    if remote and local != remote and not own_commits(registry, remote, local):
        registry.repo.update_ref(registry.ref, remote, local, "agent-registry: adopt layout")
        confirm(registry, remote)


def _move_shards(registry: Registry, commits: list[str], tracking: bool = False) -> None:
    """Point each shard ref (and, once pushed, its remote-tracking ref) at its commit."""
    for index, commit in enumerate(commits):
        ref = S.shard_ref(registry.branch, index)
        registry.repo.update_ref(ref, commit, registry.repo.read_ref(ref),
                                 "agent-registry: convert (shard)")
        if tracking:
            registry.repo.git("update-ref", _tracking(registry, index), commit)


# -- a new registry ----------------------------------------------------------------------

def create(registry: Registry, count: int) -> dict | None:
    """Make *registry*'s branch, new, in *count* lock shards with clone refs (format 3):
    ``{"created": True}``, with ``"pushed": {"remote", "refs"}`` when made through the
    remote (the branches it pushed there).  None leaves it to the caller's init operation (the core's:
    one branch, or adopting the registry the remote has): for a registry that exists
    here or on the remote (its first write converts it), and for a remote
    that cannot be used, with a warning (the next sync pushes the one branch, and
    `agent-registry shard` converts it later: a format-3 main branch pushed alone,
    without its shards, would stop every other clone)."""
    if registry.remote:
        try:
            return _create_remote(registry, count)
        except RemoteUnusable as exc:  # the init operation's own warning says why
            registry.warnings.append(
                _no_atomic(registry, "made as one branch, not in lock shards")
                if exc.kind == "no-atomic" else
                f"made as one branch, not in lock shards: {registry.remote} could not be "
                "used; `agent-registry shard` converts it")
            return None
    with file_lock(registry.lock_file):
        if registry.repo.read_ref(registry.ref) is not None:
            return None
        built = _build_new(registry, count)
        _move_shards(registry, built["shards"])  # first: a crash leaves refs nothing reads
        registry.repo.update_ref(registry.ref, built["main"], None,
                                 f"agent-registry: init in layout format {S.FORMAT}")
    return {"created": True}


def _build_new(registry: Registry, count: int) -> dict:
    """The commits of a new registry in *count* shards: the init operation's root
    commit and, on it, the conversion (written as objects; no ref moves)."""
    root, _ = registry.build(None, registry.new_op("init"))
    return _build(registry, root, count, new=True)  # type: ignore[arg-type]


def _create_remote(registry: Registry, count: int) -> dict | None:
    """create() through the remote: the main branch and the shards in one atomic push
    that creates them; None when the remote (or this clone) has a registry already."""
    from .remote import Offline
    from .state import confirm, redact
    for _ in range(ATTEMPTS):
        remote = _fetch_all(registry)
        if remote is not None or registry.repo.read_ref(registry.ref) is not None:
            return None
        built = _build_new(registry, count)
        refs = [f"{built['main']}:{registry.ref}"] + [
            f"{commit}:{S.shard_ref(registry.branch, i)}" for i, commit in enumerate(built["shards"])]
        try:
            if not _push_atomic(registry, refs):
                continue  # another clone made it meanwhile: adopt it (the next round)
        except Offline as exc:
            raise _unusable(registry, exc) from None
        with file_lock(registry.lock_file):
            _move_shards(registry, built["shards"], tracking=True)
            registry.repo.git("update-ref", registry.tracking_ref, built["main"])
            try:
                registry.repo.update_ref(registry.ref, built["main"], None,
                                         f"agent-registry: init in layout format {S.FORMAT}")
            except CasFailed:
                pass  # a process of this clone made one meanwhile: its sync replays it
            confirm(registry, built["main"], last_success=iso(registry.clock()),
                    last_error=None, last_error_kind=None)
        return {"created": True, "pushed": {"remote": redact(registry.remote), "refs": len(refs)}}
    raise RegistryError(f"could not create the registry: the remote kept moving "
                        f"({ATTEMPTS} attempts)")
