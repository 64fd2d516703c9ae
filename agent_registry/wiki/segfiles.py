"""Whoosh's index files read for a warm query, without importing Whoosh's reading stack.

A query reads little of an index: the table of contents, the question's terms, their
posting blocks, the length bytes of their fields and ten hits' stored fields.  Through
Whoosh that is about fifty modules to import, the largest part of a warm query after the
interpreter (docs/benchmarks.md).  :class:`Files` reads the files Whoosh 2.7's
``W3Codec`` writes (of our separate-file segments, nothing else) with the standard library
and three small Whoosh modules (the Porter stemmer, ``whoosh.scoring``'s bm25,
``whoosh.util.numeric``'s length bytes), and answers what :func:`.whoosh_shim.best` and
:func:`.index.search_index` ask of a reader.  Anything it does not expect (an unknown
class in the table of contents, another analyzer, a compound segment, inlined postings, a
truncated file, a file merged away since the folder was listed) raises: the quick path
(wiki/fastpath.py) leaves the query to Whoosh then.
tests/test_wiki_segfiles.py compares its answers with Whoosh's.  Over 400 lines: one file
format read whole (its table of contents, term tables, postings and columns), which split
would only pass its private layouts between modules.
"""
from __future__ import annotations

import _pickle
import os
import struct
import sys
import zlib
from collections import namedtuple
from io import BytesIO

from .whoosh_shim import imported

TOC_PREFIX = "_MAIN_"  # the tables of contents of Whoosh's default index name, ours
TOC_VERSION = -111
BLOCK_MAGIC = b"W3Bl"
HASH_MAGIC = b"HSH3"
INT, USHORT, LONG = struct.Struct("!i"), struct.Struct("!H"), struct.Struct("!q")
LENGTHS = struct.Struct("!ii")  # key and value lengths before each hash file item
POINTER = struct.Struct("!Iq")  # a slot of a hash table: key hash, item position
DIRECTORY = struct.Struct("!qi")  # 256 of them: a hash table's position and slot count
TERMINFO = struct.Struct("!BfIBBfII")  # inlined?, weight, doc frequency, lengths, ...
PYTHON2 = {"__builtin__": "builtins", "copy_reg": "copyreg"}  # protocol 2 names
ANALYZER = ("RegexTokenizer", "LowercaseFilter", "StopFilter", "StemFilter")
# what the table of contents may name: Whoosh's classes are read as plain records
KNOWN = {("whoosh.codec.whoosh3", "W3Segment"), ("whoosh.codec.whoosh3", "W3Codec"),
         ("whoosh.fields", "Schema"), ("whoosh.fields", "TEXT"), ("whoosh.fields", "ID"),
         ("whoosh.fields", "STORED"), ("whoosh.formats", "Frequency"),
         ("whoosh.formats", "Existence"), ("whoosh.analysis.analyzers", "CompositeAnalyzer"),
         ("whoosh.analysis.tokenizers", "RegexTokenizer"),
         ("whoosh.analysis.tokenizers", "IDTokenizer"),
         ("whoosh.analysis.filters", "LowercaseFilter"),
         ("whoosh.analysis.filters", "StopFilter"), ("whoosh.analysis.morph", "StemFilter"),
         ("whoosh.columns", "VarBytesColumn"), ("whoosh.columns", "PickleColumn"),
         ("whoosh.columns", "CompressedBytesColumn")}
REAL = {("collections", "defaultdict"), ("builtins", "set"), ("builtins", "frozenset"),
        ("builtins", "object"), ("copyreg", "_reconstructor"), ("re", "_compile"),
        ("array", "_array_reconstructor"), ("builtins", "int"), ("_codecs", "encode")}


Token = namedtuple("Token", "text startchar endchar")  # what an analyzer yields
Field = namedtuple("Field", "analyzer")  # a field of the schema, as a query asks for it


class Unexpected(Exception):
    """The index is not as this reader knows it: Whoosh reads it instead."""


class Record:
    """One of Whoosh's objects from a pickle: its class's name and its attributes."""
    kind = ""

    def __setstate__(self, state) -> None:
        if isinstance(state, tuple):  # (dict, slots)
            state = {**(state[0] or {}), **(state[1] or {})}
        self.__dict__.update(state)


