"""`agent-registry watch` (issue 14): the four events, once each, to a real HTTP receiver
on 127.0.0.1 reached through Apprise's json:// transport; cold start; retry after a
failed delivery; a watchdog killed with SIGKILL and restarted; events of another clone
arriving through a bare remote; the dashboard's read-only /api/watch."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from helpers import CLI, FakeClock, Runner, git, make_repo, wait_for

pytest.importorskip("apprise")


class Receiver:
    """A webhook on 127.0.0.1: records every JSON body posted to it, and answers with
    the queued statuses first (e.g. one 500), then 200."""

    def __init__(self) -> None:
        self.posts: list[dict] = []
        self.failures_left = 0
        self.arrived = threading.Event()  # set by each post before it is answered
        self.hold: threading.Event | None = None  # when set: answer only once it is set
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with receiver.lock:
                    failing = receiver.failures_left > 0
                    receiver.failures_left -= failing
                    body["accepted"] = not failing
                    body["path"] = self.path
                    body["headers"] = dict(self.headers)
                    receiver.posts.append(body)
                receiver.arrived.set()
                if receiver.hold is not None:
                    receiver.hold.wait(60)
                self.send_response(500 if failing else 200)
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        # Apprise gives up on a target after 4 s by default; a loaded CI machine once took
        # longer to answer from this thread, and the delivery was recorded as failed
        self.url = f"json://127.0.0.1:{self.server.server_address[1]}/hook?cto=30&rto=30"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def accepted(self) -> list[str]:
        """Titles of the messages the receiver accepted, in order."""
        with self.lock:
            return [p.get("title") for p in self.posts if p["accepted"]]

    def message(self, title: str) -> str:
        return next(p["message"] for p in self.posts if p["title"] == title and p["accepted"])

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


def title(sid: str, event: str) -> str:
    return f"agent-registry: {sid} {event}"


def watch(run: Runner, receiver: Receiver, *args: str, cwd: Path | None = None):
    return run("--json", "watch", "--once", *args, cwd=cwd,
               env={"AGENT_REGISTRY_NOTIFY_URLS": receiver.url})


def state(repo: Path) -> dict:
    common = Path(repo) / git(repo, "rev-parse", "--git-common-dir").strip()
    return json.loads((common / "agent-registry" / "watch.json").read_text())


def test_the_four_events_arrive_once_each(repo, run, receiver):
    assert run("init").returncode == 0
    cold = watch(run, receiver)
    assert cold.returncode == 0, cold.stderr
    assert json.loads(cold.stdout)["cold_start"] and receiver.accepted() == []

    run("register", "s-fin", "--provider", "Claude", "--working-on", "auth",
        "--notify-started", "{session_id} here, on {working_on}")
    run("register", "s-end", "--provider", "Codex", "--working-on", "login")
    run("register", "s-kill", "--provider", "Kimi", "--working-on", "docs")
    result = watch(run, receiver, "--idle-minutes", "600")
    assert result.returncode == 0, result.stderr
    assert sorted(e["key"] for e in json.loads(result.stdout)["events"]) == \
        ["started/s-end", "started/s-fin", "started/s-kill"]
    assert receiver.message(title("s-fin", "started")) == "s-fin here, on auth"

    run("finish", "s-fin", "--notify-executed", "{session_id} done for {name}")
    run("end", "s-end", "--what", "fixed the login form")
    run("kill", "s-kill")
    # an idle session: registered (and last heard of) three hours ago
    from agent_registry import Registry
    with Registry.open(str(repo), clock=FakeClock(time.time() - 3 * 3600)) as old:
        old.register("s-idle", provider="Gemini", working_on="tests")
    assert watch(run, receiver, "--idle-minutes", "60").returncode == 0
    assert watch(run, receiver, "--idle-minutes", "60").returncode == 0  # nothing new

    expected = [title("s-fin", "started"), title("s-end", "started"),
                title("s-kill", "started"), title("s-fin", "executed"),
                title("s-end", "executed"), title("s-kill", "stopped"),
                title("s-idle", "started"), title("s-idle", "idle")]
    assert sorted(receiver.accepted()) == sorted(expected)
    assert receiver.message(title("s-fin", "executed")) == "s-fin done for Test User"
    assert "fixed the login form" in receiver.message(title("s-end", "executed"))
    stopped = receiver.message(title("s-kill", "stopped"))
    assert "killed (logical stop)" in stopped and "s-kill" in stopped
    assert "180 minutes" in receiver.message(title("s-idle", "idle"))

    # a heartbeat starts a new spell: idle again once, an hour and a half later
    with Registry.open(str(repo), clock=FakeClock(time.time() - 90 * 60)) as old:
        old.heartbeat("s-idle")
    assert watch(run, receiver, "--idle-minutes", "60").returncode == 0
    assert watch(run, receiver, "--idle-minutes", "60").returncode == 0
    assert receiver.accepted().count(title("s-idle", "idle")) == 2
    assert "90 minutes" in receiver.posts[-1]["message"]


def test_a_cold_start_sends_nothing_for_history(repo, run, receiver):
    from agent_registry import Registry
    with Registry.open(str(repo), clock=FakeClock(time.time() - 5 * 3600)) as old:
        old.init()
        for sid in ("h-live", "h-done", "h-idle"):
            old.register(sid, provider="Claude", working_on="history")
        old.finish("h-done")
    for _ in range(2):
        result = watch(run, receiver, "--idle-minutes", "60")
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)["events"] == []
    assert receiver.accepted() == []
    run("register", "new-one", "--provider", "Codex")
    assert watch(run, receiver).returncode == 0
    assert receiver.accepted() == [title("new-one", "started")]


def test_history_rewritten_by_gc_is_not_told_again(repo, run, receiver):
    from agent_registry import Registry
    with Registry.open(str(repo), clock=FakeClock(time.time() - 3 * 86400)) as old:
        old.init()
        old.register("ancient", provider="Claude")
        old.finish("ancient")
    with Registry.open(str(repo), clock=FakeClock(time.time() - 3600)) as recent:
        recent.register("g1", provider="Codex")
        recent.finish("g1")  # history: before the watchdog's first pass
    assert watch(run, receiver).returncode == 0
    run("register", "g2", "--provider", "Kimi")
    assert watch(run, receiver).returncode == 0
    assert json.loads(run("--json", "gc", "--keep-days", "1").stdout)["squashed"] > 1
    run("finish", "g2")
    assert watch(run, receiver).returncode == 0
    assert watch(run, receiver).returncode == 0
    assert receiver.accepted() == [title("g2", "started"), title("g2", "executed")]


def test_a_failed_delivery_is_retried_and_sent_once(repo, run, receiver):
    run("init")
    watch(run, receiver)
    run("register", "r1", "--provider", "Claude", "--working-on", "retry")
    receiver.failures_left = 1
    first = watch(run, receiver)
    assert first.returncode == 3, first.stderr  # kept for the next pass
    assert json.loads(first.stdout)["error"]["pass"]["failed"][0]["key"] == "started/r1"
    assert len(receiver.posts) == 1 and receiver.accepted() == []
    assert state(repo)["outbox"][0]["key"] == "started/r1"
    second = watch(run, receiver)
    assert second.returncode == 0, second.stderr
    assert receiver.accepted() == [title("r1", "started")]
    assert watch(run, receiver).returncode == 0
    assert receiver.accepted() == [title("r1", "started")]
    assert state(repo)["outbox"] == [] and state(repo)["done"]["started/r1"] == "sent"


def test_a_daemon_retries_with_backoff(repo, run, receiver):
    run("init")
    receiver.failures_left = 2
    daemon = subprocess.Popen([CLI, "watch", "--interval", "0.2"], cwd=repo,
                              env={**os.environ, "AGENT_REGISTRY_NOTIFY_URLS": receiver.url},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: (Path(repo) / ".git/agent-registry/watch.json").exists(), "cold start")
        run("register", "b1", "--provider", "Claude")
        wait_for(lambda: receiver.accepted(), "the retried delivery")
    finally:
        daemon.terminate()
        daemon.wait()
    assert len(receiver.posts) == 3 and receiver.accepted() == [title("b1", "started")]


def test_a_watchdog_stopped_with_sigterm_mid_delivery_records_it_first(repo, run, receiver):
    run("init")
    daemon = subprocess.Popen([CLI, "watch", "--interval", "0.2"], cwd=repo,
                              env={**os.environ, "AGENT_REGISTRY_NOTIFY_URLS": receiver.url},
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    receiver.hold = threading.Event()
    try:
        wait_for(lambda: (Path(repo) / ".git/agent-registry/watch.json").exists(), "cold start")
        run("register", "t1", "--provider", "Claude")
        assert receiver.arrived.wait(60), "the delivery never arrived"
        daemon.terminate()  # while the transport waits for the receiver's answer
        receiver.hold.set()
        assert daemon.wait(60) == 0, daemon.stderr.read()
    finally:
        receiver.hold.set()
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
    assert state(repo)["done"]["started/t1"] == "sent"
    assert watch(run, receiver).returncode == 0
    assert receiver.accepted() == [title("t1", "started")]


def test_a_watchdog_killed_and_restarted_neither_repeats_nor_skips(repo, run, receiver):
    run("init")
    env = {**os.environ, "AGENT_REGISTRY_NOTIFY_URLS": receiver.url}
    command = [CLI, "watch", "--interval", "0.2"]
    first = subprocess.Popen(command, cwd=repo, env=env, stdout=subprocess.DEVNULL)
    try:
        wait_for(lambda: (Path(repo) / ".git/agent-registry/watch.json").exists(), "cold start")
        run("register", "k1", "--provider", "Claude")
        wait_for(lambda: state(repo).get("done", {}).get("started/k1") == "sent", "k1 sent")
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    # while no watchdog runs
    run("register", "k2", "--provider", "Codex")
    run("finish", "k1")
    second = subprocess.Popen(command, cwd=repo, env=env, stdout=subprocess.DEVNULL)
    try:
        wait_for(lambda: len(receiver.accepted()) >= 3, "the events of the dead time")
    finally:
        second.terminate()
        second.wait()
    assert watch(run, receiver).returncode == 0
    assert sorted(receiver.accepted()) == sorted(
        [title("k1", "started"), title("k2", "started"), title("k1", "executed")])


def test_a_second_watchdog_of_the_same_clone_is_refused(repo, run, receiver):
    run("init")
    env = {**os.environ, "AGENT_REGISTRY_NOTIFY_URLS": receiver.url}
    first = subprocess.Popen([CLI, "watch", "--interval", "0.2"], cwd=repo, env=env,
                             stdout=subprocess.DEVNULL)
    try:
        wait_for(lambda: (Path(repo) / ".git/agent-registry/watch.json").exists(), "cold start")
        second = watch(run, receiver)
        assert second.returncode == 1 and "another `agent-registry watch` runs" in second.stderr
    finally:
        first.terminate()
        first.wait()


def test_events_of_another_clone_arrive_through_the_remote(tmp_path, receiver):
    seed = make_repo(tmp_path / "seed")
    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    git(seed, "push", "-q", str(bare), "main")
    clones = []
    for name in ("watcher", "agent"):
        git(tmp_path, "clone", "-q", str(bare), str(tmp_path / name))
        clones.append(Runner(tmp_path / name))
    watcher, agent = clones
    assert agent("init").returncode == 0
    assert watch(watcher, receiver).returncode == 0  # cold start, after a fetch
    result = agent("register", "far-1", "--provider", "Kimi", "--working-on", "elsewhere")
    assert result.returncode == 0, result.stderr
    assert agent("finish", "far-1").returncode == 0
    result = watch(watcher, receiver)
    assert result.returncode == 0, result.stderr
    assert receiver.accepted() == [title("far-1", "started"), title("far-1", "executed")]
    assert git(watcher.cwd, "rev-parse", "-q", "--verify", "refs/heads/agent-registry",
               check=False) == ""  # followed through the remote-tracking ref alone


def test_bad_configuration_is_one_line_and_exit_2(repo, run, tmp_path):
    run("init")
    nothing = run("watch", "--once")
    assert nothing.returncode == 2 and "no notification target" in nothing.stderr
    bogus = run("watch", "--once", env={"AGENT_REGISTRY_NOTIFY_URLS": "nonsense://x"})
    assert bogus.returncode == 2 and "not an Apprise URL" in bogus.stderr
    (repo / ".env").write_text("AGENT_REGISTRY_NOTIFY_URLS=json://127.0.0.1:9/x\n")
    tracked = run("watch", "--once")  # a .env git does not ignore is never read
    assert tracked.returncode == 2 and "not git-ignored" in tracked.stderr
    (repo / ".env").write_text("DATABASE=local\n")  # not ours: left alone
    assert "no notification target" in run("watch", "--once").stderr
    assert not (repo / ".git/agent-registry/watch.json").exists()


def test_a_git_ignored_env_file_and_the_local_pool(repo, run, receiver):
    run("init")
    (repo / ".gitignore").write_text(".env\n")
    (repo / ".env").write_text(f"export AGENT_REGISTRY_NOTIFY_URLS='{receiver.url}'\n"
                               "AGENT_REGISTRY_NOTIFY_NAME=Ada\n")
    (repo / ".git/agent-registry/notify-messages.json").write_text(
        json.dumps({"started": ["{name}: {session_id} ({provider}) is on {working_on}"]}))
    assert run("watch", "--once").returncode == 0
    run("register", "p1", "--provider", "Claude", "--working-on", "pools")
    assert run("watch", "--once").returncode == 0
    assert receiver.message(title("p1", "started")) == "Ada: p1 (Claude) is on pools"


def test_end_stores_the_agents_own_message_with_the_wiki_what(repo, run, receiver):
    run("init")
    watch(run, receiver)
    run("register", "e1", "--provider", "Codex")
    run("end", "e1", "--what", "split the parser", "--notify-executed", "{what} ({session_id})")
    shown = json.loads(run("--json", "show", "e1").stdout)["sessions"][0]
    assert shown["notify_executed"] == "{what} ({session_id})"
    assert watch(run, receiver).returncode == 0
    assert receiver.message(title("e1", "executed")) == "split the parser (e1)"


def test_the_dashboard_shows_the_watchdog(repo, run, receiver):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from agent_registry.dashboard.app import create_app
    run("init")
    with TestClient(create_app(str(repo)), base_url="http://127.0.0.1") as client:
        assert client.get("/api/watch").json() == {"configured": False, "running": False}
        watch(run, receiver)
        run("register", "d1", "--provider", "Claude")
        receiver.failures_left = 1
        watch(run, receiver)
        watch(run, receiver)
        data = client.get("/api/watch").json()
    assert data["configured"] and not data["running"]  # --once has exited
    assert [r["key"] for r in data["recent"]] == ["started/d1"]
    assert data["failures"][0]["key"] == "started/d1"
    assert data["pending"] == [] and data["targets"] == [receiver.url.rsplit("/", 1)[0]]
    assert receiver.url not in json.dumps(data)  # never the URL itself (it may hold a token)


def test_the_open_wa_recipe_posts_what_the_gateway_takes(repo, run, receiver):
    """docs/watch.md's json:// URL for an open-wa gateway: its send route, its key
    header, and a flat {chatId, text} body."""
    run("init")
    port = receiver.server.server_address[1]
    url = (f"json://127.0.0.1:{port}/api/sessions/0b1c-uuid/messages/send-text"
           "?+X-API-Key=k3y&:chatId=391234567890%40c.us&:message=text&:title=&:version="
           "&:type=&:attachments=")
    env = {"AGENT_REGISTRY_NOTIFY_URLS": url}
    assert run("watch", "--once", env=env).returncode == 0
    run("register", "wa-1", "--provider", "Claude", "--notify-started", "hi {session_id}")
    assert run("watch", "--once", env=env).returncode == 0
    [post] = receiver.posts
    assert post["path"] == "/api/sessions/0b1c-uuid/messages/send-text"
    assert post["headers"]["X-API-Key"] == "k3y"
    assert {k: post[k] for k in post if k not in ("accepted", "path", "headers")} == \
        {"chatId": "391234567890@c.us", "text": "hi wa-1"}
