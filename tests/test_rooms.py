"""Rooms across repositories (issue 12): two code repositories that name one bare hub
repository (`git config agent-registry.hub URL`) see each other's presence and messages;
each repository's own room is `repo:<name>`."""
from __future__ import annotations

import json
import os
import shlex

import pytest

from helpers import Runner, git, make_repo


def js(proc) -> dict:
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture
def world(tmp_path):
    """Repositories `api` and `web`, both pointing to the bare hub `hub.git`."""
    hub = tmp_path / "hub.git"
    git(tmp_path, "init", "-q", "--bare", str(hub))
    runners = {}
    for name in ("api", "web"):
        repo = make_repo(tmp_path / name)
        git(repo, "config", "agent-registry.hub", str(hub))
        runners[name] = Runner(repo)
    return hub, runners["api"], runners["web"]


def hub_files(hub, folder: str) -> list[str]:
    return git(hub, "ls-tree", "-r", "--name-only", "agent-registry", "--", folder,
               check=False).split()


def test_presence_and_messages_cross_repositories(world):
    hub, api, web = world
    assert api("register", "api-1", "--provider", "Codex", "--working-on", "schema v2",
               "--room", "room:contract").returncode == 0
    assert web("register", "web-1", "--provider", "Claude", "--working-on", "client",
               "--room", "room:contract").returncode == 0
    assert web("register", "web-2", "--provider", "Claude", "--working-on", "css").returncode == 0
    who = js(api("--json", "status", "--room", "room:contract"))
    assert {(s["id"], s["repo"]) for s in who["sessions"]} == {("api-1", "api"), ("web-1", "web")}
    assert all(s["present"] for s in who["sessions"])
    text = web("status", "--room", "room:contract")
    assert "api-1" in text.stdout and "present" in text.stdout

    sent = js(api("--json", "send", "--from", "api-1", "--room", "room:contract",
                  "the /users endpoint now pages"))
    assert sent["recipients"] == ["web-1@web"]  # members: session @ repository
    assert hub_files(hub, "messages") == [f"messages/api-1@api/{sent['id']}.json"]
    inbox = js(web("--json", "inbox", "web-1"))
    assert [m["id"] for m in inbox["messages"]] == [sent["id"]]
    assert js(web("--json", "inbox", "web-2"))["messages"] == []  # never joined
    reply = js(web("--json", "send", "--from", "web-1", "--room", "room:contract",
                   "--reply-to", sent["id"], "thanks, adapting"))
    assert js(web("--json", "ack", sent["id"], "--session", "web-1"))["acked"] == [sent["id"]]
    thread = js(api("--json", "thread", reply["id"]))
    assert [m["id"] for m in thread["messages"]] == [sent["id"], reply["id"]]
    assert thread["messages"][0]["acked_by"] == ["web-1@web"]
    assert [m["id"] for m in js(api("--json", "inbox", "api-1"))["messages"]] == [reply["id"]]
    # nothing of it in the code repositories' own registries
    assert git(api.cwd, "ls-tree", "-r", "--name-only", "agent-registry", "--", "messages") == ""


def test_a_new_session_hears_what_waits_in_its_room(world):
    _, api, web = world
    assert api("register", "api-1", "--provider", "Codex", "--room", "room:contract").returncode == 0
    assert web("register", "web-1", "--provider", "Claude", "--room", "room:contract").returncode == 0
    mid = js(api("--json", "send", "--from", "api-1", "--room", "room:contract", "v2 is live"))["id"]
    late = js(web("--json", "register", "web-3", "--provider", "Claude", "--room", "room:contract"))
    assert [m["id"] for m in late["waiting"]] == [mid]


def test_a_session_joins_a_room_by_the_command_its_inbox_names(world):
    """A reviewer's finding: `inbox`'s hint `register --resume --room room:NAME` failed
    (no SID), and the documented `register "$AGENT_REGISTRY_SESSION" --resume --room
    room:contract` asked for --provider; a resume also lost the session's other tags."""
    _, api, _ = world
    sid = js(api("--json", "register", "--provider", "Codex", "--working-on", "schema v2",
                 "--tag", "backend"))["session"]["id"]
    env = {"AGENT_REGISTRY_SESSION": sid}
    hint = api("inbox", env=env).stdout
    command = hint.split("join a shared room: ")[1].split(")")[0]
    assert command == 'register "$AGENT_REGISTRY_SESSION" --resume --room room:NAME'
    # run as printed: a shell expands the variable, the reader names the room
    args = shlex.split(command.replace("$AGENT_REGISTRY_SESSION", sid)
                       .replace("room:NAME", "room:contract"))
    joined = js(api("--json", *args, env=env))
    assert joined["rooms"]["rooms"] == ["room:contract"]
    session = joined["session"]
    assert (session["provider"], session["working_on"]) == ("Codex", "schema v2")
    assert session["tags"] == ["backend", "room:contract"]
    assert "room:contract" in api("inbox", env=env).stdout


