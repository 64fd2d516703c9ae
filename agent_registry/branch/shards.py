"""The shard map: where each file of a sharded registry lives (issue 11; docs/design.md,
"Past one ref").  Standard library and the branch format only (the guard will read
shards through it).

A sharded registry (layout format 2) keeps its state on the main registry branch
(``agent-registry``) and on N shard branches (``agent-registry-shards/00`` …), each tree
laid out as the single branch is, so reading the registry is overlaying them (no file
lives in two places, except ``README.md`` and ``registry.md``, which every ref renders for
itself, and lock records, which live in every shard that could be asked about them).

- What one session alone writes (its live session file, its diary, the messages it sends
  and its acknowledgements) lives on the session's shard, ``shard("s:" + sid)``:
  heartbeats and diary lines of different sessions never race, except that the sessions
  hashed to one shard share its ref.
- A lock on *target* is recorded in every shard that could hold a path the lock covers.
  The key of a file path is its first ``KEY_DEPTH`` components (a shallower file is its
  own key); a target whose every covered path has one key (a file, a directory or a glob
  whose literal prefix has at least ``KEY_DEPTH`` components) is recorded in that key's
  shard, any other (``src/``, ``**/*.py``) in every shard.  So two targets that could
  cover one path ``p`` are both recorded in ``shard(key(p))``: the claims of both write
  that shard, and its compare-and-swap (``update-ref NEW OLD``, a fast-forward-only push)
  decides between them.  ``tests/test_shards.py`` checks this by brute force.
- The rest (ended sessions, ``sessions/recent.json``, the wiki, the layout marker) stays
  on the main branch: an archive written by ``end`` and ``gc``, not by claims.
"""
from __future__ import annotations

import json

from . import paths as P
from ..errors import RegistryError
from .records import LIVE, Holder, Lock, Session, UnreadableRecord, dump_session, iso

FORMAT = 2  # the sharded layout; 1 is the single branch (no marker)
WRITES = (1,)  # the formats this version writes: the single branch, until the shards are wired
REQUIRES = "0.2.0"  # the first agent-registry release that reads and writes FORMAT
LAYOUT = "layout.json"  # the marker, on the main branch
KEY_DEPTH = 2
MAIN = -1  # place() of a file kept on the main branch
EVERY = -2  # place() of a file each ref renders for itself
RENDERED = ("README.md", "registry.md")
# per-session files: folder -> how a file name there gives its session id
_SESSION_FILES = (("sessions/live/", ".yaml"), ("contexts/", ".md"))
# one folder per session (branch/mailbox.py): the messages it sends, its acknowledgements
_SESSION_FOLDERS = ("messages/", "acks/")

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


class NewerFormat(RegistryError):
    """The registry was written by a newer agent-registry: refuse to write to it."""


def shard_ref(branch: str, index: int) -> str:
    """The ref of shard *index*: a branch a forge lists, beside (never below) *branch*,
    since ``refs/heads/agent-registry/…`` cannot exist next to ``refs/heads/agent-registry``."""
    return f"refs/heads/{branch}-shards/{index:02d}"


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


def lock_shards(target: str, shards: int) -> tuple[int, ...]:
    """The shards recording a lock on *target* (and read by a claim of it)."""
    key = target_key(target)
    return tuple(range(shards)) if key is None else (_bucket("p:" + key, shards),)


def claim_shards(sid: str, targets: list[str], shards: int) -> tuple[int, ...]:
    """The refs a claim of *targets* by *sid* writes: each target's shards and the
    session's own (its ``locks:`` list), in order: the ones an atomic push names."""
    found = {session_shard(sid, shards)}
    for target in targets:
        found.update(lock_shards(target, shards))
    return tuple(sorted(found))


def place(path: str, shards: int) -> int:
    """Where the branch file *path* lives: a shard index, MAIN or EVERY.  Lock records
    (``locks/…``) have no single place: ask lock_shards with their target."""
    if path in RENDERED:
        return EVERY
    if path.startswith("locks/"):
        raise ValueError(f"{path}: a lock record lives where its target says (lock_shards)")
    for folder, suffix in _SESSION_FILES:
        name = path[len(folder):]
        if path.startswith(folder) and name.endswith(suffix) and "/" not in name:
            return session_shard(name[:-len(suffix)], shards)
    for folder in _SESSION_FOLDERS:
        sid, slash, _ = path[len(folder):].partition("/")
        if path.startswith(folder) and slash and sid:
            return session_shard(sid, shards)
    return MAIN


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
    branch's files and each shard's.  Each file goes where place() says, each lock record
    to every shard of its target (one that cannot be read to every shard: it fails
    closed wherever it is asked about); README.md and registry.md are left to each ref
    to render; the main branch gains the fence and the marker (dated *at*)."""
    main: dict[str, bytes] = {}
    parts: list[dict[str, bytes]] = [{} for _ in range(shards)]
    for path, data in files.items():
        if path in RENDERED:
            continue
        if path.startswith("locks/"):
            try:
                where = lock_shards(Lock.from_bytes(data).path, shards)
            except UnreadableRecord:
                where = tuple(range(shards))
            for index in where:
                parts[index][path] = data
            continue
        index = place(path, shards)
        (main if index == MAIN else parts[index])[path] = data
    main.update(fence_files(at))
    main[LAYOUT] = layout_bytes(shards)
    return main, parts


# -- the layout marker ------------------------------------------------------------------

def layout_bytes(shards: int) -> bytes:
    """The marker a conversion writes on the main branch."""
    return (json.dumps({"format": FORMAT, "shards": shards, "key_depth": KEY_DEPTH,
                        "requires": REQUIRES}, indent=1) + "\n").encode()


def layout_of(raw: bytes | None) -> dict:
    """The layout the marker *raw* describes (``format``, ``shards``, ``key_depth``,
    ``requires``); ``{"format": 1}`` for a single-branch registry (no marker).  One that
    cannot be read refuses (NewerFormat): it was not written by any version we know."""
    if raw is None:
        return {"format": 1}
    try:
        data = json.loads(raw)
        if isinstance(data.get("format"), int) and data["format"] >= 1:
            return data
    except (ValueError, AttributeError):
        pass
    raise NewerFormat(f"{LAYOUT} on the registry branch is unreadable: refusing to write; "
                      "fix it by hand or install the newest agent-registry")


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
