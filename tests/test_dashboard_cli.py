"""``agent-registry dashboard``: the port it picks, reuse of a running dashboard, the
token, --open, and bad input — real processes and real sockets on 127.0.0.1."""
from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from agent_registry.dashboard.serve import access_token, is_loopback
from helpers import CLI, make_repo
from test_dashboard_support import served


def get(url: str, headers: dict | None = None) -> tuple[int, dict]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_help_says_what_it_does(run):
    proc = run("dashboard", "--help")
    assert proc.returncode == 0
    assert "--host" in proc.stdout and "--port" in proc.stdout and "--open" in proc.stdout


def test_serves_the_api_and_reuses_itself_on_the_same_port(run, repo):
    run("register", "kimi-1", "--provider", "Kimi", "--pid", str(os.getpid()))
    with served(repo) as info:
        assert info["host"] == "127.0.0.1" and info["reused"] is False
        assert info["token_required"] is False and info["token"]
        status, sessions = get(info["url"] + "api/sessions")
        assert status == 200 and [s["id"] for s in sessions["sessions"]] == ["kimi-1"]

        again = run("--json", "dashboard", "--port", str(info["port"]))
        assert again.returncode == 0, again.stderr
        second = json.loads(again.stdout)
        assert second["reused"] is True and second["port"] == info["port"]
        assert "already serves this repository's dashboard" in again.stderr


def test_the_page_has_an_icon_and_favicon_ico_is_no_404(repo):
    """The icon the page names and the /favicon.ico every browser asks for are served
    (issue 37: the dashboard's favicon was a 404 in every browser console)."""
    import re
    with served(repo) as info:
        with urllib.request.urlopen(info["url"], timeout=10) as response:
            page = response.read().decode()
        icon = re.search(r'<link rel="icon" href="([^"]+)"', page)
        assert icon, page[:400]
        for path in (icon.group(1), "/favicon.ico"):
            with urllib.request.urlopen(info["url"] + path.lstrip("/"), timeout=10) as got:
                assert got.status == 200 and got.headers["content-type"] == "image/svg+xml"
                assert got.read().startswith(b"<svg")


def test_a_port_taken_by_something_else_is_skipped(run, repo):
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        with served(repo, "--port", str(port)) as info:
            assert info["port"] != port and info["reused"] is False
            assert f"port {port} is taken by something else" in " ".join(info["notes"])
            assert get(info["url"] + "api/health")[1]["common_dir"] == str(repo / ".git")


def test_another_repositorys_dashboard_is_not_reused(run, repo, tmp_path):
    other = make_repo(tmp_path / "other")
    with served(other) as theirs:
        with served(repo, "--port", str(theirs["port"])) as ours:
            assert ours["port"] != theirs["port"]
            assert "another repository's dashboard" in " ".join(ours["notes"])


@pytest.mark.parametrize("rounds", [3, pytest.param(10, marks=pytest.mark.slow)])
def test_ctrl_c_right_after_the_start_line_stops_at_once(repo, rounds):
    """The start line is printed before uvicorn listens for Ctrl-C: an interrupt in
    between stops the process at once (exit 130), with no traceback, every time in a row
    (it used to land inside an import or a logging lock and could hang the exit; make test
    tries three times, make test-slow ten)."""
    for _ in range(rounds):
        proc = subprocess.Popen([CLI, "--json", "dashboard", "--port", "0"], cwd=repo,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for line in proc.stdout:  # to the end of the start line's JSON
            if line.startswith("}"):
                break
        else:  # it ended before starting: say why, not spin on the closed pipe
            pytest.fail(f"the dashboard exited {proc.wait()}: {proc.stderr.read()}")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=15) == 130
        assert proc.stderr.read() == ""


def test_a_token_from_the_environment_guards_every_request(repo):
    with served(repo, env={"AGENT_REGISTRY_DASHBOARD_TOKEN": "t0ken-for-tests"}) as info:
        assert info["token_required"] is True
        assert info["url"].endswith("/?token=t0ken-for-tests")
        base = info["url"].split("?")[0]
        assert get(base + "api/sessions")[0] == 401
        assert get(base + "api/sessions", {"Authorization": "Bearer t0ken-for-tests"})[0] == 200
        status, health = get(base + "api/health")  # the port probe needs no token
        assert status == 200 and "common_dir" not in health


def test_binding_beyond_loopback_makes_up_a_token():
    assert access_token("127.0.0.1") is None and access_token("::1") is None
    assert access_token("localhost") is None
    assert len(access_token("0.0.0.0")) >= 24
    assert access_token("0.0.0.0") != access_token("0.0.0.0")
    assert is_loopback("127.0.0.2") and not is_loopback("192.168.1.10")


def test_open_starts_the_browser_on_the_page(repo, tmp_path):
    opened = tmp_path / "opened"
    browser = tmp_path / "browser"
    browser.write_text(f"#!/bin/sh\necho \"$1\" > {opened}\n")
    browser.chmod(browser.stat().st_mode | stat.S_IEXEC)
    with served(repo, "--open", env={"BROWSER": f"{browser} %s"}) as info:
        for _ in range(100):
            if opened.exists() and opened.read_text().strip():
                break
            time.sleep(0.1)
        assert opened.read_text().strip() == info["url"]


@pytest.mark.parametrize("args", [["--port", "70000"], ["--port", "x"], ["--host", "no-such-host.invalid"]])
def test_bad_input_is_one_line_and_exit_2(run, args):
    proc = run("dashboard", *args)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1


def test_outside_a_repository_is_refused(run, tmp_path):
    proc = run("-C", str(tmp_path), "dashboard", check_untouched=False)
    assert proc.returncode == 2
    assert "not a git repository" in proc.stderr
