"""``agent-registry mcp`` (issue 13), driven by the MCP SDK's own stdio client: each test
starts the installed command as a real subprocess and talks MCP to it.  Also
``harness install claude|codex|gemini --mcp``."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed")
from mcp import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

from agent_registry import Registry  # noqa: E402
from helpers import CLI, ROOT, WAITER, git  # noqa: E402

TOOLS = {"register", "status", "show", "lock_acquire", "lock_release", "lock_check",
         "heartbeat", "context_log", "finish", "end", "wiki_query", "wiki_show",
         "send", "inbox", "ack", "thread", "room_who"}
RESOURCES = {"registry://status", "registry://locks", "registry://registry.md"}


@asynccontextmanager
async def server(repo: Path, *args: str, command: list[str] | None = None,
                 errlog: str = os.devnull):
    """A ClientSession on a fresh ``agent-registry -C REPO mcp`` process (its stderr
    goes to *errlog*)."""
    command = command or [CLI, "-C", str(repo), "mcp", *args]
    params = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    with open(errlog, "w") as log:
        async with stdio_client(params, errlog=log) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session


def talk(repo: Path, script, *args: str):
    """Run the coroutine function *script(session)* against one server; its result."""
    async def main():
        async with server(repo, *args) as session:
            return await script(session)
    return anyio.run(main)


async def call(session: ClientSession, tool: str, **arguments) -> tuple[bool, str, dict]:
    """(is_error, text, structured result) of one tool call; never an empty answer."""
    result = await session.call_tool(tool, arguments)
    text = "".join(c.text for c in result.content if c.type == "text")
    assert text.strip(), f"{tool} answered nothing"
    return result.is_error, text, result.structured_content or {}


async def register(session: ClientSession, **fields) -> str:
    error, text, result = await call(session, "register", provider="Claude", **fields)
    assert not error, text
    return result["session"]["id"]


def held_by(repo: Path, path: str) -> list[str]:
    with Registry.open(str(repo)) as registry:
        return [r.get("owner") for r in registry.check([path]) if r["state"] != "free"]


def test_lists_every_tool_with_a_schema_and_every_resource(repo):
    async def script(session):
        return (await session.list_tools()).tools, (await session.list_resources()).resources
    tools, resources = talk(repo, script)
    assert {t.name for t in tools} == TOOLS
    for tool in tools:
        assert tool.description and "\n" not in tool.description.strip(), tool.name
        assert tool.input_schema["type"] == "object"
        for name, prop in tool.input_schema.get("properties", {}).items():
            assert prop.get("description"), f"{tool.name}.{name} has no description"
    acquire = next(t for t in tools if t.name == "lock_acquire").input_schema
    assert set(acquire["properties"]) == {"paths", "session_id", "ttl", "shared", "generations",
                                          "reason"}
    assert acquire["required"] == ["paths"]
    assert {str(r.uri) for r in resources} == RESOURCES


def test_a_claim_through_mcp_carries_its_reason(repo):
    """lock_acquire's reason is stored with the claim, as `lock acquire --reason` stores
    it: lock_check, status and the CLI's `lock list` show it (issue 36)."""
    async def script(session):
        sid = await register(session, session_id="claude-mcp-1")
        claimed = await call(session, "lock_acquire", paths=["src/auth.py"],
                             reason="migrating the token format")
        checked = await call(session, "lock_check", paths=["src/auth.py"], session_id=sid)
        status = await call(session, "status")
        return claimed, checked, status
    claimed, checked, status = talk(repo, script)
    assert not claimed[0], claimed[1]
    assert checked[2]["paths"][0]["reason"] == "migrating the token format"
    assert status[2]["reasons"] == [{"path": "src/auth.py", "owner": "claude-mcp-1",
                                     "reason": "migrating the token format"}]
    with Registry.open(str(repo)) as registry:
        assert registry.locks()[0]["reason"] == "migrating the token format"


