"""The commit-message format, written in one place (branch/trailers.py) for every commit
the tool makes: the bytes on the branch are what older clones and `git log --grep` read."""
from __future__ import annotations

from agent_registry.branch.trailers import parse_op, trailers


def test_a_claim_names_session_paths_generations_and_the_whole_operation():
    op = {"op": "claim", "session": "kimi-1", "paths": ["src/a.py"], "generations": {"src/a.py": 2},
          "at": 1.5}
    text = trailers(op, extra=("Takeover: src/a.py from codex-1: gone",))
    assert text == ("Registry-Takeover: src/a.py from codex-1: gone\n"
                    "Registry-Op: claim\nRegistry-Session: kimi-1\nRegistry-Path: src/a.py\n"
                    "Registry-Generation: 2 src/a.py\n"
                    'Registry-Data: {"at": 1.5, "generations": {"src/a.py": 2}, "op": "claim", '
                    '"paths": ["src/a.py"], "session": "kimi-1"}\n')
    assert parse_op("claim src/a.py by kimi-1\n\n" + text) == op


def test_gc_and_resolution_commits_keep_their_bytes():
    gc = {"op": "gc", "at": 2.0, "rewrote": "abc", "reason": "two  words\nhere"}
    assert trailers(gc) == ("Registry-Op: gc\nRegistry-Reason: two words here\n"
                            'Registry-Data: {"at": 2.0, "op": "gc", "reason": "two  words\\nhere", '
                            '"rewrote": "abc"}\n')
    resolved = {"op": "resolved", "of": {"op": "claim", "session": "s1"}, "at": 3.0}
    assert trailers(resolved, session="s1").splitlines()[:2] == ["Registry-Op: resolved",
                                                                 "Registry-Session: s1"]
    assert parse_op("no trailers here") is None
    assert parse_op("x\n\nRegistry-Data: {not json") is None
