"""The Whoosh index of the wiki: a local cache, never committed, always rebuildable.

Layout under ``<git common dir>/agent-registry/``::

    wiki-index.lock           flock: one updater at a time (a second one waits for the
                              first, then uses what it built instead of building again)
    wiki-index/CURRENT        name of the live index directory (replaced atomically)
    wiki-index/ix-<token>/    a Whoosh index; holds a "__meta__" document with the
                              branch commit it reflects, written in the same Whoosh
                              commit as the entries, so the two never disagree
    wiki-index/ix-<token>/UPDATING   present while an update runs

Each query brings the index up to the registry tip (``Registry.tip``: the local branch,
else the remote-tracking branch a plain ``git clone`` made) by a tree diff of ``wiki/``
since the indexed commit (cost: the entries that changed).  An update killed half-way leaves
UPDATING behind; whoever next holds the lock sees it and rebuilds into a fresh
directory, as it does for an index that fails to open or a commit that no longer
exists (a force-pushed branch).  ``wiki rebuild`` does the same on request.
"""
from __future__ import annotations

import contextlib
import os
from collections import namedtuple

from ..store.flock import file_lock
from .progress import Progress
from .whoosh_shim import imported as load_whoosh

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:  # a warm query's quick path (wiki/fastpath.py) imports no registry core
    from ..core.registry import Registry

INDEX_DIR = "wiki-index"  # in the clone's state folder (store/layout.state_path)
META_KEY = "__meta__"  # cannot be a session id: those start with a letter or digit
# files: the entry's files_touched, so a session is told of the entries of the paths it holds
SEARCH_FIELDS = ("router", "what", "bugs", "files", "body")
DISTILLED_FIELDS = SEARCH_FIELDS[:4]  # what the agent (or the LLM) wrote: searched first
FIELD_BOOSTS = {"router": 3.0, "what": 2.0, "bugs": 1.5, "files": 1.5, "body": 1.0}
EMPTY = "-"  # the indexed commit of an index built while the branch did not exist
VERSION = 4  # of the schema and documents: an index of another version is rebuilt
# Segments are written as separate files, not one compound file: Whoosh reads a compound
# segment by copying it into memory (27.8 MB at 10,000 entries: the peak of a query, and
# 31 ms of opening it), separate files are read where they lie (docs/benchmarks.md).

# an index that opened: the Whoosh index, the branch commit it reflects, its directory,
# the Whoosh generation read, and how many entries it holds
Opened = namedtuple("Opened", "ix commit folder generation entries")


def schema():
    load_whoosh()
    from whoosh.analysis import StemmingAnalyzer
    from whoosh.fields import ID, STORED, TEXT, Schema
    # no positions: a question is words, never a phrase query, so they would only cost
    # index size and build time
    text = lambda stored: TEXT(analyzer=StemmingAnalyzer(), stored=stored, phrase=False)
    return Schema(key=ID(stored=True, unique=True), id=ID(stored=True), router=text(True),
                  what=text(True), bugs=text(True), files=text(False), body=text(False),
                  provider=STORED, date=STORED, pending=ID(stored=True), commit=STORED,
                  version=STORED, excerpt=STORED)


def document(sid: str, raw: bytes) -> dict | None:
    """The index document of one entry file, or None for an unreadable one."""
    from ..branch.records import UnreadableRecord
    from .entry import NOT_DOCUMENTED, entry_id, parse_entry
    try:
        entry = parse_entry(raw, sid)
    except UnreadableRecord:
        return None
    clean = lambda v: "" if v.strip().lower() == NOT_DOCUMENTED else v
    body = entry["body"]
    return {"key": sid, "id": entry_id(sid), "router": clean(entry["router"]),
            "what": clean(entry["what"]), "bugs": "\n".join(entry["bugs"]),
            "files": "\n".join(entry["files_touched"]), "body": body,
            "provider": entry["provider"], "date": entry["date"],
            "pending": "1" if entry["pending_ingest"] else "0",
            "excerpt": " ".join(body.split())[-600:]}


def _updating(folder: str) -> bool:
    return os.path.exists(os.path.join(folder, "UPDATING"))


def up_to_date(entries: int) -> dict:
    """The ``index`` of a query's answer when its index was up to date."""
    return {"built": False, "updated": 0, "waited": False, "entries": entries}


def current_dir(root: str) -> str | None:
    """The live index directory under *root* (``wiki-index``), None when none is named."""
    try:
        with open(os.path.join(root, "CURRENT")) as pointer:
            name = pointer.read().strip()
    except OSError:
        return None
    return os.path.join(root, name) if name.startswith("ix-") else None


