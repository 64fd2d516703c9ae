"""Reading objects from pack files without a git process (store/loose.py asks here for
what is not loose).

After a ``git gc`` the registry's older trees and files are packed, and the tip's new
commit points into them: reading those here (the pack index's fan-out and a binary
search, zlib, and git's delta instructions) keeps `lock check` and the guard from
starting ``git cat-file``.  Only what this reads whole and checks is answered: version 2
indexes, the four object types and both delta kinds, sizes as the headers say.  Anything
else (another index version, a base outside the pack, a truncated or malformed entry,
a pack that does not match its index) is None, and the caller asks git.
"""
from __future__ import annotations

import mmap
import os
import zlib

_TYPES = {1: "commit", 2: "tree", 3: "blob", 4: "tag"}
_OFS_DELTA, _REF_DELTA = 6, 7
_MAX_CHAIN = 64  # git's own default depth is 50
CACHED = 1024  # objects kept resolved (delta bases are read again and again)


class Mismatch(ValueError):
    """A pack that is not the one its index describes (cut short, or another's)."""


class _Pack:
    def __init__(self, idx_path: str, hash_len: int) -> None:
        with open(idx_path, "rb") as f:
            self.idx = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        with open(idx_path[:-4] + ".pack", "rb") as f:
            self.pack = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        if self.idx[:8] != b"\377tOc\0\0\0\2" or self.pack[:4] != b"PACK":
            raise ValueError("not a version 2 pack index")
        self.hash_len = hash_len
        self.count = int.from_bytes(self.idx[8 + 255 * 4:8 + 256 * 4], "big")
        # as git checks before it reads a pack: the count in its header and the checksum
        # at its end are those its index recorded.  A pack cut short (a disk full during
        # `git gc`) fails here, so none of its objects is read from it, as git reads none
        if len(self.pack) < 12 + hash_len or \
                int.from_bytes(self.pack[8:12], "big") != self.count or \
                self.pack[-hash_len:] != self.idx[-2 * hash_len:-hash_len]:
            raise Mismatch("the pack does not match its index")

    def offset(self, oid: bytes) -> int | None:
        """Where *oid* (binary) starts in the pack, None when it is not in it."""
        first = oid[0]
        lo = int.from_bytes(self.idx[8 + (first - 1) * 4:8 + first * 4], "big") if first else 0
        hi = int.from_bytes(self.idx[8 + first * 4:12 + first * 4], "big")
        names, width = 8 + 256 * 4, self.hash_len
        while lo < hi:
            mid = (lo + hi) // 2
            here = self.idx[names + mid * width:names + (mid + 1) * width]
            if here == oid:
                break
            lo, hi = (mid + 1, hi) if here < oid else (lo, mid)
        else:
            return None
        offsets = names + self.count * (width + 4)
        value = int.from_bytes(self.idx[offsets + mid * 4:offsets + mid * 4 + 4], "big")
        if value & 0x80000000:  # a large pack: the offset is in the 64-bit table
            large = offsets + self.count * 4 + (value & 0x7FFFFFFF) * 8
            value = int.from_bytes(self.idx[large:large + 8], "big")
        return value


