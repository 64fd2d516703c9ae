"""Cursor's backstop, driven through the hook commands `harness install cursor` writes
into `.cursor/hooks.json`, with events shaped as Cursor documents them
(cursor.com/docs/hooks: `preToolUse`, `beforeShellExecution`, `postToolUse`,
`postToolUseFailure`; Cursor cannot run here, so this checks the documented schema, not
a running Cursor).  One shell call is gated by both `preToolUse` and
`beforeShellExecution`, noted once (at `preToolUse`, whose `tool_use_id` the after-events
carry) and checked once; a command the gate cannot read that changes a held file is put
back and the holder told; a call whose after-event never comes is told, not put back."""
from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from helpers import CLI
from test_guard import agents, hold, open_registry  # noqa: F401  (fixture)

NATIVE = "c0ffee00-1111-4222-8333-444455556666"
HOLDERS_WORK = "auth = 2  # kimi-1's uncommitted work\n"
WRITES_AUTH = "python3 -c \"open('src/auth.py', 'w').write('mine\\n')\""
# Cursor's tool_use_id may hold a newline (call id and tool call id): named by its digest
CALL_ID = "call_9Qx1\nctc_71b2"


def installed(repo: Path) -> dict[str, str]:
    """{Cursor event: the command `harness install cursor` wrote for it}."""
    proc = subprocess.run([CLI, "harness", "install", "cursor"], cwd=repo,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    hooks = json.loads((repo / ".cursor" / "hooks.json").read_text())["hooks"]
    return {event: entries[0]["command"] for event, entries in hooks.items()}


def fire(repo: Path, hooks: dict, event: str, payload: dict) -> subprocess.CompletedProcess:
    """Run the installed command of *event* as Cursor does: through the shell, from the
    project root, the event JSON on stdin, its project in the environment."""
    env = {k: v for k, v in os.environ.items()
           if k != "AGENT_REGISTRY_ALLOW" and not k.endswith("_PROJECT_DIR")}
    env.update(CURSOR_PROJECT_DIR=str(repo), CLAUDE_PROJECT_DIR=str(repo))
    common = {"conversation_id": NATIVE, "generation_id": "g1", "model": "m",
              "hook_event_name": event, "cursor_version": "2.4.0",
              "workspace_roots": [str(repo)], "user_email": None, "transcript_path": None}
    proc = subprocess.run(["sh", "-c", hooks[event]], cwd=repo,
                          input=json.dumps({**common, **payload}), capture_output=True,
                          text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc


def tool(repo: Path, command: str, call_id: str = CALL_ID) -> dict:
    """A Shell call's fields in preToolUse and its after-events."""
    return {"tool_name": "Shell", "tool_use_id": call_id, "cwd": str(repo),
            "tool_input": {"command": command, "working_directory": str(repo)}}


def gate(repo: Path, hooks: dict, command: str, call_id: str = CALL_ID,
         shell_first: bool = False) -> None:
    """Both of Cursor's gates of one shell call: preToolUse and beforeShellExecution, in
    either order (the docs do not say which runs first)."""
    both = [("preToolUse", tool(repo, command, call_id)),
            ("beforeShellExecution", {"command": command, "cwd": str(repo), "sandbox": False})]
    for event, payload in reversed(both) if shell_first else both:
        answer = json.loads(fire(repo, hooks, event, payload).stdout)
        assert "permission" not in answer, answer  # let through: Cursor's own flow


def after(repo: Path, hooks: dict, command: str, *, failed: bool = False,
          call_id: str = CALL_ID) -> subprocess.CompletedProcess:
    if failed:
        return fire(repo, hooks, "postToolUseFailure", {
            **tool(repo, command, call_id), "error_message": "Command failed with exit code 3",
            "failure_type": "error", "duration": 12, "is_interrupt": False})
    return fire(repo, hooks, "postToolUse", {
        **tool(repo, command, call_id), "duration": 12,
        "tool_output": json.dumps({"exitCode": 0, "stdout": ""})})


def notes(repo: Path) -> list[Path]:
    folder = repo / ".git" / "agent-registry" / "backstop"
    return sorted(folder.glob("*.note*")) if folder.exists() else []


def inbox(repo: Path, sid: str) -> list[dict]:
    proc = subprocess.run([CLI, "--json", "inbox", sid], cwd=repo, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return [m for m in json.loads(proc.stdout)["messages"] if m.get("subject") == "backstop"]


@pytest.fixture
def held(repo, agents):
    """*repo* where kimi-1, a live session, holds src/auth.py with uncommitted work in
    it, Cursor's hooks installed and the Cursor session started by its sessionStart."""
    hold(repo, "kimi-1", ["src/auth.py"], agents(), working_on="auth refactor")
    (repo / "src" / "auth.py").write_text(HOLDERS_WORK)
    hooks = installed(repo)
    fire(repo, hooks, "sessionStart", {"session_id": NATIVE, "is_background_agent": False,
                                       "composer_mode": "agent"})
    return repo, hooks


def test_the_hooks_file_names_the_after_events_paired_with_pre_tool_use(held):
    repo, hooks = held
    assert {"preToolUse", "beforeShellExecution", "postToolUse", "postToolUseFailure"} <= \
        set(hooks)
    assert "afterShellExecution" not in hooks  # no call id: it would check a call twice
    for event in ("postToolUse", "postToolUseFailure"):
        assert "harness hook cursor post-tool-use" in hooks[event]
    data = json.loads((repo / ".cursor" / "hooks.json").read_text())["hooks"]
    assert "failClosed" not in data["postToolUse"][0]  # only a gate blocks


@pytest.mark.parametrize("shell_first", [False, True])
def test_an_unreadable_command_changing_a_held_file_is_put_back_and_both_told(held,
                                                                              shell_first):
    repo, hooks = held
    gate(repo, hooks, WRITES_AUTH, shell_first=shell_first)
    assert len(notes(repo)) == 1  # one call, gated twice, noted once
    subprocess.run(["bash", "-c", WRITES_AUTH], cwd=repo, check=True)
    answer = json.loads(after(repo, hooks, WRITES_AUTH).stdout)
    assert (repo / "src" / "auth.py").read_text() == HOLDERS_WORK  # put back
    text = answer["additional_context"]  # postToolUse: after the tool result, to the model
    assert "src/auth.py" in text and "kimi-1" in text and "put back" in text
    assert f"--from cursor-{NATIVE}" in text
    [message] = inbox(repo, "kimi-1")
    assert f"cursor-{NATIVE}" in message["body"] and "src/auth.py" in message["body"]
    assert notes(repo) == []  # the one note taken by the one check


def test_a_failed_command_is_put_back_the_holder_told_the_agent_on_stderr(held):
    """postToolUseFailure (a non-zero exit) has no output fields: the holder's work is
    put back and the holder told; the agent's text goes to stderr, not to the model, and
    to the agent's own inbox (its next session start, or a wake, reads it)."""
    repo, hooks = held
    command = WRITES_AUTH + "; exit 3"
    gate(repo, hooks, command)
    subprocess.run(["bash", "-c", command], cwd=repo)
    proc = after(repo, hooks, command, failed=True)
    assert json.loads(proc.stdout) == {}
    assert "src/auth.py" in proc.stderr and "kimi-1" in proc.stderr
    assert (repo / "src" / "auth.py").read_text() == HOLDERS_WORK
    assert len(inbox(repo, "kimi-1")) == 1 and notes(repo) == []
    [mine] = inbox(repo, f"cursor-{NATIVE}")
    assert mine["subject"] == "backstop" and "src/auth.py" in mine["body"] \
        and "put back" in mine["body"], mine


def test_a_command_that_changes_nothing_says_nothing(held):
    repo, hooks = held
    gate(repo, hooks, "python3 -c pass")
    assert json.loads(after(repo, hooks, "python3 -c pass").stdout) == {}
    assert notes(repo) == [] and inbox(repo, "kimi-1") == []


def test_a_call_whose_after_event_never_comes_is_told_not_put_back(held):
    """Denied at Cursor's prompt, or interrupted, with no after-event: once its note is
    after.LEFTOVER old, the session's next call tells it, and nothing is put back over the
    holder's work since."""
    repo, hooks = held
    gate(repo, hooks, "python3 -c pass", call_id="call-a")
    later = "auth = 3  # ten more minutes of kimi-1's work\n"
    (repo / "src" / "auth.py").write_text(later)
    [note] = notes(repo)
    os.utime(note, (time.time() - 700,) * 2)
    gate(repo, hooks, "python3 -c pass", call_id="call-b")
    text = json.loads(after(repo, hooks, "python3 -c pass", call_id="call-b").stdout)[
        "additional_context"]
    assert "src/auth.py" in text and "nothing was put back" in text and "kimi-1" in text
    assert (repo / "src" / "auth.py").read_text() == later  # the holder's later work stays
    assert inbox(repo, "kimi-1") == []  # nothing put back: no holder message
    assert [n.name.endswith(".late") for n in notes(repo)] == [True]  # kept for its end


def test_an_unreadable_command_is_refused_at_pre_tool_use_while_the_registry_is_unreadable(
        held):
    """Who holds what cannot be read: preToolUse, where the note is taken, refuses a
    command the gate cannot see into (beforeShellExecution takes no note, so its answer
    stays Cursor's own flow); nothing is noted."""
    repo, hooks = held
    (repo / ".git" / "refs" / "heads" / "agent-registry").write_text("1" * 40 + "\n")
    answer = json.loads(fire(repo, hooks, "preToolUse", tool(repo, WRITES_AUTH)).stdout)
    assert answer["permission"] == "deny"
    assert "cannot tell whether this command writes a locked file" in answer["agent_message"]
    assert notes(repo) == []
