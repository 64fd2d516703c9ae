"""`status` and the dashboard filter sessions with one function (branch/records.py,
`select_sessions`): the same question gives the same sessions through both faces, and an
unknown status is bad input in both.  Real processes: the CLI and a served dashboard."""
from __future__ import annotations

import json

import httpx
import pytest

from test_dashboard_support import served

FILTERS = [
    {"status": "Finished"}, {"status": "finished"}, {"status": "ONWORKING"},
    {"provider": "claude"}, {"provider": "KIMI"}, {"project": "nowhere"},
    {"status": "finished", "provider": "codex"},
]


@pytest.fixture
def team(repo, run):
    for sid, provider in (("kimi-1", "Kimi"), ("claude-1", "Claude"), ("codex-1", "Codex")):
        assert run("register", sid, "--provider", provider).returncode == 0
    assert run("finish", "codex-1").returncode == 0
    return repo


def cli_ids(run, query: dict) -> set[str]:
    args = [x for key, value in query.items() for x in (f"--{key}", value)]
    proc = run("--json", "status", "--all", *args)
    assert proc.returncode == 0, proc.stderr
    return {s["id"] for s in json.loads(proc.stdout)["sessions"]}


def test_cli_and_dashboard_filter_alike(team, run):
    with served(team) as info:
        for query in FILTERS:
            reply = httpx.get(info["url"] + "api/sessions",
                              params={**query, "history": "true"}, timeout=30)
            assert reply.status_code == 200, reply.text
            web = {s["id"] for s in reply.json()["sessions"]}
            assert web == cli_ids(run, query), query
    assert cli_ids(run, {"status": "finished"}) == {"codex-1"}
    assert cli_ids(run, {"provider": "claude"}) == {"claude-1"}


def test_an_unknown_status_is_bad_input_in_both(team, run):
    proc = run("status", "--status", "Sleeping")
    assert proc.returncode == 2 and "invalid status 'Sleeping'" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    with served(team) as info:
        reply = httpx.get(info["url"] + "api/sessions", params={"status": "Sleeping"}, timeout=30)
        assert reply.status_code == 400 and "invalid status" in reply.text
