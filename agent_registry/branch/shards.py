"""The shard map: where each file of a sharded registry lives (issue 11; docs/design.md,
"Past one ref").  Standard library and the branch format only (the guard will read
shards through it).

A sharded registry (layout format 2, "lock shards") keeps its state on the main
registry branch (``agent-registry``) and its lock records on N shard branches
(``agent-registry-shards/00`` …), each tree laid out as the single branch is, so reading
the registry is overlaying them (no file lives in two places, except ``README.md`` and
``registry.md``, which every ref renders for itself, and lock records, which live in
every shard that could be asked about them).

- Sessions, diaries, the wiki, the layout marker and everything else but lock records
  stay on the main branch (register, heartbeat, update, diary, finish write it alone);
  a session's held locks are listed per shard, ``held/<sid>.json`` in each shard that
  records one of them, and its session file's ``locks:`` list is empty.
- A lock on *target* is recorded in every shard that could hold a path the lock covers.
  The key of a file path is its first ``KEY_DEPTH`` components (a shallower file is its
  own key); a target whose every covered path has one key (a file, a directory or a glob
  whose literal prefix has at least ``KEY_DEPTH`` components) is recorded in that key's
  shard, any other (``src/``, ``**/*.py``) in every shard.  So two targets that could
  cover one path ``p`` are both recorded in ``shard(key(p))``: the claims of both write
  that shard, and its compare-and-swap (``update-ref NEW OLD``, a fast-forward-only push)
  decides between them.  ``tests/test_shards.py`` checks this by brute force.
"""
TYPE_CHECKING = False
if TYPE_CHECKING:  # for annotations only: collections costs a one-shot command 1 ms
    from collections.abc import Callable

from ..store import jsontext
from . import paths as P
from ..errors import RegistryError
from .records import (LIVE, Holder, Lock, Session, UnreadableRecord, dump_session, iso,
                      load_session)

FORMAT = 3  # lock shards and clone refs; 1 is the single branch (no marker)
# the formats this version writes: the single branch, lock shards (2: heartbeats and
# diaries still on the main branch), and lock shards with clone refs (3: branch/clones.py)
WRITES = (1, 2, 3)
REQUIRES = "0.3.0"  # the first agent-registry release that reads and writes FORMAT
LAYOUT = "layout.json"  # the marker, on the main branch
KEY_DEPTH = 2
DEFAULT_COUNT = 16  # a broad lock writes every shard, one push each: keep them few
CONFIG = "agent-registry.shards"  # git config: the count a conversion makes (sync/convert.py)
HELD_DIR = "held"  # held/<sid>.json on a shard: what the session holds there
MAIN = -1  # place() of a file kept on the main branch
EVERY = -2  # place() of a file each ref renders for itself
RENDERED = ("README.md", "registry.md")
_LIVE = "sessions/live/"

# The fence a conversion leaves on the main branch for tools older than FORMAT, which read
# only that branch (they would see no lock at all there): a live session holding a glob
# lock on everything, for a century.  Their claims and `lock check` answer "locked by
# agent-registry-format-2 … working on: <FENCE_TEXT>", their pre-commit hook refuses:
# one line, naming the version to install.  This code never reads these two files:
# live sessions and locks live on the shards (place(), lock_shards()).
FENCE_SESSION = "agent-registry-format-2"
FENCE_TARGET = "**"
FENCE_TTL = 100 * 365 * 86400
FENCE_TEXT = (f"this registry uses layout format {FORMAT} (sharded): "
              f"install agent-registry >= {REQUIRES} to use it")


def internal(session: Session) -> bool:
    """A session the registry keeps for itself, never an agent: the fence a conversion
    to lock shards leaves for older versions, or any session of provider agent-registry."""
    return session.id == FENCE_SESSION or session.provider == "agent-registry"


class NewerFormat(RegistryError):
    """The registry was written by a newer agent-registry: refuse to write to it."""


def shard_branch(branch: str, index: int) -> str:
    """The branch of shard *index*: one a forge lists, beside (never below) *branch*,
    since ``refs/heads/agent-registry/…`` cannot exist next to ``refs/heads/agent-registry``."""
    return f"{branch}-shards/{index:02d}"


