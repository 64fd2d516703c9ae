"""`--json` and `--quiet` may follow the command (agents type `status --json`): both
routes of the console script, click's and the click-free fast path, read them; after a
`--` they are arguments.  Real processes through the installed CLI."""
from __future__ import annotations

import json


def test_json_after_the_command_on_both_routes(repo, run):
    assert run("register", "s1", "--provider", "Kimi").returncode == 0
    acquired = run("lock", "acquire", "src/a.py", "--session", "s1", "--json")  # fast path
    assert acquired.returncode == 0, acquired.stderr
    assert json.loads(acquired.stdout)["locks"][0]["status"] == "acquired"
    checked = run("lock", "check", "src/a.py", "--json")
    assert json.loads(checked.stdout)["paths"][0]["owner"] == "s1"
    status = run("status", "--json")  # click
    assert status.returncode == 0, status.stderr
    assert [s["id"] for s in json.loads(status.stdout)["sessions"]] == ["s1"]
    quiet = run("lock", "acquire", "src/b.py", "--session", "s1", "--quiet")
    assert quiet.returncode == 0 and quiet.stdout == ""


def test_after_a_double_dash_they_are_arguments(repo, run):
    for sid in ("s1", "s2"):
        assert run("register", sid, "--provider", "Kimi").returncode == 0
    sent = run("send", "--from", "s1", "--to", "s2", "--", "--json")
    assert sent.returncode == 0, sent.stderr
    assert not sent.stdout.lstrip().startswith("{")  # the text answer: --json was the body
    inbox = json.loads(run("--json", "inbox", "s2").stdout)
    assert [m["body"] for m in inbox["messages"]] == ["--json"]


def test_the_short_quiet_goes_before_the_command_only(repo, run):
    """As README's command reference says: `-q` (like `-C`) is read before the command;
    after it, only the long `--quiet` is (a command's own short options stay its own)."""
    assert run("register", "s1", "--provider", "Kimi").returncode == 0
    before = run("-q", "status")
    assert before.returncode == 0 and before.stdout == ""
    after = run("status", "-q")
    assert after.returncode == 2 and "No such option '-q'" in after.stderr
