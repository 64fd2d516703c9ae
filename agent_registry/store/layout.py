"""Where a repository lives (:data:`RepoInfo`), and :func:`plain_layout`: finding it from
its files, without a ``git rev-parse`` process; :func:`ref_from_files`: a ref's commit from
its files, which the Repo's read_ref reads too.

Apart from store/git.py (which re-exports both, and :func:`clean_env`) so that what runs
after every tool call (the after-tool hook's quick path, harness/after.py) finds the
repository without importing the git module and what it imports (zlib, the object and
ref writers): about 1 ms of a process that is mostly the interpreter starting
(docs/benchmarks.md); and the backstop's note lists a held folder (harness/held.py)
through store/spawn.py with the environment git runs with everywhere.
"""
import os

from .tuples import named

# A named tuple, not a dataclass: importing dataclasses (inspect, ast, ...) would cost the
# guard, which runs on every commit, several milliseconds.
RepoInfo = named("RepoInfo", "git_dir common_dir toplevel prefix object_format ref_format",
                 ("",))
RepoInfo.__doc__ = """Where a repository lives.  git_dir: this worktree's git dir;
common_dir: shared by all worktrees (refs, objects, our local state); toplevel: the
worktree, None for a bare repository; prefix: the cwd relative to toplevel ("" or
"sub/dir/"); object_format: "sha1" or "sha256"; ref_format: "files", "reftable", or ""
(not read yet: the Repo reads it, ref_storage)."""

# Environment variables that describe *where* git works: inherited from a hook they would
# redirect our plumbing at the user's index.  Everything else (config, ssh, proxies,
# tracing) is the user's and is kept.
_GIT_LOCATION_VARS = {
    "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_COMMON_DIR", "GIT_NAMESPACE", "GIT_PREFIX",
    "GIT_QUARANTINE_PATH", "GIT_REFLOG_ACTION", "GIT_EDITOR", "GIT_INTERNAL_SUPER_PREFIX",
    "GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_AUTHOR_DATE",
    "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL", "GIT_COMMITTER_DATE",
}


