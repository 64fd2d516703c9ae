"""Reading loose objects without a git process.

The registry writes its objects loose (store/git.py ``write_object``), so what a
one-shot command reads (the tip's commit, the trees on a few paths, their files) is
nearly always loose: reading them here, zlib and a tree walk, saves starting
``git cat-file --batch`` (most of a `lock check`'s git CPU).  Whatever this cannot
answer for certain (an object that is packed or in an alternate, an abbreviated or
symbolic name, a malformed file) it says :data:`UNKNOWN`, and the caller asks git,
which reads it as before; objects are named by their content, so both answers agree.
"""
from __future__ import annotations

import os
import zlib

UNKNOWN = object()  # not decided here: ask git
_HEX = frozenset("0123456789abcdef")


class LooseObjects:
    """The loose objects of one object store, read by full object name."""

    def __init__(self, objects_dir: str, hex_len: int) -> None:
        self._objects = objects_dir
        self._hex_len = hex_len
        self._trees: dict[str, dict[bytes, bytes]] = {}  # oid -> name -> entry oid (hex)

    def _object(self, oid: str) -> tuple[str, bytes] | None:
        """(type, content) of the loose object *oid*, None when it is not loose (or not
        readable as one)."""
        try:
            with open(os.path.join(self._objects, oid[:2], oid[2:]), "rb") as f:
                raw = zlib.decompress(f.read())
        except (OSError, zlib.error):
            return None
        header, nul, data = raw.partition(b"\0")
        kind, _, size = header.partition(b" ")
        if not nul or not size.isdigit() or int(size) != len(data):
            return None
        return kind.decode("ascii", "replace"), data

    def _tree(self, oid: str) -> dict[bytes, bytes] | None:
        entries = self._trees.get(oid)
        if entries is None:
            found = self._object(oid)
            if found is None or found[0] != "tree":
                return None
            entries, data, i, width = {}, found[1], 0, self._hex_len // 2
            while i < len(data):
                nul = data.index(b"\0", i)
                name = data[data.index(b" ", i) + 1:nul]
                entries[name] = data[nul + 1:nul + 1 + width].hex().encode()
                i = nul + 1 + width
            self._trees[oid] = entries
        return entries

    def read(self, rev: str):
        """(type, content) of *rev* (a full object name, or ``<name>:<path>``), None
        when the path is certainly not there, or UNKNOWN."""
        oid, colon, path = rev.partition(":")
        if len(oid) != self._hex_len or not _HEX.issuperset(oid):
            return UNKNOWN
        if not colon:
            return self._object(oid) or UNKNOWN
        found = self._object(oid)
        if found is None or found[0] not in ("commit", "tree"):
            return UNKNOWN
        if found[0] == "commit":
            first = found[1][:5 + self._hex_len].decode("ascii", "replace")
            if not first.startswith("tree "):
                return UNKNOWN
            oid = first[5:]
        names = path.split("/") if path else []
        if "" in names or "." in names or ".." in names:
            return UNKNOWN  # git's own reading of such paths decides
        for name in names:
            entries = self._tree(oid)
            if entries is None:
                return UNKNOWN
            entry = entries.get(name.encode())
            if entry is None:
                return None  # read whole: the name is not in this tree
            oid = entry.decode()
        return self._object(oid) or UNKNOWN