def test_register_claim_check_release_finish(repo):
    async def script(session):
        sid = await register(session, working_on="auth", session_id="claude-mcp-1",
                             notify_started="claude-mcp-1 is on auth")
        claimed = await call(session, "lock_acquire", paths=["src/auth.py"])
        checked = await call(session, "lock_check", paths=["src/auth.py"], session_id=sid)
        logged = await call(session, "context_log", text="claimed auth")
        beat = await call(session, "heartbeat")
        released = await call(session, "lock_release", paths=["src/auth.py"])
        finished = await call(session, "finish", notify_executed="auth is done")
        return sid, claimed, checked, logged, beat, released, finished
    sid, claimed, checked, logged, beat, released, finished = talk(repo, script)
    assert sid == "claude-mcp-1"
    assert not claimed[0] and claimed[2]["locks"][0]["status"] == "acquired"
    assert checked[2]["paths"][0]["state"] == "locked-by-me" and checked[2]["free_to_edit"]
    assert not logged[0] and "claimed auth" in logged[2]["line"]
    assert not beat[0] and beat[2]["session"] == sid
    assert released[2]["locks"] == [{"path": "src/auth.py", "status": "released"}]
    assert finished[2]["session"]["status"] == "Finished"
    assert finished[2]["session"]["notify_started"] == "claude-mcp-1 is on auth"
    assert finished[2]["session"]["notify_executed"] == "auth is done"
    assert held_by(repo, "src/auth.py") == []


def test_a_resume_keeps_every_field_it_is_not_given(repo, run):
    """register with resume (an agent restarted into its session: a new server) keeps
    what it does not give, as `register SID --resume` does: provider, ai_version,
    working_on, space, to-dos, tags; a field it gives replaces only that one."""
    fields = dict(session_id="claude-mcp-2", ai_version="opus-4", working_on="auth",
                  space=["src/auth.py"], todo_present=["tokens"], tags=["backend"])

    async def first(session):
        return await call(session, "register", provider="Claude", **fields)
    error, text, _ = talk(repo, first)
    assert not error, text

    def kept(answer: dict) -> dict:
        return {k: answer["session"][k] for k in ("provider", "ai_version", "working_on",
                                                  "space", "todo_present", "tags")}
    before = {"provider": "Claude", "ai_version": "opus-4", "working_on": "auth",
              "space": ["src/auth.py"], "todo_present": ["tokens"], "tags": ["backend"]}

    async def resumed(session):
        return (await call(session, "register", provider="Claude",
                           session_id="claude-mcp-2", resume=True),
                await call(session, "register", session_id="claude-mcp-2", resume=True,
                           working_on="auth, part two"))  # provider too: the session's
    (error, text, again), (error2, text2, changed) = talk(repo, resumed)
    assert not error and not error2, (text, text2)
    assert kept(again) == before
    assert kept(changed) == {**before, "working_on": "auth, part two"}
    shown = json.loads(run("--json", "show", "claude-mcp-2").stdout)["sessions"][0]
    assert {k: shown[k] for k in before} == {**before, "working_on": "auth, part two"}

    async def no_provider(session):  # a new session still needs one
        return await call(session, "register", session_id="claude-mcp-3")
    error, text, _ = talk(repo, no_provider)
    assert error and "provider is required" in text


def test_the_session_is_bound_to_the_server_parent_and_kept_fresh(repo, run):
    """The harness (here: this test process) owns the session; the server's own
    heartbeat renews it while the server runs."""
    async def script(session):
        error, text, result = await call(session, "register", provider="Claude",
                                         session_id="claude-beat")
        assert not error, text
        first = result["session"]["heartbeat_at"]
        for _ in range(600):  # a watchdog, not a timing assertion
            shown = json.loads(run("--json", "show", "claude-beat").stdout)
            if shown["sessions"][0]["heartbeat_at"] != first:
                return result, shown["sessions"][0]
            await anyio.sleep(0.2)
        pytest.fail("the server never renewed its session")
    result, later = talk(repo, script, "--heartbeat", "1")
    assert result["session"]["pid"] == os.getpid()
    assert result["session"]["owner"] == "given"
    assert "MCP server's parent" in result["bound_to"]["why"]
    assert later["status"] == "OnWorking"
    # the renewal is the server's heartbeat operation, on whichever registry ref the
    # layout puts heartbeats (this clone's own ref, in the layout `init` makes)
    log = git(repo, "log", "--format=%s", "--branches=agent-registry*")
    assert "heartbeat claude-beat (0 lock(s))" in log


