"""Reading objects without a git process: loose here, packed in store/packs.py.

The registry writes its objects loose (store/git.py ``write_object``), so what a
one-shot command reads (the tip's commit, the trees on a few paths, their files) is
nearly always loose: reading them here, zlib and a tree walk, saves starting
``git cat-file --batch`` (most of a `lock check`'s git CPU); after a ``git gc`` the
packs answer the rest.  Whatever this cannot answer for certain (an object in an
alternate, an abbreviated or symbolic name, a malformed file) it says :data:`UNKNOWN`,
and the caller asks git, which reads it as before; objects are named by their
content, so both answers agree.  git says "missing" both for a name not in a tree and
for an object it cannot read: store/git.py's walk tells those two apart.
"""
import zlib

from .rawfile import read_bytes

UNKNOWN = object()  # not decided here: ask git
HEX = frozenset("0123456789abcdef")
CACHED = 1024  # trees kept parsed, and small objects kept whole
KEPT_SIZE = 16 * 1024


def tree_of_commit(data: bytes, hex_len: int) -> str | None:
    """The tree a commit's first line names, None when that line is not a whole object
    name (a commit cut short: reading its cut name would find nothing, read as "free")."""
    first = data[:6 + hex_len].decode("ascii", "replace")
    oid = first[5:5 + hex_len]
    if first.startswith("tree ") and first[5 + hex_len:] == "\n" and HEX.issuperset(oid):
        return oid
    return None


EQUAL_FROM = 8  # entries from which a tree is first tried as one of equal entries


def parse_entries(data: bytes, width: int):
    """Name -> object id (raw: in hex only when one is followed) of the tree *data*, whose
    ids are *width* bytes: a dict, or :class:`EqualEntries` (``get`` only); None when it
    is not a tree git wrote (or is cut short).  An entry is ``<mode> <name>\\0<id>``."""
    if len(data) >= EQUAL_FROM * (width + 4):
        equal = EqualEntries.of(data, width)
        if equal is not None:
            return equal
    entries, i, size, index = {}, 0, len(data), data.index
    try:
        while i < size:
            nul = index(b"\0", i)
            end = nul + 1 + width
            if end > size:
                return None
            entries[data[index(b" ", i, nul) + 1:nul]] = data[nul + 1:end]
            i = end
    except ValueError:
        return None
    return entries


class EqualEntries:
    """A tree whose entries are all as long as its first, with its mode, their space and
    NUL where its are, and no NUL in their names: a lock shard's ``locks/`` folder (256 of
    ``40000 xx\\0<id>``), a folder of lock records.  Reading its entries one by one cost
    a `lock check` at 10,000 locks about as much as the rest of its reads; here a name is
    found in place, in C: ``<space><name><NUL>`` where an entry has its space.  Each of
    :meth:`of`'s checks is what reading the entries one by one would find, so ``get``
    answers as that reading's dict (a name met twice: the last)."""

    __slots__ = ("data", "space", "nul", "size", "width")

    def __init__(self, data: bytes, space: int, nul: int, width: int) -> None:
        self.data, self.space, self.nul, self.width = data, space, nul, width
        self.size = nul + 1 + width

    @classmethod
    def of(cls, data: bytes, width: int) -> "EqualEntries | None":
        nul = data.find(b"\0")
        space = data.find(b" ", 0, nul)
        if space <= 0:
            return None
        size = nul + 1 + width
        count, rest = divmod(len(data), size)
        if rest or count < EQUAL_FROM or data[nul::size] != b"\0" * count or \
                any(data[k::size] != data[k:k + 1] * count for k in range(space + 1)) or \
                any(b"\0" in data[k::size] for k in range(space + 1, nul)):
            return None
        return cls(data, space, nul, width)

    def get(self, name: bytes) -> bytes | None:
        if len(name) != self.nul - self.space - 1:
            return None
        needle = b" " + name + b"\0"
        at = self.data.rfind(needle)
        while at != -1 and (at - self.space) % self.size:  # inside an id: not a name
            at = self.data.rfind(needle, 0, at + len(needle) - 1)
        if at == -1:
            return None
        start = at - self.space + self.nul + 1
        return self.data[start:start + self.width]


