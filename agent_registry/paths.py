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
    if sid is None:
        raise BadInput("no session id: pass one or set AGENT_REGISTRY_SESSION")
    if not sid.strip():
        raise BadInput("empty session id")
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
    Symlinks inside the repository (the path's own and its folders') are resolved, as
    the predecessor resolved real paths, so a link and its target are one lock; a
    symlink that leads outside the repository is refused.  Refuses empty and blank
    paths, NUL and control characters, and anything outside the repo.
    """
    if not raw.strip():
        raise BadInput(f"blank path {raw!r}" if raw else "empty path")
    if _CONTROL.search(raw):
        raise BadInput(f"path {raw!r} contains a control character")
    wants_dir = raw.endswith("/") or raw.endswith("/.")
    path = raw.replace(os.sep, "/") if os.sep != "/" else raw
    top = os.path.realpath(toplevel) if toplevel else None
    if posixpath.isabs(path):
        if top is None:
            raise BadInput(f"absolute path {raw!r} in a bare repository")
        path = _relative(top, posixpath.normpath(path)) or \
            _relative(top, os.path.realpath(path)) or ".."
    else:
        path = posixpath.join(prefix, path)
    path = _inside(posixpath.normpath(path) if path else ".", raw)
    if top:
        path = _inside(_resolve_links(path, top, raw), raw)
    if not wants_dir and not is_glob(path) and top and os.path.isdir(os.path.join(top, path)):
        wants_dir = True
    return path + "/" if wants_dir else path


def _inside(path: str, raw: str) -> str:
    """*path* (normalized, repo-relative) unless it leaves the repository or is in .git."""
    if path in (".", "") or path == ".." or path.startswith("../"):
        raise BadInput(f"path {raw!r} is outside the repository")
    if path == ".git" or path.startswith(".git/"):
        raise BadInput(f"path {raw!r} is inside .git")
    return path


def _relative(top: str, path: str) -> str | None:
    """*path* (absolute) relative to the folder *top*, or None when it is not below it."""
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