def test_the_repository_room_is_implicit(world):
    _, api, _ = world
    for sid in ("a1", "a2"):
        assert api("register", sid, "--provider", "Codex").returncode == 0
    sent = js(api("--json", "send", "--from", "a1", "--room", "repo:api", "lunch?"))
    assert sent["recipients"] == ["a2"]
    who = js(api("--json", "status", "--room", "repo:api"))
    assert {s["id"] for s in who["sessions"]} == {"a1", "a2"}



def test_a_wrong_repo_room_names_the_right_one_not_a_hub(tmp_path):
    """A clone in folder `proj` of `remote.git`: its room is `repo:remote`.  Asked for
    `repo:proj` without a hub, it said "no hub for shared rooms", which a repo: room never
    needs; it names the room to use instead."""
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    proj = make_repo(tmp_path / "proj")
    git(proj, "remote", "add", "origin", str(remote))
    run = Runner(proj)
    assert run("register", "p1", "--provider", "Codex").returncode == 0
    assert run("register", "p2", "--provider", "Codex").returncode == 0
    for args in (("status", "--room", "repo:proj"),
                 ("send", "--from", "p1", "--room", "repo:proj", "hi")):
        proc = run(*args)
        assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, (args, proc.stderr)
        assert proc.stderr.startswith("agent-registry: repo:proj is not this repository's "
                                      "room, which is repo:remote"), proc.stderr
        assert "no hub" not in proc.stderr
    who = js(run("--json", "status", "--room", "repo:remote"))
    assert {s["id"] for s in who["sessions"]} == {"p1", "p2"} and who["hub"] is None
    assert js(run("--json", "send", "--from", "p1", "--room", "repo:remote", "hi"))[
        "recipients"] == ["p2"]


def test_rooms_refuse_bad_input(world, tmp_path):
    _, api, _ = world
    assert api("register", "a1", "--provider", "Codex").returncode == 0
    for args in (("send", "--from", "a1", "--room", "lobby", "hi"),
                 ("register", "a2", "--provider", "X", "--room", "repo:api"),
                 ("status", "--room", "room:bad name")):
        proc = api(*args)
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, (args, proc.stderr)
    # a sender that never joined the hub is unknown there
    nobody = api("send", "--from", "a1", "--room", "room:contract", "hi")
    assert nobody.returncode == 1
    alone = Runner(make_repo(tmp_path / "alone"))
    assert alone("register", "x1", "--provider", "Codex").returncode == 0
    no_hub = alone("send", "--from", "x1", "--room", "room:contract", "hi")
    assert no_hub.returncode == 2 and "agent-registry.hub" in no_hub.stderr


def test_the_dashboard_shows_a_room(world):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from agent_registry.dashboard.app import create_app
    _, api, web = world
    assert api("register", "api-1", "--provider", "Codex", "--room", "room:contract").returncode == 0
    assert web("register", "web-1", "--provider", "Claude", "--room", "room:contract").returncode == 0
    with TestClient(create_app(str(api.cwd)), base_url="http://127.0.0.1") as client:
        room = client.get("/api/rooms/room:contract").json()
        assert {(s["id"], s["repo"], s["present"]) for s in room["sessions"]} == \
            {("api-1", "api", True), ("web-1", "web", True)}
        own = client.get("/api/rooms/repo:api").json()
        assert [s["id"] for s in own["sessions"]] == ["api-1"] and own["hub"] is None
        assert client.get("/api/rooms/lobby").status_code == 400


def test_presence_follows_heartbeats_and_endings(world):
    hub, api, web = world
    assert api("register", "api-1", "--provider", "Codex", "--room", "room:contract").returncode == 0
    assert web("register", "web-1", "--provider", "Claude", "--room", "room:contract").returncode == 0
    assert web("lock", "heartbeat", "--session", "web-1").returncode == 0
    assert git(hub, "log", "-1", "--format=%s", "agent-registry").startswith("heartbeat web-1")
    assert web("finish", "web-1").returncode == 0
    who = js(api("--json", "status", "--room", "room:contract"))
    assert [s["id"] for s in who["sessions"]] == ["api-1"]


def claude_in_the_room(api, web) -> str:
    """A Claude Code session started in *web* (its session-start hook), registered in
    room:contract beside *api*'s api-1: its id."""
    from test_harness_hooks import NATIVE, base, hook
    sid = f"claude-{NATIVE}"
    assert hook(web.cwd, "claude", "session-start", base("claude", web.cwd, "SessionStart"),
                "--pid", str(os.getpid())).returncode == 0
    js(web("--json", "register", sid, "--resume", "--provider", "Claude",
           "--room", "room:contract"))
    js(api("--json", "register", "api-1", "--provider", "Codex", "--room", "room:contract"))
    return sid


