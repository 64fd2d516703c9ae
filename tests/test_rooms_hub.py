"""Rooms through a hub that misbehaves or is shared (issue 24): a hung hub costs a command
one network timeout (agent-registry.networkTimeout), is contacted only for sessions in a
room, and is named (its URL, credentials removed) when it fails; presence on the hub is
keyed by repository and session, so two repositories' `kimi-1` are two members."""
from __future__ import annotations

import json
import socket
import threading
import time

import pytest

from helpers import Runner, git, make_repo
from test_rooms import js


class HungServer:
    """A TCP server on 127.0.0.1 that accepts every connection and never answers."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.accepted: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted.append(conn)

    def close(self) -> None:
        self.sock.close()
        for conn in self.accepted:
            conn.close()


@pytest.fixture
def hung():
    server = HungServer()
    yield server
    server.close()


TIMEOUT = 2


def test_a_hung_hub_costs_one_timeout_and_is_named(tmp_path, hung):
    repo = make_repo(tmp_path / "api")
    url = f"http://agent:s3cret@127.0.0.1:{hung.port}/hub.git"
    git(repo, "config", "agent-registry.hub", url)
    git(repo, "config", "agent-registry.networkTimeout", str(TIMEOUT))
    run = Runner(repo)
    assert run("register", "solo", "--provider", "Codex").returncode == 0
    # a session in no room never waits on the hub
    proc = run("--json", "inbox", "solo")
    assert proc.returncode == 0, proc.stderr
    assert hung.accepted == [], proc.stderr  # the hub was not even connected to
    proc = run("ack", "0123456789abcdef", "--session", "solo")
    assert proc.returncode == 2 and "unknown message id" in proc.stderr
    assert hung.accepted == [], proc.stderr
    # joining a room through a hub that never answers: one timeout, then the hub is not
    # contacted again by this command; the registration itself stands
    proc = run("--json", "register", "r1", "--provider", "Codex", "--room", "room:contract")
    assert proc.returncode == 0, proc.stderr
    # counted by the hub's connections, not the clock: one try, then skipped
    assert len(hung.accepted) == 1, (len(hung.accepted), proc.stderr)
    named = f"the hub http://127.0.0.1:{hung.port}/hub.git"
    assert named in proc.stderr and "s3cret" not in proc.stderr + proc.stdout
    assert "origin" not in proc.stderr, proc.stderr
    out = json.loads(proc.stdout)
    assert out["rooms"]["confirmed"] is False
    assert named in out["rooms"]["remote_error"]["message"]
    # the inbox of a session in a room asks the hub once, within the timeout
    proc = run("--json", "inbox", "r1")
    assert proc.returncode == 0, proc.stderr
    assert len(hung.accepted) == 2, (len(hung.accepted), proc.stderr)  # asked once more
    assert named in proc.stderr and "origin" not in proc.stderr


def test_the_hub_comes_back_and_takes_what_waited(tmp_path, hung):
    """What a command wrote while the hub was down stays in the cache and is pushed by
    the next command that reaches the hub."""
    repo = make_repo(tmp_path / "api")
    git(repo, "config", "agent-registry.hub", f"http://127.0.0.1:{hung.port}/hub.git")
    git(repo, "config", "agent-registry.networkTimeout", str(TIMEOUT))
    run = Runner(repo)
    assert run("register", "r1", "--provider", "Codex", "--room", "room:contract").returncode == 0
    hub = tmp_path / "hub.git"
    git(tmp_path, "init", "-q", "--bare", str(hub))
    git(repo, "config", "agent-registry.hub", str(hub))
    who = js(run("--json", "status", "--room", "room:contract"))
    assert [(s["id"], s["repo"]) for s in who["sessions"]] == [("r1", "api")]
    assert "r1@api" in git(hub, "ls-tree", "-r", "--name-only", "agent-registry")


def test_presence_is_keyed_by_repository_and_session(tmp_path):
    hub = tmp_path / "hub.git"
    git(tmp_path, "init", "-q", "--bare", str(hub))
    runs = {}
    for name in ("api", "web"):
        repo = make_repo(tmp_path / name)
        git(repo, "config", "agent-registry.hub", str(hub))
        runs[name] = Runner(repo)
        assert runs[name]("register", "kimi-1", "--provider", "Kimi", "--working-on", name,
                          "--room", "room:contract").returncode == 0
    api, web = runs["api"], runs["web"]
    who = js(api("--json", "status", "--room", "room:contract"))
    assert sorted((s["id"], s["repo"], s["working_on"]) for s in who["sessions"]) == \
        [("kimi-1", "api", "api"), ("kimi-1", "web", "web")]
    # one's message reaches the other, not itself
    sent = js(api("--json", "send", "--from", "kimi-1", "--room", "room:contract", "v2"))
    assert sent["recipients"] == ["kimi-1@web"]
    assert [m["id"] for m in js(web("--json", "inbox", "kimi-1"))["messages"]] == [sent["id"]]
    assert js(api("--json", "inbox", "kimi-1"))["messages"] == []
    assert js(web("--json", "ack", sent["id"], "--session", "kimi-1"))["acked"] == [sent["id"]]
    # one's finish ends only its own presence
    assert api("finish", "kimi-1").returncode == 0
    who = js(web("--json", "status", "--room", "room:contract"))
    assert [(s["id"], s["repo"]) for s in who["sessions"]] == [("kimi-1", "web")]


def test_a_long_lived_process_tries_a_down_hub_again_after_a_while(monkeypatch):
    from agent_registry.sync import rooms
    monkeypatch.setattr(rooms, "_DOWN", {})
    rooms._DOWN["https://hub"] = (time.monotonic(), "the hub https://hub is unreachable")
    assert rooms._down("https://hub") and rooms._down("https://other") is None
    rooms._DOWN["https://hub"] = (time.monotonic() - rooms.DOWN_FOR - 1, "old")
    assert rooms._down("https://hub") is None  # the MCP server asks it again
