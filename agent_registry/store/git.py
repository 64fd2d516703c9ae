"""The one module that talks to git (over 400 lines: on purpose, all of it here).

Reads of loose and packed objects read their files (store/loose.py, store/packs.py);
the rest go through one persistent ``git cat-file --batch``.  Writes create loose objects
directly (the format is git's own: zlib of ``"<type> <size>\\0" + data``, named by its
hash), which saves a ``hash-object``/``mktree``/``commit-tree`` process per object, and
then move the branch with ``update-ref REF NEW OLD``, the compare-and-swap (through a kept
``git update-ref --stdin``, store/refupdates.py).
Only the trees on the paths that change are rewritten, so a write costs what it changes.

Every git process runs with a clean environment (no GIT_DIR/GIT_INDEX_FILE leaking in
from a hook) plus an explicit GIT_DIR, so registry writes can never touch the user's
index, working tree or HEAD.
"""
import os
import time
import zlib
TYPE_CHECKING = False
if TYPE_CHECKING:  # for annotations only: collections costs a one-shot command 1 ms
    from collections.abc import Iterator

    from . import spawn

from ..errors import BadInput, RegistryError, Unreadable, os_failure, shown_path
from .loose import CACHED, HEX, UNKNOWN, LooseObjects, tree_of_commit
from .rawfile import create_read_only, read_bytes
from .layout import (RefUnreadable, RepoInfo, clean_env, loose_object,
                     packed_refs, plain_layout, ref_from_files, state_path)
from .gitconfig import branch_name, config_from_files, remote_name  # noqa: F401 (re-exported)

STALE_REF_LOCK = 10.0  # seconds after which a ref's .lock file is taken for abandoned
REFLOG_IDENT = "reflog-ident"  # git's committer identity, kept for the next process (store/looseref.py)
GITLINK_MODE = b"160000"  # a submodule's commit: another repository's object
# the repairs an unreadable ref or object names
REF_REPAIR = ("run `agent-registry doctor --fix` (it restores the ref from its reflog or "
              "the remote), or repair it by hand (`git fsck`)")
OBJECT_REPAIR = ("run `git fsck`, then `agent-registry doctor --fix` (it fetches the "
                 "object again from the remote)")
# a loose object this small is stored uncompressed (zlib level 0, which git reads as any
# other): its file takes one 4 KiB block either way, and compressing the few objects of
# a claim cost it about a tenth of a millisecond
STORED_UP_TO = 4096 - 11  # zlib's header, one stored block's header, its checksum
TREE_MODE = b"40000"
BLOB_MODE = b"100644"


def _unwritable(folder: str) -> OSError | None:
    """Why *folder* cannot take a small new file right now (disk full, read-only file
    system, permission denied), or None.  git does not always name the cause ("couldn't
    write '…lock'"), and its words may be translated: a probe gives the errno."""
    # named like a ref lock, which git skips when it lists refs, should a kill leave it
    probe = os.path.join(folder, f"agent-registry-probe-{os.getpid()}.lock")
    try:
        with open(probe, "xb") as out:
            out.write(b"probe\n")
    except OSError as exc:
        return exc
    finally:
        try:
            os.unlink(probe)
        except OSError:
            pass
    return None


class GitError(RegistryError):
    """git failed in a way the registry cannot interpret."""


class CasFailed(Exception):
    """update-ref found the ref somewhere other than expected: re-read and retry."""


_VERSION: list[tuple[int, ...]] = []  # this process's git, asked once


def git_version() -> tuple[int, ...]:
    """The version of the git on PATH, e.g. (2, 39, 5); () when git does not say one.
    Read with a pattern: macOS's says ``git version 2.39.3 (Apple Git-146)``."""
    if not _VERSION:
        import re
        text = run_git(["version"]).stdout.decode(errors="replace")
        match = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
        _VERSION.append(tuple(int(n) for n in match.groups() if n) if match else ())
    return _VERSION[0]


def run_git(args: list[str], *, cwd: str | None = None, env: dict[str, str] | None = None,
            input: bytes | None = None, check: bool = True,
            timeout: float | None = None) -> "spawn.Completed":
    """git *args*, output captured; GitError when it fails and *check*.  A *timeout*
    (network commands) raises spawn.TimedOut for the caller to name, the child killed; a
    run in another directory (*cwd*) goes through subprocess (store/spawn.py)."""
    from . import spawn  # here: a read of loose objects and ref files (`lock check`) runs none
    proc = spawn.run(["git", *args], env=env, input=input, timeout=timeout, cwd=cwd)
    if check and proc.returncode != 0:
        msg = proc.stderr.decode(errors="replace").strip().splitlines()
        raise GitError(f"git {args[0]} failed: {msg[-1] if msg else proc.returncode}")
    return proc