def open_current(root: str, light: bool = False) -> Opened | None:
    """The current index under *root*, or None when missing, half-updated, unreadable or
    of another version: whoever holds the lock rebuilds it then, never trusts it.
    *light*: read by wiki/segfiles.py (the quick path), not through Whoosh's modules;
    None also for what it does not read as Whoosh would (Whoosh decides then)."""
    folder = current_dir(root)
    if folder is None or not os.path.isdir(folder) or _updating(folder):
        return None
    try:
        if light:
            from .segfiles import Files
            ix = Files(folder)
        else:
            load_whoosh()
            from whoosh import index as windex
            ix = windex.open_dir(folder)
        with ix.reader() as reader:
            meta = reader.stored_fields(reader.first_id("key", META_KEY))
            generation = reader.generation()
            entries = reader.doc_count() - 1  # the __meta__ document
    except Exception:  # any Whoosh failure to read means: rebuild
        return None
    if not meta or not meta.get("commit") or meta.get("version") != VERSION:
        return None
    return Opened(ix, meta["commit"], folder, generation, entries)


class WikiIndex:
    def __init__(self, registry: Registry, progress: Progress | None = None) -> None:
        self.registry = registry
        self.repo = registry.repo
        # os.path, not pathlib: pathlib's import (urllib.parse, ipaddress) would be a
        # twentieth of a whole-process query
        self.root = registry.repo.state_path(INDEX_DIR)
        self.lock_file = registry.repo.state_path("wiki-index.lock")
        self.progress = progress or Progress(None)
        # what bringing the index up to date took (the "index" of `wiki query --json`);
        # "reason" is added when it was built
        self.status: dict = up_to_date(0)

    # -- opening ---------------------------------------------------------------------
    def _current_dir(self) -> str | None:
        return current_dir(self.root)

    def _open(self) -> Opened | None:
        return open_current(self.root)

    def _waiting(self) -> None:
        self.status["waited"] = True
        self.progress.waiting()

    def indexed(self) -> str | None:
        """The branch commit the current index reflects ("-" for an empty branch), None
        when there is no usable index; reads only (``doctor``)."""
        opened = self._open()
        return opened.commit if opened else None

    def open(self):
        """The index, brought up to the branch tip."""
        opened = self._open()
        if opened and opened.commit == (self.registry.tip() or EMPTY):
            self.status["entries"] = opened.entries
            return opened.ix  # the usual case: no lock, no writes
        with file_lock(self.lock_file, self._waiting):
            # what we opened still stands unless someone switched or updated it meanwhile
            if not (opened and self._current_dir() == opened.folder
                    and not _updating(opened.folder)
                    and opened.ix.latest_generation() == opened.generation):
                opened = self._open()
            return self._refresh(opened)

    def _refresh(self, opened: Opened | None):
        """Bring *opened* (None: there is no usable index) up to the tip; caller holds
        the lock."""
        tip = self.registry.tip() or EMPTY
        if opened is None:
            why = "no index yet" if self._current_dir() is None else \
                "the previous index was incomplete, unreadable or of an older version"
            return self._rebuild(tip, why)
        if opened.commit == tip:
            self.status["entries"] = opened.entries
            return opened.ix
        changes = self._diff(opened.commit, tip)
        if changes is None:
            return self._rebuild(tip, f"cannot diff from the indexed commit {opened.commit[:12]}")
        return self._update(opened, tip, changes)

    def rebuild(self):
        """A new index from the tip; unless another process rebuilt it while this one
        waited for the lock: then that one is brought up to the tip and used."""
        before = self._current_dir()
        with file_lock(self.lock_file, self._waiting):
            if self.status["waited"] and self._current_dir() != before:
                return self._refresh(self._open())
            return self._rebuild(self.registry.tip() or EMPTY, "requested")

    # -- writing ---------------------------------------------------------------------
    def _diff(self, old: str, new: str) -> list[str] | None:
        """Session ids of the wiki entries added, changed or deleted between two commits,
        None if unknown."""
        if old == EMPTY or new == EMPTY:
            return None
        from .entry import WIKI_DIR, sid_of
        proc = self.repo.git("diff-tree", "-r", "-z", "--no-renames", "--name-only",
                             old, new, "--", WIKI_DIR + "/", check=False)
        if proc.returncode != 0:
            return None
        out = []
        for path in proc.stdout.decode(errors="replace").split("\0"):
            folder, _, name = path.rpartition("/")
            if folder == WIKI_DIR and (sid := sid_of(name)):
                out.append(sid)
        return out

    def _update(self, opened: Opened, tip: str, changes: list[str]):
        from .entry import WIKI_DIR
        marker = os.path.join(opened.folder, "UPDATING")
        with open(marker, "w") as out:
            out.write(f"{os.getpid()}\n")
        writer = opened.ix.writer(compound=False)
        self.progress.start("updating the wiki index", len(changes))
        try:
            # one pipelined read for all of them (a deleted entry reads as missing)
            blobs = self.repo.read_blobs([f"{tip}:{WIKI_DIR}/{sid}.md" for sid in changes])
            for done, (sid, raw) in enumerate(zip(changes, blobs), 1):
                doc = document(sid, raw) if raw is not None else None
                if doc is None:
                    writer.delete_by_term("key", sid)
                else:
                    writer.update_document(**doc)
                self.progress.step(done)
            writer.update_document(key=META_KEY, commit=tip, version=VERSION)
            self.progress.phase("writing")
            writer.commit()
        except BaseException:
            writer.cancel()
            raise
        os.unlink(marker)
        self.status.update(updated=len(changes), entries=opened.ix.doc_count() - 1)
        self.progress.finish(f"wiki index updated: {len(changes):,} "
                             f"entr{'y' if len(changes) == 1 else 'ies'} re-indexed")
        return opened.ix

    def _rebuild(self, tip: str, why: str):
        import shutil  # here: a query that finds its index up to date never needs it
        from .entry import WIKI_DIR, sid_of
        load_whoosh()
        from whoosh import index as windex
        os.makedirs(self.root, exist_ok=True)
        name = f"ix-{os.urandom(6).hex()}"
        folder = os.path.join(self.root, name)
        os.mkdir(folder)
        ix = windex.create_in(folder, schema())
        writer = ix.writer(limitmb=128, compound=False)
        count = 0
        try:
            files = [] if tip == EMPTY else [
                (sid, oid) for name, is_tree, oid in self.repo.list_tree(f"{tip}:{WIKI_DIR}")
                if not is_tree and (sid := sid_of(name))]
            self.progress.start(f"building the wiki index ({why})", len(files))
            blobs = self.repo.read_blobs([o for _, o in files])
            for done, ((sid, _), raw) in enumerate(zip(files, blobs), 1):
                doc = document(sid, raw) if raw is not None else None
                if doc is not None:
                    writer.add_document(**doc)
                    count += 1
                self.progress.step(done)
            writer.add_document(key=META_KEY, commit=tip, version=VERSION)
            self.progress.phase("writing")
            writer.commit()
        except BaseException:
            writer.cancel()
            shutil.rmtree(folder, ignore_errors=True)
            raise
        pointer = os.path.join(self.root, f"CURRENT.{os.getpid()}")
        with open(pointer, "w") as out:
            out.write(name + "\n")
        os.replace(pointer, os.path.join(self.root, "CURRENT"))  # atomic switch to it
        for old in os.listdir(self.root):
            path = os.path.join(self.root, old)
            if old != name and old.startswith("ix-"):
                shutil.rmtree(path, ignore_errors=True)
            elif old.startswith("CURRENT."):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
        self.status.update(built=True, reason=why, entries=count)
        self.progress.finish(f"wiki index built: {count:,} entries")
        return ix