def shard_ref(branch: str, index: int) -> str:
    return f"refs/heads/{shard_branch(branch, index)}"


def shard_patterns(branch: str, remote: str | None) -> list[str]:
    """Ref patterns (``for-each-ref``, ``git log --glob``) naming exactly the shard
    branches, local and remote-tracking: not the intent refs beside them
    (``<branch>-shards/NN-intents/<clone>``, sync/intents.py), whose commits are
    operations still pending."""
    folders = [f"refs/heads/{branch}-shards/"] + (
        [f"refs/remotes/{remote}/{branch}-shards/"] if remote else [])
    return [folder + digits for folder in folders for digits in ("[0-9][0-9]", "[0-9][0-9][0-9]")]


def shard_refs(branch: str, shards: int) -> list[str]:
    return [shard_ref(branch, i) for i in range(shards)]


def fetch_refspecs(remote: str, branch: str) -> list[str]:
    """What a fetch of the whole registry asks for: the main branch and every shard, in
    one fetch (one connection, one ref advertisement)."""
    return [f"+refs/heads/{branch}:refs/remotes/{remote}/{branch}",
            f"+refs/heads/{branch}-shards/*:refs/remotes/{remote}/{branch}-shards/*"]


def _bucket(name: str, shards: int) -> int:
    return int(P.sha1_hex(name)[:8], 16) % shards  # the digest's first 4 bytes, big-endian


def session_shard(sid: str, shards: int) -> int:
    """The shard holding session *sid*'s own files."""
    return _bucket("s:" + sid, shards)


def path_key(path: str) -> str:
    """The key of the file *path*: its first KEY_DEPTH components."""
    return "/".join(path.split("/")[:KEY_DEPTH])


def path_shard(path: str, shards: int) -> int:
    """The one shard holding every lock that could cover the file *path* (what the guard
    and ``lock check`` read for it)."""
    return _bucket("p:" + path_key(path), shards)


def target_key(target: str) -> str | None:
    """The key every path *target* covers shares, or None when they may have several
    (the lock is then recorded in every shard)."""
    if P.is_glob(target):
        prefix = P.literal_prefix(target)
    else:
        name = P.plain(target)
        if not P.is_dir(name):
            return path_key(name)
        prefix = name
    parts = prefix.rstrip("/").split("/") if prefix else []
    return "/".join(parts[:KEY_DEPTH]) if len(parts) >= KEY_DEPTH else None


def lock_shards(target: str, shards: int,
                fold: "Callable[[str], str] | None" = None) -> tuple[int, ...]:
    """The shards recording a lock on *target* (and read by a claim of it).  Where names
    fold (*fold* is the repository's pathcase key), also the shard of the folded key:
    two new spellings of one file (``New/x.py``, ``new/x.py``) claimed at once then both
    write that shard, and its compare-and-swap lets one of them win.  The exact key's
    shard comes first (:meth:`WholeView.shard_of` reads it)."""
    key = target_key(target)
    if key is None:
        return tuple(range(shards))
    exact = _bucket("p:" + key, shards)
    folded = _bucket("p:" + fold(key), shards) if fold else exact
    return (exact,) if folded == exact else (exact, folded)


def claim_shards(sid: str, targets: list[str], shards: int) -> tuple[int, ...]:
    """The refs a claim of *targets* by *sid* writes: each target's shards and the
    session's own (its ``locks:`` list), in order: the ones an atomic push names."""
    found = {session_shard(sid, shards)}
    for target in targets:
        found.update(lock_shards(target, shards))
    return tuple(sorted(found))


def place(path: str, shards: int) -> int:
    """Where the branch file *path* lives: MAIN or EVERY.  Lock records (``locks/…``) and
    held lists (``held/…``) have no single place: a lock record lives in each shard of its
    target (lock_shards), a held list in each shard recording one of the session's locks."""
    if path in RENDERED:
        return EVERY
    if path.startswith(("locks/", HELD_DIR + "/")):
        raise ValueError(f"{path}: lives in the shards of its targets (lock_shards)")
    return MAIN


def held_path(sid: str) -> str:
    return f"{HELD_DIR}/{sid}.json"