def ref_storage(common_dir: str) -> str:
    """How the repository stores its refs: "files" (loose files and packed-refs, which
    the registry reads itself), or what ``extensions.refStorage`` names ("reftable":
    then only git reads and writes them).  From the config file; git is asked only when
    the file mentions the key."""
    path = os.path.join(common_dir, "config")
    try:
        config = read_bytes(path)
    except OSError:
        return "files"  # no config: git would not open the repository either
    if b"refstorage" not in config.lower():
        return "files"
    from . import spawn
    proc = spawn.run(["git", "config", "--file", path, "--get", "extensions.refstorage"],
                     env=clean_env())
    return proc.stdout.decode(errors="replace").strip().lower() or "files"


def discover(path: str = ".") -> RepoInfo:
    """Find the repository containing *path* the way git does (honouring GIT_DIR)."""
    if not os.path.isdir(path):
        raise BadInput(f"not a directory: {path}")
    found = plain_layout(path)
    if found is not None:
        return found
    from . import spawn
    proc = spawn.run(["git", "-C", path, "rev-parse", "--path-format=absolute",
                      "--absolute-git-dir", "--git-common-dir", "--show-object-format",
                      "--is-bare-repository", "--show-prefix"],
                     env={**os.environ, "LC_ALL": "C"})  # its reason read in English
    if proc.returncode != 0:
        # git's own reason when it gives one: a repository in a format this git does not
        # read (a reftable one for git < 2.45) is not "not a repository"; git says it
        # on two lines ("unknown repository extension found:", then the names)
        said = " ".join(proc.stderr.decode(errors="replace").split())
        why = f" ({said.removeprefix('fatal: ')})" if "extension" in said else ""
        raise BadInput(f"not a git repository: {os.path.abspath(path)}{why}")
    git_dir, common, fmt, bare, prefix = (proc.stdout.decode().split("\n") + [""] * 5)[:5]
    toplevel = None
    if bare != "true":
        cwd = os.path.realpath(path)
        depth = len([p for p in prefix.split("/") if p])
        toplevel = cwd
        for _ in range(depth):
            toplevel = os.path.dirname(toplevel)
    return RepoInfo(git_dir, common, toplevel, prefix, fmt or "sha1", ref_storage(common))