def question(analyzer, text: str, fields: tuple[str, ...]) -> list[tuple[str, str, float]]:
    """The terms of a question, (field, stem, boost): each word (stemmed, stop words
    dropped) in any of *fields*, with their boosts, all of them optional (an OR).  Read
    directly rather than by qparser: a question is plain words (``auth: "fix" (401)`` is
    no field, phrase or range syntax), and qparser's import is a tenth of a whole-process
    query."""
    stems = dict.fromkeys(token.text for token in analyzer(text))
    return [(field, stem, FIELD_BOOSTS[field]) for stem in stems for field in fields]


def search_index(ix, text: str, limit: int) -> list[dict]:
    """Whoosh BM25F candidates: [{id, session_id, router, what, score, why, ...}].

    The distilled fields are searched first; the diaries too only when those give
    fewer than *limit* hits: what an agent wrote about a session (router, what, bugs)
    is the better evidence that it answers the question, and a diary's words match
    thousands of entries.  Scored term at a time (:func:`.whoosh_shim.best`: Whoosh's
    BM25F scores, several times faster than its document-at-a-time search).  *ix*: a
    Whoosh index, or the quick path's wiki/segfiles.Files, which reads the same files."""
    from .whoosh_shim import best
    # the words of the question by their stem, to say "matches" in the user's own words
    analyzer = ix.schema["router"].analyzer  # every text field has the same one
    spoken: dict[str, str] = {}
    for token in analyzer(text, chars=True):
        spoken.setdefault(token.text, text[token.startchar:token.endchar])
    out = []
    with ix.reader() as reader:
        for fields in (DISTILLED_FIELDS, SEARCH_FIELDS):
            hits = best(reader, question(analyzer, text, fields), limit)
            if len(hits) >= limit:
                break
        for docnum, score, matched in hits:
            stored = reader.stored_fields(docnum)
            fields = sorted({f for f, _ in matched}, key=SEARCH_FIELDS.index)
            words = sorted({spoken.get(stem, stem).lower() for _, stem in matched})
            out.append({"id": stored["id"], "session_id": stored["key"],
                        "router": stored["router"], "what": stored["what"],
                        "score": round(score, 3),
                        "bugs": [b for b in stored.get("bugs", "").split("\n") if b],
                        "why": f"matches {', '.join(words)} in {', '.join(fields)}",
                        "provider": stored.get("provider", ""), "date": stored.get("date", ""),
                        "pending_ingest": stored.get("pending") == "1",
                        "excerpt": stored.get("excerpt", "")})
    return out


def pending_sids(ix) -> list[str]:
    load_whoosh()
    with ix.reader() as reader:
        if ("pending", "1") not in reader:
            return []
        return sorted(reader.stored_fields(doc)["key"]
                      for doc in reader.postings("pending", "1").all_ids())