def held_bytes(sid: str, targets: list[str], heartbeat_at: str) -> bytes:
    """A session's held list on one shard: the targets it holds there, and the heartbeat
    its last claim there wrote (a claim renews the session without writing the main
    branch, so a holder's age is the newest of this and its session file's)."""
    return (jsontext.dumps({"session": sid, "locks": targets, "heartbeat_at": heartbeat_at},
                       indent=1, ensure_ascii=False) + "\n").encode()


def parse_held(raw: bytes) -> tuple[list[str], str]:
    """(targets, heartbeat_at) of a held list; UnreadableRecord when it is not one."""
    try:
        data = jsontext.loads(raw)
        targets, beat = data["locks"], data.get("heartbeat_at", "")
        # isinstance(t, str) of each, called from C (map): a holder's list names a
        # thousand paths at 10,000 locks, and each `lock check` of one of them reads it
        if isinstance(targets, list) and all(map(str.__instancecheck__, targets)) \
                and isinstance(beat, str):
            return targets, beat
    except (ValueError, KeyError, TypeError):
        pass
    raise UnreadableRecord("not a held list (locks: a list of paths, heartbeat_at: a time)")


def fence_files(at: float) -> dict[str, bytes]:
    """The fence's files on the main branch (path -> content), dated *at*."""
    stamp = iso(at)
    session = Session(FENCE_SESSION, provider="agent-registry", ai_version=REQUIRES,
                      working_on=FENCE_TEXT, status=LIVE, registered_at=stamp,
                      heartbeat_at=stamp, host="registry-layout", owner="none",
                      locks=[FENCE_TARGET])
    lock = Lock(FENCE_TARGET, "exclusive", [Holder(FENCE_SESSION, "0" * 16, stamp, FENCE_TTL)])
    return {f"sessions/live/{FENCE_SESSION}.yaml": dump_session(session),
            P.record_name(FENCE_TARGET): lock.to_bytes()}


def split(files: dict[str, bytes], shards: int, at: float) -> tuple[dict[str, bytes],
                                                                  list[dict[str, bytes]]]:
    """The conversion's trees: the single branch's *files* (path -> content) as the main
    branch's files and each shard's.  The main branch keeps every file but the lock
    records, its live sessions' ``locks:`` lists emptied (a session file that cannot be
    read is kept as it is), and gains the fence and the marker (dated *at*).  Shard i
    gets each lock record whose target's lock_shards contain i (one that cannot be read:
    every shard, so it fails closed wherever it is asked about) and, for each live
    session holding targets recorded there, ``held/<sid>.json`` listing them with the
    session's heartbeat.  README.md and registry.md are left to each ref to render."""
    main: dict[str, bytes] = {}
    parts: list[dict[str, bytes]] = [{} for _ in range(shards)]
    for path, data in files.items():
        if path in RENDERED:
            continue
        if path.startswith("locks/"):
            try:
                target = Lock.from_bytes(data).path
            except UnreadableRecord:
                target = None
            # a record of another target, or none: every shard (view.parse_lock refuses it)
            where = lock_shards(target, shards) if isinstance(target, str) and \
                P.record_name(target) == path else tuple(range(shards))
            for index in where:
                parts[index][path] = data
            continue
        name = path[len(_LIVE):]
        if path.startswith(_LIVE) and name.endswith(".yaml") and "/" not in name:
            try:
                session = load_session(data)
            except UnreadableRecord:
                main[path] = data
                continue
            held: list[list[str]] = [[] for _ in range(shards)]
            for target in session.locks:
                for index in lock_shards(target, shards):
                    held[index].append(target)
            for index, targets in enumerate(held):
                if targets:
                    parts[index][held_path(session.id)] = held_bytes(
                        session.id, targets, session.heartbeat_at)
            if session.locks:
                session.locks = []
                data = dump_session(session, data)
        main[path] = data
    main.update(fence_files(at))
    main[LAYOUT] = layout_bytes(shards)
    return main, parts


# -- the layout marker ------------------------------------------------------------------

def layout_bytes(shards: int) -> bytes:
    """The marker a conversion writes on the main branch."""
    return (jsontext.dumps({"format": FORMAT, "shards": shards, "key_depth": KEY_DEPTH,
                        "requires": REQUIRES}, indent=1) + "\n").encode()


