"""The LLM path, against a real HTTP server on 127.0.0.1 speaking the OpenAI
chat-completions API, through the real langchain-openai client (nothing monkeypatched
but the environment that configures it)."""
from __future__ import annotations

import json

import pytest

from agent_registry.wiki import get_entry, ingest, ingest_pending, search
from agent_registry.wiki.entry import entry_id
from agent_registry.wiki.llm import LLMError
from agent_registry.wiki.ops import apply_ingest, end_session
from helpers import git
from test_wiki_support import FakeOpenAI, fixture_files, put_files

QUESTION = "sqlite database is locked"
SQLITE, POSTGRES = "claude-1751000016", "kimi-1751000002"


@pytest.fixture
def llm(monkeypatch):
    server = FakeOpenAI()
    for name, value in server.env().items():
        monkeypatch.setenv(name, value)
    yield server
    server.close()


@pytest.fixture
def wiki_repo(registry):
    put_files(registry, fixture_files())
    return registry


def rerank_answer(*sids: str) -> str:
    return json.dumps({"results": [{"id": entry_id(s), "description": f"session {s}",
                                    "why": f"because {s}"} for s in sids]})


def whoosh_order(registry, monkeypatch) -> list[str]:
    with monkeypatch.context() as m:
        m.delenv("AGENT_REGISTRY_LLM_BASE_URL")
        return [r["session_id"] for r in search(registry, QUESTION)["results"]]


# -- rerank -----------------------------------------------------------------------------

def test_the_llm_reranks_the_whoosh_candidates(wiki_repo, llm):
    llm.script = [rerank_answer(POSTGRES, SQLITE)]
    answer = search(wiki_repo, QUESTION)
    assert answer["ranker"] == "llm" and answer["model"] == "test-model"
    assert [r["session_id"] for r in answer["results"]] == [POSTGRES, SQLITE]
    assert answer["results"][0]["why"] == f"because {POSTGRES}"
    assert answer["results"][0]["description"] == f"session {POSTGRES}"
    assert {"id", "session_id", "router", "what", "score", "why"} <= set(answer["results"][0])
    (request,) = llm.requests
    assert request["path"] == "/v1/chat/completions" and request["auth"] == "Bearer sk-test"
    assert request["body"]["model"] == "test-model"
    prompt = request["body"]["messages"][-1]["content"]
    assert QUESTION in prompt and entry_id(SQLITE) in prompt


def test_malformed_json_is_retried_and_the_good_answer_used(wiki_repo, llm):
    llm.script = ['{"results": [{"id": "oops", ', rerank_answer(SQLITE)]
    answer = search(wiki_repo, QUESTION)
    assert answer["ranker"] == "llm"
    assert [r["session_id"] for r in answer["results"]] == [SQLITE]
    assert len(llm.requests) == 2
    retry = llm.requests[1]["body"]["messages"]
    assert retry[-2]["role"] == "assistant" and "rejected" in retry[-1]["content"]


def test_an_answer_outside_the_schema_is_retried(wiki_repo, llm):
    invented = json.dumps({"results": [{"id": "deadbeef0000", "description": "x", "why": "y"}]})
    missing_why = json.dumps({"results": [{"id": entry_id(SQLITE), "description": "x"}]})
    llm.script = [invented, missing_why, rerank_answer(SQLITE)]
    answer = search(wiki_repo, QUESTION)
    assert answer["ranker"] == "llm" and len(llm.requests) == 3
    assert "unknown id" in llm.requests[1]["body"]["messages"][-1]["content"]


def test_three_bad_answers_leave_the_whoosh_ranking(wiki_repo, llm, monkeypatch):
    llm.script = ["no", "still no", "[1, 2]"]
    answer = search(wiki_repo, QUESTION)
    assert answer["ranker"] == "whoosh" and "no valid JSON after 3 attempts" in answer["llm_error"]
    assert [r["session_id"] for r in answer["results"]] == whoosh_order(wiki_repo, monkeypatch)


def test_a_server_error_leaves_the_whoosh_ranking(wiki_repo, llm, monkeypatch):
    llm.script = [("status", 500)]
    answer = search(wiki_repo, QUESTION)
    assert answer["ranker"] == "whoosh" and "LLM request failed" in answer["llm_error"]
    assert len(llm.requests) == 1
    assert [r["session_id"] for r in answer["results"]] == whoosh_order(wiki_repo, monkeypatch)
    assert answer["results"][0]["session_id"] == SQLITE


def test_a_hanging_server_times_out_to_the_whoosh_ranking(wiki_repo, llm, monkeypatch):
    monkeypatch.setenv("AGENT_REGISTRY_LLM_TIMEOUT", "1")
    llm.script = ["hang"]
    answer = search(wiki_repo, QUESTION)
    assert answer["ranker"] == "whoosh" and "Timeout" in answer["llm_error"]
    assert answer["results"][0]["session_id"] == SQLITE


def test_no_candidate_means_no_llm_call(wiki_repo, llm):
    answer = search(wiki_repo, "quantum chromodynamics lattice")
    assert answer == {"ranker": "whoosh", "results": [], "index": answer["index"]}
    assert llm.requests == []


