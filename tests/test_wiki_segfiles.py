"""wiki/segfiles.py reads Whoosh's index files as Whoosh does: on an index of several
segments with deleted documents, every planted question (and others) gets the same hits,
scores, reasons and stored fields through it as through Whoosh's own reader, and so do
the latest entries; an index it does not know (a compound segment) is left to Whoosh,
and the query still answers."""
from __future__ import annotations

import pytest

from agent_registry.wiki import api
from agent_registry.wiki.index import WikiIndex, current_dir, open_current
from agent_registry.wiki.segfiles import Files, Unexpected
from test_wiki_quick import ANSWER, QUESTION, query, top
from test_wiki_relevance import KNOWN
from test_wiki_support import fixture_files, put_files

OTHERS = ["flaky test around midnight", "memory leak in websocket handler", "zanzibar",
          "the of and", "src/api/auth.py", "ÜNICODE naïve café", "quantum chromodynamics"]


@pytest.fixture
def segmented(registry):
    """An index of several segments, with deletions: built, then updated twice."""
    files = fixture_files()
    put_files(registry, files)
    api.search(registry, "sqlite")  # builds
    later = files["wiki/kimi-1751000029.md"].replace("Celery", "Zanzibar")
    put_files(registry, {"wiki/later-1.md": later, "wiki/later-2.md": later + "\nmore\n"})
    api.search(registry, "sqlite")  # a second segment
    put_files(registry, {"wiki/later-1.md": None, "wiki/claude-1751000016.md":
                         files["wiki/claude-1751000016.md"] + "\nWAL checkpoint starvation\n"})
    api.search(registry, "sqlite")  # a third, and deletions in the first two
    index = WikiIndex(registry)
    whoosh = index.open()
    with whoosh.reader() as reader:
        assert len(reader.leaf_readers()) > 1
        assert any(segment.has_deletions() for segment, _ in reader.leaf_readers())
    return whoosh, Files(current_dir(index.root))


def test_every_question_gets_the_same_answer_as_through_whoosh(segmented):
    whoosh, files = segmented
    for question in [q for q, _ in KNOWN] + OTHERS:
        for limit in (1, 10):
            assert api.candidates(files, question, limit) == \
                api.candidates(whoosh, question, limit), (question, limit)
    assert api.candidates(files, "", 5) == api.candidates(whoosh, "", 5)  # the latest


def test_the_counts_and_the_meta_document_are_whooshs(segmented):
    whoosh, files = segmented
    with whoosh.reader() as theirs, files.reader() as ours:
        assert (ours.doc_count(), ours.doc_count_all(), ours.generation()) == \
            (theirs.doc_count(), theirs.doc_count_all(), theirs.generation())
        assert ours.stored_fields(ours.first_id("key", "__meta__")) == \
            theirs.stored_fields(theirs.first_id("key", "__meta__"))
        for field in ("router", "what", "bugs", "files", "body"):
            assert ours.field_length(field) == theirs.field_length(field)


def test_an_index_it_does_not_know_is_left_to_whoosh(registry, repo):
    put_files(registry, fixture_files())
    assert top(query(repo)[0]) == ANSWER  # builds
    root = WikiIndex(registry).root
    opened = open_current(root)
    opened.ix.writer(compound=True).commit(optimize=True)  # one compound segment
    assert open_current(root, light=True) is None and open_current(root) is not None
    answer, quick = query(repo, QUESTION)
    assert not quick and not answer["index"]["built"] and top(answer) == ANSWER


def test_a_column_merged_away_after_the_open_hands_the_query_to_whoosh(segmented):
    """Whoosh merges while the quick path reads: a length column listed when the index
    was opened and gone at the search is not "no lengths" (every score wrong), it raises,
    and the quick path leaves the query to Whoosh."""
    whoosh, files = segmented
    question = KNOWN[0][0]
    before = api.candidates(files, question, 10)  # maps the postings and stored fields
    assert before == api.candidates(whoosh, question, 10)
    whoosh.writer().commit(optimize=True)  # one segment: the old segments' files deleted
    with pytest.raises(Unexpected, match="gone since the index was opened"):
        api.candidates(files, question, 10)
