"""`harness install`: Claude Code hooks fed the documented JSON, and protocol blocks."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from helpers import ROOT, git
from test_guard import agents, hold, open_registry  # noqa: F401  (fixture)

CLAUDE_ID = "3f1c2a9e-8b7d-4c11-9e0f-5a6b7c8d9e01"


def installed_command(repo: Path, event: str) -> str:
    settings = json.loads((repo / ".claude" / "settings.json").read_text())
    commands = [h["command"] for group in settings["hooks"][event] for h in group["hooks"]
                if "harness hook claude" in h["command"]]
    assert len(commands) == 1
    return commands[0]


def fire(repo: Path, event: str, payload: dict, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run the installed hook command the way Claude Code does: through a shell, with
    the event's JSON on stdin, in the project directory."""
    body = {"session_id": CLAUDE_ID, "transcript_path": "/tmp/transcript.jsonl",
            "cwd": str(repo), "hook_event_name": event, **payload}
    return subprocess.run(installed_command(repo, event), shell=True, cwd=repo,
                          input=json.dumps(body), capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=60)


def edit_event(path: str, tool: str = "Edit") -> dict:
    key = "notebook_path" if tool == "NotebookEdit" else "file_path"
    return {"tool_name": tool, "tool_use_id": "toolu_01", "permission_mode": "default",
            "tool_input": {key: path, "old_string": "a", "new_string": "b"}}


def test_install_merges_into_existing_settings_and_is_idempotent(repo, run):
    settings = repo / ".claude" / "settings.json"
    settings.parent.mkdir()
    mine = {"permissions": {"allow": ["Bash(npm test)"]},
            "hooks": {"PreToolUse": [{"matcher": "Bash",
                                      "hooks": [{"type": "command", "command": "./lint.sh"}]}]}}
    settings.write_text(json.dumps(mine))
    result = run("--json", "harness", "install", "claude", check_untouched=False)
    assert result.returncode == 0, result.stderr
    merged = json.loads(settings.read_text())
    assert merged["permissions"] == mine["permissions"]
    assert merged["hooks"]["PreToolUse"][0] == mine["hooks"]["PreToolUse"][0]
    ours = merged["hooks"]["PreToolUse"][1]
    assert ours["matcher"] == "Edit|Write|MultiEdit|NotebookEdit|Bash"
    assert set(merged["hooks"]) == {"PreToolUse", "PostToolUse", "PostToolUseFailure",
                                    "SessionStart", "UserPromptSubmit", "Stop", "SessionEnd"}
    assert run("harness", "install", "claude", "--auto-claim", check_untouched=False).returncode == 0
    again = json.loads(settings.read_text())
    assert len(again["hooks"]["PreToolUse"]) == 2 and len(again["hooks"]["SessionStart"]) == 1
    assert "--auto-claim" in again["hooks"]["PreToolUse"][1]["hooks"][0]["command"]
    assert "agent-registry:protocol:start" in (repo / "CLAUDE.md").read_text()


def test_invalid_settings_are_refused_and_left_alone(repo, run):
    settings = repo / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text("{not json")
    proc = run("harness", "install", "claude", check_untouched=False)
    assert proc.returncode == 2 and "not valid JSON" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert settings.read_text() == "{not json"
    assert not (repo / "CLAUDE.md").exists()


def test_session_lifecycle_through_the_installed_hooks(repo, run, agents, tmp_path):
    assert run("harness", "install", "claude", check_untouched=False).returncode == 0
    env_file = tmp_path / "claude-env"
    start = fire(repo, "SessionStart", {"source": "startup", "model": "claude-sonnet-4-5"},
                 env={"CLAUDE_ENV_FILE": str(env_file)})
    assert start.returncode == 0, start.stderr
    out = json.loads(start.stdout)["hookSpecificOutput"]
    sid = f"claude-{CLAUDE_ID}"
    assert out["hookEventName"] == "SessionStart" and sid in out["additionalContext"]
    assert env_file.read_text() == f"export AGENT_REGISTRY_SESSION={sid}\n"
    with open_registry(repo) as registry:
        session = registry.session(sid)
    assert session.live and session.provider == "Claude" and session.ai_version == "claude-sonnet-4-5"

    # another live session holds src/auth.py: the edit is denied, naming the owner
    hold(repo, "kimi-1", ["src/auth.py"], agents(), working_on="auth refactor")
    for tool, path in (("Edit", str(repo / "src" / "auth.py")), ("Write", "src/auth.py")):
        denied = fire(repo, "PreToolUse", edit_event(path, tool))
        assert denied.returncode == 0, denied.stderr
        decision = json.loads(denied.stdout)["hookSpecificOutput"]
        assert decision["hookEventName"] == "PreToolUse"
        assert decision["permissionDecision"] == "deny"
        assert "kimi-1" in decision["permissionDecisionReason"]
        assert "auth refactor" in decision["permissionDecisionReason"]
    # a free path, and a path outside the repository: no decision, normal flow
    for path in (str(repo / "README.md"), "/etc/hosts"):
        free = fire(repo, "PreToolUse", edit_event(path))
        assert free.returncode == 0 and free.stdout == "", free.stderr

    # Stop (end of a turn) renews the heartbeat; SessionEnd finishes and releases
    with open_registry(repo) as registry:
        registry.claim(sid, ["README.md"])
    def beats() -> int:  # heartbeat commits, on whichever registry ref the layout puts them
        return git(repo, "log", "--format=%s", "--branches=agent-registry*").count(
            f"heartbeat {sid} ")
    before = beats()
    assert fire(repo, "Stop", {"stop_hook_active": False}).returncode == 0
    assert beats() == before + 1
    end = fire(repo, "SessionEnd", {"reason": "prompt_input_exit"})
    assert end.returncode == 0, end.stderr
    with open_registry(repo) as registry:
        assert registry.session(sid).status == "Finished"
        assert registry.check(["README.md"])[0]["state"] == "free"

    # a resumed conversation whose session ended gets a fresh id, and keeps it
    again = fire(repo, "SessionStart", {"source": "resume"})
    new_sid = json.loads(again.stdout)["hookSpecificOutput"]["additionalContext"].split()[4]
    assert new_sid.startswith(sid + "+")
    with open_registry(repo) as registry:
        registry.claim(new_sid, ["docs/"])
    assert fire(repo, "PreToolUse", edit_event("docs/a.md")).stdout == ""