def test_the_heartbeat_stops_when_the_agent_process_is_gone(repo, tmp_path):
    """A server left running must not keep a dead agent's locks fresh."""
    agent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    errlog = tmp_path / "server.err"

    async def main():
        async with server(repo, "--heartbeat", "1", errlog=str(errlog)) as session:
            error, text, _ = await call(session, "register", provider="Claude",
                                        session_id="claude-gone", pid=agent.pid)
            assert not error, text
            agent.kill()
            agent.wait()
            for _ in range(600):  # a watchdog, not a timing assertion
                if "stopped heartbeating claude-gone" in errlog.read_text():
                    return await call(session, "lock_check", paths=["src/auth.py"])
                await anyio.sleep(0.2)
            pytest.fail("the server kept heartbeating a session whose agent is gone")
    try:
        error, _, _ = anyio.run(main)
    finally:
        agent.kill()
        agent.wait()
    assert not error
    assert f"its owner process {agent.pid} is gone" in errlog.read_text()


def test_a_refused_claim_is_a_tool_error_naming_the_holder(repo, run):
    assert run("register", "kimi-7", "--provider", "Kimi", "--working-on", "token refresh",
               "--pid", str(os.getpid())).returncode == 0
    assert run("lock", "acquire", "src/auth.py", "--session", "kimi-7").returncode == 0
    before = git(repo, "rev-parse", "agent-registry").strip()

    async def script(session):
        await register(session, session_id="claude-2")
        return await call(session, "lock_acquire", paths=["src/auth.py", "README.md"])
    error, text, _ = talk(repo, script)
    assert error
    assert "src/auth.py is locked by kimi-7" in text
    assert "Holder kimi-7: Kimi" in text and "token refresh" in text and "Reach it" in text
    assert held_by(repo, "src/auth.py") == ["kimi-7"] and held_by(repo, "README.md") == []
    # only claude-2's registration was written: the refused claim changed nothing
    assert git(repo, "rev-list", f"{before}..agent-registry", "--count").strip() == "1"


def test_mcp_help_names_every_tool_and_resource_the_server_has(repo):
    """The command's help lists what the server offers, read from the server itself, so
    a tool added later cannot be left out of it (issue 36)."""
    async def script(session):
        return (await session.list_tools()).tools, (await session.list_resources()).resources
    tools, resources = talk(repo, script)
    helped = " ".join(subprocess.run([CLI, "mcp", "--help"], capture_output=True, text=True,
                                     check=True).stdout.split())
    words = {w.rstrip(".") for w in helped.replace(",", " ").replace(";", " ").split()}
    for name in [t.name for t in tools] + [str(r.uri) for r in resources]:
        assert name in words, name


def test_a_mistyped_id_is_answered_with_the_nearest_live_one_not_the_servers(repo, run):
    """The server's own session is named first only among equally like ids: a typo of
    another live session's id suggests that one (issue 36)."""
    async def script(session):
        await register(session, session_id="mcp-2")
        assert run("register", "cli-1", "--provider", "Codex").returncode == 0
        return await call(session, "lock_acquire", paths=["src/a.py"], session_id="cli-l")
    error, text, _ = talk(repo, script)
    assert error and "Did you mean cli-1?" in text, text


def test_an_unknown_session_id_lists_the_live_ones(repo, run):
    assert run("register", "kimi-7", "--provider", "Kimi").returncode == 0

    async def script(session):
        await register(session, session_id="claude-right")
        unknown = await call(session, "lock_acquire", paths=["src/auth.py"],
                             session_id="claude-rihgt")
        await call(session, "finish")
        ended = await call(session, "heartbeat", session_id="claude-right")
        missing = await call(session, "lock_release", paths=["src/auth.py"])
        return unknown, ended, missing
    unknown, ended, missing = talk(repo, script)
    assert unknown[0] and "unknown session claude-rihgt" in unknown[1]
    assert "Did you mean claude-right?" in unknown[1]
    assert "Live sessions: claude-right, kimi-7" in unknown[1]
    assert ended[0] and "session claude-right has ended" in ended[1] and "kimi-7" in ended[1]
    assert missing[0] and "session_id is required" in missing[1]


