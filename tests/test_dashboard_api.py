"""The dashboard's JSON API, through FastAPI's test client, over real repositories whose
sessions are registered by real CLI processes."""
from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timezone

import httpx
import pytest
from fastapi.testclient import TestClient

from agent_registry.dashboard.app import create_app
from agent_registry.dashboard.events import (changed_paths, describe_change, shard_changed_paths,
                                             signature)
from agent_registry.core.registry import Registry
from helpers import git, make_repo
from test_dashboard_support import agents  # noqa: F401  (fixture)
from test_dashboard_support import commit_raw, served

LOCAL = "http://127.0.0.1"


@pytest.fixture
def dashboard(repo):
    app = create_app(str(repo))
    with TestClient(app, base_url=LOCAL) as client:
        client.headers["X-Agent-Registry-Token"] = app.state.post_token
        yield client


# -- reading ----------------------------------------------------------------------------

def test_health_names_the_repository(dashboard, repo):
    health = dashboard.get("/api/health").json()
    assert health["app"] == "agent-registry-dashboard"
    assert health["common_dir"] == str(repo / ".git")
    assert health["branch"] == "agent-registry"
    other = make_repo(repo.parent / "other")
    with TestClient(create_app(str(other)), base_url=LOCAL) as client:
        assert client.get("/api/health").json()["repo_id"] != health["repo_id"]


def test_a_repository_without_the_registry_branch_yet(dashboard, repo):
    assert dashboard.get("/api/sessions?history=true").json()["sessions"] == []
    assert dashboard.get("/api/locks").json()["locks"] == []
    assert dashboard.get("/api/sessions/kimi-1/timeline").json()["events"] == []
    assert dashboard.post("/api/cleanup", json={"reason": "tidy"}).json() == {"stopped": []}
    # a write (the first makes the registry, as `init` does): still nothing to read
    assert dashboard.get("/api/sessions?history=true").json()["sessions"] == []
    assert dashboard.get("/api/locks").json()["locks"] == []


def test_sessions_default_to_live_ones_and_filter(dashboard, agents):
    agents.register("kimi-1", "Kimi", "auth refactor")
    agents.register("claude-1", "Claude", "tests")
    agents.register("codex-1", "Codex", "docs")
    agents.cli("finish", "codex-1")

    live = dashboard.get("/api/sessions").json()
    assert {s["id"] for s in live["sessions"]} == {"kimi-1", "claude-1"}
    assert live["sessions"][0]["heartbeat_age_seconds"] is not None
    assert dashboard.get("/api/sessions?provider=claude").json()["sessions"][0]["id"] == "claude-1"
    assert dashboard.get("/api/sessions?project=nowhere").json()["sessions"] == []

    history = dashboard.get("/api/sessions?history=true").json()
    assert {s["id"] for s in history["sessions"]} == {"kimi-1", "claude-1", "codex-1"}
    assert history["providers"] == ["Claude", "Codex", "Kimi"]
    finished = dashboard.get("/api/sessions?status=Finished").json()["sessions"]
    assert [s["id"] for s in finished] == ["codex-1"]

    today = dashboard.get("/api/sessions?history=true&date=today").json()["sessions"]
    assert len(today) == 3
    assert dashboard.get("/api/sessions?history=true&date=2001-01-01").json()["sessions"] == []
    day = datetime.now(timezone.utc).astimezone().date().isoformat()
    assert len(dashboard.get(f"/api/sessions?history=true&date={day}").json()["sessions"]) == 3


@pytest.mark.parametrize("query", ["status=Sleeping", "date=yesterday", "date=2026-13-40",
                                   "limit=0"])
def test_bad_session_filters_are_refused(dashboard, query):
    answer = dashboard.get("/api/sessions?" + query)
    assert answer.status_code in (400, 422)


def test_locks_show_owner_age_and_staleness(dashboard, agents):
    agents.register("kimi-1")
    agents.register("gone-1", "Codex", "crashed")
    agents.claim("kimi-1", "src/auth.py")
    agents.claim("gone-1", "docs/")
    agents.die("gone-1")
    locks = {l["path"]: l for l in dashboard.get("/api/locks").json()["locks"]}
    assert locks["src/auth.py"]["owner"] == "kimi-1"
    assert locks["src/auth.py"]["state"] == "fresh"
    assert locks["src/auth.py"]["working_on"] == "auth"
    assert locks["src/auth.py"]["unconfirmed"] is False
    assert locks["docs/"]["state"] == "stale"
    assert "gone" in locks["docs/"]["stale_reason"]


