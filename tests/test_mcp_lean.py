"""The lean path (agent_registry/mcp/lean.py): a plain ``tools/call`` answered from the
wire by the SDK's own handler must send the JSON the SDK's session sends.

Each call is made twice by the SDK's stdio client on one server: plain, which the lean
path takes, and with a progress token, which it leaves to the SDK's session (a request
carrying ``_meta``); the two answers, as the client received them off the wire, must be
equal but for the request id and the values two calls cannot share (times and the
generations of claims).  The client's messages are recorded by a tee between its stdio
transport and its session."""
from __future__ import annotations

import json
import os
import re
import subprocess
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed")
from mcp import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402
from mcp.shared.message import SessionMessage  # noqa: E402

from agent_registry.wiki.entry import entry_id  # noqa: E402
from helpers import CLI  # noqa: E402
from test_mcp import TOOLS, register  # noqa: E402

# ISO times (2026-12-06T14:53:20Z and the like) and ages ("3s"): what two calls differ in
TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?")


@asynccontextmanager
async def recorded(repo: Path):
    """A ClientSession on a fresh server, and the list every answer it received is
    appended to (each as its wire form: the fields the server sent, by their names)."""
    params = StdioServerParameters(command=CLI, args=["-C", str(repo), "mcp"],
                                   env=dict(os.environ))
    answers: list[dict] = []
    with open(os.devnull, "w") as log:
        async with stdio_client(params, errlog=log) as (read, write):
            send, receive = anyio.create_memory_object_stream(0)

            async def tee() -> None:
                async with send:
                    async for item in read:
                        if isinstance(item, SessionMessage) and \
                                getattr(item.message, "method", None) is None:
                            answers.append(item.message.model_dump(
                                mode="json", by_alias=True, exclude_unset=True))
                        await send.send(item)
            async with anyio.create_task_group() as tg:
                tg.start_soon(tee)
                async with ClientSession(receive, write) as session:
                    await session.initialize()
                    yield session, answers
                tg.cancel_scope.cancel()


def masked(value, *same: str):
    """*value* with what differs between two equal calls made one after the other
    replaced: times and ages (the two calls may fall in two seconds), generations (a
    claim's own id), and the strings *same*; a text content holding the result as JSON
    is compared as that result."""
    if isinstance(value, dict):
        return {k: "<generation>" if k in ("generation", "generations") else
                "<seconds>" if k.endswith("_seconds") else
                masked(v, *same) for k, v in value.items()}
    if isinstance(value, list):
        return [masked(v, *same) for v in value]
    if isinstance(value, str) and value.startswith("{"):  # a text content: the result
        return masked(json.loads(value), *same)
    if isinstance(value, str):
        for name in same:
            value = value.replace(name, "<same>")
        return TIME.sub("<time>", value)
    return value


async def progress(*_) -> None:
    pass


async def answer(session: ClientSession, answers: list[dict], tool: str, arguments: dict,
                 lean: bool) -> dict:
    """The wire answer to *tool* called plainly (the lean path takes it) or with a
    progress token (the SDK's session answers), without its id."""
    before = len(answers)
    await session.call_tool(tool, arguments,
                            **({} if lean else {"progress_callback": progress}))
    assert len(answers) == before + 1
    return {k: v for k, v in answers[-1].items() if k != "id"}


