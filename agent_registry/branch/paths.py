"""Lock targets: validation, normalization, where their records live, and overlap.

A target is a file (``src/a.py``), a directory (``src/auth/``, trailing slash), a glob
(``src/**/*.py``, git wildmatch), or a literal name with glob characters, stored with
git's pathspec magic (``:(literal)a[1].py``).  Every decision about which paths a target
covers goes through :func:`covers`.  Standard library only: the guard imports this.
"""
import os
import posixpath
TYPE_CHECKING = False
if TYPE_CHECKING:  # for annotations only: collections costs a one-shot command 1 ms
    from collections.abc import Iterable

from ..errors import BadInput
from . import pathforms as W
from ..store.lazyre import ALNUM, LazyPattern, spelled_with

GLOB_CHARS = "*?["
# git pathspec magic: how an argument says it is a literal name or a glob
LITERAL = ":(literal)"
GLOB = ":(glob)"
_SESSION_ID_CHARS = ALNUM | frozenset("._:@+-")  # [A-Za-z0-9][A-Za-z0-9._:@+-]{0,127}
# refused in every text an agent gives (and in paths): C0, DEL, C1, and the bidi controls
# that reorder what a terminal shows (U+202A-U+202E embeddings and overrides, U+2066-U+2069
# isolates, U+200E/U+200F marks, U+061C arabic letter mark)
_CONTROL = LazyPattern("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
TAG = LazyPattern(r"[A-Za-z0-9][A-Za-z0-9._:@+/-]{0,63}")


def is_session_id(text: str) -> bool:
    return spelled_with(text, ALNUM, _SESSION_ID_CHARS, 128)


def validate_session_id(sid: str | None) -> str:
    if sid is None:
        raise BadInput("no session id: pass one or set AGENT_REGISTRY_SESSION")
    if not sid.strip():
        raise BadInput("empty session id")
    if not is_session_id(sid):
        raise BadInput(f"invalid session id {sid!r}: use letters, digits and ._:@+- "
                       "(at most 128, starting with a letter or digit)")
    return sid


# the one size cap of every text an agent gives, on every face (CLI, MCP, hooks, the
# dashboard): a message body, a diary line, working-on, a wiki field, a reason
MAX_TEXT = 64 * 1024  # bytes of UTF-8


# the longest path any face takes (CLI, MCP, hooks, the library): PATH_MAX on Linux, so no
# file of a longer name can be written; the dashboard's forms cap at the same length
MAX_PATH = 4096  # bytes of UTF-8


def has_control(text: str) -> bool:
    """Whether *text* holds a control or bidi character.  Printable ASCII, the usual
    text, is told without the pattern, whose wide Unicode class costs a one-shot command
    more to compile than the rest of its checks."""
    return not (text.isascii() and text.isprintable()) and bool(_CONTROL.search(text))


def validate_text(label: str, value: str, *, allow_newlines: bool = False) -> str:
    if len(value) > MAX_TEXT // 4 and len(value.encode("utf-8", "surrogatepass")) > MAX_TEXT:
        raise BadInput(f"{label} is over {MAX_TEXT // 1024} KiB")
    bad = value.replace("\n", "").replace("\t", "") if allow_newlines else value
    if has_control(bad):
        raise BadInput(f"{label} contains a control character")
    return value


def validate_tag(tag: str) -> str:
    """A session tag (``register --tag``) or a room name: one word, no control characters."""
    if not TAG.fullmatch(tag or ""):
        raise BadInput(f"invalid tag {tag!r}: use letters, digits and ._:@+/- (at most 64, "
                       "starting with a letter or digit)")
    return tag


def is_glob(target: str) -> bool:
    """Is *target* a pattern?  A stored literal name (``:(literal)a[1].py``) is not."""
    # spelled out, not any() over GLOB_CHARS: `status` asks it of every held path
    return ("*" in target or "?" in target or "[" in target) and not target.startswith(LITERAL)


def is_dir(target: str) -> bool:
    return target.endswith("/")


def normalize(raw: str, *, toplevel: str | None, prefix: str = "", rule=None,
              windows: bool | None = None) -> str:
    """Repo-relative POSIX form of *raw*, given relative to the cwd (like git paths).

    ``./src/a.py`` -> ``src/a.py``; an existing directory gets a trailing ``/``.
    Symlinks inside the repository (the path's own and its folders') are resolved, as
    the predecessor resolved real paths, so a link and its target are one lock; a
    symlink that leads outside the repository is refused.  Refuses empty and blank
    paths, NUL and control characters, paths over MAX_PATH bytes, and anything outside
    the repo.

    On Windows (*windows*, by default ``os.sep``) a backslash separates folders and a
    drive letter (``C:\\repo\\a.py``, ``C:/repo/a.py``, Git Bash's ``/c/repo/a.py``)
    starts an absolute path, as git for Windows reads them; elsewhere a backslash is a
    character of the name, as git reads it there (see branch/pathforms.py).  *rule*
    (branch/pathcase.Rule) spells the path as this filesystem does: NFC when names are
    precomposed, each existing folder and file as the disk has it when case is ignored.
    """
    if not raw.strip():
        raise BadInput(f"blank path {raw!r}" if raw else "empty path")
    if len(raw) > MAX_PATH // 4 and len(raw.encode("utf-8", "surrogatepass")) > MAX_PATH:
        raise BadInput(f"path {raw[:40]!r}… is over {MAX_PATH} bytes ({len(raw)} characters): "
                       "longer than any file's path can be")
    if has_control(raw):
        raise BadInput(f"path {raw!r} contains a control character")
    windows = os.sep == "\\" if windows is None else windows
    path = raw.replace("\\", "/") if windows else raw
    if rule is not None and rule.folds:
        path = rule.spelled(path)
    wants_dir = path.endswith("/") or path.endswith("/.")
    top = W.top(toplevel, windows)
    if windows:
        path = W.drive_path(path, top)
    if posixpath.isabs(path) or (windows and W.DRIVE.match(path)):
        if top is None:
            raise BadInput(f"absolute path {raw!r} in a bare repository")
        path = _relative(top, posixpath.normpath(path), windows) or \
            (not windows and _relative(top, os.path.realpath(path))) or ".."
    else:
        path = posixpath.join(prefix, path)
    path = _inside(posixpath.normpath(path) if path else ".", raw)
    # the disk is asked below the worktree, unless it is a Windows root named on Linux (tests)
    probe = bool(top) and (not windows or os.path.isdir(top))
    if probe:
        path = _inside(_resolve_links(path, top, raw), raw)
        if not windows and "\\" in path:
            W.backslash(path, top, raw)
        if rule is not None and rule.ignorecase:  # .GIT/config is .git/config here
            path = _inside(rule.on_disk(top, path), raw)
    if not wants_dir and not is_glob(path) and probe and os.path.isdir(os.path.join(top, path)):
        wants_dir = True
    return path + "/" if wants_dir else path


def _inside(path: str, raw: str) -> str:
    """*path* (normalized, repo-relative) unless it leaves the repository or is in .git."""
    if path in (".", "") or path == ".." or path.startswith("../"):
        raise BadInput(f"path {raw!r} is outside the repository")
    if path == ".git" or path.startswith(".git/"):
        raise BadInput(f"path {raw!r} is inside .git")
    return path


def _relative(top: str, path: str, windows: bool = False) -> str | None:
    """*path* (absolute) relative to the folder *top*, or None when it is not below it."""
    if windows:
        return W.relative(top, path)
    rel = os.path.relpath(path, top).replace(os.sep, "/")
    return None if rel == ".." or rel.startswith("../") else rel


def _resolve_links(path: str, top: str, raw: str) -> str:
    """*path* with the symlinks among its leading components resolved (up to the first
    one with glob characters): a link and its target must be one lock."""
    parts = path.split("/")
    cut = next((i for i, part in enumerate(parts) if is_glob(part)), len(parts))
    if cut == 0:
        return path
    here = os.path.join(top, *parts[:cut])
    real = os.path.realpath(here)
    if real == here:  # no symlink on the way: the common case costs one realpath
        return path
    rel = _relative(top, real)
    if rel is None:
        raise BadInput(f"path {raw!r} is a symlink (or inside one) that leads to {real}, "
                       "outside the repository")
    return "/".join([rel, *parts[cut:]])


_hexdigest = None  # store.digest's, imported when the first name is made


def sha1_hex(text: str) -> str:
    """The hex SHA-1 of *text*: how records, shards and wiki entries are named (through
    store.digest, which spares the claim path hashlib; kept after the first name, as
    `status` names every record it reads)."""
    global _hexdigest
    if _hexdigest is None:
        from ..store.digest import hexdigest as _hexdigest
    return _hexdigest("sha1", text.encode())


def record_name(target: str) -> str:
    """Where a lock on *target* is stored: fanned out by 2 hex chars, globs apart."""
    digest = sha1_hex(target)
    if is_glob(target):
        return f"locks/patterns/{digest}.json"
    return f"locks/{digest[:2]}/{digest}.json"


def lookup_keys(path: str) -> list[str]:
    """The targets that would cover or meet *path* (a file, or a directory ending in
    ``/``) with no pattern: its own, its twin of the other kind (``src/gen`` and
    ``src/gen/`` name one thing: :func:`covers`), and each ancestor directory's (in their
    stored form: see :func:`literal`)."""
    return [literal(key) for key in [path, twin(path), *ancestors(path)]]


def twin(path: str) -> str:
    """The other kind of the same name: the folder ``src/gen/`` of the file ``src/gen``,
    and the other way round."""
    return path[:-1] if path.endswith("/") else path + "/"


def ancestors(path: str) -> list[str]:
    """The directories above *path*, outermost first, each with its trailing slash."""
    parts = path.rstrip("/").split("/")
    return ["/".join(parts[:i]) + "/" for i in range(1, len(parts))]


def literal(path: str) -> str:
    """The stored target of the file or directory named *path*, taken literally: the
    name itself, or ``:(literal)NAME`` when the name contains glob characters."""
    return LITERAL + path if is_glob(path) else path


def plain(target: str) -> str:
    """The name of a literal target without its ``:(literal)`` magic."""
    return target[len(LITERAL):] if target.startswith(LITERAL) else target


def target(raw: str, *, toplevel: str | None, prefix: str = "", new: bool = True,
           rule=None) -> str:
    """The stored target an argument names, with git's pathspec magic: ``:(literal)NAME``
    is always that name, ``:(glob)PATTERN`` always a glob; a plain argument with glob
    characters is literal when it names an existing file or directory, else a glob.
    The syntax of a *new* glob (one about to be claimed) is checked here (BadInput,
    exit 2), so that no bad pattern is stored; one already stored can still be named."""
    magic = LITERAL if raw.startswith(LITERAL) else GLOB if raw.startswith(GLOB) else ""
    body = raw[len(magic):]
    path = normalize(body, toplevel=toplevel, prefix=prefix, rule=rule)
    if not is_glob(path):
        return path
    name = path.rstrip("/")
    exists = bool(toplevel) and os.path.lexists(os.path.join(toplevel, name))
    if magic == LITERAL or (not magic and exists):
        is_folder = bool(toplevel) and os.path.isdir(os.path.join(toplevel, name))
        return literal(name + "/" if is_folder or path.endswith("/") else name)
    problem = glob_error(name) if new else None
    if problem:
        raise BadInput(f"invalid glob {body!r}: {problem} (to name a file of that name "
                       f"literally, write '{LITERAL}{body}')")
    return path


def literal_prefix(target: str) -> str:
    """The directory part of a glob before its first wildcard (``src/a/`` of
    ``src/a/*.py``): every path the glob can cover starts with it.  A directory or
    file target is its own prefix."""
    if not is_glob(target):
        return plain(target)
    stops = [i for i in (target.find(c) for c in GLOB_CHARS + "\\") if i != -1]
    head = target[:min(stops)]
    return head[:head.rfind("/") + 1]


def glob_error(pattern: str) -> str | None:
    """Why the glob *pattern* cannot be compiled (branch/wildmatch.py), or None; that
    module is imported on first need: most commands meet no glob."""
    from .wildmatch import glob_error as problem
    return problem(pattern)


def _glob_covers(pattern: str, path: str) -> bool:
    """Does the glob *pattern* cover the file *path*: match it or one of its directories
    (a pattern ending in ``/`` matches directories only), or equal it literally, as git
    pathspecs do?  A pattern that cannot be compiled fails closed: it covers everything
    under its literal prefix (callers warn about the record)."""
    bare = pattern.rstrip("/")
    dirs = [folder[:-1] for folder in ancestors(path)]
    names = dirs if pattern.endswith("/") else [path, *dirs]
    from .wildmatch import BadPattern, wildmatch
    try:
        return any(name == bare or wildmatch(bare, name) for name in names)
    except BadPattern:
        return path.startswith(literal_prefix(pattern))


def covers(target: str, path: str) -> bool:
    """Does a lock on *target* cover the file *path*?  The one matching function: the
    guard calls it for each path a commit changes, and claims and ``lock check`` reach
    it through :func:`overlaps` for every file target.  A folder lock covers a file of
    its own name too (``src/gen/`` covers ``src/gen``): one name is a file or a folder,
    never both, so a file lock and a folder lock on it meet."""
    if is_glob(target):
        return _glob_covers(target, path)
    name = plain(target)
    if is_dir(name):
        return path.startswith(name) or path == name[:-1]
    return path == name


def overlaps(a: str, b: str) -> bool:
    """Could a path be covered by both targets?  When in doubt: yes."""
    if not is_glob(b) and not is_dir(b):
        return covers(a, plain(b))
    if not is_glob(a) and not is_dir(a):
        return covers(b, plain(a))
    pa, pb = literal_prefix(a), literal_prefix(b)
    return pa.startswith(pb) or pb.startswith(pa)


def csv_items(value: "Iterable[str] | str") -> list[str]:
    """A list field given as "a, b" or as items: stripped, blanks dropped, each checked."""
    if isinstance(value, str):
        value = value.split(",")
    items = [v.strip() for v in value if v and v.strip()]
    for item in items:
        validate_text("list item", item)
    return items
