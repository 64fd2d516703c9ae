"""The watchdog's state file (watch.json) is never silently replaced."""
from __future__ import annotations

from pathlib import Path

import pytest

from helpers import Runner, git

pytest.importorskip("apprise")

URL = "json://127.0.0.1:9/hook"  # never reached: the pass is refused before delivery


def test_a_broken_state_file_refuses_instead_of_a_silent_cold_start(repo, run: Runner):
    env = {"AGENT_REGISTRY_NOTIFY_URLS": URL}
    run("init")
    assert run("watch", "--once", env=env).returncode == 0  # cold start: the state exists
    run("register", "later-one", "--provider", "Codex")
    common = Path(repo) / git(repo, "rev-parse", "--git-common-dir").strip()
    path = common / "agent-registry" / "watch.json"
    path.write_text("{not json")
    result = run("watch", "--once", env=env)
    # a cold start would record later-one as history and never announce it
    assert result.returncode == 2, result.stdout
    assert "not valid JSON" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert path.read_text() == "{not json"


def test_a_local_pool_that_is_not_an_object_refuses(repo, run: Runner):
    run("init")
    common = Path(repo) / git(repo, "rev-parse", "--git-common-dir").strip()
    (common / "agent-registry").mkdir(exist_ok=True)
    (common / "agent-registry" / "notify-messages.json").write_text('["hi {name}"]')
    result = run("watch", "--once", env={"AGENT_REGISTRY_NOTIFY_URLS": URL})
    # it used to be ignored without a word, the shipped pool used instead
    assert result.returncode == 2 and "must be a JSON object" in result.stderr
