"""Relevance with Whoosh alone: over the 33 realistic entries of tests/fixtures/wiki_entries,
questions an agent would ask before starting must rank the right past session first."""
from __future__ import annotations

import pytest

from agent_registry.wiki import search
from test_wiki_support import fixture_files, put_files

# (question, the session that answers it); paraphrased, not copied from the router lines,
# and several need stemming ("migrating" ~ "migrated", "reconnecting" ~ "reconnects")
KNOWN = [
    ("refresh token expired oauth 401", "claude-1751000001"),
    ("adding a required column to a big postgres table", "kimi-1751000002"),
    ("test fails randomly in CI around midnight", "codex-1751000003"),
    ("docker image too big", "gemini-1751000004"),
    ("rate limiting the public API per key", "claude-1751000005"),
    ("italian translations plural forms", "kimi-1751000006"),
    ("emails leaking into logs", "aider-1751000007"),
    ("memory leak OOM killed pod", "codex-1751000008"),
    ("excel csv export semicolon", "claude-1751000009"),
    ("pagination returns duplicate rows", "gemini-1751000010"),
    ("github actions cache for pip dependencies", "kimi-1751000011"),
    ("password reset token expiry", "claude-1751000012"),
    ("upgrading django", "codex-1751000013"),
    ("generate invoice pdf", "gemini-1751000014"),
    ("stripe webhook signature verification", "kimi-1751000015"),
    ("sqlite database is locked", "claude-1751000016"),
    ("kubernetes pod restarted while migrations run at startup", "codex-1751000018"),
    ("cron job ran twice on daylight saving change", "gemini-1751000019"),
    ("S3 upload CORS error", "kimi-1751000020"),
    ("graphql too many SQL queries", "codex-1751000022"),
    ("feature flags", "gemini-1751000023"),
    ("accented file names from mac duplicated", "kimi-1751000024"),
    ("old prices shown after an update, cache", "claude-1751000025"),
    ("migrating the command line from argparse", "aider-1751000026"),
    ("reconnecting websockets with backoff", "codex-1751000027"),
    ("dark theme", "gemini-1751000028"),
    ("celery tasks lost when the worker restarts", "kimi-1751000029"),
    ("certificate expired on staging", "claude-1751000030"),
    ("slow pandas report", "codex-1751000031"),
    ("screen reader labels", "gemini-1751000032"),
    ("two-factor authentication", "kimi-1751000033"),
]


@pytest.fixture(scope="module")
def wiki_registry(tmp_path_factory):
    from agent_registry import Registry
    from helpers import make_repo
    repo = make_repo(tmp_path_factory.mktemp("relevance") / "repo")
    with Registry.open(str(repo)) as registry:
        put_files(registry, fixture_files())
        yield registry


def test_the_fixture_is_large_enough():
    assert len(fixture_files()) >= 30


@pytest.mark.parametrize("question,expected", KNOWN, ids=[q for q, _ in KNOWN])
def test_known_question_ranks_the_right_session_first(wiki_registry, question, expected):
    answer = search(wiki_registry, question, limit=3)
    assert answer["ranker"] == "whoosh"
    assert answer["results"], f"nothing found for {question!r}"
    assert answer["results"][0]["session_id"] == expected, [
        (r["session_id"], r["router"], r["score"]) for r in answer["results"]]
