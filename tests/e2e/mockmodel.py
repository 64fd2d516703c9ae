"""A scripted model server on 127.0.0.1 for driving the real Claude Code, Codex and Gemini
CLI headless (tests/e2e/test_harness_cli.py).

It speaks just enough of three wire protocols, each streamed as server-sent events:

- Anthropic Messages: ``POST /v1/messages`` (Claude Code with ``ANTHROPIC_BASE_URL``);
  ``count_tokens`` and model listings get minimal answers;
- OpenAI Responses: ``POST /v1/responses`` (Codex with a ``model_provider`` whose
  ``wire_api = "responses"`` and ``base_url = http://127.0.0.1:PORT/v1``);
- Gemini: ``POST /v1beta/models/M:streamGenerateContent?alt=sse`` and ``:generateContent``
  (Gemini CLI with ``GOOGLE_GEMINI_BASE_URL``);
- OpenAI Chat Completions: ``POST /v1/chat/completions``, streamed (``chat.completion.chunk``
  events, then ``[DONE]``) or not (Qwen Code with ``OPENAI_BASE_URL``; Copilot CLI with
  ``COPILOT_PROVIDER_BASE_URL``, whose default wire API is "completions").

It plays a script: a list of turns, each a ``Tool(name, args)`` (the model calls a tool)
or a ``Text(text)`` (the model answers and the turn ends), or a callable given the
request record that returns one of those (a test can act in the middle of a run). Only a
*main* request (one offering tools: the agent's own loop) takes the next turn; side
requests (titles, routing, next-speaker checks, quota probes) get a short neutral answer.
When the script is exhausted every main request gets ``Text("done")``.

Every request is recorded (``server.requests``: path, kind, main, body) so a test can
assert what the model saw: ``server.saw("held by")`` searches the main requests' bodies.

    with MockModel([Tool("Write", {...}), Text("done")]) as model:
        env["ANTHROPIC_BASE_URL"] = model.url
        ...
        assert model.saw("claude-") ...

Run it by hand: ``python tests/e2e/mockmodel.py [PORT]`` serves an empty script and
prints each request's path and body to stderr (handy to look at what a CLI sends).
"""
from __future__ import annotations

import itertools
import json
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable
from urllib.parse import urlsplit


@dataclass
class Tool:
    """The model calls tool ``name`` with ``args`` (a dict).  For Codex's freeform
    ``apply_patch`` (a "custom" tool) pass ``args`` as the raw patch string."""
    name: str
    args: Any


@dataclass
class Text:
    """The model answers with ``text`` and ends its turn."""
    text: str


@dataclass
class Request:
    path: str
    kind: str  # anthropic | openai | gemini | chat | other
    main: bool
    body: Any
    headers: dict = field(default_factory=dict)
    at: float = field(default_factory=time.time)

    @property
    def text(self) -> str:
        return json.dumps(self.body, ensure_ascii=False)

    def tool_outputs(self) -> list[str]:
        """The results of the tool calls in this request's history, in call order, as
        text (Anthropic tool_result, OpenAI *_call_output, Gemini functionResponse,
        Chat Completions ``role: tool`` messages)."""
        body = self.body if isinstance(self.body, dict) else {}
        out: list[str] = []
        if self.kind == "anthropic":
            for msg in body.get("messages") or []:
                content = msg.get("content")
                for block in content if isinstance(content, list) else []:
                    if isinstance(block, dict) and block.get("type") == "tool_result":
                        inner = block.get("content")
                        if isinstance(inner, list):
                            inner = "\n".join(b.get("text", "") for b in inner
                                              if isinstance(b, dict))
                        out.append(str(inner))
        elif self.kind == "openai":
            for item in body.get("input") or []:
                kind = str(item.get("type", "")) if isinstance(item, dict) else ""
                if kind == "tool_search_output":
                    out.append(json.dumps(item.get("tools"), ensure_ascii=False))
                elif kind.endswith("_call_output"):
                    output = item.get("output")
                    out.append(output if isinstance(output, str)
                               else json.dumps(output, ensure_ascii=False))
        elif self.kind == "chat":
            for msg in body.get("messages") or []:
                if isinstance(msg, dict) and msg.get("role") == "tool":
                    content = msg.get("content")
                    if isinstance(content, list):
                        content = "\n".join(str(b.get("text", "")) for b in content
                                             if isinstance(b, dict))
                    out.append(str(content))
        elif self.kind == "gemini":
            for content in body.get("contents") or []:
                for part in content.get("parts") or []:
                    if isinstance(part, dict) and "functionResponse" in part:
                        out.append(json.dumps(part["functionResponse"].get("response"),
                                              ensure_ascii=False))
        return out


