"""Whoosh without the imports a search never uses: a small, documented shim.

whoosh-reloaded 2.7.5 imports several things at module level that a search never
reaches; together they were about 45 ms of every ``wiki query`` (docs/benchmarks.md):

=========================  ====================================  ========================
imported by                what                                  used for
=========================  ====================================  ========================
``whoosh.compat``          ``urllib.request.urlretrieve``        re-exported, never
                           (pulls http.client, email, ssl)       called inside Whoosh
``whoosh.reading``         the ``cached_property`` package       one property of
                           (pulls asyncio, concurrent.futures)   ``SegmentReader``
``whoosh.query.terms``     ``whoosh.lang.morph_en.variations``   ``Variations`` queries
                           (a 70 kB word table)                  (we never build one)
``whoosh.compat``          ``html.escape``, ``queue``            highlighting, multiproc
``whoosh.filedb.           ``tempfile`` (pulls shutil, bz2,      temporary storage of
filestore``                lzma, random)                         a writer
``whoosh.util``,           ``random``                            names of new files,
``whoosh.classify``                                              query expansion
``whoosh.util.times``      ``calendar``, ``datetime``            ambiguous dates
``whoosh.fields``          ``datetime``, ``whoosh.util.times``   ``DATETIME`` fields
``whoosh.analysis.morph``  ``whoosh.lang.dmetaphone``            ``DoubleMetaphoneFilter``
``whoosh.codec.base``      ``whoosh.automata.lev``               fuzzy term automata
``whoosh.codec.base``      ``whoosh.filedb.compound`` (mmap,     compound segments (ours
                           shutil)                               are separate files)
``whoosh.filedb.           ``copy.copy`` (pulls weakref)         copying a read array
structfile``
``whoosh.fields``          ``fnmatch``                           glob field names
``whoosh.reading``         ``whoosh.support.levenshtein``        term suggestions
``whoosh.filedb.           ``hashlib.md5`` (loads OpenSSL's      keys of the term tables
filetables``               ``_hashlib``, ~2 ms)                  (CPython's ``_md5``:
                                                                 the same digest)
``whoosh.compat``          ``pickle`` (the module around         the TOC and stored
                           ``_pickle``'s functions)              fields (``_pickle``'s)
``whoosh.fields``          ``decimal.Decimal``                   ``NUMERIC`` fields of
                                                                 Decimals (we have none)
=========================  ====================================  ========================

:func:`imported` imports Whoosh's modules while stand-ins for those sit in
``sys.modules``: each is a lazy module that imports the real one on its first attribute
access (``queue``, ``tempfile``, ``random``, ``calendar``, ``datetime``, ``lev``,
``fnmatch`` are imported whole); what Whoosh imports by name (``urlretrieve``,
``variations``, ``escape``, ``double_metaphone``, ``copy``, ``datetime_to_long``,
``CompoundStorage``, ...) is a forwarder that imports the real one on its first call or
attribute access; ``cached_property`` is the standard library's
``functools.cached_property`` (the same semantics for that one property); ``md5`` is
CPython's ``_md5.md5``, which every query calls to look its terms up, and ``pickle``'s
functions, classes and errors are ``_pickle``'s, the very objects ``pickle`` exports.  The stand-ins
are taken out of ``sys.modules`` right after, so code that imports the real modules later
(the LLM client, the dashboard) gets them.  A module that is already imported is used as
it is.  Upstream, the fix is to import these where they are used (``whoosh.compat`` need
not re-export urlretrieve; ``functools.cached_property`` has existed since Python 3.8);
then this part can go.
"""
from __future__ import annotations

import functools
import importlib
import sys
from _thread import allocate_lock
from types import ModuleType

# the dashboard's threads may search for the first time at once (_thread's lock: the
# threading module is a millisecond of a query that starts no thread)
_LOCK = allocate_lock()
# what a query uses (it reads through an IndexReader: whoosh.searching and the query
# classes are a tenth of Whoosh's import), and what a Searcher adds
MODULES = ("whoosh.index", "whoosh.fields", "whoosh.analysis", "whoosh.scoring",
           "whoosh.codec.whoosh3", "whoosh.reading")
SEARCHING = ("whoosh.query", "whoosh.searching")


class _Forwarder:
    """Stands for ``module.name`` (a function or a class): imports it when first called
    or asked for an attribute (``CompoundStorage.assemble``, ``urlretrieve.__name__``)."""

    def __init__(self, module: str, name: str) -> None:
        self._where = (module, name)

    def _real(self):
        module, name = self._where
        return getattr(importlib.import_module(module), name)

    def __call__(self, *args, **kwargs):
        return self._real()(*args, **kwargs)

    def __getattr__(self, name: str):
        return getattr(self._real(), name)


class _LazyModule(ModuleType):
    """A stand-in for a module imported whole: its first attribute access imports the
    real module (no longer shadowed by then) and every access reads from it."""

    def __getattr__(self, name: str):
        if name.startswith("__") or sys.modules.get(self.__name__) is self:
            raise AttributeError(name)  # the import system probing, or still shadowing
        return getattr(importlib.import_module(self.__name__), name)


