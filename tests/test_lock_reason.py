"""A claim carries its reason (issue 36, smaller items): `lock acquire --reason TEXT` is
stored with the claim and shown where the lock is: `lock list` (and its JSON), the
refusal another session meets (and its JSON), and the page (registry.md)."""
from __future__ import annotations

import json

import pytest

from test_render_gfm import CMARK, registry_md, render


def ok(proc):
    assert proc.returncode == 0, proc.stderr
    return proc


def test_a_claim_s_reason_is_shown_to_everyone_who_meets_the_lock(run):
    ok(run("init"))
    ok(run("register", "a1", "--provider", "Claude", "--working-on", "auth"))
    ok(run("register", "b1", "--provider", "Codex"))
    ok(run("lock", "acquire", "src/auth.py", "--session", "a1",
           "--reason", "migrating the token format"))
    assert "migrating the token format" in ok(run("lock", "list")).stdout
    [listed] = json.loads(ok(run("--json", "lock", "list")).stdout)["locks"]
    assert listed["reason"] == "migrating the token format"
    refused = run("lock", "acquire", "src/auth.py", "--session", "b1")
    assert refused.returncode == 1
    assert "because: migrating the token format" in refused.stderr
    error = json.loads(run("--json", "lock", "acquire", "src/auth.py", "--session", "b1").stdout)
    assert error["error"]["conflicts"][0]["reason"] == "migrating the token format"
    # a renewal without --reason keeps the claim's why
    ok(run("lock", "acquire", "src/auth.py", "--session", "a1"))
    [listed] = json.loads(ok(run("--json", "lock", "list")).stdout)["locks"]
    assert listed["reason"] == "migrating the token format"


def test_status_and_lock_check_show_the_reason(run):
    ok(run("init"))
    ok(run("register", "a1", "--provider", "Claude"))
    ok(run("register", "b1", "--provider", "Codex"))
    ok(run("lock", "acquire", "src/auth.py", "--session", "a1",
           "--reason", "migrating the token format"))
    ok(run("lock", "acquire", "src/other.py", "--session", "b1"))
    assert "reason: a1 holds src/auth.py: migrating the token format" in ok(run("status")).stdout
    assert json.loads(ok(run("--json", "status")).stdout)["reasons"] == [
        {"path": "src/auth.py", "owner": "a1", "reason": "migrating the token format"}]
    checked = json.loads(run("--json", "lock", "check", "src/auth.py", "src/other.py",
                             "--session", "b1").stdout)["paths"]
    assert [c["reason"] for c in checked] == ["migrating the token format", ""]


@pytest.mark.skipif(CMARK is None, reason="cmark-gfm is not installed (apt install cmark-gfm)")
def test_the_page_shows_the_reason(repo, registry, clock):
    registry.register("a1", provider="Claude", working_on="auth")
    registry.claim("a1", ["src/auth.py"], reason="migrating the token format")
    clock.advance(61)  # the main page is rendered again a minute later
    registry.claim("a1", ["src/other.py"])
    rows = {row[0]: row for row in render(registry_md(repo)).table("Path")[1:]}
    assert "because: migrating the token format" in rows["src/auth.py"][2]
    assert "because" not in rows["src/other.py"][2]


def test_a_reason_with_a_control_character_is_bad_input(run):
    ok(run("init"))
    ok(run("register", "a1", "--provider", "Claude"))
    proc = run("lock", "acquire", "src/auth.py", "--session", "a1", "--reason", "a\x1bb")
    assert proc.returncode == 2 and "reason contains a control character" in proc.stderr
    assert json.loads(ok(run("--json", "lock", "list")).stdout)["locks"] == []