class LooseObjects:
    """The loose objects of one object store, read by full object name."""

    def __init__(self, objects_dir: str, hex_len: int) -> None:
        self._objects = objects_dir
        self.hex_len = hex_len
        self._trees: dict = {}  # oid -> parse_entries's: name -> entry oid (raw)
        self._small: dict[str, tuple[str, bytes]] = {}  # oid -> (type, content)
        self._packs = None  # store/packs.Packs, at the first object that is not loose

    def _object(self, oid: str) -> tuple[str, bytes] | None:
        """(type, content) of *oid*, loose or in a pack (store/packs.py), None when
        neither answers it.  Small objects are kept: a command reads a tip's commit
        and trees more than once (the view, then the write), and a name's content
        never changes."""
        found = self._small.get(oid)
        if found is None:
            found = self._read(oid)
            if found is not None and len(found[1]) <= KEPT_SIZE:
                if len(self._small) >= CACHED:
                    self._small.clear()
                self._small[oid] = found
        return found

    def keep(self, oid: str, kind: str, data: bytes) -> None:
        """Keep object *oid*, just written by this process, as read: a long-lived writer
        (the MCP server) reads its own shard tips' commits and trees at its next claim."""
        if len(data) <= KEPT_SIZE:
            if len(self._small) >= CACHED:
                self._small.clear()
            self._small[oid] = (kind, data)

    def _read(self, oid: str) -> tuple[str, bytes] | None:
        try:
            raw = zlib.decompress(read_bytes(f"{self._objects}/{oid[:2]}/{oid[2:]}"))
        except (OSError, zlib.error):
            if self._packs is None:
                from .packs import Packs  # after a gc only: mmap is not free
                self._packs = Packs(self._objects, self.hex_len)
            return self._packs.object(oid)
        header, nul, data = raw.partition(b"\0")
        kind, _, size = header.partition(b" ")
        if not nul or not size.isdigit() or int(size) != len(data):
            return None
        return kind.decode("ascii", "replace"), data

    def forget(self, oid: str | None) -> None:
        """Drop what was kept of *oid* (of every object: None), and the packs' listing:
        a damaged copy was set aside, another to be fetched (store/git.py ``set_aside``)."""
        if oid is None:
            self._small.clear()
            self._trees.clear()
        else:
            self._small.pop(oid, None)
            self._trees.pop(oid, None)
        self._packs = None

    def _tree(self, oid: str):
        entries = self._trees.get(oid)
        if entries is None:
            found = self._object(oid)
            if found is None or found[0] != "tree":
                return None
            entries = parse_entries(found[1], self.hex_len // 2)
            if entries is None:
                return None  # not a tree git wrote, or cut short: git, then store/git.py's walk
            if len(self._trees) >= CACHED:  # a long-lived reader (MCP, dashboard)
                self._trees.clear()
            self._trees[oid] = entries
        return entries

    def read(self, rev: str):
        """(type, content) of *rev* (a full object name, or ``<name>:<path>``), None
        when the path is certainly not there, or UNKNOWN."""
        oid, colon, path = rev.partition(":")
        if len(oid) != self.hex_len or not HEX.issuperset(oid):
            return UNKNOWN
        if not colon:
            return self._object(oid) or UNKNOWN
        found = self._object(oid)
        if found is None or found[0] not in ("commit", "tree"):
            return UNKNOWN
        if found[0] == "commit":
            oid = tree_of_commit(found[1], self.hex_len)
            if oid is None:
                return UNKNOWN  # a damaged commit: git's answer, then store/git.py's walk
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
            oid = entry.hex()
        return self._object(oid) or UNKNOWN
