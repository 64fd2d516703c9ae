"""The click-free path for `lock acquire`, `lock check`, `lock heartbeat` and `status`
says exactly what the click commands say, and leaves everything unusual to click."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from agent_registry.cli.fast import parse

CLICK_MAIN = "import sys; from agent_registry.cli.main import main; sys.exit(main(sys.argv[1:]))"


def both(repo, *args: str, env: dict | None = None) -> tuple:
    """(exit, stdout, stderr) of the console script (hot path) and of the click CLI."""
    env = {**os.environ, **(env or {})}
    hot = subprocess.run(["agent-registry", *args], cwd=repo, capture_output=True, text=True,
                         env={**env, "PATH": os.path.dirname(sys.executable) + ":" + env["PATH"]})
    slow = subprocess.run([sys.executable, "-c", CLICK_MAIN, *args], cwd=repo,
                          capture_output=True, text=True, env=env)
    return (hot.returncode, hot.stdout, hot.stderr), (slow.returncode, slow.stdout, slow.stderr)


def _no_ages(part):
    """The two runs happen a moment apart: ages may differ by a second."""
    if not isinstance(part, str):
        return part
    part = re.sub(r"(?m)  \d+[smhd]$", "  N", part)  # status's AGE column
    return re.sub(r"\d+s ago", "Ns ago", re.sub(r'"age_seconds": \d+', '"age_seconds": N', part))


def test_hot_and_click_paths_agree(run, repo):
    run("register", "s1", "--provider", "Kimi", "--working-on", "auth")
    run("register", "s2", "--provider", "Claude", "--working-on", "ui")
    run("lock", "acquire", "src/auth.py", "--session", "s1")
    cases = [
        ("lock", "check", "src/auth.py", "README.md", "--session", "s2"),
        ("--json", "lock", "check", "src/auth.py", "--session=s1"),
        ("lock", "acquire", "src/auth.py", "--session", "s2"),  # refused: exit 1
        ("--json", "lock", "acquire", "src/auth.py", "--session", "s2"),
        ("lock", "acquire", "../outside", "--session", "s2"),  # bad input: exit 2
        ("-q", "lock", "check", "src/auth.py"),
        ("-C", "src", "lock", "check", "auth.py"),
        ("status",), ("status", "--all", "--provider", "kimi"), ("status", "--status=Stop"),
        ("lock", "heartbeat", "src/auth.py", "s1"), ("lock", "heartbeat", "--session", "s2"),
        ("lock", "heartbeat", "README.md", "--session", "s1"),  # not held: exit 1
    ]
    for args in cases:
        hot, slow = (tuple(_no_ages(part) for part in answer) for answer in both(repo, *args))
        assert hot == slow, args
    # claims that succeed: each path claimed once through each route, same answers
    hot, slow = both(repo, "--json", "lock", "acquire", "a.txt", "--ttl", "60", "--shared",
                     env={"AGENT_REGISTRY_SESSION": "s2"})
    assert hot[0] == slow[0] == 0
    assert json.loads(hot[1])["locks"][0]["status"] == "acquired"
    assert json.loads(slow[1])["locks"][0]["status"] == "renewed"


@pytest.mark.parametrize("argv", [
    ["lock", "acquire", "--help"], ["lock", "acquire"], ["lock", "acquire", "a", "--ttl", "x"],
    ["lock", "acquire", "a", "--bogus"], ["lock", "release", "a"], ["--version"],
    ["lock", "acquire", "a"],  # no session: click's error
    ["lock", "check", "--", "-a"], ["-x", "lock", "check", "a"],
])
def test_unusual_arguments_go_to_click(argv, monkeypatch):
    monkeypatch.delenv("AGENT_REGISTRY_SESSION", raising=False)
    assert parse(argv) is None


def test_the_hot_path_does_not_import_click(run, repo):
    run("register", "s1", "--provider", "Kimi", "--working-on", "auth")
    code = ("import sys; from agent_registry.cli.fast import parse, execute; "
            "code = execute(parse(['lock', 'acquire', 'src/auth.py', '--session', 's1'])); "
            "assert code == 0, code; "
            "print(sorted(m for m in ('click', 'ruamel', 'whoosh') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith("[]")