try:  # CPython's own MD5 (~0.2 ms to import; hashlib loads OpenSSL's _hashlib, ~2 ms)
    from _md5 import md5 as _md5
    MD5: tuple = (_md5,)
except ImportError:  # a build without it: hashlib's, on the first call
    MD5 = ("md5",)
PICKLE_NAMES = ("Pickler", "Unpickler", "PickleError", "PicklingError", "UnpicklingError",
                "dump", "dumps", "load", "loads")
try:  # pickle exports _pickle's very objects; pickle.py around them is ~0.7 ms more
    import _pickle
    PICKLE: tuple = tuple(getattr(_pickle, name) for name in PICKLE_NAMES)
except ImportError:
    PICKLE = PICKLE_NAMES

# module -> what Whoosh takes from it: names (forwarders) or the very objects (set under
# their names), None (the whole module, lazily), or for cached_property its
# standard-library twin
STAND_INS = {"cached_property": functools.cached_property, "urllib.request": ("urlretrieve",),
             "whoosh.lang.morph_en": ("variations",), "html": ("escape",), "queue": None,
             "tempfile": None, "random": None, "calendar": None, "datetime": None,
             "whoosh.lang.dmetaphone": ("double_metaphone",),
             "whoosh.util.times": ("datetime_to_long", "long_to_datetime"),
             "whoosh.automata.lev": None, "whoosh.support.levenshtein": ("distance",),
             "whoosh.filedb.compound": ("CompoundStorage",), "copy": ("copy",),
             "fnmatch": None, "hashlib": MD5, "pickle": PICKLE, "decimal": ("Decimal",)}


def _stand_ins() -> dict[str, ModuleType]:
    made: dict[str, ModuleType] = {}
    for module, value in STAND_INS.items():
        if module in sys.modules:
            continue  # already paid for: use the real one
        # lazy in any case: a module imported by name may also be reached whole
        # (whoosh.codec.base takes CompoundStorage, whoosh3 compound.CompoundWriter)
        made[module] = stand_in = _LazyModule(module, f"stand-in from {__name__}")
        for item in value if isinstance(value, tuple) else () if value is None else (value,):
            if isinstance(item, str):
                setattr(stand_in, item, _Forwarder(module, item))
            else:
                setattr(stand_in, item.__name__, item)
    return made


def imported(modules: tuple[str, ...] = MODULES) -> None:
    """Import Whoosh's *modules* (once) without the unused heavy imports."""
    if modules[-1] in sys.modules:  # the last one imported: all done
        return
    with _LOCK:
        if modules[-1] in sys.modules:
            return
        stand_ins = _stand_ins()
        sys.modules.update(stand_ins)
        try:
            for module in modules:
                importlib.import_module(module)
        finally:
            for name, stand_in in stand_ins.items():
                if sys.modules.get(name) is stand_in:
                    del sys.modules[name]


# -- scoring an OR of terms, term at a time ----------------------------------------------
# Whoosh scores ``Or([Term(field, text, boost=b), ...])`` document at a time: a binary tree
# of UnionMatchers advanced posting by posting, each step a dozen Python calls through the
# tree (about 30 us a document).  A question's common words match a few thousand documents
# of a 10,000-entry wiki, and block-quality skipping never applies to them.  best() gives
# the same BM25F scores (Whoosh's bm25 with the index-wide idf and average field length a
# Searcher gives its scorer, the same field lengths, the boost as Whoosh's WrappingMatcher
# applies it) term at a time, from an IndexReader: each posting block is read whole (its
# ids and weights, as W3LeafMatcher decodes them), the field lengths of a segment are read
# as one byte string, and a term's score is computed once per (weight, length byte) pair.
# Reading without a Searcher also leaves whoosh.searching and the query classes unimported.
# Upstream this is a matcher method yielding a block's ids and weights plus a bulk read of
# a length column; until then it reads W3LeafMatcher's block attributes, and falls back to
# Whoosh's own search when they are not there (another codec or version).

@functools.cache
def _has_block_reads() -> bool:
    from whoosh.codec.whoosh3 import W3LeafMatcher, W3PerDocReader
    return all(hasattr(W3LeafMatcher, name) for name in ("_read_ids", "_read_weights",
                                                         "_next_block", "reset")) and \
        hasattr(W3PerDocReader, "_cached_reader")


def _length_bytes(reader, field: str) -> tuple[bytes, object]:
    """The length bytes of *field* for every document of a segment, and how a byte
    becomes a length (without a column Whoosh's scorer takes every length as 1)."""
    from whoosh.codec.whoosh3 import LENGTHS_COLUMN, _lenfield
    from whoosh.util.numeric import byte_to_length
    column = reader._perdoc._cached_reader(_lenfield(field), LENGTHS_COLUMN)
    if column is None:
        return bytes(reader.doc_count_all()), lambda _: 1
    return column._dbfile.get(column._basepos, column._count), byte_to_length