def test_room_messages_reach_a_harness_session_once_naming_the_room(world):
    """A message to a shared room reaches a Claude Code session through its prompt hook
    and its end-of-turn hook (--wake, --hold), once each, naming the room; its empty
    inbox then says why (issue 36)."""
    from test_harness_hooks import base, context_of, hook, kept_going
    _, api, web = world
    sid = claude_in_the_room(api, web)

    def send(text: str) -> str:
        return js(api("--json", "send", "--from", "api-1", "--room", "room:contract", text))["id"]

    first = send("the /users endpoint now pages")
    prompt = {**base("claude", web.cwd, "UserPromptSubmit"), "prompt": "go on"}
    told = context_of("claude", hook(web.cwd, "claude", "user-prompt-submit", prompt),
                      "user-prompt-submit")
    assert f"{first} message from api-1@api to room room:contract: the /users endpoint" in told
    again = hook(web.cwd, "claude", "user-prompt-submit", prompt)
    assert first not in context_of("claude", again, "user-prompt-submit")

    stop = {**base("claude", web.cwd, "Stop"), "stop_hook_active": False}
    second = send("and /orders too")
    woken = kept_going("claude", hook(web.cwd, "claude", "stop", stop, "--wake"))
    assert second in woken and "room room:contract" in woken and first not in woken
    assert kept_going("claude", hook(web.cwd, "claude", "stop", stop, "--wake")) is None
    third = send("v2 ships friday")
    held = kept_going("claude", hook(web.cwd, "claude", "stop", stop, "--hold", "5"))
    assert third in held and "room room:contract" in held

    js(web("--json", "ack", first, second, third, "--session", sid))
    empty = web("inbox", sid)
    assert empty.returncode == 0, empty.stderr
    assert f"no messages for {sid}: caught up (3 acknowledged); it is in repo:web, " \
           "room:contract" in empty.stdout
    fresh = js(web("--json", "register", "web-9", "--provider", "Claude"))["session"]["id"]
    assert "nothing sent to it yet; it is in repo:web " in web("inbox", fresh).stdout


def test_a_prompt_hook_fetches_the_hub_once(world, tmp_path):
    """The prompt hook marks what arrived (sync/rooms.mark_arrived, which reads the
    hub) and then reads what waits (the hub again): one process, one fetch of the hub
    (it was fetched twice), and the room's message is told."""
    from test_harness_hooks import base, context_of, hook
    _, api, web = world
    claude_in_the_room(api, web)
    sent = js(api("--json", "send", "--from", "api-1", "--room", "room:contract", "v2"))["id"]
    trace = tmp_path / "trace"
    prompt = {**base("claude", web.cwd, "UserPromptSubmit"), "prompt": "go on"}
    proc = hook(web.cwd, "claude", "user-prompt-submit", prompt, env={"GIT_TRACE": str(trace)})
    assert sent in context_of("claude", proc, "user-prompt-submit")
    fetches = [line for line in trace.read_text().splitlines() if "built-in: git fetch" in line]
    assert len(fetches) == 1, fetches


def test_a_high_room_message_is_told_at_the_next_tool_call_once(world):
    """A person's high message to a shared room, sent from another repository, is marked
    for the session here by the first command that reads the hub (its ``inbox``), so
    Claude Code's PreToolUse hook, which never fetches, tells it once (issue 36)."""
    from test_harness_hooks import next_tool_call
    _, api, web = world
    sid = claude_in_the_room(api, web)
    high = js(api("--json", "send", "--from", "boss", "--room", "room:contract",
                  "--importance", "high", "freeze the contract"))["id"]
    assert next_tool_call("claude", web.cwd) == ("", "")  # the hook reads no hub
    assert web("inbox", sid).returncode == 0
    before, _ = next_tool_call("claude", web.cwd)
    assert high in before and "freeze the contract" in before
    assert web("inbox", sid).returncode == 0
    assert next_tool_call("claude", web.cwd) == ("", "")


def test_mcp_register_returns_what_waits_in_its_rooms(world):
    """MCP register answers with what waits, as the CLI prints it (issue 36)."""
    pytest.importorskip("mcp", reason="the mcp extra is not installed")
    from test_mcp import call, talk
    _, api, web = world
    js(api("--json", "register", "api-1", "--provider", "Codex", "--room", "room:contract"))
    js(web("--json", "register", "web-1", "--provider", "Claude", "--room", "room:contract"))
    mid = js(api("--json", "send", "--from", "api-1", "--room", "room:contract", "v2"))["id"]

    async def script(session):
        return await call(session, "register", provider="Claude", session_id="web-2",
                          rooms=["room:contract"])
    error, text, result = talk(web.cwd, script)
    assert not error, text
    assert [m["id"] for m in result["waiting"]] == [mid]