class _Unpickler:
    """pickle.loads that makes plain Records of Whoosh's known classes and refuses any
    other class, so reading the table of contents imports none of Whoosh's modules."""

    def __init__(self) -> None:
        self.classes: dict[tuple[str, str], type] = {}
        find = self.find_class

        class Restricted(_pickle.Unpickler):
            def find_class(self, module: str, name: str):
                return find(module, name)

        self.unpickler = Restricted

    def find_class(self, module: str, name: str):
        module = PYTHON2.get(module, module)  # what pickle's own find_class maps too
        if (module, name) in REAL:
            import importlib
            return getattr(importlib.import_module(module), name)
        if (module, name) == ("whoosh.lang.porter", "stem"):
            imported(("whoosh.lang.porter",))
            from whoosh.lang.porter import stem
            return stem
        if (module, name) not in KNOWN:
            raise Unexpected(f"{module}.{name} in the table of contents")
        if (module, name) not in self.classes:
            self.classes[module, name] = type(name, (Record,), {"kind": name})
        return self.classes[module, name]

    def loads(self, data: bytes, stream: BytesIO | None = None):
        return self.unpickler(stream or BytesIO(data)).load()


def _varint(stream: BytesIO) -> int:
    value, shift = 0, 0
    while True:
        byte = stream.read(1)
        if not byte:
            raise Unexpected("a varint cut short")
        value |= (byte[0] & 0x7F) << shift
        if not byte[0] & 0x80:
            return value
        shift += 7


class Analyzer:
    """StemmingAnalyzer as the schema holds it: a regex tokenizer, lower case, stop words
    and the Porter stemmer, applied as Whoosh's CompositeAnalyzer applies them."""

    def __init__(self, composite) -> None:
        items = getattr(composite, "items", None)
        if composite.kind != "CompositeAnalyzer" or [i.kind for i in items] != list(ANALYZER):
            raise Unexpected("another analyzer")
        tokenizer, _, stop, stem = items
        if tokenizer.gaps or stem.lang:
            raise Unexpected("an analyzer with other settings")
        self.pattern, self.stops = tokenizer.expression, stop.stops
        self.min, self.max, self.ignore = stop.min, stop.max, stem.ignore
        self.stem, self.cache = stem.stemfn, {}  # the stems of this process's words

    def __call__(self, text: str, chars: bool = False):
        for match in self.pattern.finditer(text):
            word = match.group(0).lower()
            if len(word) < self.min or (self.max is not None and len(word) > self.max) \
                    or word in self.stops:
                continue
            if word not in self.ignore:
                stemmed = self.cache.get(word)
                if stemmed is None:
                    stemmed = self.cache[word] = self.stem(word)
                word = stemmed
            yield Token(word, match.start(), match.end())


def _read(folder: str, name: str, mapped: bool = False):
    """A file's bytes; *mapped*: mapped, as Whoosh reads it (over 10 MB at 10,000 entries).
    A file gone since the folder was listed was merged away by a writer meanwhile."""
    try:
        f = open(os.path.join(folder, name), "rb")
    except FileNotFoundError:
        raise Unexpected(f"{name} gone since the index was opened") from None
    with f:
        if not mapped or not os.fstat(f.fileno()).st_size:
            return f.read()
        import mmap
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


class Terms:
    """A segment's term table (Whoosh's OrderedHashReader file): term -> its term info."""

    def __init__(self, data: bytes, unpickler: _Unpickler) -> None:
        if data[:4] != HASH_MAGIC or data[4] != 0:  # 0: md5 hashes
            raise Unexpected("a term table of another kind")
        self.data = data
        extras_end = len(data) - INT.size
        extras_at = extras_end - INT.unpack_from(data, extras_end)[0]
        self.fieldmap = unpickler.loads(data[extras_at:extras_end])["fieldmap"]
        directory = extras_at - 256 * DIRECTORY.size
        self.tables = [DIRECTORY.unpack_from(data, directory + i * DIRECTORY.size)
                       for i in range(256)]
        from _md5 import md5
        self.md5 = md5

    def find(self, field: str, text: str) -> tuple[int, int] | None:
        """(position, length) of the term's info, None when the segment has no such term."""
        number = self.fieldmap.get(field)
        if number is None:
            return None
        key = USHORT.pack(number) + text.encode("utf-8")
        keyhash = int(self.md5(key).hexdigest(), 16) & 0xFFFFFFFF
        start, slots = self.tables[keyhash & 255]
        data = self.data
        for slot in range(slots):
            at = start + ((((keyhash >> 8) % slots) + slot) % slots) * POINTER.size
            slothash, item = POINTER.unpack_from(data, at)
            if not item:
                return None
            if slothash == keyhash:
                keylen, datalen = LENGTHS.unpack_from(data, item)
                begin = item + LENGTHS.size
                if data[begin:begin + keylen] == key:
                    return begin + keylen, datalen
        return None

    def info(self, where: tuple[int, int]) -> tuple[int, int]:
        """(doc frequency, where its postings start) of a term's info (Whoosh's
        W3TermInfo)."""
        inlined, _, frequency, *_ = TERMINFO.unpack_from(self.data, where[0])
        if inlined:
            raise Unexpected("inlined postings")
        return frequency, LONG.unpack_from(self.data, where[0] + TERMINFO.size)[0]


