"""Lock targets: validation, normalization, where their records live, and overlap.

A target is a file (``src/a.py``), a directory (``src/auth/``, trailing slash) or a glob
(``src/**/*.py``, git wildmatch).  Standard library only: the guard imports this.
"""
from __future__ import annotations

import hashlib
import os
import posixpath
import re
from functools import lru_cache

from .errors import BadInput

GLOB_CHARS = "*?["
SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@+-]{0,127}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def validate_session_id(sid: str | None) -> str:
    if not sid:
        raise BadInput("no session id: pass one or set AGENT_REGISTRY_SESSION")
    if not SESSION_ID.fullmatch(sid):
        raise BadInput(f"invalid session id {sid!r}: use letters, digits and ._:@+- "
                       "(at most 128, starting with a letter or digit)")
    return sid


def validate_text(label: str, value: str, *, allow_newlines: bool = False) -> str:
    bad = value.replace("\n", "").replace("\t", "") if allow_newlines else value
    if _CONTROL.search(bad):
        raise BadInput(f"{label} contains a control character")
    return value


def is_glob(target: str) -> bool:
    return any(c in target for c in GLOB_CHARS)


def is_dir(target: str) -> bool:
    return target.endswith("/")


def normalize(raw: str, *, toplevel: str | None, prefix: str = "") -> str:
    """Repo-relative POSIX form of *raw*, given relative to the cwd (like git paths).

    ``./src/a.py`` -> ``src/a.py``; an existing directory gets a trailing ``/``.
    Refuses empty paths, NUL and control characters, and anything outside the repo.
    """
    if not raw:
        raise BadInput("empty path")
    if _CONTROL.search(raw):
        raise BadInput(f"path {raw!r} contains a control character")
    wants_dir = raw.endswith("/") or raw.endswith("/.")
    path = raw.replace(os.sep, "/") if os.sep != "/" else raw
    if posixpath.isabs(path):
        if toplevel is None:
            raise BadInput(f"absolute path {raw!r} in a bare repository")
        top = os.path.realpath(toplevel)
        real = os.path.realpath(path) if not is_glob(path) else posixpath.normpath(path)
        if real != top and not real.startswith(top.rstrip("/") + "/"):
            raise BadInput(f"path {raw!r} is outside the repository")
        path = real[len(top):].lstrip("/")
    else:
        path = posixpath.join(prefix, path)
    path = posixpath.normpath(path) if path else "."
    if path in (".", "") or path == ".." or path.startswith("../"):
        raise BadInput(f"path {raw!r} is outside the repository")
    if path == ".git" or path.startswith(".git/"):
        raise BadInput(f"path {raw!r} is inside .git")
    if not wants_dir and not is_glob(path) and toplevel and \
            os.path.isdir(os.path.join(toplevel, path)):
        wants_dir = True
    return path + "/" if wants_dir else path


def record_name(target: str) -> str:
    """Where a lock on *target* is stored: fanned out by 2 hex chars, globs apart."""
    digest = hashlib.sha1(target.encode()).hexdigest()
    if is_glob(target):
        return f"locks/patterns/{digest}.json"
    return f"locks/{digest[:2]}/{digest}.json"


def lookup_keys(path: str) -> list[str]:
    """Exact and ancestor-directory targets that would cover *path* (globs aside)."""
    parts = path.rstrip("/").split("/")
    keys = [path]
    for i in range(1, len(parts)):
        keys.append("/".join(parts[:i]) + "/")
    return keys


@lru_cache(maxsize=256)
def _wildmatch_regex(pattern: str) -> re.Pattern:
    out, i, n = [], 0, len(pattern)
    while i < n:
        c = pattern[i]
        if pattern.startswith("**/", i) and (i == 0 or pattern[i - 1] == "/"):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("/**", i) and i + 3 == n:
            out.append("/.*")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            end = pattern.find("]", i + 2)
            if end == -1:
                out.append(re.escape(c))
                i += 1
            else:
                body = pattern[i + 1:end]
                if body[:1] in ("!", "^"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = end + 1
        else:
            out.append(re.escape(c))
            i += 1
    return re.compile("".join(out) + r"\Z")


def wildmatch(pattern: str, path: str) -> bool:
    """git wildmatch with WM_PATHNAME: ``*`` stays within a directory, ``**`` crosses."""
    return _wildmatch_regex(pattern).match(path) is not None


def literal_prefix(target: str) -> str:
    """The directory part of a glob before its first wildcard (``src/a/`` of
    ``src/a/*.py``); a directory or file target is its own prefix."""
    if not is_glob(target):
        return target
    head = target[:min(target.find(c) for c in GLOB_CHARS if c in target)]
    return head[:head.rfind("/") + 1]


def covers(target: str, path: str) -> bool:
    """Does a lock on *target* cover the file *path*?"""
    if is_glob(target):
        return wildmatch(target, path) or any(
            wildmatch(target, key.rstrip("/")) for key in lookup_keys(path)[1:])
    if is_dir(target):
        return path.startswith(target)
    return path == target


def overlaps(a: str, b: str) -> bool:
    """Could a path be covered by both targets?  When in doubt: yes."""
    if not is_glob(a) and not is_glob(b):
        return (a == b or (is_dir(b) and a.startswith(b))
                or (is_dir(a) and b.startswith(a)))
    if is_glob(a) and not is_glob(b) and not is_dir(b):
        return covers(a, b)
    if is_glob(b) and not is_glob(a) and not is_dir(a):
        return covers(b, a)
    pa, pb = literal_prefix(a), literal_prefix(b)
    return pa.startswith(pb) or pb.startswith(pa)
