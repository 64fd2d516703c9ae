"""The term-at-a-time scorer of the wiki search (whoosh_shim.best) against Whoosh's own
search of the same OR query: the same documents, the same scores, the same matched terms,
over an index of several segments with deleted documents (what updates leave behind); and
the answer of `wiki search` is the same when the shim falls back to Whoosh's search."""
from __future__ import annotations

import pytest

from agent_registry.wiki import index as wiki_index
from agent_registry.wiki import search, whoosh_shim
from agent_registry.wiki.index import DISTILLED_FIELDS, SEARCH_FIELDS, WikiIndex, question
from test_wiki_relevance import KNOWN
from test_wiki_support import fixture_files, put_files

QUESTIONS = [q for q, _ in KNOWN] + ["fixed the race condition in the worker",
                                     "quantum chromodynamics", "the"]


@pytest.fixture
def segmented(registry):
    """The fixture wiki indexed, then two updates: three segments, changed entries
    deleted from the first one, one entry gone."""
    files = fixture_files()
    put_files(registry, files)
    search(registry, "first build")
    names = sorted(files)
    put_files(registry, {names[0]: files[names[0]].replace("router:", "router: race condition"),
                         names[1]: None})
    search(registry, "first update")
    put_files(registry, {names[2]: files[names[2]] + "\nthe worker race again\n"})
    ix = WikiIndex(registry).open()
    with ix.reader() as reader:
        assert len(reader.leaf_readers()) > 1 and reader.has_deletions()
    return registry, ix


def ranked(hits):
    return [(doc, round(score, 9), sorted(terms)) for doc, score, terms in hits]


@pytest.mark.parametrize("fields", [DISTILLED_FIELDS, SEARCH_FIELDS])
def test_block_scores_are_whooshs_scores(segmented, fields):
    _, ix = segmented
    analyzer = ix.schema["router"].analyzer
    with ix.reader() as reader:
        for text in QUESTIONS:
            terms = question(analyzer, text, fields)
            for limit in (1, 10, 1000):
                ours = whoosh_shim.best(reader, terms, limit)
                assert ranked(ours) == ranked(whoosh_shim._whoosh_best(reader, terms, limit))
    assert whoosh_shim._has_block_reads()  # the fast path was the one compared


def test_the_answer_is_the_same_through_whooshs_own_search(segmented, monkeypatch):
    registry, _ = segmented
    fast = [search(registry, q) for q in QUESTIONS]
    monkeypatch.setattr(whoosh_shim, "_has_block_reads", lambda: False)
    assert [search(registry, q) for q in QUESTIONS] == fast
    assert fast[0]["results"] and not fast[-1]["results"]  # "the" is a stop word


def test_a_question_of_stop_words_only_has_no_terms(segmented):
    _, ix = segmented
    assert question(ix.schema["router"].analyzer, "the and of", SEARCH_FIELDS) == []
    with ix.reader() as reader:
        assert whoosh_shim.best(reader, [], 10) == []
    assert wiki_index.search_index(ix, "the and of", 10) == []
