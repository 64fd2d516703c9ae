"""The dashboard and the MCP server over a registry in the lock-shard layout (format 3,
docs/shards.md), where claims and releases commit on the shard branches
``agent-registry-shards/NN`` and never move the main branch: the live updates and the
session timeline read those branches too, and a claim through MCP lands on its shard.

The real dashboard the CLI serves on 127.0.0.1 (read over HTTP by httpx and by Chromium
through Playwright), the real MCP server through the MCP SDK's stdio client, real
clones of a real bare remote; every registry is made as ``agent-registry init --shards
4`` makes it, every claim made by another process."""
from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from helpers import CLI, git
from test_dashboard_support import agents  # noqa: F401  (fixture)
from test_dashboard_support import served
from test_scale_faces import ok, shard_branch
from test_sync import Team

from agent_registry.branch import shards as S
from agent_registry.branch.paths import record_name

COUNT = 4
BRANCH = "agent-registry"
FILE = "src/auth.py"  # shard 2 of 4
OTHER = "README.md"  # shard 1 of 4
BROAD = "tests/"  # every shard
WATCHDOG = 60.0  # seconds before a test gives up waiting for an event (not a speed claim)


def tip(repo: Path, ref: str) -> str:
    return git(repo, "rev-parse", ref).strip()


def base(info: dict) -> str:
    return info["url"].rstrip("/")


def sharded_repo(agents, *sids: str) -> None:
    """A registry made in COUNT lock shards, *sids* registered (each owned by a `sleep`)."""
    agents.cli("init", "--shards", str(COUNT))
    for sid in sids:
        agents.register(sid, "Kimi", f"{sid} work")
    assert git(agents.repo, "for-each-ref", "--format=%(refname)",
               f"refs/heads/{BRANCH}-shards/").split() == S.shard_refs(BRANCH, COUNT)


class Events:
    """The dashboard's Server-Sent Events, read line by line over a real connection."""

    def __init__(self, response: httpx.Response) -> None:
        self.lines = response.iter_lines()

    def next(self, until: float) -> tuple[str, dict] | None:
        """The next event (name, data); None once *until* (a monotonic time) has passed.
        The server's keep-alive comment every 15 s lets a silent stream time out."""
        name = None
        for line in self.lines:
            if line.startswith("event:"):
                name = line.split(":", 1)[1].strip()
            elif line.startswith("data:") and name:
                return name, json.loads(line.split(":", 1)[1])
            if time.monotonic() > until:
                return None
        return None

    def change_with(self, area: str) -> dict:
        """The first `change` whose areas include *area* (earlier ones are skipped)."""
        until = time.monotonic() + WATCHDOG
        while (event := self.next(until)) is not None:
            if event[0] == "change" and area in event[1]["areas"]:
                return event[1]
        pytest.fail(f"no change with {area!r} reached the event stream")


def stream(info: dict):
    return httpx.stream("GET", base(info) + "/api/events",
                        timeout=httpx.Timeout(WATCHDOG, connect=10.0))


# -- live updates -----------------------------------------------------------------------

def test_a_claim_on_a_shard_reaches_the_event_stream(agents, repo):
    """The claim writes one shard ref and leaves the main branch alone: the stream says
    `locks` and `sessions` changed, for the session whose held list moved."""
    sharded_repo(agents, "kimi-1")
    main = tip(repo, BRANCH)
    with served(repo) as info, stream(info) as response:
        events = Events(response)
        assert events.next(time.monotonic() + WATCHDOG)[0] == "hello"
        agents.claim("kimi-1", FILE)
        change = events.change_with("locks")
        assert "sessions" in change["areas"] and change["sessions"] == ["kimi-1"]
        assert tip(repo, BRANCH) == main  # only the shard moved
        locks = httpx.get(base(info) + "/api/locks").json()["locks"]
        assert [(lock["path"], lock["owner"]) for lock in locks] == [(FILE, "kimi-1")]
        agents.cli("lock", "release", FILE, "--session", "kimi-1")
        assert events.change_with("locks")["sessions"] == ["kimi-1"]
        assert httpx.get(base(info) + "/api/locks").json()["locks"] == []


def test_another_clones_claim_arrives_by_a_plain_fetch(tmp_path):
    """Clone b claims (its shard is pushed, the main branch does not move); clone a's
    dashboard notices when a plain `git fetch` moves a's remote-tracking shard ref."""
    team = Team(tmp_path)
    a, b = team.clone("a"), team.clone("b")
    ok(a("init", "--shards", str(COUNT)))
    ok(a("register", "a1", "--provider", "Codex", "--working-on", "auth"))
    ok(b("register", "b1", "--provider", "Codex", "--working-on", "docs"))
    ok(a("sync"))  # a knows b1 before the dashboard starts: only b's claim is news
    with served(a.cwd) as info, stream(info) as response:
        events = Events(response)
        assert events.next(time.monotonic() + WATCHDOG)[0] == "hello"
        ok(b("lock", "acquire", FILE, "--session", "b1"))
        git(a.cwd, "fetch", "-q", "origin")
        change = events.change_with("locks")
        assert "b1" in change["sessions"] and "sync" in change["areas"]
        locks = httpx.get(base(info) + "/api/locks").json()["locks"]
        assert [(lock["path"], lock["owner"]) for lock in locks] == [(FILE, "b1")]