def clean_env(base: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    for name in _GIT_LOCATION_VARS:
        env.pop(name, None)
    env.setdefault("GIT_TERMINAL_PROMPT", "0")
    # git's messages in English whatever the person's language: the registry reads them
    # (which failure a push met, a ref another process holds, no atomic pushes there)
    env["LC_ALL"] = "C"
    return env


# any of these set, git's discovery is not the plain walk up the directories
_DISCOVERY_ENV = ("GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY",
                  "GIT_CEILING_DIRECTORIES", "GIT_DISCOVERY_ACROSS_FILESYSTEM", "GIT_CONFIG",
                  "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT")


def plain_layout(path: str) -> RepoInfo | None:
    """The repository of *path* read from the files, without a ``git rev-parse`` process
    (a sixth of a one-shot `lock check`'s processes and their start-up): only the plain
    layout, a worktree whose ``.git`` (a folder, or a file naming a linked worktree's)
    is found walking up within one filesystem, owned by this user, sha1, not bare, no
    core.worktree or include in its config, nothing in the environment that moves it.
    None for anything else: then git says."""
    if os.sep != "/" or any(os.environ.get(name) for name in _DISCOVERY_ENV):
        return None
    here = os.path.realpath(path)
    if "/.git/" in here + "/":
        return None  # inside a git directory: git's answer differs
    try:
        device = os.stat(here).st_dev
        top = here
        while not os.path.lexists(os.path.join(top, ".git")):
            if all(os.path.exists(os.path.join(top, n)) for n in ("HEAD", "objects", "refs")):
                return None  # a bare repository (or a git directory) on the way up
            parent = os.path.dirname(top)
            if parent == top or os.stat(parent).st_dev != device:
                return None
            top = parent
        git_dir = os.path.join(top, ".git")
        if os.path.isfile(git_dir):
            with open(git_dir) as f:
                line = f.readline().strip()
            if not line.startswith("gitdir: "):
                return None
            git_dir = os.path.join(top, line[8:])
        git_dir = os.path.realpath(git_dir)
        common = git_dir
        if os.path.exists(os.path.join(git_dir, "commondir")):
            with open(os.path.join(git_dir, "commondir")) as f:
                common = os.path.realpath(os.path.join(git_dir, f.read().strip()))
        if not os.path.isfile(os.path.join(git_dir, "HEAD")) or any(
                os.stat(d).st_uid != os.geteuid() for d in (top, git_dir, common)):
            return None  # not a repository, or git's ownership check has a say
        with open(os.path.join(common, "config"), "rb") as f:
            config = f.read().lower()
    except OSError:
        return None
    if any(word in config.replace(b"bare = false", b"") for word in (
            b"objectformat", b"worktree", b"bare", b"include", b"[extensions")):
        # sha256, core.worktree, bare (in any spelling: true, 1, yes), includes, any
        # extension (reftable, per-worktree config): let git say
        return None
    prefix = "" if here == top else os.path.relpath(here, top) + "/"
    return RepoInfo(git_dir, common, top, prefix, "sha1", "files")  # no extension: files



def worktrees(info: RepoInfo) -> dict[str, str]:
    """Real path of each worktree of this repository -> its git dir, read from the
    files git keeps (no process): the main one (beside a ``.git`` common dir), this one,
    and each linked one (its ``worktrees/<name>/gitdir`` names its ``.git`` file)."""
    common = info.common_dir.rstrip("/")
    found: dict[str, str] = {}
    if os.path.basename(common) == ".git":
        found[os.path.realpath(os.path.dirname(common))] = common
    if info.toplevel:  # this one, whatever its kind (a main one's --separate-git-dir)
        found[os.path.realpath(info.toplevel)] = info.git_dir
    folder = os.path.join(common, "worktrees")
    try:
        names = os.listdir(folder)
    except OSError:
        names = []
    for name in names:
        try:
            with open(os.path.join(folder, name, "gitdir")) as f:
                dot_git = f.read().strip()
        except OSError:
            continue
        found[os.path.realpath(os.path.dirname(dot_git))] = os.path.join(folder, name)
    return found


def loose_object(common_dir: str, oid: str) -> str:
    """The file the loose object *oid* is kept in (git's fan-out: ``objects/xx/rest``)."""
    return os.path.join(common_dir, "objects", oid[:2], oid[2:])


def state_path(common_dir: str, *names: str) -> str:
    """A path in the local-only state folder shared by every worktree of a clone."""
    return os.path.join(common_dir, "agent-registry", *names)


# the folder of the marks of high messages in it (store/urgent.py writes them): named here,
# where the hooks around every tool call look for one without importing what writes them
URGENT = "urgent"


def packed_oid(packed: bytes, ref: str) -> bytes | None:
    """The object id field of *ref*'s line in the bytes of packed-refs (``<oid> <ref>``),
    None when it has no such line."""
    end = packed.find(b" " + ref.encode() + b"\n")
    return None if end < 0 else packed[packed.rfind(b"\n", 0, end) + 1:end]


SYMREF_DEPTH = 5  # symbolic refs followed before a chain is a loop (git's SYMREF_MAXDEPTH)


class RefUnreadable(ValueError):
    """A ref that is there but cannot be read (a damaged or unreadable file, a loop of
    symbolic refs): git ignores such a ref, and a registry that did would read its locks
    as free.  *ref*: the ref (or ``packed-refs``) at fault; *why*: what is wrong."""

    def __init__(self, ref: str, why: str) -> None:
        super().__init__(f"{ref}: {why}")
        self.ref, self.why = ref, why


def packed_refs(common_dir: str) -> bytes:
    """packed-refs, b"" when there is none; one cut short is unreadable (git stops at its
    unterminated line)."""
    from .rawfile import read_bytes  # loaded already wherever the Repo is
    try:
        packed = read_bytes(os.path.join(common_dir, "packed-refs"))
    except FileNotFoundError:
        return b""
    except OSError as exc:
        raise RefUnreadable("packed-refs", f"it cannot be read ({exc.strerror})") from None
    if packed and not packed.endswith(b"\n"):
        raise RefUnreadable("packed-refs", "it is cut short (no end of line)")
    return packed


def ref_from_files(common_dir: str, ref: str, oid_length: int = 40) -> str | None:
    """*ref*'s commit read from the files as git reads it (its loose file, else its line
    in packed-refs: an existing loose file decides, as in git; symbolic refs followed
    within refs/), None when it has neither; RefUnreadable for a ref that is there but
    cannot be read.  The Repo's read_ref (files refs) and the wiki's quick path both read
    a ref here; *oid_length*: 64 in a sha256 repository."""
    from .rawfile import read_bytes
    name = ref
    for _ in range(SYMREF_DEPTH + 1):
        try:
            value: bytes | None = read_bytes(os.path.join(common_dir, name)).strip()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            value = None  # a folder of refs below that name is no ref either
        except OSError as exc:
            raise RefUnreadable(name, f"its file cannot be read ({exc.strerror})") from None
        if value is None:
            raw = packed_oid(packed_refs(common_dir), name)
            if raw is None:
                return None
            oid = raw.decode("ascii", "replace")
            if not _is_oid(oid, oid_length):
                raise RefUnreadable(name, f"packed-refs holds {oid[:60]!r} for it")
            return oid
        if not value.startswith(b"ref: "):
            oid = value.decode("ascii", "replace")
            if not _is_oid(oid, oid_length):
                raise RefUnreadable(ref, f"its file {name} holds "
                                    f"{'nothing' if not value else repr(value[:60])}")
            return oid
        name = value[5:].strip().decode("utf-8", "replace")
        if not name.startswith("refs/") or any(
                part in ("", ".", "..") for part in name.split("/")):
            raise RefUnreadable(ref, f"a symbolic ref to {name!r}, outside refs/")
    raise RefUnreadable(ref, f"a loop of symbolic refs (more than {SYMREF_DEPTH}, "
                        f"through {name})")


def _is_oid(value: str, length: int) -> bool:
    return len(value) == length and not value.strip("0123456789abcdef")