def test_auto_claim_claims_free_paths_and_denies_held_ones(repo, run, agents):
    assert run("harness", "install", "claude", "--auto-claim", check_untouched=False).returncode == 0
    assert fire(repo, "SessionStart", {"source": "startup"}).returncode == 0
    sid = f"claude-{CLAUDE_ID}"
    notebook = fire(repo, "PreToolUse", edit_event(str(repo / "nb.ipynb"), "NotebookEdit"))
    assert notebook.returncode == 0 and notebook.stdout == "", notebook.stderr
    with open_registry(repo) as registry:
        assert registry.check(["nb.ipynb"], sid=sid)[0]["state"] == "locked-by-me"
    # a new file whose name would be a bad glob is claimed as the name it is
    odd = fire(repo, "PreToolUse", edit_event(str(repo / "lib" / "[z-a].py"), "Write"))
    assert odd.returncode == 0 and odd.stdout == "", odd.stderr
    with open_registry(repo) as registry:
        assert registry.check([":(literal)lib/[z-a].py"], sid=sid)[0]["state"] == "locked-by-me"
    hold(repo, "kimi-1", ["src/"], agents())
    denied = json.loads(fire(repo, "PreToolUse", edit_event("src/auth.py")).stdout)
    assert denied["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert "kimi-1" in denied["hookSpecificOutput"]["permissionDecisionReason"]


def test_bad_hook_input_blocks_the_edit_and_is_non_blocking_elsewhere(repo, run):
    assert run("harness", "install", "claude", check_untouched=False).returncode == 0
    proc = subprocess.run(installed_command(repo, "PreToolUse"), shell=True, cwd=repo,
                          input="not json", capture_output=True, text=True)
    # the edit gate cannot decide: exit 2, which blocks the edit (fail closed)
    assert proc.returncode == 2 and proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1 and "not JSON" in proc.stderr
    # exit 1 elsewhere: Claude Code shows a non-blocking error and goes on
    proc = subprocess.run(installed_command(repo, "Stop"), shell=True, cwd=repo,
                          input="not json", capture_output=True, text=True)
    assert proc.returncode == 1 and proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1 and "not JSON" in proc.stderr


@pytest.mark.parametrize("name, file_name", [("codex", "AGENTS.md"), ("gemini", "GEMINI.md"),
                                             ("generic", "AGENTS.md")])
def test_protocol_block_is_merged_between_markers(repo, run, name, file_name):
    target = repo / file_name
    target.write_text("# Our rules\n\nUse tabs.\n")
    assert run("harness", "install", name, check_untouched=False).returncode == 0
    text = target.read_text()
    assert text.startswith("# Our rules\n\nUse tabs.\n")
    assert text.count("<!-- agent-registry:protocol:start -->") == 1
    for command in ("agent-registry wiki query", "agent-registry lock acquire",
                    "--session SID", "agent-registry end SID", "agent-registry inbox SID"):
        assert command in text
    # idempotent, and an edited block is replaced while what follows it stays
    target.write_text(text.replace("Claim", "Clam") + "\nMore of ours.\n")
    result = json.loads(run("--json", "harness", "install", name, check_untouched=False).stdout)
    assert result["changed"] is True
    assert target.read_text() == text + "\nMore of ours.\n"
    result = json.loads(run("--json", "harness", "install", name, check_untouched=False).stdout)
    assert result["changed"] is False


def test_auto_claim_that_cannot_write_denies_the_edit(repo, run):
    """The claim before an edit fails (the registry cannot be written): the edit is
    denied with why, not let through unclaimed."""
    assert run("harness", "install", "claude", "--auto-claim", check_untouched=False).returncode == 0
    assert fire(repo, "SessionStart", {"source": "startup"}).returncode == 0
    objects = repo / ".git" / "objects"
    if subprocess.run(["chattr", "+i", str(objects)], capture_output=True).returncode:
        pytest.skip("chattr +i is not supported here")
    try:
        proc = fire(repo, "PreToolUse", edit_event("src/new.py", "Write"))
    finally:
        subprocess.run(["chattr", "-i", str(objects)], check=True)
    assert proc.returncode == 0, proc.stderr
    decision = json.loads(proc.stdout)["hookSpecificOutput"]
    assert decision["permissionDecision"] == "deny"
    assert "could not claim src/new.py before the edit: cannot write to .git/objects" in \
        decision["permissionDecisionReason"]