def test_session_detail_has_the_diary(dashboard, agents):
    agents.register("kimi-1")
    agents.cli("context", "log", "kimi-1", "extracted the token manager")
    detail = dashboard.get("/api/sessions/kimi-1").json()
    assert detail["session"]["provider"] == "Kimi"
    assert "extracted the token manager" in detail["diary"]
    assert dashboard.get("/api/sessions/nobody").status_code == 404
    assert dashboard.get("/api/sessions/..").status_code in (400, 404)


def test_sync_state_without_a_remote(dashboard):
    assert dashboard.get("/api/sync").json()["enabled"] is False
    refused = dashboard.post("/api/sync")
    assert refused.status_code == 409
    assert "no remote" in refused.json()["error"]["message"]


def test_sync_now_pushes_to_the_remote(tmp_path, agents, repo):
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    git(repo, "remote", "add", "origin", str(remote))
    agents.register("kimi-1")
    app = create_app(str(repo))
    with TestClient(app, base_url=LOCAL) as client:
        assert client.get("/api/sync").json()["enabled"] is True
        answer = client.post("/api/sync", headers={"X-Agent-Registry-Token": app.state.post_token})
        assert answer.status_code == 200, answer.text
        assert answer.json()["pushed"] is True
        assert client.get("/api/sync").json()["ahead"] == 0
    assert git(remote, "rev-parse", "agent-registry").strip() == \
        git(repo, "rev-parse", "agent-registry").strip()


# -- the timeline -----------------------------------------------------------------------

def test_timeline_reads_the_session_history(dashboard, agents, repo):
    agents.register("kimi-1")
    agents.register("kimi-10", working_on="an id that contains kimi-1")
    agents.claim("kimi-1", "src/auth.py", "src/oauth/")
    agents.claim("kimi-10", "README.md")
    agents.cli("lock", "heartbeat", "--session", "kimi-1")
    agents.cli("context", "log", "kimi-1", "halfway")
    agents.cli("lock", "release", "src/auth.py", "--session", "kimi-1")
    agents.cli("lock", "force-release", "src/oauth/", "--force", "--reason", "blocked", "--by", "ops")
    agents.cli("finish", "kimi-1")

    timeline = dashboard.get("/api/sessions/kimi-1/timeline").json()
    kinds = [e["kind"] for e in timeline["events"]]
    assert kinds == ["registered", "claimed", "heartbeat", "diary", "released", "lock freed",
                     "finished"]
    freed = timeline["events"][5]
    assert (freed["by"], freed["reason"], freed["paths"]) == ("ops", "blocked", ["src/oauth/"])
    session, *paths = timeline["lanes"]
    assert session["intervals"][0]["end"] == timeline["events"][-1]["at"]
    assert {lane["label"] for lane in paths} == {"src/auth.py", "src/oauth/"}
    assert all(lane["intervals"][0]["end"] is not None for lane in paths)
    assert timeline["truncated"] is False

    other = dashboard.get("/api/sessions/kimi-10/timeline").json()
    assert [e["kind"] for e in other["events"]] == ["registered", "claimed"]
    assert other["lanes"][1]["intervals"][0]["end"] is None  # still held: drawn up to now
    assert dashboard.get("/api/sessions/kimi-1/timeline?limit=2").json()["truncated"] is True


def test_timeline_shows_a_cleanup_stop(dashboard, agents):
    agents.register("gone:1")
    agents.register("gone:2")
    agents.claim("gone:1", "src/auth.py")
    agents.die("gone:1")
    agents.die("gone:2")
    agents.cli("cleanup")
    events = dashboard.get("/api/sessions/gone:2/timeline").json()["events"]
    assert [e["kind"] for e in events] == ["registered", "stopped"]
    # the lock gone:1 held is freed on its shard, by a commit naming the cleanup
    events = dashboard.get("/api/sessions/gone:1/timeline").json()["events"]
    assert [e["kind"] for e in events] == ["registered", "claimed", "stopped", "lock freed"]
    assert events[-1]["reason"] == "cleanup stopped gone:1"
    assert dashboard.get("/api/locks").json()["locks"] == []


