"""A process that keeps its registry open (the MCP server, the dashboard) does not read
again what an earlier call read and nothing changed (issue 35): a session file's bytes
are parsed once, the shipped templates read once; what each call is handed is its own."""
from __future__ import annotations

import os

from agent_registry import Registry
from agent_registry.branch import view as view_module
from agent_registry.store import shipped


def test_claims_parse_an_unchanged_session_file_once(repo, monkeypatch):
    with Registry.open(str(repo)) as registry:
        registry.register("s1", provider="Kimi", pid=os.getpid(), tags=["a"])
        parsed = []
        real = view_module.load_session
        monkeypatch.setattr(view_module, "load_session",
                            lambda raw: parsed.append(raw) or real(raw))
        for i in range(5):  # the session's file is the same for each (its locks: the shards)
            assert registry.claim("s1", [f"src/m{i}/f.py"])["locks"][0]["status"] == "acquired"
        assert len(parsed) <= 1, len(parsed)
        # each reader gets its own copy: changing one changes no later read
        mine = registry.view().session("s1")
        mine.tags.append("changed")
        mine.locks.append("nothing/held")
        again = registry.view().session("s1")
        assert again.tags == ["a"] and "nothing/held" not in again.locks


def test_commits_read_each_template_once_per_process(repo, monkeypatch):
    opened = []
    monkeypatch.setattr(shipped, "_TEXTS", {})
    monkeypatch.setattr(shipped, "open", lambda path, *a, **k: opened.append(path) or
                        open(path, *a, **k), raising=False)
    with Registry.open(str(repo)) as registry:
        registry.register("s1", provider="Kimi", pid=os.getpid())
        for i in range(5):
            registry.claim("s1", [f"src/m{i}/f.py"])
    assert opened and len(opened) == len(set(opened)), opened
