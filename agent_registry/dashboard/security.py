"""Who may talk to the dashboard.

- Bound to loopback (no access token): reads are open to this machine, but the Host
  header must name loopback, so a web page that rebinds its DNS name to 127.0.0.1 cannot
  read the registry through the visitor's browser.
- Bound elsewhere: every request needs the access token (header, ``Authorization:
  Bearer``, or the cookie set when the printed ``/?token=…`` link is opened), except
  ``/api/health``, which the port probe of a second ``dashboard`` command reads.
- Every mutating request must be a POST carrying the token in the ``X-Agent-Registry-Token``
  header (a cookie is not enough: a browser sends cookies cross-site) and must not come
  from another origin (``Origin`` / ``Sec-Fetch-Site``).  Without an access token the
  app makes up a per-process one for this, given to the page in a meta tag.
- A request body larger than ``MAX_BODY`` is refused with 413 before it is read: at once
  when ``Content-Length`` says so, else as soon as the streamed (chunked) body passes it.
"""
from __future__ import annotations

import json
import secrets
from urllib.parse import parse_qs

TOKEN_HEADER = "x-agent-registry-token"
TOKEN_COOKIE = "agent_registry_token"
LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1"}
OPEN_PATHS = {"/api/health"}
# The largest legitimate body (a force-release: a path and a reason) is a few KiB.
MAX_BODY = 1024 * 1024
SAFE_METHODS = {"GET", "HEAD"}

SECURITY_HEADERS = [
    (b"content-security-policy",
     b"default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
     b"connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; "
     b"form-action 'none'"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
]


def host_name(host_header: str) -> str:
    """The name part of a Host header: ``[::1]:8765`` -> ``::1``, ``a:80`` -> ``a``."""
    if host_header.startswith("["):
        return host_header[1:].split("]", 1)[0]
    return host_header.rsplit(":", 1)[0] if host_header.count(":") == 1 else host_header


class RequestGuard:
    """ASGI middleware applying the rules above to every HTTP request."""

    def __init__(self, app, *, access_token: str | None, post_token: str) -> None:
        self.app = app
        self.access_token = access_token
        self.post_token = post_token

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        refusal = self.refusal(scope, headers)
        if refusal:
            status, message = refusal
            return await _json_error(send, status, message)

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *SECURITY_HEADERS]}
            await send(message)
        await self.app(scope, receive, send_with_headers)

    def refusal(self, scope, headers: dict[str, str]) -> tuple[int, str] | None:
        host = headers.get("host", "")
        if self.access_token is None and host_name(host) not in LOOPBACK_HOSTS:
            return 421, f"this dashboard answers only to 127.0.0.1/localhost, not {host!r}"
        if self.access_token is not None and scope["path"] not in OPEN_PATHS \
                and not offers_token(scope, headers, self.access_token):
            return 401, "this dashboard needs its access token (open the link it printed)"
        if scope["method"] in SAFE_METHODS:
            return None
        if scope["method"] != "POST":
            return 405, "changes are made with POST only"
        if not same_token(headers.get(TOKEN_HEADER, ""), self.post_token):
            return 403, f"a change needs the {TOKEN_HEADER} header"
        origin = headers.get("origin")
        own = f"{scope.get('scheme', 'http')}://{host}"
        if origin is not None and origin != own:
            return 403, f"cross-origin request refused (from {origin})"
        if headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
            return 403, "cross-site request refused"
        return None


class BodyLimit:
    """ASGI middleware answering 413 to a request body over *limit* bytes, so nothing
    behind it (FastAPI reads a whole body before validating it) holds more in memory."""

    def __init__(self, app, *, limit: int = MAX_BODY) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isascii() and declared.isdigit() and int(declared) > self.limit:
            return await self.too_large(send)  # (the server refuses a malformed length)
        received, started, cut = 0, False, False

        async def counting_receive():
            nonlocal received, cut
            if cut:
                return {"type": "http.disconnect"}
            message = await receive()
            received += len(message.get("body", b""))
            if received > self.limit:
                # answer now (unless the app already did) and tell the app the client
                # left: the rest of the body is never read
                cut = True
                if not started:
                    await self.too_large(send)
                return {"type": "http.disconnect"}
            return message

        async def tracking_send(message) -> None:
            nonlocal started
            if cut and not started:
                return  # the 413 was the answer
            started = True
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except Exception:
            if not cut:
                raise  # after a cut, only the app's complaint about the lost body is dropped

    async def too_large(self, send) -> None:
        await _json_error(send, 413, f"request body over {self.limit} bytes")


def offers_token(scope, headers: dict[str, str], token: str) -> bool:
    """Whether the request carries *token* in a header, the cookie or the query."""
    offered = [headers.get(TOKEN_HEADER, "")]
    auth = headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        offered.append(auth[7:].strip())
    offered.append(cookie_value(headers.get("cookie", ""), TOKEN_COOKIE))
    offered += parse_qs(scope.get("query_string", b"").decode("latin-1")).get("token", [])
    return any(same_token(o, token) for o in offered if o)


def same_token(offered: str, expected: str) -> bool:
    # as bytes: compare_digest refuses str with non-ASCII characters
    return secrets.compare_digest(offered.encode(), expected.encode())


def cookie_value(header: str, name: str) -> str:
    for part in header.split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value
    return ""


async def _json_error(send, status: int, message: str) -> None:
    body = json.dumps({"error": {"code": status, "message": message}}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()), *SECURITY_HEADERS]})
    await send({"type": "http.response.body", "body": body})