class Packs:
    """The packs of one object store, opened at the first object asked of them."""

    def __init__(self, objects_dir: str, hex_len: int) -> None:
        self._folder = os.path.join(objects_dir, "pack")
        self._hash_len = hex_len // 2
        self._packs: list[_Pack] | None = None
        self._mismatched: list[str] = []  # index files whose pack is not theirs
        self._done: dict[tuple[int, int], tuple[str, bytes]] = {}  # (pack, offset) -> object

    def _open(self) -> list[_Pack]:
        if self._packs is None:
            self._packs = []
            try:
                names = sorted(os.listdir(self._folder))
            except OSError:
                names = []
            for name in names:
                if name.endswith(".idx"):
                    try:
                        self._packs.append(_Pack(os.path.join(self._folder, name),
                                                 self._hash_len))
                    except Mismatch:
                        self._mismatched.append(os.path.join(self._folder, name))
                    except (OSError, ValueError):
                        continue  # (an empty file cannot be mapped): git reads it
        return self._packs

    def mismatches(self) -> list[str]:
        """The index files whose pack is not the one they describe (cut short): git
        skips those packs, as this does; `doctor --fix` sets them aside."""
        self._open()
        return list(self._mismatched)

    def object(self, oid: str) -> tuple[str, bytes] | None:
        """(type, content) of *oid* from a pack, None when no pack here answers it."""
        binary = bytes.fromhex(oid)
        for number, pack in enumerate(self._open()):
            at = pack.offset(binary)
            if at is not None:
                try:
                    return self._at(number, pack, at, 0)
                except (IndexError, ValueError, zlib.error):
                    return None
        return None

    def _at(self, number: int, pack: _Pack, at: int, depth: int) -> tuple[str, bytes] | None:
        done = self._done.get((number, at))
        if done is not None:
            return done
        data = pack.pack
        byte = data[at]
        kind, size, shift, pos = (byte >> 4) & 7, byte & 15, 4, at + 1
        while byte & 0x80:
            byte = data[pos]
            size |= (byte & 0x7F) << shift
            shift, pos = shift + 7, pos + 1
        if kind in _TYPES:
            found = (_TYPES[kind], _inflate(data, pos, size))
        elif kind in (_OFS_DELTA, _REF_DELTA) and depth < _MAX_CHAIN:
            if kind == _OFS_DELTA:
                byte = data[pos]
                back, pos = byte & 0x7F, pos + 1
                while byte & 0x80:
                    byte = data[pos]
                    back, pos = ((back + 1) << 7) | (byte & 0x7F), pos + 1
                base_at = at - back
            else:
                base_at = pack.offset(data[pos:pos + self._hash_len])
                pos += self._hash_len
                if base_at is None:
                    return None  # a thin base elsewhere: git finds it
            base = self._at(number, pack, base_at, depth + 1)
            if base is None:
                return None
            found = (base[0], _apply_delta(base[1], _inflate(data, pos, size)))
        else:
            return None
        if len(self._done) >= CACHED:  # a long-lived reader (MCP, dashboard) stays small
            self._done.clear()
        self._done[(number, at)] = found
        return found


def _inflate(data: mmap.mmap, pos: int, size: int) -> bytes:
    """The zlib stream at *pos*, which must inflate to *size* bytes."""
    stream = zlib.decompressobj()
    out, step = b"", max(size + 64, 4096)
    while not stream.eof:
        chunk = data[pos:pos + step]
        if not chunk:
            raise ValueError("truncated pack entry")
        out += stream.decompress(chunk)
        pos += step
    if len(out) != size:
        raise ValueError("pack entry of another size")
    return out


def _varint(delta: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = delta[pos]
        value |= (byte & 0x7F) << shift
        shift, pos = shift + 7, pos + 1
        if not byte & 0x80:
            return value, pos


def _apply_delta(base: bytes, delta: bytes) -> bytes:
    """git's delta: the base's size, the result's, then copy and insert instructions."""
    base_size, pos = _varint(delta, 0)
    size, pos = _varint(delta, pos)
    if base_size != len(base):
        raise ValueError("delta against another base")
    out = []
    while pos < len(delta):
        op = delta[pos]
        pos += 1
        if op & 0x80:  # copy from the base: offset and size bytes as the low bits say
            offset = length = 0
            for bit in range(4):
                if op & (1 << bit):
                    offset |= delta[pos] << (8 * bit)
                    pos += 1
            for bit in range(3):
                if op & (0x10 << bit):
                    length |= delta[pos] << (8 * bit)
                    pos += 1
            length = length or 0x10000
            if offset + length > len(base):
                raise ValueError("delta copies past its base")
            out.append(base[offset:offset + length])
        elif op:  # insert the next op bytes
            out.append(delta[pos:pos + op])
            pos += op
        else:
            raise ValueError("reserved delta instruction")
    result = b"".join(out)
    if len(result) != size:
        raise ValueError("delta result of another size")
    return result
