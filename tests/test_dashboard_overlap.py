"""The dashboard's overlap pane in Chromium (issue 27 item 3): sessions in two worktrees
on two branches editing one function show as one row (issue 37: two sessions on one side
are still one collision), live, with the paths, the kind and since when, each session a
link to its row and timeline."""
from __future__ import annotations

from pathlib import Path

import pytest

from helpers import git
from test_dashboard_browser import CHROMIUM, browser, expect, page, snap  # noqa: F401
from test_dashboard_support import served

chromium = pytest.mark.skipif(not Path(CHROMIUM).exists(),
                              reason="needs Debian's chromium (.ci/run installs it)")

BILLING = "".join(f"def f{i}():\n    return {i}\n\n" for i in range(12))


def change(where: Path, old: str, new: str) -> None:
    path = where / "src" / "billing.py"
    path.write_text(path.read_text().replace(old, new))
    git(where, "commit", "-q", "-am", f"{where.name}: {new.strip()}")


@pytest.fixture
def worktrees(repo, tmp_path, monkeypatch):
    """Worktrees wt-a and wt-b of *repo* on branches feat-a and feat-b, a session in each
    (a1, b1), and src/billing.py on main before they forked."""
    monkeypatch.setenv("AGENT_REGISTRY_PID", "none")
    (repo / "src" / "billing.py").write_text(BILLING)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "billing")
    from agent_registry import Registry
    trees = {}
    for name in ("a", "b"):
        trees[name] = tmp_path / f"wt-{name}"
        git(repo, "worktree", "add", "-q", "-b", f"feat-{name}", str(trees[name]))
        with Registry.open(str(trees[name])) as registry:
            registry.register(f"{name}1", provider="Kimi", working_on=f"task {name}")
    return trees


@chromium
def test_the_overlap_pane_shows_the_pair_live_and_links_each_session(page, snap, worktrees,
                                                                       repo):
    change(worktrees["a"], "return 3\n", "return 30\n")  # only one side moved: no pair yet
    from agent_registry import Registry
    with Registry.open(str(worktrees["a"])) as registry:  # a second session on side a
        registry.register("a2", provider="Kimi", working_on="task a, too")
    with served(repo) as info:
        page.goto(info["url"])
        expect(page.locator("#live")).to_have_text("live")
        expect(page.locator("#overlaps-empty")).to_be_visible()
        change(worktrees["b"], "return 3\n", "return 300\n")  # the same function: a conflict
        # one collision, one row, however many sessions work on a side (issue 37)
        pair = page.locator("#overlaps tbody tr[data-pair='a1 a2 b1']")
        expect(pair).to_have_count(1, timeout=20_000)
        expect(page.locator("#overlaps tbody tr")).to_have_count(1)
        expect(pair.locator("a.session-link")).to_have_text(["a1", "a2", "b1"])
        expect(pair).to_contain_text("feat-a")
        expect(pair).to_contain_text("feat-b")
        expect(pair.locator(".state.conflict")).to_have_text("conflict")
        expect(pair.locator("ul.paths li")).to_have_text("src/billing.py conflict")
        expect(pair.locator("td").nth(3)).not_to_be_empty()  # since when
        snap()
        pair.locator("a.session-link", has_text="b1").click()
        detail = page.locator("#sessions tr[data-detail='b1']")
        expect(detail).to_be_visible()
        expect(detail.locator("svg.timeline")).to_have_count(1)
        snap("timeline")


def test_a_repeat_forecast_with_nothing_new_writes_nothing(worktrees, repo):
    """The pane's live probe reads the forecast every few polls: a read that finds what
    the last one found leaves the state folder alone, whose change the event stream
    would otherwise report as a sync (a change event every probe)."""
    from fastapi.testclient import TestClient

    from agent_registry.dashboard.app import create_app
    change(worktrees["a"], "return 3\n", "return 30\n")
    change(worktrees["b"], "return 3\n", "return 300\n")
    (worktrees["b"] / "notes.txt").write_text("uncommitted\n")
    state = repo / ".git" / "agent-registry"
    with TestClient(create_app(str(repo)), base_url="http://127.0.0.1") as client:
        first = client.get("/api/overlaps").json()
        assert [o["sessions"] for o in first["overlaps"]] == [["a1", "b1"]]
        before = [(p.name, p.stat().st_ino, p.stat().st_mtime_ns) for p in state.iterdir()]
        assert client.get("/api/overlaps").json()["overlaps"] == first["overlaps"]
        after = [(p.name, p.stat().st_ino, p.stat().st_mtime_ns) for p in state.iterdir()]
    assert after == before