class Segment:
    """One segment's files: its terms, postings, length columns and stored fields."""

    def __init__(self, folder: str, names: frozenset[str], record,
                 unpickler: _Unpickler) -> None:
        if record.kind != "W3Segment" or getattr(record, "compound", True) or \
                hasattr(record, "name"):
            raise Unexpected("a segment of another kind")
        self.folder, self.names, self.unpickler = folder, names, unpickler
        self.prefix = f"{record.indexname}_{record.segid}"
        self.count = record._doccount
        self.deleted_docs_set = frozenset(record._deleted or ())
        self.lengths = dict(record._fieldlengths)
        self.terms = Terms(_read(folder, self.prefix + ".trm", mapped=True), unpickler)
        self._postings: bytes | None = None
        self._stored: tuple[bytes, list[int], list[int]] | None = None

    def doc_count_all(self) -> int:
        return self.count

    def has_deletions(self) -> bool:
        return bool(self.deleted_docs_set)

    def __contains__(self, term: tuple[str, str]) -> bool:
        return self.terms.find(*term) is not None

    def doc_frequency(self, field: str, text: str) -> int:
        where = self.terms.find(field, text)
        return 0 if where is None else self.terms.info(where)[0]

    def length_bytes(self, field: str) -> tuple[bytes, object]:
        """As :func:`.whoosh_shim._length_bytes`: the length byte of every document.
        Whether the column exists is the folder's listing when the index was opened: one
        deleted since (a merge) is not "no lengths", which would score every hit wrong."""
        name = f"{self.prefix}._{field}_len.col"
        if name not in self.names:
            return bytes(self.count), lambda _: 1
        data = _read(self.folder, name)
        from whoosh.util.numeric import byte_to_length
        return data, byte_to_length

    def blocks(self, field: str, text: str):
        """(ids, weights) of each posting block of the term, deleted documents too."""
        from array import array
        where = self.terms.find(field, text)
        if where is None:
            return
        if self._postings is None:
            self._postings = _read(self.folder, self.prefix + ".pst", mapped=True)
        data, at = self._postings, self.terms.info(where)[1]
        if data[at:at + 4] != BLOCK_MAGIC:
            raise Unexpected("a posting list without its header")
        at += 4
        while True:
            length = INT.unpack_from(data, at)[0]
            end = at + INT.size + abs(length)
            stream = BytesIO(data[at + INT.size:end])  # the block: its info, then its data
            info = self.unpickler.loads(b"", stream)
            count, compression = info[0], info[3]
            raw = stream.read()
            ids, weights, _ = self.unpickler.loads(zlib.decompress(raw) if compression else raw)
            total, decoded = 0, []
            for gap in ids:  # the ids are stored as gaps (Whoosh's delta_decode)
                total += gap
                decoded.append(total)
            if weights is None or isinstance(weights, float):
                weights = array("f", [1.0 if weights is None else weights] * count)
            yield decoded, weights
            if length < 0:  # the last block
                return
            at = end

    def stored_fields(self, docnum: int) -> dict:
        if self._stored is None:
            self._stored = self._stored_column()
        data, offsets, lengths = self._stored
        size = lengths[docnum]
        if not size:
            return {}
        value = zlib.decompress(data[offsets[docnum]:offsets[docnum] + size])
        return self.unpickler.loads(value) if value else {}

    def _stored_column(self) -> tuple[bytes, list[int], list[int]]:
        """Whoosh's VarBytesColumn layout: the values, then the lengths array, then the
        offsets array when written, then their typecodes (and "X" for offsets)."""
        from array import array
        data = _read(self.folder, self.prefix + "._stored.col", mapped=True)
        last = len(data) - 1
        code, offsets = chr(data[last]), None

        def read_array(code: str, start: int) -> list[int]:
            values = array(code)
            values.frombytes(data[start:start + struct.calcsize(code) * self.count])
            if sys.byteorder == "little":
                values.byteswap()  # written big-endian
            return values.tolist()

        if code == "X":
            code, offsets_code = chr(data[last - 2]), chr(data[last - 1])
            start = (last - 2) - self.count * struct.calcsize(offsets_code)
            offsets = read_array(offsets_code, start)
            last = start
        lengths = read_array(code, last - struct.calcsize(code) * self.count)
        if offsets is None:
            offsets, base = [], 0
            for size in lengths:
                offsets.append(base)
                base += size
        return data, offsets, lengths

    def first_id(self, field: str, text: str) -> int | None:
        for ids, _ in self.blocks(field, text):
            for doc in ids:
                if doc not in self.deleted_docs_set:
                    return doc
        return None