def test_rooms_over_mcp_register_send_room_who_and_inbox(tmp_path):
    """register joins rooms (with tags), send reaches a room, room_who tells who is in
    it, and inbox shows what a room sent: the same hub the CLI's --room uses."""
    from helpers import Runner, make_repo
    hub = tmp_path / "hub.git"
    git(tmp_path, "init", "-q", "--bare", str(hub))
    api, web = make_repo(tmp_path / "api"), make_repo(tmp_path / "web")
    for repo in (api, web):
        git(repo, "config", "agent-registry.hub", str(hub))
    web_cli = Runner(web)
    assert web_cli("register", "web-1", "--provider", "Claude", "--working-on", "client",
                   "--room", "room:contract").returncode == 0
    assert web_cli("register", "web-2", "--provider", "Claude", "--tag", "ui").returncode == 0

    async def script(session):
        error, text, result = await call(session, "register", provider="Codex",
                                         session_id="api-1", working_on="schema v2",
                                         tags=["backend"], rooms=["room:contract"])
        assert not error, text
        assert result["rooms"]["rooms"] == ["room:contract"]
        assert set(result["session"]["tags"]) == {"backend", "room:contract"}
        who = await call(session, "room_who", room="room:contract")
        own = await call(session, "room_who", room="repo:api")
        sent = await call(session, "send", room="room:contract", body="/users now pages")
        both = await call(session, "send", room="room:contract", to="web-1", body="x")
        bad = await call(session, "room_who", room="lobby")
        joined_own = await call(session, "register", provider="Codex", session_id="api-2",
                                rooms=["repo:api"])
        return who, own, sent, both, bad, joined_own
    who, own, sent, both, bad, joined_own = anyio.run(lambda: _run_on(api, script))
    assert not who[0], who[1]
    assert {(s["id"], s["repo"]) for s in who[2]["sessions"]} == {("api-1", "api"), ("web-1", "web")}
    assert all(s["present"] for s in who[2]["sessions"])
    assert [s["id"] for s in own[2]["sessions"]] == ["api-1"] and own[2]["hub"] is None
    assert not sent[0] and sent[2]["recipients"] == ["web-1@web"], sent[1]  # hub members
    assert both[0] and "exactly one of" in both[1]
    assert bad[0] and "invalid room" in bad[1]
    assert joined_own[0] and "room:<name>" in joined_own[1]
    with Registry.open(str(api)) as registry:  # refused before anything was written
        assert [s.id for s in registry.sessions()] == ["api-1"]
    inbox = json.loads(web_cli("--json", "inbox", "web-1").stdout)
    assert [m["id"] for m in inbox["messages"]] == [sent[2]["id"]]
    reply = json.loads(web_cli("--json", "send", "--from", "web-1", "--room", "room:contract",
                               "--reply-to", sent[2]["id"], "thanks").stdout)

    async def read(session):
        await call(session, "register", provider="Codex", session_id="api-1b",
                   rooms=["room:contract"])
        # a reply naming no audience goes back to its sender, through the room (issue 37)
        answer = await call(session, "send", reply_to=reply["id"], body="ok",
                            session_id="api-1")
        beat = await call(session, "heartbeat", session_id="api-1")
        assert not beat[0], beat[1]
        return await call(session, "inbox", session_id="api-1"), answer
    (error, text, result), answer = anyio.run(lambda: _run_on(api, read))
    assert not error, text
    assert [m["id"] for m in result["messages"]] == [reply["id"]]
    assert not answer[0] and answer[2]["recipients"] == ["web-1@web"], answer[1]
    # presence follows: the heartbeat was carried over to the hub
    assert git(hub, "log", "-1", "--format=%s", "agent-registry").startswith("heartbeat api-1")


async def _run_on(repo: Path, script):
    async with server(repo) as session:
        return await script(session)


def test_bad_arguments_are_tool_errors(repo):
    async def script(session):
        await register(session)
        return [await call(session, "lock_acquire", paths=[]),
                await call(session, "lock_acquire", paths=["../outside"]),
                await call(session, "lock_acquire", paths=["src/auth.py"], ttl=0),
                await call(session, "register", provider="")]
    for error, text, _ in talk(repo, script):
        assert error and text


