"""Helpers for the wiki tests (no tests here): put fixture files on the branch, and a
real HTTP server on 127.0.0.1 that speaks the OpenAI chat-completions API."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from agent_registry.core.operations import OPERATIONS, Outcome

FIXTURES = Path(__file__).parent / "fixtures" / "wiki_entries"
PUT_FILES = "test-put-files"


def _op_put_files(registry, view, op):
    for path, text in op["files"].items():
        view.write(path, None if text is None else text.encode())
    return Outcome({}, f"test: put {len(op['files'])} file(s)")


def put_files(registry, files: dict[str, str | None]) -> None:
    """Commit *files* (path -> text, None deletes) to the registry branch in one commit.
    The operation is known only while it is applied: importing this module leaves the
    production operation table alone."""
    registry.init()
    OPERATIONS[PUT_FILES] = _op_put_files
    try:
        registry.apply(registry.new_op(PUT_FILES, files=files))
    finally:
        del OPERATIONS[PUT_FILES]


def fixture_files() -> dict[str, str]:
    return {f"wiki/{p.name}": p.read_text() for p in sorted(FIXTURES.glob("*.md"))}


def completion(content: str) -> dict:
    return {"id": "chatcmpl-test", "object": "chat.completion", "created": 1_700_000_000,
            "model": "test-model",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}}


class FakeOpenAI:
    """Answers POST /v1/chat/completions from a script of replies, one per request:
    a string (the assistant's content), ("status", code), or "hang" (no answer until the
    server stops).  Every request body is kept in ``requests``."""

    def __init__(self) -> None:
        self.script: list = []
        self.requests: list[dict] = []
        self.release = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep pytest output clean
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append({"path": self.path, "body": body,
                                        "auth": self.headers.get("Authorization")})
                reply = server.script.pop(0) if server.script else ("status", 503)
                if reply == "hang":
                    server.release.wait(30)
                    return
                if isinstance(reply, tuple):
                    payload, code = b'{"error": {"message": "boom", "type": "server_error"}}', reply[1]
                else:
                    payload, code = json.dumps(completion(reply)).encode(), 200
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def env(self, timeout: float = 5) -> dict[str, str]:
        return {"AGENT_REGISTRY_LLM_BASE_URL": self.base_url,
                "AGENT_REGISTRY_LLM_MODEL": "test-model",
                "AGENT_REGISTRY_LLM_API_KEY": "sk-test",
                "AGENT_REGISTRY_LLM_TIMEOUT": str(timeout)}

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()
