"""Memory at the start (issue 36): the session-start hook and MCP ``register`` hand the
agent the few wiki entries most relevant to what it works on and the paths it holds or
expects to touch, with their ids; ``--no-memory`` (a hook option) turns it off.  The
entries are written through the CLI (``end``), the hook run as a subprocess, ``register``
called through the MCP SDK's client."""
from __future__ import annotations

import json

import pytest

from helpers import git
from test_guard import agents  # noqa: F401  (fixture)
from test_harness_hooks import base, context_of, hook

PAST = {"s1": ("oauth token refresh", "rotated the oauth refresh tokens", "src/oauth.py"),
        "s2": ("billing invoices", "invoices rendered as pdf", "src/billing.py"),
        "s3": ("readme wording", "fixed typos in the readme", "README.md")}


@pytest.fixture
def wiki(repo, run, monkeypatch) -> dict[str, str]:
    """Three ended sessions' wiki entries, written through the CLI: {sid: entry id}."""
    monkeypatch.setenv("AGENT_REGISTRY_PID", "none")
    assert run("init").returncode == 0
    for sid, (about, what, path) in PAST.items():
        (repo / path).parent.mkdir(exist_ok=True)
        (repo / path).write_text(f"{sid}\n")
        for args in (("register", sid, "--provider", "Kimi", "--working-on", about),
                     ("lock", "acquire", path, "--session", sid),
                     ("end", sid, "--router", about, "--what", what, "--how", "by hand",
                      "--solved", "yes", "--bugs", f"{sid} bug")):
            proc = run(*args)
            assert proc.returncode == 0, proc.stderr
    ids = {}
    for sid in PAST:
        proc = run("--json", "wiki", "show", sid)
        assert proc.returncode == 0, proc.stderr
        ids[sid] = json.loads(proc.stdout)["id"]
    return ids


def started(repo, agents, *options: str) -> str:
    proc = hook(repo, "claude", "session-start",
                {**base("claude", repo, "SessionStart"), "source": "startup"},
                "--pid", str(agents()), *options)
    return context_of("claude", proc, "session-start")


def test_the_start_hook_hands_the_entries_of_the_work_its_branch_names(repo, wiki, agents):
    git(repo, "checkout", "-q", "-b", "feat/oauth-refresh")
    told = started(repo, agents)
    head = "agent-registry: past sessions on this work (agent-registry wiki show ID):"
    assert head in told
    memory = told.split(head, 1)[1].strip().splitlines()
    assert memory[0] == f"- {wiki['s1']} (s1): rotated the oauth refresh tokens; bugs: s1 bug"
    assert not any(wiki["s3"] in line for line in memory)


def test_no_memory_turns_it_off(repo, wiki, agents):
    git(repo, "checkout", "-q", "-b", "feat/oauth-refresh")
    told = started(repo, agents, "--no-memory")
    assert "you are session" in told and "past sessions" not in told
    assert wiki["s1"] not in told


def test_mcp_register_returns_the_entries_of_its_work_and_paths(repo, wiki):
    pytest.importorskip("mcp")
    from test_mcp import call, talk

    async def script(session):
        about = await call(session, "register", provider="Claude", session_id="m1",
                           working_on="oauth token refresh")
        paths = await call(session, "register", provider="Claude", session_id="m2",
                           space=["src/billing.py"])
        off = await call(session, "register", provider="Claude", session_id="m3",
                         working_on="oauth token refresh", memory=False)
        return about, paths, off
    about, paths, off = talk(repo, script)
    assert not about[0] and about[2]["memory"][0]["id"] == wiki["s1"]
    assert about[2]["memory"][0]["session_id"] == "s1"
    assert not paths[0] and paths[2]["memory"][0]["session_id"] == "s2"
    assert not off[0] and "memory" not in off[2]
