"""Branch names as git checks them (``git check-ref-format --branch``), without a process.

A name read from somewhere git did not write it (a session record on the registry
branch, which any clone can write) is checked here before it is made into a ref and
read: ``../../../../src/payload`` would otherwise name a file outside ``refs/``.  The
rules are git's own (refs.c ``check_refname_format`` on ``refs/heads/<name>``, and
``strbuf_check_branch_ref``); tests/test_overlap.py compares them with git's answer.
"""
from __future__ import annotations

# refs.c refname_disposition: ASCII controls, DEL, and these are never part of a ref name
_BAD = frozenset(" ~^:?*[\\\x7f") | frozenset(chr(c) for c in range(32))


def branch_problem(name: str) -> str | None:
    """Why git would refuse *name* as a branch name, or None when it is one."""
    if not name:
        return "it is empty"
    if name.startswith("-"):
        return "it starts with '-'"
    if name == "HEAD":
        return "it is HEAD"
    if bad := sorted(set(name) & _BAD):
        return f"it holds {bad[0]!r}"
    for text, why in (("..", "'..'"), ("@{", "'@{'"), ("//", "an empty folder")):
        if text in name:
            return f"it holds {why}"
    if name.startswith("/") or name.endswith("/"):
        return "it starts or ends with '/'"
    if name.endswith("."):
        return "it ends with '.'"
    for part in name.split("/"):
        if part.startswith("."):
            return f"a part of it starts with '.' ({part!r})"
        if part.endswith(".lock"):
            return f"a part of it ends with '.lock' ({part!r})"
    return None