def test_the_cli_says_which_ranker_answered(wiki_repo, llm, run):
    llm.script = [rerank_answer(SQLITE)]
    proc = run("wiki", "query", QUESTION)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == "ranker: llm"
    assert f"why: because {SQLITE}" in proc.stdout
    llm.script = [("status", 500)]
    proc = run("wiki", "query", QUESTION)
    assert proc.stdout.splitlines()[0].startswith("ranker: whoosh (LLM failed: LLM request failed")


# -- ingest -------------------------------------------------------------------------------

def ended(registry, sid="kimi-1", **fields):
    registry.register(sid, provider="Kimi", working_on="oauth")
    registry.context_log(sid, "added a lock around token refresh; 401s gone")
    end_session(registry, sid, **fields)


DISTILLED = {"router": "OAuth refresh serialized with a lock", "how": "asyncio.Lock",
             "solved": "random 401s", "bugs": ["refresh token reuse"], "tools": ["pytest"],
             "what": "the LLM's own what"}


def test_ingest_fills_only_what_was_left_undocumented(registry, llm):
    ended(registry, what="Serialized token refresh")
    llm.script = [json.dumps(DISTILLED)]
    result = ingest(registry, "kimi-1")
    assert result["filled"] == ["router", "how", "solved", "bugs", "tools"]
    entry = get_entry(registry, "kimi-1")
    assert entry["what"] == "Serialized token refresh"  # the agent's words stay
    assert entry["router"] == DISTILLED["router"] and entry["bugs"] == ["refresh token reuse"]
    assert entry["pending_ingest"] is False and entry["undocumented"] == []
    assert entry["ingested_by"] == "test-model"
    prompt = llm.requests[0]["body"]["messages"][-1]["content"]
    assert "token refresh; 401s gone" in prompt and '"what"' not in prompt.split("already wrote")[0]


def test_a_router_line_over_300_characters_is_refused_and_retried(registry, llm):
    ended(registry, what="w", how="h", solved="s", bugs="b", tools="t")
    llm.script = [json.dumps({"router": "x" * 301}), json.dumps({"router": "short line"})]
    ingest(registry, "kimi-1")
    assert get_entry(registry, "kimi-1")["router"] == "short line"
    assert "longer than 300" in llm.requests[1]["body"]["messages"][-1]["content"]


@pytest.mark.parametrize("reply", [("status", 500), "not json", "hang"])
def test_a_failed_ingest_leaves_the_entry_pending_and_byte_identical(registry, repo, llm,
                                                                     monkeypatch, reply):
    monkeypatch.setenv("AGENT_REGISTRY_LLM_TIMEOUT", "1")
    ended(registry)
    before_tip = git(repo, "rev-parse", "agent-registry")
    before = git(repo, "show", "agent-registry:wiki/kimi-1.md")
    llm.script = [reply] * 3
    with pytest.raises(LLMError):
        ingest(registry, "kimi-1")
    assert git(repo, "rev-parse", "agent-registry") == before_tip
    assert git(repo, "show", "agent-registry:wiki/kimi-1.md") == before
    assert get_entry(registry, "kimi-1")["pending_ingest"] is True


def test_an_ingest_never_replaces_what_was_documented_meanwhile(registry):
    ended(registry, what="mine")
    apply_ingest(registry, "kimi-1", {"what": "theirs", "how": "filled"}, "test-model")
    entry = get_entry(registry, "kimi-1")
    assert (entry["what"], entry["how"]) == ("mine", "filled")


def test_ingest_pending_goes_on_after_a_failure(registry, llm, run):
    ended(registry, "a-1")
    ended(registry, "b-2")
    llm.script = [("status", 500), json.dumps(DISTILLED)]
    result = ingest_pending(registry)
    assert [r["session_id"] for r in result["failed"]] == ["a-1"]
    assert [r["session_id"] for r in result["ingested"]] == ["b-2"]
    assert get_entry(registry, "a-1")["pending_ingest"] is True
    assert get_entry(registry, "b-2")["pending_ingest"] is False
    llm.script = [("status", 500)]
    proc = run("wiki", "ingest-pending")
    assert proc.returncode == 1 and "1 pending entry failed (left pending): a-1: LLM" in proc.stderr


def test_ingest_without_an_llm_is_refused_and_changes_nothing(registry, repo, run):
    ended(registry)
    before = git(repo, "rev-parse", "agent-registry")
    proc = run("wiki", "ingest", "kimi-1")
    assert proc.returncode == 1 and "no LLM configured" in proc.stderr
    assert git(repo, "rev-parse", "agent-registry") == before


def test_the_rerank_prompt_carries_each_candidates_router_bugs_and_diary(wiki_repo, llm):
    llm.script = [rerank_answer(SQLITE)]
    search(wiki_repo, QUESTION)
    lines = llm.requests[0]["body"]["messages"][-1]["content"].splitlines()
    candidate = json.loads(next(l for l in lines if entry_id(SQLITE) in l))
    assert candidate["bugs"] == ["long write transaction held the lock during network calls"]
    assert candidate["router"].startswith("SQLite 'database is locked'")
    assert "Stress test 10 minutes" in candidate["excerpt"]


def test_an_empty_list_the_agent_gave_means_none_and_is_not_distilled(registry, llm):
    ended(registry, what="w", how="h", solved="s", router="r", bugs="", tools="pytest")
    entry = get_entry(registry, "kimi-1")
    assert entry["bugs"] == [] and entry["undocumented"] == [] and not entry["pending_ingest"]
    assert ingest(registry, "kimi-1")["already"] is True
    assert llm.requests == []