def test_every_tools_answers_on_the_lean_path_are_the_sdks(repo):
    """Success, tool errors, bad arguments, an unknown tool: for every tool, what the lean
    path sends equals what the SDK's session sends for the same call."""
    def claim(path):
        return [("lock_acquire", {"paths": [path]})]

    def release(path):
        return [("lock_release", {"paths": [path]})]
    sid = "claude-lean"
    # (tool, arguments, what restores the state after the first of the two calls)
    calls = [
        ("status", {}, []),
        ("show", {"session_id": sid}, []),
        ("show", {"session_id": "claude-nobody"}, []),
        ("register", {"provider": "Claude", "pid": "not a number"}, []),
        ("lock_acquire", {"paths": ["claimed.py"]}, release("claimed.py")),
        ("lock_acquire", {"paths": ["x.py"], "session_id": "claude-lean-typo"}, []),
        ("lock_acquire", {"paths": []}, []),
        ("lock_acquire", {"paths": ["x.py"], "ttl": 0}, []),
        ("lock_release", {"paths": ["held.py"]}, claim("held.py")),
        ("lock_release", {"paths": ["never-held.py"], "session_id": "claude-nobody"}, []),
        ("lock_check", {"paths": ["held.py", "free.py"], "session_id": sid}, []),
        ("lock_check", {}, []),
        ("heartbeat", {"session_id": sid}, []),
        ("heartbeat", {"session_id": sid, "paths": ["never-held.py"]}, []),
        ("context_log", {"text": "same line", "session_id": sid}, []),
        ("send", {"body": "hello", "to": "claude-nobody", "session_id": sid}, []),
        ("send", {"body": "hello", "session_id": sid}, []),
        ("inbox", {"session_id": sid}, []),
        ("ack", {"message_ids": ["m-nothing"], "session_id": sid}, []),
        ("thread", {"message_id": "m-nothing"}, []),
        ("room_who", {"room": "repo:nothing here"}, []),
        ("wiki_query", {"text": "auth"}, []),
        ("wiki_show", {"id": "nothing"}, []),
        ("finish", {"session_id": "claude-nobody"}, []),
        ("end", {"session_id": "claude-nobody", "what": "nothing"}, []),
        ("no_such_tool", {"paths": ["x.py"]}, []),
    ]
    # tools that make or end a session: each of the two calls on a session of its own
    twins = [
        ("register", {"provider": "Codex", "session_id": "codex-{}", "working_on": "auth"}),
        ("finish", {"session_id": "codex-{}"}),
        ("register", {"provider": "Codex", "session_id": "codex-{}", "working_on": "auth"}),
        ("end", {"session_id": "codex-{}", "what": "the auth module", "router": "auth"}),
    ]

    async def main():
        compared = []
        async with recorded(repo) as (session, answers):
            await register(session, session_id=sid, working_on="auth")
            await session.call_tool("lock_acquire", {"paths": ["held.py"]})
            for tool, arguments, restore in calls:
                pair = []
                for lean in (True, False):
                    pair.append(await answer(session, answers, tool, arguments, lean))
                    for undo, undo_arguments in restore:
                        await session.call_tool(undo, undo_arguments)
                compared.append((tool, arguments, *pair))
            for tool, arguments in twins:
                pair = [await answer(session, answers, tool, {
                    k: v.format(twin) if isinstance(v, str) else v
                    for k, v in arguments.items()}, lean)
                    for twin, lean in (("a", True), ("b", False))]
                compared.append((tool, arguments,
                                 *(masked(answered, twin, entry_id(twin))
                                   for answered, twin in zip(pair, ("codex-a", "codex-b")))))
        return compared
    compared = anyio.run(main)
    for tool, arguments, lean, sdk in compared:
        assert masked(lean) == masked(sdk), (tool, arguments)
    assert {tool for tool, *_ in compared} == TOOLS | {"no_such_tool"}
    results = {(tool, str(arguments)): lean for tool, arguments, lean, _ in compared}
    assert not results[("lock_acquire", str({"paths": ["claimed.py"]}))]["result"]["isError"]
    assert results[("lock_acquire", str({"paths": []}))]["result"]["isError"]
    assert results[("no_such_tool", str({"paths": ["x.py"]}))]["result"]["isError"]