def layout_of(raw: bytes | None) -> dict:
    """The layout the marker *raw* describes (``format``, ``shards``, ``key_depth``,
    ``requires``); ``{"format": 1}`` for a single-branch registry (no marker).  One that
    cannot be read refuses (NewerFormat): it was not written by any version we know."""
    if raw is None:
        return {"format": 1}
    try:
        data = jsontext.loads(raw)
        if isinstance(data.get("format"), int) and data["format"] >= 1:
            return data
    except (ValueError, AttributeError):
        pass
    raise NewerFormat(f"{LAYOUT} on the registry branch is unreadable: refusing to write; "
                      "fix it by hand or install the newest agent-registry")


def count_of(marker: dict) -> int:
    """The shard count of the layout *marker*; one that is not a count refuses."""
    count = marker.get("shards")
    if not isinstance(count, int) or not 1 <= count <= 256:
        raise NewerFormat(f"{LAYOUT}: shards {count!r} is not a shard count; fix it by hand")
    return count


def require_writable(raw: bytes | None) -> None:
    """Refuse, in one line naming the version to install, to write a registry whose
    marker *raw* names a layout this version does not write (WRITES): writing there
    would go where no newer tool reads, or drop what it does not understand."""
    layout = layout_of(raw)
    if layout["format"] not in WRITES:
        needed = layout.get("requires") if isinstance(layout.get("requires"), str) else None
        raise NewerFormat(f"this registry uses layout format {layout['format']}, which this "
                          f"agent-registry does not write: install agent-registry >= "
                          f"{needed or 'the newest release'}")


def newest_layout(repo, tips) -> dict:
    """The layout of the registry whose main branch this clone has at *tips* (its own
    tip, the remote-tracking one: another clone may have converted it since): the
    newest marker among them, ``{"format": 1}`` when none has one.  A layout this
    version does not write refuses (require_writable).  The one layout detection the
    core and the guard share."""
    found = {"format": 1}
    for tip in dict.fromkeys(t for t in tips if t):
        raw = repo.read_blob(f"{tip}:{LAYOUT}")
        require_writable(raw)
        marker = layout_of(raw)
        if marker["format"] > found["format"]:
            found = marker
    return found


def absent(repo, branch: str, remote: str, count: int) -> list[str]:
    """The lock shards of the registry *branch* in *count* shards that neither this
    clone nor *remote*, as of the last fetch (its remote-tracking refs), has."""
    names = [shard_branch(branch, index) for index in range(count)]
    return [name for name in names if repo.read_ref(f"refs/heads/{name}") is None
            and repo.read_ref(f"refs/remotes/{remote}/{name}") is None]


def missing_text(repo, branch: str, remote: str | None, name: str, count: int) -> str:
    """Why the whole view refuses: the lock shard *name* is missing here.  Where the
    remote lacked it too at the last fetch (a shard deleted there; the registry deleted
    there; or made anew by an older version without its shards), a sync here cannot
    bring it back: the line says who can, and the way out when no one can."""
    if not remote:
        return f"{name} is missing here ({LAYOUT} names {count} lock shards): run " \
               "`agent-registry sync`"
    if repo.read_ref(f"refs/remotes/{remote}/{branch}") is None:  # the registry deleted there
        return (f"{name} is missing here, and {remote} had no {branch} at the last fetch "
                f"({LAYOUT} names {count} lock shards): " + gone_advice(remote))
    return (f"{name} is missing here, and {remote} did not have it at the last fetch "
            f"({LAYOUT} names {count} lock shards): `agent-registry sync` fetches it if "
            f"{remote} has it now, and pushes it back when run in a clone that has it; if "
            f"no clone has it, no clone can read this registry: `agent-registry uninstall "
            f"--branches --remote --yes` in one clone deletes it, then `agent-registry "
            f"init` there starts a new one")


def gone_advice(remote: str) -> str:
    """What to do about a registry deleted on *remote* whose lock shards this clone
    lacks (sync/remote.py ``Deleted`` says it too)."""
    return (f"`agent-registry sync` fetches them if {remote} has them again, and puts "
            f"them back when run in a clone that has them; if the registry was removed on "
            f"purpose (`agent-registry uninstall --branches --remote` in another clone), "
            f"leave it here too with `agent-registry uninstall --branches --yes`, or run "
            f"that and then `agent-registry init` to start a new one")