def test_a_path_too_long_for_any_file_is_refused_by_mcp_as_by_the_cli(repo, run):
    """One check of a path, in the library every face calls (issue 34): MCP claimed a
    1,000,000-character path.  MCP, the CLI and the library refuse a path over 4096
    bytes (PATH_MAX) in one line, nothing claimed; one of 4096 is still a path."""
    huge, over, most = "a" * 1_000_000, "src/" + "b/" * 2047, "src/" + "é" * 2046
    assert len(over.encode()) == 4098 and len(most.encode()) == 4096

    async def script(session):
        await register(session, session_id="claude-long")
        return [await call(session, tool, paths=[path])
                for tool in ("lock_acquire", "lock_check") for path in (huge, over)]
    for error, text, _ in talk(repo, script):
        assert error and "is over 4096 bytes" in text and len(text) < 300, text[:300]
    with Registry.open(str(repo)) as registry:
        assert registry.locks() == []
    before = git(repo, "for-each-ref")
    for args in (("lock", "acquire", "--session", "claude-long", over),
                 ("lock", "check", over)):
        proc = run(*args)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr[:300]
        assert "is over 4096 bytes" in proc.stderr
    from agent_registry.errors import BadInput
    with Registry.open(str(repo)) as registry, pytest.raises(BadInput, match="over 4096"):
        registry.claim("claude-long", [over])
    assert git(repo, "for-each-ref") == before
    assert run("lock", "acquire", "--session", "claude-long", most).returncode == 0


def test_wiki_query_and_show_and_the_resources(repo):
    async def script(session):
        sid = await register(session, session_id="claude-wiki", working_on="auth")
        await call(session, "lock_acquire", paths=["src/auth.py"])
        other = await register(session, session_id="claude-other")
        await call(session, "lock_acquire", paths=["README.md"], session_id=other)
        ended = await call(session, "end", session_id=sid,
                           router="refresh tokens rotate on every login",
                           what="token rotation", how="a new table", solved="replayed tokens",
                           bugs=[], tools=["pytest"])
        found = await call(session, "wiki_query", text="token rotation")
        shown = await call(session, "wiki_show", id=sid)
        nothing = await call(session, "wiki_query", text="kubernetes ingress")
        status = json.loads((await session.read_resource("registry://status")).contents[0].text)
        locks = json.loads((await session.read_resource("registry://locks")).contents[0].text)
        page = (await session.read_resource("registry://registry.md")).contents[0]
        return ended, found, shown, nothing, status, locks, page
    ended, found, shown, nothing, status, locks, page = talk(repo, script)
    assert not ended[0] and ended[2]["entry"]["session_id"] == "claude-wiki"
    assert not found[0] and found[2]["results"][0]["session_id"] == "claude-wiki"
    assert not shown[0] and shown[2]["router"] == "refresh tokens rotate on every login"
    assert not nothing[0] and nothing[2]["results"] == []
    assert [s["id"] for s in status["sessions"]] == ["claude-other"]
    assert [(l["path"], l["owner"]) for l in locks["locks"]] == [("README.md", "claude-other")]
    assert page.mime_type == "text/markdown"
    assert page.text == git(repo, "show", "agent-registry:registry.md")
    assert "claude-other" in page.text  # ids are not escaped (27fa29a)


def test_a_claim_the_remote_cannot_confirm_says_confirmed_false(repo, tmp_path):
    git(repo, "remote", "add", "origin", str(tmp_path / "gone.git"))

    async def script(session):
        registered = await call(session, "register", provider="Claude", session_id="claude-off")
        claimed = await call(session, "lock_acquire", paths=["src/auth.py"])
        return registered, claimed
    registered, claimed = talk(repo, script)
    assert not registered[0] and registered[2]["confirmed"] is False
    assert not claimed[0] and claimed[2]["confirmed"] is False
    assert claimed[2]["locks"][0]["status"] == "acquired"
    assert "not confirmed" in claimed[2]["warning"]