class ObjectReader:
    """Loose objects read directly (store/loose.py), anything else through a persistent
    ``git cat-file --batch``, started at the first read it is needed for: one process at
    most for every read of a command.

    A name inside a tree (``<oid>:<path>``) reads as absent (None) only when each tree
    on the way was read whole and lacks it; an object on the way that neither this nor
    git can read (missing, corrupt, cut short) raises Unreadable, naming the ref it was
    reached from (``sources``).  git's cat-file says "missing" for both, so that answer
    is walked again, object by object (:meth:`_walk`): only a damaged registry, or a
    name that is really absent from a tree git could not read for us, pays for it."""

    def __init__(self, git_dir: str, env: dict[str, str], loose: LooseObjects) -> None:
        self._git_dir = git_dir
        self._env = env
        self._loose = loose
        self._proc: "spawn.Piped | None" = None
        # object -> the ref it was reached from (a tip, its root tree), set by read_ref
        # and commit_info: an unreadable object is named with the ref a person repairs
        self.sources: dict[str, str] = {}
        self.commits: dict[str, tuple[str, tuple[str, ...], str]] = {}  # oid -> parsed

    def _start(self) -> "spawn.Piped":
        if self._proc is None:
            from . import spawn
            self._proc = spawn.Piped(["git", "cat-file", "--batch"], self._env)
        return self._proc

    def read(self, rev: str) -> tuple[str, bytes] | None:
        """(type, content) of *rev* (an oid or ``<oid>:<path>``): None for an object
        name git does not have, or a path not in its tree; Unreadable when an object on
        the way to that path cannot be read."""
        if "\n" not in rev:  # the loose answer without read_many's lists: a `lock check`
            found = self._loose.read(rev)  # reads some sixty objects one at a time
            if found is not UNKNOWN:
                return found
        return self.read_many([rev])[0]

    def read_many(self, revs: list[str], chunk: int = 200) -> list[tuple[str, bytes] | None]:
        """Like read() for many objects, pipelined: a chunk of requests is written
        before its answers are read (small enough to fit the pipe, so neither side
        blocks the other)."""
        if any("\n" in rev for rev in revs):
            raise ValueError("object name with a newline")
        out: list[tuple[str, bytes] | None] = [self._loose.read(rev) for rev in revs]
        unknown = [i for i, found in enumerate(out) if found is UNKNOWN]
        for i, found in zip(unknown, self._from_git([revs[i] for i in unknown], chunk)):
            out[i] = self._walk(revs[i]) if found is None and ":" in revs[i] else found
        return out

    def _walk(self, rev: str) -> tuple[str, bytes] | None:
        """What git's "missing" for ``<oid>:<path>`` means: None when a tree on the way,
        read whole, lacks the next name (or the path goes through a file or a
        submodule); Unreadable when an object on the way is missing or damaged.  A
        symbolic name, or a path git reads its own way, keeps git's answer."""
        oid, _, path = rev.partition(":")
        names = path.split("/") if path else []
        if len(oid) != self._loose.hex_len or not HEX.issuperset(oid) or \
                "" in names or "." in names or ".." in names:
            return None
        kind, data = self._need(oid, rev)
        if kind == "commit":
            tree = tree_of_commit(data, self._loose.hex_len)
            if tree is None:
                raise self.broken(oid, rev, "is a damaged commit (no whole tree line)")
            oid, (kind, data) = tree, self._need(tree, rev)
        width = self._loose.hex_len // 2
        for name in names:
            if kind != "tree":
                return None  # a path through a file: not there
            try:
                entries = parse_tree(data, width)
            except ValueError:
                entries = None
            if entries is None or any(len(entry) != width for _, entry in entries.values()):
                raise self.broken(oid, rev, "is a damaged tree")
            entry = entries.get(name.encode())
            if entry is None or entry[0] == GITLINK_MODE:
                return None
            oid = entry[1].hex()
            kind, data = self._need(oid, rev)
        return kind, data

    def _need(self, oid: str, rev: str) -> tuple[str, bytes]:
        """The object *oid*, which a ref or a tree names, so must be there."""
        found = self._loose.read(oid)
        if found is UNKNOWN:
            found = self._from_git([oid], 1)[0]
        if found is None:
            raise self.broken(oid, rev, "is missing or damaged")
        return found

    def remember(self, oid: str, ref: str) -> None:
        if len(self.sources) >= CACHED:  # a long-lived reader (MCP, dashboard) stays small
            self.sources.clear()
        self.sources.setdefault(oid, ref)

    def keep_commit(self, oid: str, parsed: tuple[str, tuple[str, ...], str]
                    ) -> tuple[str, tuple[str, ...], str]:
        """Keep commit *oid* parsed (store/git.py ``commit_info``): a long-lived process
        opens a view of each of the 16 shard tips per read, and a name's content never
        changes, so each commit is parsed once."""
        if len(self.commits) >= CACHED:
            self.commits.clear()
        self.commits[oid] = parsed
        return parsed

    def wrote(self, oid: str, kind: str, data: bytes) -> None:
        """Object *oid* is stored, and holds *data*: read from memory from now on."""
        self._loose.keep(oid, kind, data)

    def forget(self, oid: str | None) -> None:
        self._loose.forget(oid)
        if oid is None:
            self.commits.clear()
        else:
            self.commits.pop(oid, None)

    def broken(self, oid: str, rev: str, why: str) -> Unreadable:
        """The error for object *oid*, met reading *rev*: the ref it came from, the
        object, what is wrong with it, the path read, and the repair."""
        ref = self.sources.get(oid) or self.sources.get(rev.partition(":")[0])
        path = rev.partition(":")[2]
        return Unreadable(f"{ref + ': ' if ref else ''}object {oid} {why}"
                          f"{f' (reading {path})' if path else ''}; {OBJECT_REPAIR}",
                          details={"ref": ref, "object": oid})

    def _from_git(self, revs: list[str], chunk: int) -> list[tuple[str, bytes] | None]:
        out: list[tuple[str, bytes] | None] = []
        if not revs:
            return out
        proc = self._start()
        assert proc.stdin and proc.stdout
        for start in range(0, len(revs), chunk):
            part = revs[start:start + chunk]
            try:
                proc.stdin.write(b"".join(rev.encode() + b"\n" for rev in part))
                proc.stdin.flush()
            except BrokenPipeError:
                pass  # it stopped on one of these: the answers read below say which
            for rev in part:
                header = proc.stdout.readline()
                if not header:
                    # git dies on an object whose header reads but whose content does not
                    # (a loose file cut short): that object is the one asked for here
                    self.close()  # the next read starts another
                    raise self.broken(rev.partition(":")[0], rev,
                                      "is damaged (git cat-file stopped on it)")
                parts = header.split()
                if parts[-1] in (b"missing", b"ambiguous"):
                    out.append(None)
                    continue
                out.append((parts[1].decode(), proc.stdout.read(int(parts[2]) + 1)[:-1]))
        return out

    def close(self) -> None:
        if self._proc is not None:
            proc, self._proc = self._proc, None
            try:
                proc.stdin.close()  # type: ignore[union-attr]
            except BrokenPipeError:
                pass  # it died (on a damaged object): reaped all the same
            proc.wait()


def parse_tree(data: bytes, oid_len: int) -> dict[bytes, tuple[bytes, bytes]]:
    """name -> (mode, binary oid) of a raw tree object."""
    entries: dict[bytes, tuple[bytes, bytes]] = {}
    i = 0
    while i < len(data):
        sp = data.index(b" ", i)
        nul = data.index(b"\0", sp)
        mode, name = data[i:sp], data[sp + 1:nul]
        entries[name] = (mode, data[nul + 1:nul + 1 + oid_len])
        i = nul + 1 + oid_len
    return entries


