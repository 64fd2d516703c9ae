"""Fresh reads (issue 24, item 1): a read an agent or a hook decides by fetches first when
this clone's last fetch is older than agent-registry.readFreshness, and otherwise says
how old its view is and why it could not refresh.  Real clones of a real bare remote;
an unreachable remote (the bare repository renamed) and a hung one (a TCP server that
accepts and never answers)."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from helpers import Runner, git
from test_scale_shards import sharded_team
from test_sync import Team


def age_view(clone: Runner, seconds: float = 120) -> None:
    """Make this clone's last fetch of the registry *seconds* old (as if time passed)."""
    mark = Path(clone.cwd, ".git", "agent-registry", "fetched", "agent-registry")
    if mark.exists():  # (a version that never noted its fetches never fetched to read)
        then = time.time() - seconds
        os.utime(mark, (then, then))


def ok(proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert proc.returncode == 0, proc.stderr
    return proc


def doc(proc: subprocess.CompletedProcess) -> dict:
    return json.loads(proc.stdout)


@pytest.fixture
def pair(tmp_path):
    """Clones a and b of one bare remote; b has fetched (its view is as old as the test
    makes it), a has a live session a1."""
    team = Team(tmp_path)
    a, b = team.clone("a"), team.clone("b")
    ok(a("register", "a1", "--provider", "Kimi", "--working-on", "the b module"))
    ok(b("register", "b1", "--provider", "Claude", "--working-on", "ui"))
    ok(b("status"))  # b fetches now: what a pushes next is newer than b's view
    return team, a, b


def test_lock_check_fetches_a_claim_pushed_after_our_last_fetch(pair):
    _, a, b = pair
    ok(a("lock", "acquire", "src/b.py", "--session", "a1"))
    age_view(b)  # b's last fetch is older than the 30 s default
    proc = b("--json", "lock", "check", "src/b.py")
    assert proc.returncode == 1, proc.stderr  # another live session holds it
    found = doc(proc)
    assert found["paths"][0]["state"] == "locked" and found["paths"][0]["owner"] == "a1"
    assert found["stale_view"] is False and found["as_of"]
    assert "stale view" not in proc.stderr
    text = b("lock", "check", "src/b.py")
    assert text.returncode == 1 and "locked: src/b.py by a1 (the b module)" in text.stdout


def test_lock_list_fetches_a_claim_pushed_after_our_last_fetch_and_says_its_age(pair):
    _, a, b = pair
    ok(a("lock", "acquire", "src/b.py", "--session", "a1"))
    age_view(b)
    found = doc(ok(b("--json", "lock", "list")))
    assert [(l["path"], l["owner"]) for l in found["locks"]] == [("src/b.py", "a1")]
    assert found["stale_view"] is False and found["as_of"]


def test_lock_check_with_read_freshness_zero_always_fetches(pair):
    _, a, b = pair
    git(b.cwd, "config", "agent-registry.readFreshness", "0")
    ok(a("lock", "acquire", "src/b.py", "--session", "a1"))
    proc = b("--json", "lock", "check", "src/b.py")  # fetched moments ago: still fetches
    assert proc.returncode == 1 and doc(proc)["paths"][0]["owner"] == "a1"


def test_within_read_freshness_the_clone_answers_and_says_nothing_of_staleness(pair):
    _, a, b = pair
    git(b.cwd, "config", "agent-registry.readFreshness", "3600")
    ok(a("lock", "acquire", "src/b.py", "--session", "a1"))
    age_view(b, 600)  # ten minutes: within the hour asked for
    proc = b("--json", "lock", "check", "src/b.py")
    assert proc.returncode == 0, proc.stderr
    found = doc(proc)
    assert found["paths"][0]["state"] == "free"  # the clone's view: a's claim is not in it
    assert found["stale_view"] is False and found["as_of"]
    assert proc.stderr == ""


def test_status_lists_a_session_registered_after_our_fetch_and_says_when_it_fetched(pair):
    _, a, b = pair
    ok(a("register", "a2", "--provider", "Codex", "--working-on", "later"))
    age_view(b)
    proc = ok(b("--json", "status"))
    found = doc(proc)
    assert "a2" in [s["id"] for s in found["sessions"]]
    assert found["stale_view"] is False
    assert found["sync"]["last_fetch"] and found["as_of"] == found["sync"]["last_fetch"]
    text = ok(b("status"))
    assert "a2" in text.stdout and "last fetch " in text.stdout


def test_show_reads_a_session_registered_after_our_fetch(pair):
    _, a, b = pair
    ok(a("register", "a2", "--provider", "Codex", "--working-on", "later"))
    age_view(b)
    found = doc(ok(b("--json", "show", "a2")))
    assert found["sessions"][0]["working_on"] == "later" and found["stale_view"] is False


def test_wiki_query_finds_an_entry_another_clone_wrote(pair):
    _, a, b = pair
    assert "not found" in ok(b("wiki", "query", "oauth token rotation")).stdout  # index built
    ok(a("end", "a1", "--router", "oauth token rotation", "--what", "rotated the tokens"))
    age_view(b)
    found = doc(ok(b("--json", "wiki", "query", "oauth token rotation")))
    assert [r["session_id"] for r in found["results"]] == ["a1"]
    assert found["stale_view"] is False and found["as_of"]


def test_inbox_shows_a_message_another_clone_sent_and_how_fresh_it_is(pair):
    _, a, b = pair
    ok(a("send", "--from", "a1", "--to", "b1", "the b module is yours after lunch"))
    found = doc(ok(b("--json", "inbox", "b1")))
    assert [m["body"] for m in found["messages"]] == ["the b module is yours after lunch"]
    assert found["stale_view"] is False and found["as_of"]


def _stale(proc: subprocess.CompletedProcess, why: str) -> dict:
    """The read answered from the clone and said so: stale_view, as_of, the reason, and
    one line on stderr naming the view's age and why."""
    found = doc(proc)
    assert found["stale_view"] is True, found
    assert found["as_of"] and isinstance(found["view_age_seconds"], int)
    assert why in found["remote_error"]["message"]
    lines = [line for line in proc.stderr.splitlines() if "stale view" in line]
    assert len(lines) == 1, proc.stderr
    assert f"as of {found['as_of']}" in lines[0] and " ago)" in lines[0] and why in lines[0]
    return found


def test_an_unreachable_remote_answers_from_the_clone_and_says_how_old_and_why(pair):
    team, a, b = pair
    ok(a("lock", "acquire", "src/b.py", "--session", "a1"))
    os.rename(team.bare, team.bare.with_name("moved.git"))
    age_view(b)
    why = "does not appear to be a git repository"
    check = b("--json", "lock", "check", "src/b.py")
    assert check.returncode == 0  # the clone's view: free, and it says it is stale
    assert doc(check)["paths"][0]["state"] == "free"
    found = _stale(check, why)
    assert found["remote_error"]["kind"] == "not-found"
    status = ok(b("--json", "status"))
    _stale(status, why)
    assert "b1" in [s["id"] for s in doc(status)["sessions"]]
    _stale(ok(b("--json", "show", "b1")), why)
    _stale(ok(b("--json", "wiki", "query", "anything")), why)
    _stale(ok(b("--json", "inbox", "b1")), why)
    text = b("lock", "check", "src/b.py")
    assert text.stdout.strip() == "free: src/b.py"
    assert len([l for l in text.stderr.splitlines() if "stale view" in l]) == 1


class Hung:
    """A TCP server on 127.0.0.1 that accepts connections and never answers."""

    def __init__(self) -> None:
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(16)
        self.port = self.server.getsockname()[1]
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self.held.append(conn)

    def close(self) -> None:
        self.server.close()
        for conn in self.held:
            conn.close()


def test_a_hung_remote_costs_one_network_timeout_and_says_so(pair):
    _, a, b = pair
    hung = Hung()
    try:
        git(b.cwd, "remote", "set-url", "origin", f"git://127.0.0.1:{hung.port}/remote.git")
        git(b.cwd, "config", "agent-registry.networkTimeout", "1")
        age_view(b)
        check = b("--json", "lock", "check", "src/b.py")
        assert check.returncode == 0, check.stderr
        found = _stale(check, "no answer within 1 s")
        assert found["remote_error"]["kind"] == "unreachable"
        tried = len(hung.held)
        assert tried >= 1  # the read did try the remote
        # the reads right after it answer from the clone, saying why, without trying the
        # hung remote again (counted by its connections, not by the clock)
        status = ok(b("--json", "status"))
        _stale(status, "no answer within 1 s")
        assert len(hung.held) == tried
        git(b.cwd, "config", "agent-registry.readFreshness", "0")  # always: tries again
        _stale(ok(b("--json", "status")), "no answer within 1 s")
        assert len(hung.held) > tried
    finally:
        hung.close()


def test_lock_check_reads_a_shard_claim_pushed_after_our_fetch(tmp_path):
    team, (c0, c1) = sharded_team(tmp_path, 2)
    ok(c1("status"))
    ok(c0("lock", "acquire", "src/auth/token.py", "--session", "s0"))
    age_view(c1)
    proc = c1("--json", "lock", "check", "src/auth/token.py")
    assert proc.returncode == 1, proc.stderr
    assert doc(proc)["paths"][0]["owner"] == "s0" and doc(proc)["stale_view"] is False


def test_the_harness_edit_gate_fetches_first(pair):
    from agent_registry.harness.decision import Ctx, may_write
    _, a, b = pair
    ok(a("lock", "acquire", "src/b.py", "--session", "a1"))
    age_view(b)
    decision = may_write(Ctx("claude", "native-1", str(b.cwd)), ["src/b.py"])
    assert not decision.allow and "a1" in decision.reason


def test_the_guard_says_its_views_age_and_never_fetches(pair):
    _, a, b = pair
    ok(a("lock", "acquire", "src/auth.py", "--session", "a1"))
    ok(b("hooks", "install"))
    age_view(b)
    assert b("lock", "check", "src/auth.py").returncode == 1  # b's view now has a's claim
    (b.cwd / "src" / "auth.py").write_text("mine\n")
    git(b.cwd, "add", "src/auth.py")
    refused = subprocess.run(["git", "commit", "-q", "-m", "touch"], cwd=b.cwd,
                             capture_output=True, text=True)
    assert refused.returncode == 1 and "a1" in refused.stderr
    assert "view of the registry is as of " in refused.stderr and " ago)" in refused.stderr
    git(b.cwd, "reset", "-q")
    # an allowed commit within the bound says nothing; past it, the view's age
    (b.cwd / "README.md").write_text("notes\n")
    git(b.cwd, "add", "README.md")
    quiet = subprocess.run(["git", "commit", "-q", "-m", "notes"], cwd=b.cwd,
                           capture_output=True, text=True)
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr
    age_view(b, 300)
    fetched = Path(b.cwd, ".git", "agent-registry", "fetched", "agent-registry").stat().st_mtime
    (b.cwd / "README.md").write_text("more notes\n")
    git(b.cwd, "add", "README.md")
    warned = subprocess.run(["git", "commit", "-q", "-m", "more"], cwd=b.cwd,
                            capture_output=True, text=True)
    assert warned.returncode == 0
    assert "warning: this clone's view of the registry is as of" in warned.stderr
    assert "(5 min ago)" in warned.stderr
    # the commit did not fetch
    assert Path(b.cwd, ".git", "agent-registry", "fetched",
                "agent-registry").stat().st_mtime == fetched


def test_a_fresh_view_costs_a_stat_and_no_process(pair, monkeypatch):
    """What the click-free `lock check` pays before every edit when the view is fresh."""
    import agent_registry.sync.remote as remote
    from agent_registry import Registry
    from agent_registry.sync.fresh import freshen
    _, _, b = pair
    with Registry.open(str(b.cwd)) as registry:
        def no_process(*args, **kwargs):
            raise AssertionError(f"a process was started: {args[:1]}")
        monkeypatch.setattr(subprocess, "Popen", no_process)
        monkeypatch.setattr(remote, "catch_up", no_process)
        view = freshen(registry)
        assert view["stale_view"] is False and view["as_of"]
        assert registry.warnings == []


def test_the_mcp_server_reads_fresh_too(pair):
    """A long-lived MCP server in clone b answers lock_check, status and show from a view
    fetched within readFreshness, as the CLI does (it answered from b's old fetch)."""
    import anyio
    from test_mcp import call, server
    _, a, b = pair
    git(b.cwd, "config", "agent-registry.readFreshness", "0")

    async def script():
        async with server(b.cwd) as session:
            ok(a("lock", "acquire", "src/b.py", "--session", "a1"))
            ok(a("register", "a2", "--provider", "Codex", "--working-on", "later"))
            _, _, checked = await call(session, "lock_check", paths=["src/b.py"])
            _, _, status = await call(session, "status")
            _, _, shown = await call(session, "show", session_id="a2")
            return checked, status, shown

    checked, status, shown = anyio.run(script)
    assert checked["paths"][0]["owner"] == "a1" and checked["free_to_edit"] is False
    assert checked["stale_view"] is False
    assert "a2" in {s["id"] for s in status["sessions"]}
    assert shown["sessions"][0]["working_on"] == "later"


def test_status_remote_honours_the_network_timeout(pair):
    """`status --remote URL` against a server that never answers gives up after
    agent-registry.networkTimeout, naming it (it waited the built-in 30 s)."""
    _, _, b = pair
    hung = Hung()
    try:
        git(b.cwd, "config", "agent-registry.networkTimeout", "1")
        status = b("status", "--remote", f"git://127.0.0.1:{hung.port}/remote.git")
        assert status.returncode == 1
        assert "no answer within 1 s" in status.stderr, status.stderr
    finally:
        hung.close()