Turn = Tool | Text | Callable[[Request], "Tool | Text"]


class MockModel:
    def __init__(self, script: list[Turn] | None = None, port: int = 0,
                 log: bool = False) -> None:
        self.script: list[Turn] = list(script or [])
        self.requests: list[Request] = []
        self.log = log
        self.lock = threading.Lock()
        self._ids = itertools.count(1)
        self.errors: list[str] = []
        self.untooled_main = False  # a Chat Completions request without tools is main too
        handler = type("Handler", (_Handler,), {"model": self})
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    # -- life cycle
    def start(self) -> "MockModel":
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> "MockModel":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- what the model saw
    @property
    def main_requests(self) -> list[Request]:
        return [r for r in self.requests if r.main]

    def saw(self, needle: str, after: int = 0) -> bool:
        """Whether a main request (from the ``after``-th on) contains ``needle``."""
        return any(needle in r.text for r in self.main_requests[after:])

    def tool_outputs(self) -> list[str]:
        """The tool results the model was last shown (the whole history: each protocol
        resends it), in call order."""
        main = self.main_requests
        return main[-1].tool_outputs() if main else []

    def dump(self) -> str:
        return "\n".join(f"{r.kind} {r.path} main={r.main}: {r.text[:4000]}"
                         for r in self.requests)

    def next_id(self) -> int:
        return next(self._ids)

    # -- the script
    def next_turn(self, req: Request) -> Tool | Text:
        with self.lock:
            turn = self.script.pop(0) if self.script else Text("done")
        if callable(turn) and not isinstance(turn, (Tool, Text)):
            turn = turn(req)
        return turn