def _tree_sort_key(item: tuple[bytes, tuple[bytes, bytes]]) -> bytes:
    name, (mode, _) = item
    return name + b"/" if mode == TREE_MODE else name


def format_tree(entries: dict[bytes, tuple[bytes, bytes]]) -> bytes:
    return b"".join(mode + b" " + name + b"\0" + oid
                    for name, (mode, oid) in sorted(entries.items(), key=_tree_sort_key))


class Repo:
    """The repository's object database and the registry ref, seen through plumbing."""

    def __init__(self, info: RepoInfo) -> None:
        self.info = info
        self.env = clean_env()
        self.env["GIT_DIR"] = info.git_dir
        self.oid_len = 32 if info.object_format == "sha256" else 20  # its digest's bytes
        self.zero_oid = "0" * (2 * self.oid_len)
        # os.path, not pathlib: the guard imports this module on every commit, and
        # pathlib (with urllib.parse) is a few ms it does not need
        self._objects = os.path.join(info.common_dir, "objects")
        self.reader = ObjectReader(info.git_dir, self.env,
                                   LooseObjects(self._objects, 2 * self.oid_len))
        self._updates = None  # the compare-and-swaps' kept git processes: a write's, made by it
        self._spares = None  # object files made ahead (store/spares.py): a long-lived writer's
        # how this filesystem compares names (branch/pathcase.Rule), set by whoever reads
        # the config (the registry, the guard); None: names are compared as they are
        self.path_rule = None
        # "files": refs read from their files here; anything else (reftable): by git
        self.ref_format = info.ref_format or ref_storage(info.common_dir)

    # -- local state -----------------------------------------------------------------
    def state_path(self, *names: str) -> str:
        """A path in the local-only state folder shared by every worktree of this clone
        (never committed); os.path, since the claim path avoids importing pathlib."""
        return state_path(self.info.common_dir, *names)

    @property
    def state_dir(self) -> "pathlib.Path":  # noqa: F821 (imported when called)
        import pathlib
        return pathlib.Path(self.state_path())

    def git(self, *args: str, check: bool = True, input: bytes | None = None,
            cwd: str | None = None) -> "spawn.Completed":
        return run_git(list(args), env=self.env, check=check, input=input, cwd=cwd)

    def index_names(self, names: list[str]) -> list[str]:
        """The index's entries that are, or are below, one of *names* spelled in any
        case (``:(icase)``): how a repository that ignores case spells them."""
        if not names or not self.info.toplevel:
            return []
        specs = [f":(top,icase,literal){name.rstrip('/')}" for name in names]
        # -C, not cwd=: a run in another directory would go through subprocess, whose
        # import a claim on such a repository would pay (store/spawn.py)
        proc = self.git("-C", self.info.toplevel, "ls-files", "-z", "--cached", "--", *specs,
                        check=False)
        return [n for n in proc.stdout.decode("utf-8", "surrogateescape").split("\0") if n]

    @property
    def updates(self):
        """The kept ``update-ref --stdin`` of this repository's compare-and-swaps
        (store/refupdates.py), made at the first: a read-only command imports none of it."""
        if self._updates is None:
            from .refupdates import RefUpdates
            self._updates = RefUpdates(self._update_ref_process,
                                       self._loose_refs if self.ref_format == "files" else None)
        return self._updates

    def _update_ref_process(self, reason: str):
        from . import spawn  # not imported where the ref moves in this process
        return spawn.Piped(["git", "update-ref", "-m", reason, "--stdin"], self.env)

    def _loose_refs(self, first: bool):
        """The in-process mover of this repository's loose branches (store/looseref.py):
        at the first move only where an earlier process kept git's identity, else made
        at the second."""
        kept = self.state_path(REFLOG_IDENT)
        if first and not os.path.exists(kept):
            return None
        from .looseref import LooseRefs

        def is_commit(oid: str) -> bool:  # as git checks a branch's new value
            try:
                found = self.reader.read(oid)
            except RegistryError:
                return False  # git's to say what is wrong with it
            return found is not None and found[0] == "commit"
        return LooseRefs(self.info.git_dir, self.info.common_dir, is_commit, kept)

    def fill_spares(self, count: int) -> None:
        """Make empty object files until *count* are spare, for the next objects this
        process writes (store/spares.py): what a long-lived writer (the MCP server) does
        between its calls, from a thread of its own, so a claim makes no file."""
        if self._spares is None:
            from .spares import SpareFiles
            self._spares = SpareFiles(self._object_file_name)
        self._spares.fill(count)

    def close(self) -> None:
        self.reader.close()
        if self._updates is not None:
            self._updates.close()
        if self._spares is not None:
            self._spares.close()

    # -- refs ------------------------------------------------------------------------
    def read_ref(self, ref: str) -> str | None:
        """The ref's commit, None when there is no such ref; Unreadable when there is one
        that cannot be read (a damaged file, a loop of symbolic refs): git ignores such a
        ref, and a registry that did would read its locks as free.  Read the way git
        stores it (the loose file, else packed-refs: an existing loose file decides, as
        in git), or through git when the refs are not files (reftable)."""
        if self.ref_format != "files":
            found = self._refs_by_git(ref).get(ref)
        else:
            try:
                found = ref_from_files(self.info.common_dir, ref, len(self.zero_oid))
            except RefUnreadable as exc:
                raise self._broken_ref(exc.ref, exc.why) from None
        if found is not None:
            self.reader.remember(found, ref)
        return found

    def _is_oid(self, value: str) -> bool:
        return len(value) == len(self.zero_oid) and HEX.issuperset(value)

    def _broken_ref(self, ref: str, why: str) -> Unreadable:
        return Unreadable(f"the ref {ref} cannot be read: {why}; {REF_REPAIR}",
                          details={"ref": ref, "object": None})

    def _packed_refs(self) -> bytes:
        try:
            return packed_refs(self.info.common_dir)
        except RefUnreadable as exc:
            raise self._broken_ref(exc.ref, exc.why) from None

    def _refs_by_git(self, pattern: str) -> dict[str, str]:
        """Ref -> commit of the refs git lists for *pattern* (itself, or refs below it):
        a repository whose refs are not files (reftable).  A git that cannot read them
        (too old for the format, a damaged table) makes them unreadable, not absent."""
        proc = self.git("for-each-ref", "--format=%(objectname) %(refname)", pattern,
                        check=False)
        if proc.returncode != 0:
            said = proc.stderr.decode(errors="replace").strip().splitlines()
            raise self._broken_ref(pattern, f"git cannot list it in this {self.ref_format} "
                                   f"repository ({said[-1] if said else proc.returncode})")
        found = {}
        for line in proc.stdout.decode("utf-8", "surrogateescape").splitlines():
            oid, _, ref = line.partition(" ")
            found[ref] = oid
        return found

    def refs_in(self, folder: str) -> dict[str, str]:
        """Ref -> commit of the refs directly in *folder* (``refs/heads/x-clones/``: not
        those in folders below it), read as read_ref reads one: with no process (loose
        files first, then packed-refs), or through git when the refs are not files."""
        if self.ref_format != "files":
            return {ref: oid for ref, oid in self._refs_by_git(folder).items()
                    if ref.startswith(folder) and "/" not in ref[len(folder):]}
        found: dict[str, str] = {}
        prefix = folder.encode()
        for line in self._packed_refs().split(b"\n"):
            oid, _, ref = line.partition(b" ")
            if ref.startswith(prefix) and b"/" not in ref[len(prefix):]:
                name, value = ref.decode("utf-8", "replace"), oid.decode("ascii", "replace")
                if not self._is_oid(value):
                    raise self._broken_ref(name, f"packed-refs holds {value[:60]!r} for it")
                found[name] = value
        try:
            names = os.listdir(os.path.join(self.info.common_dir, folder))
        except (FileNotFoundError, NotADirectoryError):
            names = []
        for name in names:
            if not name.endswith(".lock") and (oid := self.read_ref(folder + name)):
                found[folder + name] = oid
        return found

    def update_ref(self, ref: str, new: str, old: str | None, reason: str) -> None:
        """Compare-and-swap: move *ref* to *new* only if it still points at *old*.
        Through a kept ``update-ref --stdin`` (store/refupdates.py); when that does not
        go through, the one-shot ``update-ref`` decides and says why."""
        moved = self.updates.update(ref, new, old or self.zero_oid, reason)
        if moved or (moved is None and self.read_ref(ref) == new):
            return
        for attempt in range(2):
            proc = self.git("update-ref", "-m", reason, ref, new, old or self.zero_oid,
                            check=False)
            if proc.returncode == 0:
                return
            error = proc.stderr.decode(errors="replace").strip()
            folder = self._ref_place(ref)[0]
            problem = _unwritable(folder) if self.read_ref(ref) == old else None
            if problem is not None:
                # not a lost race: the ref cannot be written at all, so retrying is moot
                raise os_failure(problem, folder, writing=True)
            if attempt or not self._clear_stale_ref_lock(ref):
                raise CasFailed(error)

    def update_refs(self, moves: list[tuple[str, str | None, str | None]],
                    reason: str) -> None:
        """Compare-and-swap several refs in ONE transaction (``update-ref --stdin``): each
        (ref, new, old) moves to *new* (None: deleted) only if it still points at *old*
        (None: it must not exist), all of them or none.  CasFailed when one moved; a
        ``.lock`` a killed git left on one of them is cleared as update_ref clears it."""
        text = "".join(f"delete {ref} {old}\n" if new is None else
                       f"update {ref} {new} {old or self.zero_oid}\n" for ref, new, old in moves)
        for attempt in range(2):
            proc = self.git("update-ref", "-m", reason, "--stdin", input=text.encode(),
                            check=False)
            if proc.returncode == 0:
                return
            error = proc.stderr.decode(errors="replace").strip()
            packed = os.path.join(self.info.common_dir, "packed-refs.lock")
            cleared = [self._clear_stale_ref_lock(ref) for ref, _, _ in moves]
            if any(new is None for _, new, _ in moves) and self.ref_format == "files":
                cleared.append(self._clear_stale_ref_lock("packed-refs", packed))
            if attempt or True not in cleared:
                raise CasFailed(error)

    def _ref_place(self, ref: str) -> tuple[str, str]:
        """(the folder an update of *ref* writes in, the lock file it takes there): the
        ref's own folder and ``<ref>.lock``, or in a reftable repository the table
        folder and its ``tables.list.lock`` (every ref update writes those)."""
        if self.ref_format == "reftable":
            tables = os.path.join(self.info.common_dir, "reftable")
            return tables, os.path.join(tables, "tables.list.lock")
        path = os.path.join(self.info.common_dir, ref)
        return os.path.dirname(path), path + ".lock"

    def _clear_stale_ref_lock(self, ref: str, lock: str | None = None) -> bool:
        """Remove ``<ref>.lock`` left by a git process killed mid-update.  git holds it
        for milliseconds, and our callers hold the registry flock, so one still there
        STALE_REF_LOCK seconds after it was made is taken for abandoned, once no live
        git that could be moving a ref here is left (store/reflocks.py: one stopped in a
        hook holds its lock as long, and would rename ours onto the ref).  A young one
        is waited for (the command right after a kill meets it), not reported as a lost
        race the caller would retry at once and give up on; one a live git still holds
        STALE_REF_LOCK seconds later is refused, naming that process.  True when the
        ref may be tried again.  *lock*: another lock file to clear so (``packed-refs.lock``,
        which a transaction that deletes a ref takes)."""
        from .reflocks import movers
        lock = lock or self._ref_place(ref)[1]
        if not os.path.exists(lock):
            return False  # no lock file: the ref moved (a lost race)
        give_up = asked = 0.0
        while True:
            try:
                age = time.time() - os.stat(lock).st_mtime
            except FileNotFoundError:
                return True  # its process finished: try again
            now = time.time()
            if age >= STALE_REF_LOCK and now >= asked + 0.5:
                asked, found = now, movers(self.info)
                if found == []:
                    break
                give_up = give_up or now + STALE_REF_LOCK
                if now >= give_up:
                    who = ", ".join(found) if found is not None else \
                        "no process can be vouched for here (they cannot be listed)"
                    raise RegistryError(
                        f"{ref} is locked by {shown_path(lock)}, made {age:.0f} s ago, and a "
                        f"git may still be moving it: {who}; try again once it is done, or "
                        f"remove that file if no git process is moving {ref}")
            time.sleep(0.05)
        try:
            os.unlink(lock)
        except FileNotFoundError:
            pass
        return True

    # -- objects ---------------------------------------------------------------------
    def write_object(self, kind: str, data: bytes) -> str:
        raw = f"{kind} {len(data)}".encode() + b"\0" + data
        from .digest import hexdigest  # not hashlib: OpenSSL costs a claim ~2 ms to load
        oid = hexdigest(self.info.object_format, raw)
        final = loose_object(self.info.common_dir, oid)
        folder = os.path.dirname(final)
        if os.path.exists(final):
            self.reader.wrote(oid, kind, data)
            return oid
        packed = zlib.compress(raw, 0 if len(raw) <= STORED_UP_TO else 1)
        spare = self._spares.take(packed) if self._spares is not None else None
        tmp = spare or self._object_file_name()
        try:
            if tmp != spare:
                create_read_only(tmp, packed)
            for attempt in range(3):
                try:
                    os.replace(tmp, final)  # atomic: a reader sees the whole object or none
                    break
                except FileNotFoundError:
                    if attempt == 2:
                        raise
                    if not os.path.exists(tmp):
                        if tmp != spare:
                            raise
                        # a spare file removed since it was made (git prune removes
                        # temporary files): the object through a file made now
                        tmp = self._object_file_name()
                        create_read_only(tmp, packed)
                        continue
                    # no fan-out folder yet, or a `git gc` of this repository
                    # (prune-packed) removed it, emptied by packing, after makedirs: as
                    # git itself does, make it (again)
                    os.makedirs(folder, exist_ok=True)
        except BaseException as exc:
            if os.path.exists(tmp):
                os.unlink(tmp)
            if isinstance(exc, OSError):  # disk full, read-only, permission: one line
                raise os_failure(exc, self._objects, writing=True) from None
            raise
        self.reader.wrote(oid, kind, data)
        return oid

    def _object_file_name(self) -> str:
        return os.path.join(self._objects, f"tmp_obj_{os.getpid()}_{os.urandom(4).hex()}")

    def _named(self, rev: str, found: tuple[str, bytes] | None) -> tuple[str, bytes] | None:
        """*found* as read for *rev*; a bare object name here comes from a tree or a
        commit (every caller's), so git not having it is damage, not absence."""
        if found is None and ":" not in rev:
            raise self.reader.broken(rev, rev, "is missing or damaged")
        return found

    def read_blob(self, rev: str) -> bytes | None:
        """The file *rev* names (``<tree>:<path>``, or a blob's name from a tree): None
        when the path is not there or is no file; Unreadable when it cannot be read."""
        found = self._named(rev, self.reader.read(rev))
        return found[1] if found and found[0] == "blob" else None

    def read_blobs(self, revs: list[str]) -> list[bytes | None]:
        out = []
        for rev, found in zip(revs, self.reader.read_many(revs)):
            found = self._named(rev, found)
            out.append(found[1] if found and found[0] == "blob" else None)
        return out

    def read_tree(self, rev: str) -> dict[bytes, tuple[bytes, bytes]]:
        """The entries of the tree *rev* names ({} when the path is not there or is no
        tree); Unreadable when it cannot be read, or is not a tree git wrote."""
        found = self._named(rev, self.reader.read(rev))
        if not found or found[0] != "tree":
            return {}
        try:
            return parse_tree(found[1], self.oid_len)
        except ValueError:
            raise self.reader.broken(rev.partition(":")[0], rev, "is a damaged tree") from None

    def commit_tree(self, tree: str, parents: list[str], message: str, author: str,
                    timestamp: int) -> str:
        ident = f"{author} {timestamp} +0000"
        lines = [f"tree {tree}", *(f"parent {p}" for p in parents),
                 f"author {ident}", f"committer agent-registry <agent-registry@localhost> {timestamp} +0000",
                 "", message.rstrip("\n") + "\n"]
        return self.write_object("commit", "\n".join(lines).encode())

    def commit_info(self, oid: str) -> tuple[str, list[str], str]:
        """(tree, parents, message) of a commit, which a ref or another commit names:
        Unreadable when it is missing or damaged (cut short: no whole tree line, no
        committer), never an empty tree that would read as an empty registry."""
        known = self.reader.commits.get(oid)
        if known is None:
            found = self.reader.read(oid)
            if found is None:
                raise self.reader.broken(oid, oid, "is missing or damaged")
            if found[0] != "commit":
                raise GitError(f"not a commit: {oid}")
            head, _, message = found[1].decode(errors="replace").partition("\n\n")
            tree = tree_of_commit(found[1], len(self.zero_oid))
            if tree is None or "\ncommitter " not in head:
                raise self.reader.broken(oid, oid, "is a damaged commit (cut short)")
            parents = [line[7:] for line in head.splitlines() if line.startswith("parent ")]
            known = self.reader.keep_commit(oid, (tree, tuple(parents), message))
        tree, parents, message = known
        if oid in self.reader.sources:
            self.reader.remember(tree, self.reader.sources[oid])
        return tree, list(parents), message

    def edit_tree(self, base_tree: str | None, changes: dict[str, bytes | None]) -> str:
        """A new root tree: *base_tree* with each path set to a blob (bytes) or removed
        (None).  Only the trees along changed paths are read and rewritten."""
        nested: dict = {}
        for path, data in changes.items():
            node = nested
            *dirs, name = path.split("/")
            for d in dirs:
                node = node.setdefault(d, {})
            node[name] = data
        return self._edit(base_tree, nested) or self.write_object("tree", b"")

    def _edit(self, tree_oid: str | None, nested: dict) -> str | None:
        entries = self.read_tree(tree_oid) if tree_oid else {}
        for name, change in nested.items():
            key = name.encode()
            if isinstance(change, dict):
                old = entries.get(key)
                sub = self._edit(old[1].hex() if old and old[0] == TREE_MODE else None, change)
                if sub is None:
                    entries.pop(key, None)
                else:
                    entries[key] = (TREE_MODE, bytes.fromhex(sub))
            elif change is None:
                entries.pop(key, None)
            else:
                entries[key] = (BLOB_MODE, bytes.fromhex(self.write_object("blob", change)))
        if not entries:
            return None  # git has no empty subtrees: the parent drops this name
        return self.write_object("tree", format_tree(entries))

    def list_tree(self, rev: str) -> "Iterator[tuple[str, bool, str]]":
        """(name, is_tree, oid) of the entries of a tree named by *rev*."""
        for name, (mode, oid) in self.read_tree(rev).items():
            yield name.decode(errors="replace"), mode == TREE_MODE, oid.hex()

    # -- damage: what `doctor` examines and repairs ---------------------------------------
    def ref_names(self, prefix: str) -> list[str]:
        """Every ref whose name starts with *prefix*, those that cannot be read included
        (git's for-each-ref passes over them with a warning)."""
        folder = prefix.rpartition("/")[0]
        if self.ref_format != "files":
            return sorted(r for r in self._refs_by_git(folder + "/") if r.startswith(prefix))
        names = {ref.decode("utf-8", "replace") for line in self._packed_refs().split(b"\n")
                 if (ref := line.partition(b" ")[2]).startswith(prefix.encode())}
        for where, _, files in os.walk(os.path.join(self.info.common_dir, folder)):
            for name in files:
                ref = os.path.relpath(os.path.join(where, name), self.info.common_dir)
                ref = ref.replace(os.sep, "/")
                if ref.startswith(prefix) and not name.endswith(".lock"):
                    names.add(ref)
        return sorted(names)

    def read_whole(self, tip: str) -> None:
        """Read commit *tip* and every tree and file of it, as commands read them:
        Unreadable at the first that cannot be read."""
        trees, blobs = [self.commit_info(tip)[0]], []
        while trees:
            for mode, oid in self.read_tree(trees.pop()).values():
                if mode == TREE_MODE:
                    trees.append(oid.hex())
                elif mode != GITLINK_MODE:
                    blobs.append(oid.hex())
        self.read_blobs(blobs)

    def reflog_tip(self, ref: str) -> str | None:
        """Where the reflog last moved *ref* to (files only: reftable keeps its own)."""
        try:
            lines = read_bytes(os.path.join(self.info.common_dir, "logs", ref)).splitlines()
        except OSError:
            return None
        value = lines[-1].split(b" ", 2)[1].decode("ascii", "replace") if lines and \
            lines[-1].count(b" ") >= 2 else ""
        return value if self._is_oid(value) and value != self.zero_oid else None

    def set_aside(self, oid: str) -> str | None:
        """Move the loose file of the damaged object *oid* into the local state folder
        (``damaged/``, kept for a person), so that a copy fetched again is the one read:
        git would refuse a fetched copy that differs from it, and this reader reads the
        loose file first.  The new place, or None when the object is not loose."""
        path = loose_object(self.info.common_dir, oid)
        if not os.path.exists(path):
            return None
        aside = self.state_path("damaged", oid)
        os.makedirs(os.path.dirname(aside), exist_ok=True)
        os.replace(path, aside)
        self.reader.forget(oid)
        return aside

    def mismatched_packs(self) -> list[str]:
        """The index files of the packs that do not match them (cut short): git reads
        none of their objects, and `git fsck` and `gc` stop on them."""
        from .packs import Packs
        return Packs(self._objects, 2 * self.oid_len).mismatches()

    def set_aside_packs(self) -> list[str]:
        """Move each pack that does not match its index, with its index and the files
        beside them, into ``damaged/``.  The packs' names."""
        moved = []
        for idx in self.mismatched_packs():
            base = idx[:-len(".idx")]
            os.makedirs(self.state_path("damaged"), exist_ok=True)
            for ext in (".pack", ".rev", ".bitmap", ".idx"):  # the index last: git's order
                if os.path.exists(base + ext):
                    os.replace(base + ext, self.state_path("damaged", os.path.basename(base + ext)))
            moved.append(os.path.basename(base) + ".pack")
        if moved:
            self.reader.forget(None)
        return moved

    def drop_damaged_ref(self, ref: str) -> bool:
        """Remove the loose file of a ref that cannot be read (empty, garbage, a loop),
        so git can write it again; False when the ref's damage is not its own file."""
        if self.ref_format != "files":
            return False
        try:
            self.read_ref(ref)
            return False
        except Unreadable:
            pass
        try:
            os.unlink(os.path.join(self.info.common_dir, ref))
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return False
        return True


def read_config(git_dir: str) -> dict[str, str]:
    """``agent-registry.*`` keys of git config (lower-cased names), ``remote.origin.url``
    (whether sync has a default remote), ``core.ignorecase`` and
    ``core.precomposeunicode`` (how names compare: branch/pathcase): from the files when none
    mentions us (a ``git config`` process is a millisecond or two of every command),
    else from git, in one process."""
    known = config_from_files(git_dir)
    if known is not None:
        return known
    from . import spawn
    proc = spawn.run(["git", "config", "-z", "--get-regexp",
                      r"^(agent-registry\.|remote\.origin\.url$|core\.ignorecase$|"
                      r"core\.precomposeunicode$)"],
                     env={**clean_env(), "GIT_DIR": git_dir})
    out = {}
    for item in proc.stdout.decode(errors="replace").split("\0"):
        if item:
            key, _, value = item.partition("\n")
            out[key.lower()] = value
    return out