# -- actions ----------------------------------------------------------------------------

def test_kill_signals_the_agent_and_records_who_and_why(dashboard, agents, repo):
    agents.register("kimi-1")
    agents.claim("kimi-1", "src/auth.py")
    answer = dashboard.post("/api/sessions/kimi-1/kill", json={"reason": "runaway loop", "by": "alice"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["signal"] == "SIGTERM"
    assert not agents.alive("kimi-1")
    events = dashboard.get("/api/sessions/kimi-1/timeline").json()["events"]
    [ended] = [e for e in events if "by alice: killed (SIGTERM): runaway loop" in e["subject"]]
    assert ended["ends"] and ended["by"] == "alice" and ended["reason"].endswith("runaway loop")
    assert dashboard.get("/api/locks").json()["locks"] == []
    again = dashboard.post("/api/sessions/kimi-1/kill", json={"reason": "again"})
    assert again.status_code == 409


def test_force_release_frees_a_stale_lock_at_once_and_a_fresh_one_only_with_force(dashboard, agents, repo):
    agents.register("gone-1")
    agents.register("kimi-1")
    agents.claim("gone-1", "docs/")
    agents.claim("kimi-1", "src/auth.py")
    agents.die("gone-1")

    stale = dashboard.post("/api/locks/force-release", json={"path": "docs/", "reason": "crashed agent"})
    assert stale.status_code == 200, stale.text
    assert stale.json()["was_fresh"] is False
    freed = dashboard.get("/api/sessions/gone-1/timeline").json()["events"][-1]
    assert (freed["kind"], freed["reason"]) == ("lock freed", "crashed agent")

    fresh = {"path": "src/auth.py", "reason": "urgent hotfix", "by": "bob"}
    refused = dashboard.post("/api/locks/force-release", json=fresh)
    assert refused.status_code == 409
    assert "kimi-1" in refused.json()["error"]["message"]
    assert [l["path"] for l in dashboard.get("/api/locks").json()["locks"]] == ["src/auth.py"]
    forced = dashboard.post("/api/locks/force-release", json={**fresh, "force": True})
    assert forced.status_code == 200
    assert forced.json()["was_fresh"] is True
    freed = dashboard.get("/api/sessions/kimi-1/timeline").json()["events"][-1]
    assert (freed["kind"], freed["by"], freed["reason"]) == ("lock freed", "bob", "urgent hotfix")
    assert dashboard.get("/api/locks").json()["locks"] == []
    missing = dashboard.post("/api/locks/force-release", json={**fresh, "force": True})
    assert missing.status_code == 404


def test_cleanup_stops_zombies_and_records_who_and_why(dashboard, agents, repo):
    agents.register("gone-1")
    agents.register("kimi-1")
    agents.die("gone-1")
    answer = dashboard.post("/api/cleanup", json={"reason": "end of day", "by": "carol"})
    assert [s["session"] for s in answer.json()["stopped"]] == ["gone-1"]
    stopped = dashboard.get("/api/sessions/gone-1/timeline").json()["events"][-1]
    assert (stopped["kind"], stopped["by"], stopped["reason"]) == ("stopped", "carol", "end of day")
    assert [s["id"] for s in dashboard.get("/api/sessions").json()["sessions"]] == ["kimi-1"]


@pytest.mark.parametrize("body", [{"reason": ""}, {"reason": "x\ny"}, {"reason": "ok", "by": "a <b>"},
                                  {}, {"reason": "ok", "force": "maybe"}])
def test_bad_action_input_changes_nothing(dashboard, agents, repo, body):
    agents.register("kimi-1")
    before = git(repo, "rev-parse", "agent-registry")
    assert dashboard.post("/api/sessions/kimi-1/kill", json=body).status_code == 422
    assert dashboard.post("/api/locks/force-release", json={"path": "src/auth.py", **body}).status_code == 422
    assert git(repo, "rev-parse", "agent-registry") == before
    assert agents.alive("kimi-1")


# -- security ---------------------------------------------------------------------------

def test_changes_need_the_token_header_and_the_same_origin(dashboard, agents, repo):
    agents.register("kimi-1")
    body = {"reason": "test"}
    token = dashboard.headers.pop("X-Agent-Registry-Token")
    assert dashboard.post("/api/cleanup", json=body).status_code == 403
    assert dashboard.post("/api/cleanup", json=body,
                          headers={"X-Agent-Registry-Token": "wrong"}).status_code == 403
    own = {"X-Agent-Registry-Token": token}
    assert dashboard.post("/api/cleanup", json=body,
                          headers={**own, "Origin": "http://evil.example"}).status_code == 403
    assert dashboard.post("/api/cleanup", json=body,
                          headers={**own, "Sec-Fetch-Site": "cross-site"}).status_code == 403
    assert dashboard.put("/api/cleanup", json=body, headers=own).status_code == 405
    assert dashboard.post("/api/cleanup", json=body,
                          headers={**own, "Origin": LOCAL, "Sec-Fetch-Site": "same-origin"}).status_code == 200
    assert agents.alive("kimi-1")


def test_loopback_dashboard_answers_only_loopback_host_names(dashboard):
    assert dashboard.get("/api/sessions", headers={"Host": "attacker.example"}).status_code == 421
    assert dashboard.get("/api/sessions", headers={"Host": "localhost:8765"}).status_code == 200
    assert dashboard.get("/api/sessions", headers={"Host": "[::1]:8765"}).status_code == 200


def test_an_access_token_guards_every_request(repo):
    app = create_app(str(repo), token="s3cret-token")
    with TestClient(app, base_url="http://192.0.2.10:8765") as client:
        assert client.get("/api/sessions").status_code == 401
        assert client.get("/").status_code == 401
        health = client.get("/api/health").json()
        assert "repo_id" in health and "common_dir" not in health
        assert client.get("/api/sessions", headers={"Authorization": "Bearer s3cret-token"}).status_code == 200
        assert client.get("/api/sessions", headers={"X-Agent-Registry-Token": "s3cret-token"}).status_code == 200
        link = client.get("/?token=s3cret-token", follow_redirects=False)
        assert link.status_code == 303 and link.headers["location"] == "/"
        assert "httponly" in link.headers["set-cookie"].lower()
        page = client.get("/")  # the cookie now
        assert page.status_code == 200 and 'content="s3cret-token"' in page.text
        client.cookies.clear()
        assert client.post("/api/cleanup", json={"reason": "x"}).status_code == 401
        assert client.post("/api/cleanup", json={"reason": "x"},
                           headers={"X-Agent-Registry-Token": "s3cret-token"}).status_code == 200


def test_responses_forbid_inline_scripts(dashboard):
    page = dashboard.get("/")
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert page.headers["x-content-type-options"] == "nosniff"
    assert dashboard.get("/api/openapi.json").json()["info"]["title"] == "agent-registry dashboard"


# -- wiki -------------------------------------------------------------------------------

def test_wiki_search_and_entry(dashboard, agents):
    agents.register("kimi-1", working_on="oauth tokens")
    agents.cli("context", "log", "kimi-1", "swapped the token cache for an LRU")
    agents.cli("end", "kimi-1", "--router", "oauth token refresh", "--what", "token refresh",
               "--how", "an LRU cache", "--bugs", "expired tokens kept")
    found = dashboard.get("/api/wiki", params={"q": "token refresh"}).json()
    assert found["ranker"] == "whoosh"
    hit = found["results"][0]
    assert hit["session_id"] == "kimi-1"
    entry = dashboard.get(f"/api/wiki/{hit['id']}").json()
    assert entry["how"] == "an LRU cache"
    assert entry["bugs"] == ["expired tokens kept"]
    assert "swapped the token cache" in entry["body"]
    assert dashboard.get("/api/wiki/kimi-1").json()["id"] == hit["id"]
    assert dashboard.get("/api/wiki/nothing-here").status_code == 404
    latest = dashboard.get("/api/wiki", params={"q": ""}).json()  # the latest entries
    assert latest["ranker"] == "latest" and latest["results"][0]["session_id"] == "kimi-1"


def test_wiki_answers_503_when_the_module_is_missing(repo, monkeypatch):
    # an installation without the wiki: importing it fails the way a missing module does
    monkeypatch.setitem(sys.modules, "agent_registry.wiki", None)
    with TestClient(create_app(str(repo)), base_url=LOCAL) as client:
        answer = client.get("/api/wiki", params={"q": "auth"})
        assert answer.status_code == 503
        assert "no agent_registry.wiki module" in answer.json()["error"]["message"]
        assert client.get("/api/wiki/abc").status_code == 503


# -- change detection -------------------------------------------------------------------

def test_changes_name_their_areas_and_sessions(repo, agents):
    agents.register("kimi-1")
    with Registry.open(str(repo)) as registry:  # what the event stream compares
        before = signature(registry)
        agents.claim("kimi-1", "src/auth.py")
        after = signature(registry)
        change = describe_change(changed_paths(registry, before[0], after[0])
                                 + shard_changed_paths(registry, before[-1], after[-1]))
    assert change == {"areas": ["locks", "sessions"], "sessions": ["kimi-1"]}
    assert describe_change(["wiki/kimi-2.md", "registry.md"]) == {"areas": ["wiki"], "sessions": ["kimi-2"]}


def next_event(lines) -> tuple[str, dict]:
    """The next server-sent event (name, data), skipping keep-alive comments."""
    name, data = None, None
    for line in lines:
        if line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: "):
            data = json.loads(line[6:])
        elif not line and name:
            return name, data
    raise AssertionError("the event stream ended")


def test_event_stream_pushes_what_changed(agents, repo):
    agents.register("kimi-1")
    with served(repo) as info, httpx.stream("GET", info["url"] + "api/events", timeout=30) as stream:
        lines = stream.iter_lines()
        tip = git(repo, "rev-parse", "agent-registry").strip()
        assert next_event(lines) == ("hello", {"tip": tip})
        agents.claim("kimi-1", "src/auth.py")
        name, change = next_event(lines)
        assert name == "change"
        assert change == {"areas": ["locks", "sessions"], "sessions": ["kimi-1"],
                          "tip": git(repo, "rev-parse", "agent-registry").strip(), "previous": tip}


def test_hand_made_session_files_are_listed_not_fatal(dashboard, agents, repo):
    agents.register("kimi-1")
    commit_raw(repo, {"sessions/live/odd id.yaml": 'id: "odd id"\nprovider: "Hand"\nstatus: "OnWorking"\n'},
               "a peer's hand-made session")
    ids = [s["id"] for s in dashboard.get("/api/sessions").json()["sessions"]]
    assert sorted(ids) == ["kimi-1", "odd id"]
    assert dashboard.get("/api/sessions/odd id").json()["session"]["provider"] == "Hand"
    assert json.loads(dashboard.get("/api/sessions/odd id/timeline").text)["events"] == []


def test_a_message_is_written_only_with_the_token(agents, repo):
    """POST /api/messages on the real server: without the page's token (or from another
    origin) nothing is sent; with it, a person's message reaches the session (issue 36)."""
    import re
    import urllib.error
    import urllib.request
    agents.register("kimi-1")
    with served(repo) as info:
        page = urllib.request.urlopen(info["url"]).read().decode()
        token = re.search(r'name="agent-registry-token" content="([^"]+)"', page).group(1)
        body = json.dumps({"to": "kimi-1", "body": "please stop", "importance": "high",
                           "by": "alice"}).encode()

        def post(headers: dict) -> int:
            request = urllib.request.Request(info["url"].rstrip("/") + "/api/messages", body,
                                             {"Content-Type": "application/json", **headers})
            try:
                return urllib.request.urlopen(request).status
            except urllib.error.HTTPError as exc:
                return exc.code
        assert post({}) == 403
        assert post({"X-Agent-Registry-Token": token, "Origin": "http://evil.example"}) == 403
        assert json.loads(agents.cli("--json", "inbox", "kimi-1").stdout)["messages"] == []
        assert post({"X-Agent-Registry-Token": token}) == 200
    (message,) = json.loads(agents.cli("--json", "inbox", "kimi-1").stdout)["messages"]
    assert (message["from"], message["sender"], message["importance"]) == ("alice", "person", "high")
