"""A real smart-HTTP(S) git server on 127.0.0.1 for the tests: git's own CGI, ``git
http-backend``, behind a small threaded WSGI server, over TLS with a certificate made
for the test by ``openssl`` (the clients trust it through ``http.sslCAInfo``), so git
pushes and fetches through git-remote-https as it does with a forge."""
from __future__ import annotations

import os
import shutil
import socketserver
import ssl
import subprocess
import threading
from pathlib import Path
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server


class _Server(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _Quiet(WSGIRequestHandler):
    def log_message(self, *args) -> None:  # noqa: ANN002 (no access log on the test's stderr)
        pass


def _backend(root: Path):
    """The WSGI application: each request handed to ``git http-backend`` (a CGI: the
    request in its environment and stdin, the answer's headers then body on stdout)."""

    def app(environ, start_response):
        env = {k: v for k, v in environ.items() if isinstance(v, str)}
        env.update(GIT_PROJECT_ROOT=str(root), GIT_HTTP_EXPORT_ALL="1",
                   PATH=os.environ["PATH"], HOME=os.environ.get("HOME", str(root)))
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        out = subprocess.run(["git", "http-backend"], input=body, env=env,
                             capture_output=True, check=False).stdout
        head, _, rest = out.partition(b"\r\n\r\n")
        status, headers = "200 OK", []
        for line in head.decode("latin-1").split("\r\n"):
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = value.strip()
            elif name:
                headers.append((name, value.strip()))
        start_response(status, headers)
        return [rest]

    return app


def available() -> str | None:
    """Why the server cannot run here, None when it can."""
    exec_path = subprocess.run(["git", "--exec-path"], capture_output=True, text=True,
                               check=False).stdout.strip()
    if not os.path.exists(os.path.join(exec_path, "git-http-backend")):
        return f"no git-http-backend in {exec_path}"
    if not shutil.which("openssl"):
        return "no openssl command to make the test's certificate"
    return None


class SmartHTTPS:
    """Serves the bare repositories under *root* at ``https://127.0.0.1:PORT/NAME``
    (pushes allowed); ``ca``: the certificate a client trusts.  A context manager."""

    def __init__(self, root: Path) -> None:
        self.root, self.ca = root, root / "server-cert.pem"
        key = root / "server-key.pem"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days",
                        "1", "-subj", "/CN=127.0.0.1", "-addext",
                        "subjectAltName=IP:127.0.0.1", "-keyout", str(key),
                        "-out", str(self.ca)], check=True, capture_output=True)
        self.server = make_server("127.0.0.1", 0, _backend(root), _Server, _Quiet)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.ca, key)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> SmartHTTPS:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:  # noqa: ANN002
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()
