"""The dashboard's inbox pane and room card in a real browser (Playwright driving Debian's
Chromium, headless) while CLI processes send and acknowledge messages (issue 12)."""
from __future__ import annotations

import os
import re

import pytest

from test_dashboard_support import agents  # noqa: F401  (fixture)
from test_dashboard_support import served

playwright = pytest.importorskip("playwright.sync_api")
expect = playwright.expect

CHROMIUM = "/usr/bin/chromium"
LIVE_UPDATE_MS = 2000

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM),
                                reason="needs Debian's chromium (.ci/run installs it)")


@pytest.fixture
def page():
    with playwright.sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=CHROMIUM, headless=True,
                                         args=["--no-sandbox", "--disable-gpu"])
        tab = browser.new_page(viewport={"width": 1400, "height": 1000})
        errors: list[str] = []
        tab.on("pageerror", lambda exc: errors.append(str(exc)))
        yield tab
        browser.close()
    assert errors == [], f"JavaScript errors on the page: {errors}"


def inbox_pane(page, url: str, sid: str):
    """The dashboard at *url*, live, with *sid*'s timeline open: its inbox pane."""
    page.goto(url)
    expect(page.locator("#live")).to_have_text("live")
    row = page.locator("#sessions tbody tr").filter(
        has=page.locator("td:first-child", has_text=re.compile(f"^{re.escape(sid)}$")))
    row.get_by_role("button", name="timeline").click()
    return page.locator("#session-detail details.inbox")


def test_the_inbox_pane_follows_messages_and_opens_a_thread(page, agents, repo):
    agents.register("kimi-1", "Kimi", "auth")
    agents.register("codex-1", "Codex", "tests")
    with served(repo) as info:
        pane = inbox_pane(page, info["url"], "kimi-1")
        expect(pane.locator("summary")).to_contain_text("0 waiting")
        mid = agents.cli("send", "--from", "codex-1", "--to", "kimi-1",
                         "may I touch src/auth.py?").stdout.strip()
        item = pane.locator(f'li[data-message="{mid}"]')
        expect(item).to_contain_text("may I touch src/auth.py?", timeout=LIVE_UPDATE_MS)
        expect(pane.locator("summary")).to_contain_text("1 waiting")
        agents.cli("send", "--from", "kimi-1", "--to", "codex-1", "--reply-to", mid, "yes")
        agents.cli("ack", mid, "--session", "kimi-1")
        expect(pane.locator("summary")).to_contain_text("0 waiting", timeout=LIVE_UPDATE_MS)
        pane.locator("summary").click()  # nothing waits: the pane comes folded
        item = pane.locator(f'li[data-message="{mid}"]')
        expect(item).to_contain_text("(acknowledged)")
        item.get_by_role("button", name="thread").click()
        expect(item.locator("ol.thread li")).to_have_count(2)
        expect(item.locator("ol.thread")).to_contain_text("acknowledged by kimi-1")
        # a live update redraws the pane: the thread the reader opened stays open
        agents.cli("send", "--from", "codex-1", "--to", "kimi-1", "one more thing")
        expect(pane.locator("summary")).to_contain_text("1 waiting", timeout=LIVE_UPDATE_MS)
        expect(pane.locator(f'li[data-message="{mid}"] ol.thread li')).to_have_count(2)
        expect(pane).to_have_attribute("open", "")
        page.fill("#room-name", "repo:repo")
        page.click("#room-form button")
        expect(page.locator("#room tbody tr")).to_have_count(2)
        expect(page.locator("#room")).to_contain_text("present")


def test_a_person_writes_to_a_session_from_the_dashboard(page, agents, repo):
    """The inbox pane's form sends as a person (POST /api/messages, with the page's
    token); the message shows HIGH, ack required, then acknowledged (issue 36)."""
    agents.register("kimi-1", "Kimi", "auth")
    with served(repo) as info:
        pane = inbox_pane(page, info["url"], "kimi-1")
        pane.locator("summary").click()
        page.fill("#author", "alice")
        form = pane.locator("form.write")
        form.locator("textarea").fill("stop: the API changed")
        form.locator("select").select_option("high")
        form.locator("input[type=checkbox]").check()
        form.get_by_role("button", name="send").click()
        item = pane.locator("li", has_text="stop: the API changed")
        expect(item).to_contain_text("HIGH message from alice (a person)", timeout=LIVE_UPDATE_MS)
        expect(item).to_contain_text("ack required")
        inbox = agents.cli("--json", "inbox", "kimi-1").stdout
        assert '"sender": "person"' in inbox and '"importance": "high"' in inbox
        mid = item.get_attribute("data-message")
        agents.cli("ack", mid, "--session", "kimi-1")
        expect(pane.locator(f'li[data-message="{mid}"]')).to_contain_text(
            "(acknowledged)", timeout=LIVE_UPDATE_MS)
