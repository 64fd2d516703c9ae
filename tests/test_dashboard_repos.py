"""`dashboard --repos` in Chromium: the sessions and locks of every repository on the
user's list, with a repository column, live; another repository's rows are read-only
(no action on the page, and the API's actions act on the served repository only)."""
from __future__ import annotations

import json
import os
import subprocess

import pytest

from helpers import git, make_repo
from test_dashboard_browser import CHROMIUM, browser, expect, page, snap  # noqa: F401
from test_dashboard_support import Agents, served
from test_dashboard_support import agents  # noqa: F401  (fixture)

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM),
                                reason="needs Debian's chromium (.ci/run installs it)")


@pytest.fixture
def elsewhere(tmp_path):
    """A second repository with an agent of its own, registered by the CLI there."""
    team = Agents(make_repo(tmp_path / "elsewhere"))
    yield team
    team.close()


def refs(repo) -> str:
    return git(repo, "for-each-ref", "--format=%(refname) %(objectname)")


def row(page, table: str, key: str):
    """The row of a session (sessions) or a path (locks), by its data attribute."""
    attribute = "data-session" if table == "sessions" else "data-path"
    return page.locator(f"#{table} tbody tr[{attribute}='{key}']")


def test_every_repository_in_one_page_read_only_elsewhere(page, snap, agents, elsewhere, repo,
                                                           tmp_path):
    agents.register("here-1", "Kimi", "work here")
    agents.claim("here-1", "src/auth.py")
    elsewhere.register("there-1", "Codex", "work there")
    elsewhere.claim("there-1", "README.md")
    gone = make_repo(tmp_path / "gone")
    Agents(gone).cli("init")
    subprocess.run(["rm", "-rf", str(gone)], check=True)
    with served(repo, "--repos") as info:
        page.goto(info["url"])
        expect(page.locator("#live")).to_have_text("live")
        expect(page.locator("#sessions th.repository")).to_be_visible()
        here, there = row(page, "sessions", "here-1"), row(page, "sessions", "there-1")
        expect(here.locator("td.repository")).to_have_text(repo.name)
        expect(there.locator("td.repository")).to_have_text("elsewhere")
        expect(there.locator("td.repository")).to_have_attribute(
            "title", str(elsewhere.repo.resolve()))
        expect(here.get_by_role("button", name="Kill…")).to_have_count(1)
        expect(there.get_by_role("button", name="Kill…")).to_have_count(0)
        expect(there).to_contain_text("read-only here")
        expect(row(page, "locks", "README.md").locator("td.repository")).to_have_text("elsewhere")
        expect(row(page, "locks", "README.md").get_by_role("button")).to_have_count(0)
        expect(row(page, "locks", "src/auth.py").get_by_role("button",
                                                              name="Force-release…")).to_have_count(1)
        # live: a claim in the other repository shows without a reload
        elsewhere.claim("there-1", "src/auth.py")
        expect(page.locator("#locks tbody tr[data-repository$='/elsewhere']")).to_have_count(
            2, timeout=20_000)
        snap()
        before = refs(elsewhere.repo)
        # another repository's timeline is read from it, read-only
        there.get_by_role("button", name="timeline").click()
        detail = page.locator("#sessions tr[data-detail='there-1']")
        expect(detail.locator("svg.timeline")).to_have_count(1)
        expect(detail).to_contain_text("read-only here: from " + str(elsewhere.repo.resolve()))
        expect(detail.locator(".inbox")).to_have_count(0)
        snap("timeline-elsewhere")
        # fail closed: the API's actions act on the served repository, never elsewhere
        answer = page.request.post(f"{info['url']}api/sessions/there-1/kill",
                                   headers={"X-Agent-Registry-Token": info["token"]},
                                   data={"reason": "test"})
        assert answer.status == 404
        for path in ("/etc", str(repo.resolve()) + "/..", "relative"):  # only a listed one
            assert page.request.get(f"{info['url']}api/sessions/there-1/timeline",
                                    params={"repository": path}).status == 400
        sessions = page.request.get(f"{info['url']}api/sessions").json()
        assert any("gone" in w and "repos forget" in w for w in sessions["warnings"])
        assert {(s["id"], s["repository"]) for s in sessions["sessions"]} == \
            {("here-1", str(repo.resolve())), ("there-1", str(elsewhere.repo.resolve()))}
        assert refs(elsewhere.repo) == before  # read, never written
    assert elsewhere.alive("there-1")
    status = json.loads(elsewhere.cli("--json", "status").stdout)
    assert [s["id"] for s in status["sessions"]] == ["there-1"]


def test_reusing_a_dashboard_without_repos_says_so(agents, repo):
    with served(repo) as info:
        again = agents.cli("--json", "dashboard", "--port", str(info["port"]), "--repos")
        assert json.loads(again.stdout)["reused"] is True
        assert "lists this repository only" in again.stderr