class _Handler(BaseHTTPRequestHandler):
    model: MockModel
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args) -> None:  # quiet
        pass

    # -- plumbing
    def _body(self) -> Any:
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        if self.headers.get("Content-Encoding", "") in ("gzip",):
            import gzip
            raw = gzip.decompress(raw)
        elif self.headers.get("Content-Encoding", "") == "zstd":
            return {"_undecoded": len(raw)}
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            return {"_raw": raw.decode("utf-8", "replace")}

    def _json(self, obj: Any, status: int = 200) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _sse(self, events: list[tuple[str | None, Any]], done: bool = False) -> None:
        chunks = []
        for name, data in events:
            head = f"event: {name}\n" if name else ""
            chunks.append(f"{head}data: {json.dumps(data)}\n\n")
        if done:  # Chat Completions ends its stream with a literal [DONE]
            chunks.append("data: [DONE]\n\n")
        payload = "".join(chunks).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)
        self.wfile.flush()

    def _record(self, kind: str, main: bool, body: Any) -> Request:
        req = Request(self.path, kind, main, body,
                      {k.lower(): v for k, v in self.headers.items()
                       if k.lower() not in ("authorization", "x-api-key", "x-goog-api-key")})
        with self.model.lock:
            self.model.requests.append(req)
        if self.model.log:
            print(f"--> {self.command} {self.path} main={main}\n{req.text[:20000]}\n",
                  file=sys.stderr, flush=True)
        return req

    # -- routes
    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        self._record("other", False, None)
        if path.endswith("/models") or "/models" in path:
            # Anthropic: {data: [...]}; OpenAI/Codex: {data: [...]} or {models: [...]}
            self._json({"data": [], "models": [], "object": "list", "has_more": False})
        else:
            self._json({})

    def do_HEAD(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        path = urlsplit(self.path).path
        body = self._body()
        try:
            if path.endswith("/messages/count_tokens"):
                self._record("anthropic", False, body)
                self._json({"input_tokens": 10})
            elif path.endswith("/messages"):
                self._anthropic(body)
            elif path.endswith("/responses"):
                self._openai(body)
            elif path.endswith("/chat/completions"):
                self._chat(body)
            elif ":countTokens" in path:
                self._record("gemini", False, body)
                self._json({"totalTokens": 10})
            elif ":streamGenerateContent" in path or ":generateContent" in path:
                self._gemini(body, stream=":streamGenerateContent" in path)
            else:
                self._record("other", False, body)
                self._json({})
        except (BrokenPipeError, ConnectionResetError):
            pass
        except Exception as exc:  # a bug here must show in the test, not hang the CLI
            self.model.errors.append(f"{path}: {exc!r}")
            try:
                self._json({"error": {"message": str(exc)}}, 500)
            except OSError:
                pass

    # -- Anthropic Messages
    def _anthropic(self, body: dict) -> None:
        main = bool(body.get("tools"))
        req = self._record("anthropic", main, body)
        turn = self.model.next_turn(req) if main else Text("ok")
        n = self.model.next_id()
        model = body.get("model", "mock")
        usage = {"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 0,
                 "cache_read_input_tokens": 0}
        if isinstance(turn, Tool):
            block = {"type": "tool_use", "id": f"toolu_mock{n:04d}", "name": turn.name,
                     "input": turn.args}
            stop = "tool_use"
        else:
            block = {"type": "text", "text": turn.text}
            stop = "end_turn"
        if not body.get("stream"):
            self._json({"id": f"msg_mock{n}", "type": "message", "role": "assistant",
                        "model": model, "content": [block], "stop_reason": stop,
                        "stop_sequence": None, "usage": usage})
            return
        start = dict(block)
        if isinstance(turn, Tool):
            start["input"] = {}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(turn.args)}
        else:
            start["text"] = ""
            delta = {"type": "text_delta", "text": turn.text}
        self._sse([
            ("message_start", {"type": "message_start", "message": {
                "id": f"msg_mock{n}", "type": "message", "role": "assistant", "model": model,
                "content": [], "stop_reason": None, "stop_sequence": None, "usage": usage}}),
            ("content_block_start", {"type": "content_block_start", "index": 0,
                                     "content_block": start}),
            ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                     "delta": delta}),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            ("message_delta", {"type": "message_delta",
                               "delta": {"stop_reason": stop, "stop_sequence": None},
                               "usage": {"output_tokens": 5}}),
            ("message_stop", {"type": "message_stop"}),
        ])

    # -- OpenAI Responses
    def _openai(self, body: dict) -> None:
        main = bool(body.get("tools"))
        req = self._record("openai", main, body)
        turn = self.model.next_turn(req) if main else Text("ok")
        n = self.model.next_id()
        rid = f"resp_mock{n}"
        if isinstance(turn, Tool):
            custom = {t.get("name"): t.get("type") for t in body.get("tools") or []
                      if isinstance(t, dict)}
            searching = turn.name == "tool_search" and any(
                isinstance(t, dict) and t.get("type") == "tool_search"
                for t in body.get("tools") or [])
            if searching:  # Codex's client-side search over deferred (MCP) tools
                item = {"type": "tool_search_call", "id": f"tsc_mock{n}", "status": "completed",
                        "call_id": f"call_mock{n}", "execution": "client",
                        "arguments": turn.args}
            elif custom.get(turn.name) == "custom" or isinstance(turn.args, str):
                item = {"type": "custom_tool_call", "id": f"ctc_mock{n}", "status": "completed",
                        "call_id": f"call_mock{n}", "name": turn.name,
                        "input": turn.args if isinstance(turn.args, str)
                        else turn.args.get("input", "")}
            else:
                item = {"type": "function_call", "id": f"fc_mock{n}", "status": "completed",
                        "call_id": f"call_mock{n}", "name": turn.name,
                        "arguments": json.dumps(turn.args)}
        else:
            item = {"type": "message", "id": f"msg_mock{n}", "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": turn.text, "annotations": []}]}
        usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
                 "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0},
                 "total_tokens": 15}
        resp = {"id": rid, "object": "response", "created_at": int(time.time()),
                "status": "in_progress", "model": body.get("model", "mock"), "output": []}
        done = dict(resp, status="completed", output=[item], usage=usage)
        if body.get("stream") is False:
            self._json(done)
            return
        self._sse([
            ("response.created", {"type": "response.created", "response": resp}),
            ("response.output_item.added", {"type": "response.output_item.added",
                                            "output_index": 0, "item": item}),
            ("response.output_item.done", {"type": "response.output_item.done",
                                           "output_index": 0, "item": item}),
            ("response.completed", {"type": "response.completed", "response": done}),
        ])

    # -- OpenAI Chat Completions
    def _chat(self, body: dict) -> None:
        # Aider offers no tools: its edits are in the text (MockModel.untooled_main)
        main = bool(body.get("tools")) or self.model.untooled_main
        req = self._record("chat", main, body)
        turn = self.model.next_turn(req) if main else Text("ok")
        n = self.model.next_id()
        cid, model = f"chatcmpl-mock{n}", body.get("model", "mock")
        created = int(time.time())
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        if isinstance(turn, Tool) and isinstance(turn.args, str):  # a freeform (custom) tool
            call = {"id": f"call_mock{n}", "type": "custom",
                    "custom": {"name": turn.name, "input": turn.args}}
        elif isinstance(turn, Tool):
            call = {"id": f"call_mock{n}", "type": "function",
                    "function": {"name": turn.name, "arguments": json.dumps(turn.args)}}
        if isinstance(turn, Tool):
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
            finish = "tool_calls"
            delta = {"role": "assistant", "content": None,
                     "tool_calls": [dict(call, index=0)]}
        else:
            message = {"role": "assistant", "content": turn.text}
            finish = "stop"
            delta = {"role": "assistant", "content": turn.text}
        if not body.get("stream"):
            self._json({"id": cid, "object": "chat.completion", "created": created,
                        "model": model, "choices": [{"index": 0, "message": message,
                                                     "finish_reason": finish}],
                        "usage": usage})
            return
        head = {"id": cid, "object": "chat.completion.chunk", "created": created,
                "model": model}
        events = [(None, dict(head, choices=[{"index": 0, "delta": delta,
                                              "finish_reason": None}])),
                  (None, dict(head, choices=[{"index": 0, "delta": {},
                                              "finish_reason": finish}]))]
        if (body.get("stream_options") or {}).get("include_usage"):
            events.append((None, dict(head, choices=[], usage=usage)))
        self._sse(events, done=True)

    # -- Gemini
    def _gemini(self, body: dict, stream: bool) -> None:
        tools = body.get("tools") or []
        main = any(t.get("functionDeclarations") for t in tools if isinstance(t, dict))
        req = self._record("gemini", main, body)
        if main:
            turn = self.model.next_turn(req)
        else:
            # routing / next-speaker / JSON side calls: an answer that parses as either
            turn = Text(json.dumps({"reasoning": "mock", "next_speaker": "user",
                                    "model_choice": "flash", "complexity_reasoning": "mock",
                                    "complexity_score": 1}))
        if isinstance(turn, Tool):
            part = {"functionCall": {"name": turn.name, "args": turn.args}}
        else:
            part = {"text": turn.text}
        chunk = {"candidates": [{"content": {"role": "model", "parts": [part]},
                                 "finishReason": "STOP", "index": 0}],
                 "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5,
                                   "totalTokenCount": 15},
                 "modelVersion": "mock"}
        if stream:
            self._sse([(None, chunk)])
        else:
            self._json(chunk)


def main() -> None:
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    model = MockModel([], port=port, log=True).start()
    print(model.url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        model.stop()


if __name__ == "__main__":
    main()