def test_a_burst_of_requests_is_answered_once_each_in_whole_lines(repo):
    """Requests written to the server's stdin in one go, lean and not (calls, a call
    with a progress token, a ping, tools/list, the cancellation of one call, a line that
    is not JSON-RPC), then one by one: every answer is one whole JSON line, every
    request but the cancelled one is answered exactly once, the cancelled one at most
    once (it may be done before the cancellation is read), and a last line that is not
    JSON-RPC ends nothing."""
    from mcp.types import LATEST_PROTOCOL_VERSION
    proc = subprocess.Popen([CLI, "-C", str(repo), "mcp"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    lines: list[bytes] = []

    def send(*messages: dict) -> None:
        proc.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in messages))
        proc.stdin.flush()

    def until(rid) -> None:
        while rid not in {json.loads(line).get("id") for line in lines}:
            line = proc.stdout.readline()
            assert line, "the server closed its stdout"
            lines.append(line)

    def call(rid, tool, **arguments) -> dict:
        return {"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                "params": {"name": tool, "arguments": arguments}}
    try:
        send({"jsonrpc": "2.0", "id": 0, "method": "initialize",
              "params": {"protocolVersion": LATEST_PROTOCOL_VERSION, "capabilities": {},
                         "clientInfo": {"name": "a burst", "version": "1"}}})
        until(0)
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        send(call(1, "register", provider="Claude", session_id="claude-burst"))
        until(1)
        burst = [call(2, "lock_check", paths=["a.py"]),
                 call(3, "lock_acquire", paths=["b.py"]),
                 {"jsonrpc": "2.0", "method": "notifications/cancelled",
                  "params": {"requestId": 3}},
                 {"jsonrpc": "2.0", "id": 4, "method": "ping"},
                 {"jsonrpc": "2.0", "id": 5, "method": "tools/list"},
                 {**call(6, "lock_acquire", paths=["c.py"]),
                  "params": {"name": "lock_acquire", "arguments": {"paths": ["c.py"]},
                             "_meta": {"progressToken": 6}}},
                 {"id": 10, "method": "ping"},  # no "jsonrpc": not JSON-RPC, unanswered
                 call("seven", "lock_check", paths=["c.py"])]
        send(*burst)
        for rid in (2, 4, 5, 6, "seven"):
            until(rid)
        for rid, message in enumerate((call(8, "lock_check", paths=["c.py"],
                                            session_id="claude-burst"),
                                       {"jsonrpc": "2.0", "id": 9, "method": "ping"}), 8):
            send(message)
            until(rid)
        send({"id": 11, "method": ["ping"]})  # not JSON-RPC, and alone: nothing behind it
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
    assert proc.returncode == 0  # the server read to the end of its input and stopped
    answers = [json.loads(line) for line in lines + proc.stdout.readlines()]
    ids = [a["id"] for a in answers]
    assert sorted(map(str, ids)) == sorted(map(str, [0, 1, 2, 4, 5, 6, "seven", 8, 9]
                                                + [3] * (3 in ids)))
    by_id = {a["id"]: a for a in answers}
    assert by_id[8]["result"]["structuredContent"]["paths"][0]["state"] == "locked-by-me"
    assert by_id[9]["result"] == {} and by_id[4]["result"] == {}
    assert not by_id[6]["result"]["isError"]


def test_the_lean_path_takes_only_plain_calls_of_an_initialized_session(repo):
    """What the lean path takes, line by line, on the server's own tools: nothing before
    the SDK answered initialize and the client sent notifications/initialized, nothing
    with _meta (a progress token), another field, a batch, a boolean id or another line
    waiting behind it, and nothing once a second initialize came."""
    from agent_registry import Registry
    from agent_registry.mcp.lean import LeanCalls
    from agent_registry.mcp.server import Service, build

    def request(rid, method, **params) -> str:
        return json.dumps({"jsonrpc": "2.0", "id": rid, "method": method,
                           **({"params": params} if params else {})}) + "\n"
    ping = request(1, "ping")
    check = request(2, "tools/call", name="lock_check", arguments={"paths": ["a.py"]})
    initialize = request(0, "initialize", protocolVersion="2025-06-18", capabilities={},
                         clientInfo={"name": "test", "version": "1"})
    initialized = '{"jsonrpc": "2.0", "method": "notifications/initialized"}\n'
    with Registry.open(str(repo)) as registry:
        service = Service(registry)
        lean = LeanCalls(build(service)._lowlevel_server, service.inline)

        async def taken(line: str, more_waiting: bool = False) -> dict | None:
            answer = await lean.take(line, more_waiting)
            return None if answer is None else json.loads(answer)

        async def script():
            assert await taken(ping) is None and await taken(check) is None
            assert await taken(initialize) is None
            assert await taken(check) is None  # the SDK has not answered initialize
            lean.said('{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-06-18"}}\n')
            assert await taken(check) is None  # no notifications/initialized yet
            assert await taken(initialized) is None
            assert (await taken(ping)) == {"jsonrpc": "2.0", "id": 1, "result": {}}
            answer = await taken(check)
            assert answer["id"] == 2 and not answer["result"]["isError"]
            assert answer["result"]["structuredContent"]["paths"][0]["state"] == "free"
            assert await taken(check, more_waiting=True) is None
            for left in ({"_meta": {"progressToken": 7}}, {"task": {}},
                         {"requestState": "x"}):
                params = {"name": "lock_check", "arguments": {"paths": ["a.py"]}, **left}
                assert await taken(request(3, "tools/call", **params)) is None, left
            assert await taken(json.dumps([json.loads(ping)]) + "\n") is None
            assert await taken(ping.replace('"id": 1', '"id": true')) is None
            assert await taken(request(4, "tools/list")) is None
            assert await taken(initialize.replace('"id": 0', '"id": 5')) is None
            assert await taken(check) is None  # a second handshake: the SDK's from now on
        anyio.run(script)
