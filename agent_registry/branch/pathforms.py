"""How a path argument is written: Windows separators and drives, and a backslash
where it is part of a name.  Standard library only (the guard imports branch/paths)."""
import os

from ..errors import BadInput
from ..store.lazyre import LazyPattern

# a Windows path with a drive (``C:/``, ``c:``), and Git Bash's spelling of one (``/c/``)
DRIVE = LazyPattern(r"[A-Za-z]:(?:/|\Z)")
_GIT_BASH_DRIVE = LazyPattern(r"/([A-Za-z])(?=/|\Z)")


def top(toplevel: str | None, windows: bool) -> str | None:
    """The worktree's real path; on Windows with forward slashes (``C:/work/repo``, as
    git for Windows prints it), and as given when it names no folder here (a Windows
    root in a test on Linux)."""
    if not toplevel:
        return None
    if not windows:
        return os.path.realpath(toplevel)
    real = os.path.realpath(toplevel) if os.path.isdir(toplevel) else toplevel
    return real.replace("\\", "/").rstrip("/") or "/"


def drive_path(path: str, root: str | None) -> str:
    """Git Bash's ``/c/work/a.py`` as ``C:/work/a.py`` when the worktree is on a drive."""
    found = _GIT_BASH_DRIVE.match(path)
    if found and root and DRIVE.match(root):
        return f"{found.group(1).upper()}:" + (path[2:] or "/")
    return path


def backslash(path: str, root: str, raw: str) -> None:
    """On Linux and macOS a backslash is part of a name (git takes ``src\\a.py`` so);
    but a name with one that names nothing, where its slashed twin exists, is a Windows
    spelling: refused, so that no lock lands on a file nobody has."""
    if os.path.lexists(os.path.join(root, path)):
        return
    twin = path.replace("\\", "/")
    if os.path.lexists(os.path.join(root, twin)):
        raise BadInput(f"path {raw!r} names no file, and a backslash is part of a name "
                       f"here, not a separator: write {twin}")


def relative(root: str, path: str) -> str | None:
    """*path* below the worktree *root*, both ``C:/...`` forms, compared as Windows
    compares them (without case); ``.`` for the worktree itself, None outside it."""
    if path.casefold() == root.casefold():
        return "."
    head = root.rstrip("/") + "/"
    return path[len(head):] if path[:len(head)].casefold() == head.casefold() else None