class Reader:
    """The index's segments read as one, as Whoosh's MultiReader reads them."""

    def __init__(self, segments: list[Segment], generation: int) -> None:
        self.segments, self._generation = segments, generation
        self.offsets, base = [], 0
        for segment in segments:
            self.offsets.append(base)
            base += segment.count
        self.reads = (Segment.length_bytes, Segment.blocks)  # for whoosh_shim.best

    __enter__ = lambda self: self  # noqa: E731 (nothing to close: the maps go with it)
    __exit__ = lambda self, *exc: None  # noqa: E731

    def generation(self) -> int:
        return self._generation

    def doc_count_all(self) -> int:
        return sum(s.count for s in self.segments)

    def doc_count(self) -> int:
        return sum(s.count - len(s.deleted_docs_set) for s in self.segments)

    def doc_frequency(self, field: str, text: str) -> int:
        return sum(s.doc_frequency(field, text) for s in self.segments)

    def field_length(self, field: str) -> int:
        return sum(s.lengths.get(field, 0) for s in self.segments)

    def __contains__(self, term: tuple[str, str]) -> bool:
        return any(term in s for s in self.segments)

    def leaf_readers(self) -> list[tuple[Segment, int]]:
        return list(zip(self.segments, self.offsets))

    def stored_fields(self, docnum: int) -> dict:
        from bisect import bisect_right
        number = max(0, bisect_right(self.offsets, docnum) - 1)
        return self.segments[number].stored_fields(docnum - self.offsets[number])

    def all_stored_fields(self):
        for segment in self.segments:
            for doc in range(segment.count):
                if doc not in segment.deleted_docs_set:
                    yield segment.stored_fields(doc)

    def first_id(self, field: str, text: str) -> int:
        for segment, offset in zip(self.segments, self.offsets):
            doc = segment.first_id(field, text)
            if doc is not None:
                return offset + doc
        raise KeyError((field, text))


class Files:
    """An index directory as a query reads it: ``schema[field].analyzer`` and
    ``reader()``, as Whoosh's FileIndex offers them."""

    def __init__(self, folder: str) -> None:
        imported(("whoosh.lang.porter", "whoosh.scoring", "whoosh.util.numeric"))
        names = frozenset(os.listdir(folder))  # what exists, for every later read
        generations = [int(name[len(TOC_PREFIX):-4]) for name in names
                       if name.startswith(TOC_PREFIX) and name.endswith(".toc")
                       and name[len(TOC_PREFIX):-4].isdigit()]
        if not generations:
            raise Unexpected("no table of contents")
        self.generation = max(generations)
        stream = BytesIO(_read(folder, f"{TOC_PREFIX}{self.generation}.toc"))
        if [_varint(stream) for _ in range(3)] != [4, 8, 4] or \
                INT.unpack(stream.read(4))[0] != -12345 or \
                INT.unpack(stream.read(4))[0] != TOC_VERSION:
            raise Unexpected("a table of contents of another format")
        for _ in range(3):
            _varint(stream)  # Whoosh's release
        unpickler = _Unpickler()
        schema = unpickler.loads(stream.read(_varint(stream)))
        if INT.unpack(stream.read(4))[0] != self.generation:
            raise Unexpected("a table of contents of another generation")
        stream.read(4)
        records = unpickler.loads(b"", stream)
        self.schema = {name: Field(Analyzer(field.analyzer)) for name, field
                       in schema._fields.items() if field.kind == "TEXT"}
        self.segments = [Segment(folder, names, record, unpickler) for record in records]

    def reader(self) -> Reader:
        return Reader(self.segments, self.generation)