def _blocks(matcher):
    """(ids, weights) of each posting block of a segment's leaf matcher."""
    matcher.reset()  # a deletion filter may have moved it on already
    while matcher.is_active():
        matcher._read_ids()
        matcher._read_weights()
        yield matcher._ids, matcher._weights
        matcher._next_block()


def _term_blocks(reader, field: str, text: str):
    """(ids, weights) of each posting block of a term in a segment's reader, deleted
    documents too."""
    matcher = reader.postings(field, text)
    return _blocks(getattr(matcher, "child", matcher))  # unfiltered


def _add_term(scores: dict[int, float], reader, score, field: str, text: str,
              boost: float, reads) -> list[int]:
    """Add one term's scores in one segment to *scores* (deleted documents too: the
    caller drops them); the documents it matched.  *score(weight, length)*; *reads*:
    how the segment's length bytes and posting blocks are read."""
    length_bytes, blocks = reads
    lengths, length = length_bytes(reader, field)
    memo: dict[tuple[float, int], float] = {}  # (weight, length byte) -> score
    known, add = memo.get, scores.get  # bound once: this loop runs for every posting
    found: list[int] = []
    for ids, weights in blocks(reader, field, text):
        for key, doc in zip(zip(weights, map(lengths.__getitem__, ids)), ids):
            value = known(key)
            if value is None:
                value = memo[key] = boost * score(key[0], length(key[1]))
            scores[doc] = add(doc, 0.0) + value
        found.extend(ids)
    return found


def _bm25f(reader, field: str, text: str):
    """Whoosh's BM25F score of one term (``BM25F().scorer(searcher, field, text)``, whose
    idf and average field length are the whole index's), without a Searcher: for the
    text fields of our schema (scorable, no per-field B)."""
    from math import log
    from whoosh.scoring import BM25F, bm25
    model, count = BM25F(), reader.doc_count_all()
    idf = log(count / (reader.doc_frequency(field, text) + 1)) + 1
    average = reader.field_length(field) / (count or 1) or 1
    return lambda weight, length: bm25(idf, weight, length, average, model.B, model.K1)


def best(reader, terms: list[tuple[str, str, float]],
         limit: int) -> list[tuple[int, float, list[tuple[str, str]]]]:
    """The *limit* best documents of *reader* (an index's IndexReader) for any of *terms*
    ((field, text, boost)), scored as ``Searcher(reader).search(Or([Term(field, text,
    boost=boost), ...]))`` scores them: [(docnum, score, [(field, text) matched])], best
    first, equal scores by docnum.  A reader of wiki/segfiles.py says how it reads
    (``reads``); Whoosh's are read through W3LeafMatcher's blocks."""
    reads = getattr(reader, "reads", None)
    if reads is None and not _has_block_reads():
        return _whoosh_best(reader, terms, limit)
    reads = reads or (_length_bytes, _term_blocks)
    from heapq import nlargest
    from operator import itemgetter
    scorers = {(f, t): _bm25f(reader, f, t) for f, t, _ in terms if (f, t) in reader}
    scores: dict[int, float] = {}
    found: dict[tuple[str, str], list[tuple[int, list[int]]]] = {}
    for segment, offset in reader.leaf_readers():
        here: dict[int, float] = {}
        for field, text, boost in terms:
            if (field, text) in segment:
                docs = _add_term(here, segment, scorers[field, text], field, text, boost,
                                 reads)
                found.setdefault((field, text), []).append((offset, docs))
        if segment.has_deletions():  # the postings still list deleted documents
            for doc in segment.deleted_docs_set.intersection(here):
                del here[doc]
        scores.update((doc + offset, value) for doc, value in here.items())
    # sorted by docnum first: nlargest is stable, so equal scores keep the docnum order
    top = nlargest(limit, sorted(scores.items()), key=itemgetter(1))
    wanted = {doc for doc, _ in top}
    matched: dict[int, list[tuple[str, str]]] = {doc: [] for doc in wanted}
    for term, segments in found.items():
        for offset, docs in segments:
            for doc in {d - offset for d in wanted}.intersection(docs):
                matched[doc + offset].append(term)
    return [(doc, value, matched[doc]) for doc, value in top]


def _whoosh_best(reader, terms, limit):
    """best() through Whoosh's own search (also what tests compare best() with)."""
    imported(MODULES + SEARCHING)
    from whoosh.query import Or, Term
    from whoosh.searching import Searcher
    searcher = Searcher(reader, closereader=False)
    hits = searcher.search(Or([Term(f, t, boost=b) for f, t, b in terms]), limit=limit,
                           terms=True)
    return [(hit.docnum, hit.score, [(f, t.decode() if isinstance(t, bytes) else t)
                                     for f, t in hit.matched_terms()]) for hit in hits]