@pytest.mark.parametrize("rounds", [2, pytest.param(15, marks=pytest.mark.slow)])
def test_eight_mcp_servers_and_eight_cli_processes_race_one_winner(repo, tmp_path, rounds):
    mcp_sids = [f"mcp-{i}" for i in range(8)]
    cli_sids = [f"cli-{i}" for i in range(8)]
    with Registry.open(str(repo)) as registry:
        for sid in mcp_sids + cli_sids:
            registry.register(sid, provider="Kimi", pid=os.getpid())

    async def one_round(sessions, n: int) -> list[bool]:
        path, work = f"src/race-{n}.py", tmp_path / f"round-{n}"
        work.mkdir()
        go = work / "go"
        procs = [subprocess.Popen(
            [sys.executable, "-c", WAITER, str(work / f"ready-{i}"), str(go), CLI,
             "lock", "acquire", path, "--session", sid],
            cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for i, sid in enumerate(cli_sids)]
        for _ in range(30_000):  # a watchdog: a broken racer fails the test, not hangs it
            if len(list(work.glob("ready-*"))) == len(procs):
                break
            assert all(p.poll() is None for p in procs), "a racer died before the start"
            await anyio.sleep(0.01)
        wins: list[bool] = []

        async def claim(session, sid):
            error, _, _ = await call(session, "lock_acquire", paths=[path], session_id=sid)
            wins.append(not error)
        go.touch()
        async with anyio.create_task_group() as group:
            for session, sid in zip(sessions, mcp_sids):
                group.start_soon(claim, session, sid)
        for proc in procs:
            out, err = await anyio.to_thread.run_sync(lambda p=proc: p.communicate(timeout=600))
            assert proc.returncode in (0, 1), err
            wins.append(proc.returncode == 0)
        return wins

    async def main():
        async with server(repo) as a0, server(repo) as a1, server(repo) as a2, \
                server(repo) as a3, server(repo) as a4, server(repo) as a5, \
                server(repo) as a6, server(repo) as a7:
            return [await one_round([a0, a1, a2, a3, a4, a5, a6, a7], n)
                    for n in range(rounds)]
    for n, wins in enumerate(anyio.run(main)):
        assert sum(wins) == 1, f"round {n}: {sum(wins)} winners"
        assert len(held_by(repo, f"src/race-{n}.py")) == 1


# -- harness install --mcp -------------------------------------------------------------

def test_harness_install_mcp_merges_and_is_idempotent(repo, run):
    (repo / ".mcp.json").write_text(json.dumps(
        {"mcpServers": {"other": {"command": "other-server"}}}, indent=4) + "\n")
    (repo / ".gemini").mkdir()
    (repo / ".gemini" / "settings.json").write_text(json.dumps(
        {"theme": "dark", "mcpServers": {"agent-registry": {
            "command": "/old/venv/bin/agent-registry", "args": [], "trust": True}}}))
    (repo / ".codex").mkdir()
    (repo / ".codex" / "config.toml").write_text(
        'model = "o3"  # keep me\n\n[mcp_servers.other]\ncommand = "other"\n\n'
        '[mcp_servers.agent-registry]\ncommand = "/old/bin/agent-registry"\n'
        'args = ["mcp"]\nstartup_timeout_sec = 30\n\n'
        '[mcp_servers.agent-registry.env]\nFOO = "bar"\n')
    files = {"claude": ".mcp.json", "gemini": ".gemini/settings.json",
             "codex": ".codex/config.toml"}
    first = {}
    for harness, name in files.items():
        proc = run("--json", "harness", "install", harness, "--mcp", check_untouched=False)
        assert proc.returncode == 0, proc.stderr
        result = json.loads(proc.stdout)["harnesses"][0]["mcp"]
        assert result["changed"] and result["file"] == str(repo / name)
        first[name] = (repo / name).read_bytes()
    command = result["command"]
    assert os.path.isabs(command[0]) and os.access(command[0], os.X_OK)
    assert command[1:] == ["-C", str(repo), "mcp"]
    for harness, name in files.items():
        proc = run("--json", "harness", "install", harness, "--mcp", check_untouched=False)
        assert json.loads(proc.stdout)["harnesses"][0]["mcp"]["changed"] is False
        assert (repo / name).read_bytes() == first[name], f"{name} changed on a second run"
    claude = json.loads(first[".mcp.json"])["mcpServers"]
    assert claude["other"] == {"command": "other-server"}
    assert claude["agent-registry"] == {"type": "stdio", "command": command[0],
                                        "args": command[1:]}
    gemini = json.loads(first[".gemini/settings.json"])
    assert gemini["theme"] == "dark"
    assert gemini["mcpServers"]["agent-registry"] == {"command": command[0],
                                                      "args": command[1:], "trust": True}
    tomllib = pytest.importorskip("tomllib")
    codex = tomllib.loads(first[".codex/config.toml"].decode())
    assert codex["model"] == "o3" and codex["mcp_servers"]["other"] == {"command": "other"}
    assert codex["mcp_servers"]["agent-registry"] == {
        "command": command[0], "args": command[1:], "startup_timeout_sec": 30,
        "env": {"FOO": "bar"}}
    assert first[".codex/config.toml"].decode().startswith('model = "o3"  # keep me\n')


def test_harness_install_mcp_appends_to_a_codex_config_without_our_table(repo, run):
    config = repo / ".codex" / "config.toml"
    config.parent.mkdir()
    config.write_text('model = "o3"\n[mcp_servers.other]\ncommand = "other"')
    assert run("harness", "install", "codex", "--mcp", check_untouched=False).returncode == 0
    written = config.read_text()
    assert written.startswith('model = "o3"\n[mcp_servers.other]\ncommand = "other"\n\n'
                              '[mcp_servers.agent-registry]\n')
    tomllib = pytest.importorskip("tomllib")
    assert set(tomllib.loads(written)["mcp_servers"]) == {"other", "agent-registry"}
    assert run("harness", "install", "codex", "--mcp", check_untouched=False).returncode == 0
    assert config.read_text() == written


def test_the_written_command_serves_the_repository(repo, run, tmp_path):
    assert run("harness", "install", "claude", "--mcp", check_untouched=False).returncode == 0
    entry = json.loads((repo / ".mcp.json").read_text())["mcpServers"]["agent-registry"]

    async def main():  # started from elsewhere, as a harness may
        async with server(tmp_path, command=[entry["command"], *entry["args"]]) as session:
            return await call(session, "lock_check", paths=["src/auth.py"])
    error, _, result = anyio.run(main)
    assert not error and result["paths"] == [{"path": "src/auth.py", "state": "free"}]


def test_harness_install_mcp_refuses_a_broken_config_and_changes_nothing(repo, run):
    (repo / ".mcp.json").write_text("{not json")
    proc = run("harness", "install", "claude", "--mcp", check_untouched=False)
    assert proc.returncode == 2 and "not valid JSON" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert (repo / ".mcp.json").read_text() == "{not json"
    assert not (repo / ".claude").exists() and not (repo / "CLAUDE.md").exists()
    proc = run("harness", "install", "generic", "--mcp", check_untouched=False)
    assert proc.returncode == 2 and not (repo / "AGENTS.md").exists()


# -- the MCP Inspector's CLI mode -------------------------------------------------------

def inspector() -> list[str] | None:
    """The Inspector's command: $MCP_INSPECTOR, else one installed where npx finds it
    without a download; None when there is none."""
    if os.environ.get("MCP_INSPECTOR"):
        return os.environ["MCP_INSPECTOR"].split()
    npx = shutil.which("npx")
    if npx is None:
        return None
    probe = subprocess.run([npx, "--no-install", "@modelcontextprotocol/inspector", "--help"],
                           capture_output=True, text=True, timeout=120)
    found = probe.returncode == 0
    return [npx, "--no-install", "@modelcontextprotocol/inspector"] if found else None


def test_the_mcp_inspector_cli_lists_and_calls_tools(repo):
    command = inspector()
    if command is None:
        pytest.skip("no MCP Inspector: npx is missing or @modelcontextprotocol/inspector is "
                    "not installed (npm install -g @modelcontextprotocol/inspector, or set "
                    "MCP_INSPECTOR)")
    target = [CLI, "-C", str(repo), "mcp"]
    listed = subprocess.run([*command, "--cli", *target, "--method", "tools/list"],
                            capture_output=True, text=True, timeout=300)
    assert listed.returncode == 0, listed.stderr
    assert {t["name"] for t in json.loads(listed.stdout)["tools"]} == TOOLS
    called = subprocess.run(
        [*command, "--cli", *target, "--method", "tools/call", "--tool-name", "register",
         "--tool-arg", "provider=Inspector", "--tool-arg", "session_id=inspector-1"],
        capture_output=True, text=True, timeout=300)
    assert called.returncode == 0, called.stderr
    assert json.loads(called.stdout)["isError"] is False
    with Registry.open(str(repo)) as registry:
        assert registry.session("inspector-1").provider == "Inspector"


def test_without_the_sdk_the_command_says_how_to_install_it(repo):
    script = ("import sys; sys.modules['mcp'] = None\n"
              "from agent_registry.cli.main import main\nsys.exit(main(['mcp']))\n")
    proc = subprocess.run([sys.executable, "-c", script], cwd=repo, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.strip() == ("agent-registry: the MCP server (agent-registry mcp) needs "
                                   f"the mcp extra: pip install '{ROOT}[mcp]' (mcp is "
                                   "not installed)")