# -- the timeline ---------------------------------------------------------------------------

def test_the_timeline_lists_the_claims_and_releases_made_on_shards(agents, repo):
    sharded_repo(agents, "kimi-1")
    agents.claim("kimi-1", FILE, OTHER)  # two shards: one commit each, one operation
    agents.claim("kimi-1", BROAD)  # every shard
    agents.cli("lock", "release", OTHER, "--session", "kimi-1")
    for target in (FILE, OTHER, BROAD):
        assert "kimi-1" in git(repo, "log", "-1", "--format=%B", shard_branch(target)
                               if target != BROAD else f"{BRANCH}-shards/00")
    with served(repo) as info:
        timeline = httpx.get(base(info) + "/api/sessions/kimi-1/timeline").json()
    kinds = [(event["kind"], sorted(event["paths"])) for event in timeline["events"]]
    assert kinds == [("registered", []), ("claimed", sorted([FILE, OTHER])),
                     ("claimed", [BROAD]), ("released", [OTHER])]
    times = [event["at"] for event in timeline["events"]]
    assert times == sorted(times)
    lanes = {lane["label"]: lane["intervals"] for lane in timeline["lanes"]}
    assert lanes[FILE][0]["end"] is None and lanes[BROAD][0]["end"] is None
    assert lanes[OTHER][0]["end"] == timeline["events"][-1]["at"]
    assert not timeline["truncated"]


# -- the page, in a real browser ------------------------------------------------------------

def test_the_open_page_shows_a_shard_claim_without_reload(agents, repo):
    pytest.importorskip("playwright.sync_api")
    from test_dashboard_browser import CHROMIUM, CHROMIUM_ARGS, LIVE_UPDATE_MS, lock_row
    from playwright.sync_api import expect, sync_playwright
    import os
    if not os.path.exists(CHROMIUM):
        pytest.skip("needs Debian's chromium (.ci/run installs it)")
    sharded_repo(agents, "kimi-1", "claude-1")
    with served(repo) as info, sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=CHROMIUM, headless=True,
                                         args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(info["url"])
            expect(page.locator("#live")).to_have_text("live")
            expect(page.locator("#locks-empty")).to_be_visible()
            agents.claim("claude-1", FILE)
            expect(lock_row(page, FILE)).to_contain_text("claude-1", timeout=LIVE_UPDATE_MS)
            agents.claim("kimi-1", BROAD)
            expect(lock_row(page, BROAD)).to_contain_text("kimi-1", timeout=LIVE_UPDATE_MS)
            agents.cli("lock", "release", FILE, "--session", "claude-1")
            expect(lock_row(page, FILE)).to_have_count(0, timeout=LIVE_UPDATE_MS)
            expect(page.locator("#lock-count")).to_have_text("1")
            assert errors == [], f"JavaScript errors on the page: {errors}"
        finally:
            browser.close()


# -- MCP ----------------------------------------------------------------------------------

def test_a_claim_through_mcp_lands_on_its_shard(agents, repo):
    """A claim through the MCP server goes to its target's shard (the main branch does
    not move) and `lock check`, another process, sees it; `end` through MCP releases it
    there and writes the claims made on the shards, released or not, into the wiki
    entry's files_touched."""
    pytest.importorskip("mcp", reason="the mcp extra is not installed")
    from test_mcp import call, register, talk
    sharded_repo(agents, "kimi-1")
    main = tip(repo, BRANCH)

    async def claim(session):
        sid = await register(session, session_id="claude-mcp-1", working_on="auth")
        claimed = await call(session, "lock_acquire", paths=[FILE, OTHER])
        released = await call(session, "lock_release", paths=[OTHER])
        checked = await call(session, "lock_check", paths=[FILE], session_id=sid)
        return sid, claimed, released, checked
    sid, claimed, released, checked = talk(repo, claim)
    assert not claimed[0], claimed[1]
    assert {lock["status"] for lock in claimed[2]["locks"]} == {"acquired"}
    assert not released[0] and checked[2]["paths"][0]["state"] == "locked-by-me"
    record = git(repo, "show", f"{shard_branch(FILE)}:{record_name(FILE)}")
    assert [h["session"] for h in json.loads(record)["holders"]] == [sid]
    assert record_name(FILE) not in git(repo, "ls-tree", "-r", "--name-only", BRANCH)
    assert git(repo, "rev-list", f"{main}..{BRANCH}").split() == \
        [tip(repo, BRANCH)]  # the register only
    seen = subprocess.run([CLI, "--json", "lock", "check", FILE], cwd=repo,
                          capture_output=True, text=True)
    assert json.loads(seen.stdout)["paths"][0]["owner"] == sid
    refused = agents.cli("lock", "acquire", FILE, "--session", "kimi-1", check=False)
    assert refused.returncode != 0 and sid in refused.stderr

    async def end(session):
        return await call(session, "end", session_id=sid, what="auth done", router="auth")
    error, text, ended = talk(repo, end)
    assert not error, text
    assert ended["released"] == [FILE]  # from its shard (core/sharded.py routes end)
    assert record_name(FILE) not in git(repo, "ls-tree", "-r", "--name-only",
                                        shard_branch(FILE))
    entry = git(repo, "show", f"{BRANCH}:wiki/{sid}.md")
    assert FILE in entry and OTHER in entry  # files_touched: both claims, released or not

