"""Copilot CLI and Qwen Code as harnesses of their own (issue 33): their hooks run as the
real `agent-registry harness hook copilot|qwen EVENT` subprocess on the event JSON each
CLI sends (measured with Copilot CLI 1.0.102 and Qwen Code 0.24.4 from npm, driven
against a mock model: tests/e2e/test_harness_cli.py runs them whole), and their install,
uninstall, status and trust step through the real CLI in real repositories.

The shapes relied on:
- Copilot CLI, Claude-format hooks in ``.github/hooks/*.json``: ``tool_name`` is Claude's
  (``Edit`` for its ``edit`` and for ``apply_patch``, ``Write`` for ``create``, ``Bash``),
  the file is ``tool_input.path``; ``apply_patch``'s ``tool_input`` is the patch text
  itself; a deny is Claude's ``hookSpecificOutput``; context is read only at the top
  level (``{"additionalContext": …}``); trust is ``trustedFolders`` in
  ``~/.copilot/config.json``, which Copilot heads with ``//`` comment lines.
- Qwen Code, ``.qwen/settings.json``: Claude's event names, Gemini's tool ids
  (``write_file``, ``edit``, ``notebook_edit``, ``run_shell_command``) and Gemini's deny;
  UserPromptSubmit fires before every request of a turn (``prompt`` empty after a tool
  result); ``qwen -p`` fires no SessionEnd; folder trust is off unless
  ``security.folderTrust.enabled`` in ``~/.qwen/settings.json``.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import CLI
from test_guard import agents, open_registry  # noqa: F401  (fixture)
from test_harness_hooks import held, hook  # noqa: F401  (fixture)
from test_harness_install import cli, install, snapshot, toplevel

NATIVE = "5d6c0a7b-0d1c-462b-90ed-c42f2ea14982"


@pytest.fixture
def env(tmp_path) -> dict:
    """Copilot's and Qwen's homes under the isolated HOME (conftest isolates HOME)."""
    home = Path(os.environ["HOME"])
    return {"COPILOT_HOME": str(home / ".copilot"), "QWEN_HOME": str(home / ".qwen"),
            "PATH": f"{Path(CLI).parent}:/usr/bin:/bin"}


def event(repo: Path, name: str, **fields) -> dict:
    """What both CLIs send with every event (Claude Code's common fields)."""
    return {"hook_event_name": name, "session_id": NATIVE, "cwd": str(repo),
            "timestamp": "2026-12-04T18:47:00.601Z", **fields}


def copilot_deny(proc: subprocess.CompletedProcess) -> str | None:
    assert proc.returncode == 0, proc.stderr
    if not proc.stdout.strip():
        return None
    out = json.loads(proc.stdout)["hookSpecificOutput"]
    assert out["hookEventName"] == "PreToolUse" and out["permissionDecision"] == "deny"
    return out["permissionDecisionReason"]


def qwen_deny(proc: subprocess.CompletedProcess) -> str | None:
    assert proc.returncode == 0, proc.stderr
    if not proc.stdout.strip():
        return None
    answer = json.loads(proc.stdout)
    assert answer["decision"] == "deny"
    return answer["reason"]


def names_holder(reason: str | None, harness: str) -> bool:
    return bool(reason) and "src/auth.py" in reason and "kimi-1" in reason and \
        f"agent-registry send --to kimi-1 --from {harness}-{NATIVE} 'TEXT'" in reason


# -- Copilot CLI: the gate reads tool_input.path and the patch ---------------------------

@pytest.mark.parametrize("tool, extra", [("Edit", {"old_str": "a", "new_str": "b"}),
                                         ("Write", {"file_text": "x"})])
def test_copilot_edit_and_create_name_the_file_in_path(held, tool, extra):
    def call(rel: str) -> dict:
        return event(held, "PreToolUse", tool_name=tool,
                     tool_input={"path": str(held / rel), **extra})
    assert copilot_deny(hook(held, "copilot", "pre-tool-use", call("README.md"))) is None
    reason = copilot_deny(hook(held, "copilot", "pre-tool-use", call("src/auth.py")))
    assert names_holder(reason, "copilot"), reason


def test_claude_decision_reads_path_as_well_as_file_path(held):
    """A harness that sends Claude's tool names with the file in ``path`` (as Copilot CLI
    does) is gated by Claude's adapter too."""
    payload = {"session_id": NATIVE, "cwd": str(held), "hook_event_name": "PreToolUse",
               "tool_name": "Edit", "tool_input": {"path": str(held / "src/auth.py"),
                                                   "old_str": "a", "new_str": "b"}}
    reason = copilot_deny(hook(held, "claude", "pre-tool-use", payload))
    assert names_holder(reason, "claude"), reason


def test_copilot_apply_patch_reaches_the_gate_as_edit_with_the_patch_as_input(held):
    def patch(rel: str) -> dict:
        text = f"*** Begin Patch\n*** Update File: {rel}\n@@\n-a\n+b\n*** End Patch\n"
        return event(held, "PreToolUse", tool_name="Edit", tool_input=text)
    assert copilot_deny(hook(held, "copilot", "pre-tool-use", patch("README.md"))) is None
    reason = copilot_deny(hook(held, "copilot", "pre-tool-use", patch("src/auth.py")))
    assert names_holder(reason, "copilot"), reason
    # an edit whose input names no file is blocked (exit 2, one line), not let through
    odd = hook(held, "copilot", "pre-tool-use",
               event(held, "PreToolUse", tool_name="Edit", tool_input="rewrite auth.py"))
    assert odd.returncode == 2 and "names no file" in odd.stderr, odd.stderr


def test_copilot_shell_write_is_denied(held):
    payload = event(held, "PreToolUse", tool_name="Bash",
                    tool_input={"command": "echo x >> src/auth.py", "description": "d"})
    assert names_holder(copilot_deny(hook(held, "copilot", "pre-tool-use", payload)), "copilot")


def test_copilot_context_is_at_the_top_level(repo):
    start = hook(repo, "copilot", "session-start", event(repo, "SessionStart", source="new",
                                                         initial_prompt="Edit it."))
    assert start.returncode == 0, start.stderr
    answer = json.loads(start.stdout)
    assert list(answer) == ["additionalContext"], answer
    assert f"you are session copilot-{NATIVE}" in answer["additionalContext"]
    with open_registry(repo) as registry:
        (session,) = [s for s in registry.sessions() if s.id == f"copilot-{NATIVE}"]
    assert session.provider == "Copilot"


# -- Qwen Code: Gemini's tools and deny, Claude's events -------------------------------------

QWEN_EDITS = {"write_file": {"content": "x"}, "edit": {"old_string": "a", "new_string": "b"}}


@pytest.mark.parametrize("tool", sorted(QWEN_EDITS))
def test_qwen_edit_tools_are_denied_in_geminis_shape(held, tool):
    def call(rel: str) -> dict:
        return event(held, "PreToolUse", tool_name=tool,
                     tool_input={"file_path": str(held / rel), **QWEN_EDITS[tool]})
    assert qwen_deny(hook(held, "qwen", "pre-tool-use", call("README.md"))) is None
    assert names_holder(qwen_deny(hook(held, "qwen", "pre-tool-use", call("src/auth.py"))),
                        "qwen")


def test_qwen_notebook_and_shell_in_a_directory(held):
    notebook = event(held, "PreToolUse", tool_name="notebook_edit",
                     tool_input={"notebook_path": str(held / "src/auth.py"), "new_source": "x"})
    assert names_holder(qwen_deny(hook(held, "qwen", "pre-tool-use", notebook)), "qwen")
    shell = event(held, "PreToolUse", tool_name="run_shell_command",
                  tool_input={"command": "echo x > auth.py", "directory": "src"})
    assert names_holder(qwen_deny(hook(held, "qwen", "pre-tool-use", shell)), "qwen")


def start_qwen(repo: Path) -> str:
    proc = hook(repo, "qwen", "session-start", event(repo, "SessionStart", source="startup",
                                                     model="qwen3-coder-plus"))
    assert proc.returncode == 0, proc.stderr
    text = json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]
    assert f"you are session qwen-{NATIVE}" in text
    return f"qwen-{NATIVE}"


def status_of(repo: Path, sid: str) -> str:
    sessions = json.loads(cli(repo, {}, "--json", "status", "--all").stdout)["sessions"]
    return next(s["status"] for s in sessions if s["id"] == sid)


@pytest.fixture
def harness_process(agents):
    """A stand-in for the harness's process: (the command line options it runs with) ->
    its pid, as the hook's --pid $PPID names it."""
    return lambda *options: agents(sys.executable, "-c", "import time; time.sleep(600)",
                                   *options)


def test_qwen_headless_run_ends_its_session_at_its_last_stop(repo, harness_process):
    """`qwen -p` fires no SessionEnd: the Stop of a run started with -p finishes the
    session (when nothing keeps it going); an interactive run's Stop only renews it."""
    sid = start_qwen(repo)
    interactive = harness_process("-i", "go on")
    stop = event(repo, "Stop", stop_hook_active=False, last_assistant_message="done")
    proc = hook(repo, "qwen", "stop", stop, "--pid", str(interactive))
    assert proc.returncode == 0, proc.stderr
    assert status_of(repo, sid) == "OnWorking"
    headless = harness_process("-p", "Edit the files.", "-o", "json")
    proc = hook(repo, "qwen", "stop", stop, "--pid", str(headless))
    assert proc.returncode == 0, proc.stderr
    assert status_of(repo, sid) == "Finished"


def test_qwen_headless_run_kept_going_by_a_message_is_not_ended_yet(repo, harness_process):
    sid = start_qwen(repo)
    with open_registry(repo) as registry:
        registry.register("kimi-1", provider="Kimi", working_on="auth")
    cli(repo, {}, "send", "--from", "kimi-1", "--to", sid, "MSG-please-call-me")
    headless = harness_process("-p", "Edit the files.")
    stop = event(repo, "Stop", stop_hook_active=False, last_assistant_message="done")
    proc = hook(repo, "qwen", "stop", stop, "--pid", str(headless), "--wake", "1")
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout)
    assert answer["decision"] == "block" and "MSG-please-call-me" in answer["reason"]
    assert status_of(repo, sid) == "OnWorking"
    again = hook(repo, "qwen", "stop", {**stop, "stop_hook_active": True}, "--pid",
                 str(headless), "--wake", "1")
    assert again.returncode == 0 and not again.stdout.strip(), again.stdout
    assert status_of(repo, sid) == "Finished"


def test_qwen_prompt_checks_in_the_middle_of_a_turn_keep_the_wake_count(repo, harness_process):
    """Qwen fires UserPromptSubmit before each request after a tool result (prompt ""):
    that is not a new turn, so a wake spent in this turn stays spent."""
    sid = start_qwen(repo)
    with open_registry(repo) as registry:
        registry.register("kimi-1", provider="Kimi", working_on="auth")
    interactive = harness_process("-i", "go")
    stop = event(repo, "Stop", stop_hook_active=False, last_assistant_message="done")

    def send_and_stop(text: str) -> str | None:
        cli(repo, {}, "send", "--from", "kimi-1", "--to", sid, text)
        proc = hook(repo, "qwen", "stop", stop, "--pid", str(interactive), "--wake", "1")
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)["reason"] if proc.stdout.strip() else None

    assert "MSG-one" in send_and_stop("MSG-one")
    midturn = hook(repo, "qwen", "user-prompt-submit",
                   event(repo, "UserPromptSubmit", prompt=""))
    assert midturn.returncode == 0, midturn.stderr
    assert send_and_stop("MSG-two") is None  # the one wake of this turn is spent
    submitted = hook(repo, "qwen", "user-prompt-submit",
                     event(repo, "UserPromptSubmit", prompt="next", submitted_prompt="next"))
    assert submitted.returncode == 0, submitted.stderr
    assert "MSG-two" in json.loads(submitted.stdout)["hookSpecificOutput"]["additionalContext"]


# -- install, uninstall, status, trust ------------------------------------------------------

def test_copilot_install_writes_claude_format_hooks_in_github_hooks(repo, env):
    result = install(repo, env, "copilot", "--mcp")["harnesses"][0]
    assert sorted(result["files"]) == [".claude/skills/agent-registry/SKILL.md",
                                       ".github/hooks/agent-registry.json", ".mcp.json",
                                       "AGENTS.md"]
    data = json.loads((repo / ".github/hooks/agent-registry.json").read_text())
    assert data["version"] == 1
    assert {"SessionStart", "PreToolUse", "UserPromptSubmit", "Stop",
            "SessionEnd"} <= set(data["hooks"])
    (gate,) = data["hooks"]["PreToolUse"]
    assert gate["matcher"] == "Edit|Write|MultiEdit|NotebookEdit|Bash"
    assert "harness hook copilot pre-tool-use --pid $PPID" in gate["hooks"][0]["command"]
    start = data["hooks"]["SessionStart"][0]["hooks"][0]["command"]
    assert start.endswith("harness hook copilot session-start --pid $PPID")


def test_copilot_and_claude_share_mcp_json_and_the_skill_byte_for_byte(repo, env):
    before = snapshot(repo)
    install(repo, env, "claude", "--mcp")
    shared = {rel: (repo / rel).read_bytes()
              for rel in (".mcp.json", ".claude/skills/agent-registry/SKILL.md")}
    again = install(repo, env, "copilot", "--mcp")["harnesses"][0]
    assert not set(again["written"]) & set(shared), again["written"]
    assert {rel: (repo / rel).read_bytes() for rel in shared} == shared
    # the shared .mcp.json says nothing of which harness: each stays as installed
    states = {h["harness"]: h for h in json.loads(
        cli(repo, env, "--json", "harness", "status").stdout)["harnesses"]}
    assert states["copilot"]["installed"] and states["claude"]["installed"]
    cli(repo, env, "harness", "uninstall", "claude")
    assert {rel: (repo / rel).read_bytes() for rel in shared} == shared  # copilot's now
    cli(repo, env, "harness", "uninstall", "copilot")
    assert snapshot(repo) == before


def test_copilot_alone_does_not_make_claude_installed(repo, env):
    install(repo, env, "copilot", "--mcp")
    states = {h["harness"]: h for h in json.loads(
        cli(repo, env, "--json", "harness", "status").stdout)["harnesses"]}
    assert states["copilot"]["installed"] and states["copilot"]["mcp"] == "current"
    assert not states["claude"]["installed"], states["claude"]
    assert "claude: not installed" in cli(repo, env, "harness", "status").stdout


def test_qwen_install_writes_hooks_mcp_and_the_hooked_protocol(repo, env):
    before = snapshot(repo)
    (repo / ".qwen").mkdir()
    (repo / ".qwen/settings.json").write_text(json.dumps({"ui": {"theme": "Qwen Dark"}}))
    mine = snapshot(repo)
    result = install(repo, env, "qwen", "--mcp")["harnesses"][0]
    assert sorted(result["files"]) == [".agents/skills/agent-registry/SKILL.md",
                                       ".qwen/settings.json", "QWEN.md"]
    data = json.loads((repo / ".qwen/settings.json").read_text())
    assert data["ui"] == {"theme": "Qwen Dark"}
    assert {"SessionStart", "PreToolUse", "UserPromptSubmit", "Stop",
            "SessionEnd"} <= set(data["hooks"])
    assert data["hooks"]["PreToolUse"][0]["matcher"] == \
        "write_file|edit|notebook_edit|run_shell_command"
    stop = data["hooks"]["Stop"][0]["hooks"][0]["command"]
    assert stop.endswith("harness hook qwen stop --pid $PPID")  # tells a -p run
    server = data["mcpServers"]["agent-registry"]
    assert server["trust"] is True and server["args"][-1] == "mcp"
    text = (repo / "QWEN.md").read_text()
    assert "Your session is registered for you." in text  # the hooked reader's text
    assert install(repo, env, "qwen", "--mcp")["harnesses"][0]["written"] == []
    cli(repo, env, "harness", "uninstall", "qwen")
    assert snapshot(repo) == mine
    (repo / ".qwen/settings.json").unlink()
    (repo / ".qwen").rmdir()
    assert snapshot(repo) == before


def test_all_finds_copilot_and_qwen_on_path(repo, env, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("copilot", "qwen"):
        (bin_dir / name).write_text("#!/bin/sh\n")
        (bin_dir / name).chmod(0o755)
    found = {**env, "PATH": f"{bin_dir}:{env['PATH']}"}
    names = [h["harness"] for h in install(repo, found, "--all")["harnesses"]]
    assert names == ["copilot", "qwen"]


def states(repo: Path, env: dict) -> dict[str, dict]:
    return {h["harness"]: h for h in json.loads(
        cli(repo, env, "--json", "harness", "status").stdout)["harnesses"]}


def test_copilot_status_tells_untrusted_and_trust_keeps_the_config(repo, env):
    install(repo, env, "copilot")
    state = states(repo, env)["copilot"]
    assert state["trusted"] is False and "--trust" in state["trust_step"], state
    assert "NOT trusted" in cli(repo, env, "harness", "status").stdout
    config = Path(env["COPILOT_HOME"], "config.json")
    config.parent.mkdir(parents=True)
    head = "// User settings belong in settings.json.\n// This file is managed automatically.\n"
    config.write_text(head + json.dumps({"trustedFolders": ["/elsewhere"],
                                         "firstLaunchAt": "2026-12-04T18:47:07.986Z"}))
    granted = install(repo, env, "copilot", "--trust")["harnesses"][0]
    assert granted["trust_granted"] == [str(config)] and granted["trusted"] is True
    text = config.read_text()
    assert text.startswith(head)
    assert json.loads(text[len(head):]) == {
        "trustedFolders": ["/elsewhere", toplevel(repo)],
        "firstLaunchAt": "2026-12-04T18:47:07.986Z"}
    assert install(repo, env, "copilot", "--trust")["harnesses"][0]["trust_granted"] == []
    # a folder above the repository trusts it too (as Copilot reads it)
    config.write_text(json.dumps({"trustedFolders": [str(Path(toplevel(repo)).parent)]}))
    assert states(repo, env)["copilot"]["trusted"] is True


def test_qwen_is_trusted_unless_folder_trust_is_on(repo, env):
    install(repo, env, "qwen")
    assert states(repo, env)["qwen"]["trusted"] is True  # Qwen's default: no folder trust
    home = Path(env["QWEN_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    (home / "settings.json").write_text(json.dumps(
        {"security": {"folderTrust": {"enabled": True}}}))
    state = states(repo, env)["qwen"]
    assert state["trusted"] is False and "--trust" in state["trust_step"], state
    granted = install(repo, env, "qwen", "--trust")["harnesses"][0]
    assert granted["trusted"] is True
    assert json.loads((home / "trustedFolders.json").read_text()) == \
        {toplevel(repo): "TRUST_FOLDER"}


# -- the backstop: after a tool, in each harness's own answer -------------------------------

HOLDERS_WORK = "auth = 2  # kimi-1's uncommitted work\n"
# the shell tool's before- and after-tool events as each CLI sends them (Copilot names no
# call id and calls the result tool_result; Qwen names the call in both), for a command
# the gate cannot see into (the backstop notes the held files around it)
SHELL = {"copilot": ({"tool_name": "Bash",
                      "tool_input": {"command": "python3 tool.py", "description": "d"}},
                     {"tool_result": {"result_type": "success", "text_result_for_llm": ""}}),
         "qwen": ({"tool_name": "run_shell_command",
                   "tool_input": {"command": "python3 tool.py"},
                   "tool_use_id": "toolu_1796409891525_90fdd59jv", "tool_call_id": "call_3"},
                  {"tool_response": {"output": ""}})}


def told_after(harness: str, proc: subprocess.CompletedProcess, name: str) -> str:
    """What the after-tool answer hands the model: Copilot shows a PostToolUse block as
    `Tool result blocked: <reason>` and reads context only at the top level; Qwen appends
    hookSpecificOutput.additionalContext (named for its event) to the result and ignores a
    block (measured)."""
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout)
    if harness == "copilot" and name == "PostToolUse":
        assert answer["decision"] == "block"
        return answer["reason"]
    if harness == "copilot":
        assert list(answer) == ["additionalContext"], answer
        return answer["additionalContext"]
    out = answer["hookSpecificOutput"]
    assert out["hookEventName"] == name and "decision" not in answer
    return out["additionalContext"]


@pytest.mark.parametrize("name", ["PostToolUse", "PostToolUseFailure"])
@pytest.mark.parametrize("harness", ["copilot", "qwen"])
def test_a_held_file_a_tool_changed_is_put_back_and_told_in_the_harness_format(held, harness,
                                                                                name):
    (held / "src" / "auth.py").write_text(HOLDERS_WORK)
    start = hook(held, harness, "session-start", event(held, "SessionStart", source="startup"))
    assert start.returncode == 0, start.stderr
    before, result = SHELL[harness]
    pre = event(held, "PreToolUse", **before)
    assert (copilot_deny if harness == "copilot" else qwen_deny)(
        hook(held, harness, "pre-tool-use", pre)) is None
    (held / "src" / "auth.py").write_text("mine\n")  # a write no gate could read
    after = {**pre, "hook_event_name": name,
             **(result if name == "PostToolUse" else {"error": "exit 1"})}
    text = told_after(harness, hook(held, harness, "post-tool-use", after), name)
    assert (held / "src" / "auth.py").read_text() == HOLDERS_WORK
    assert names_holder(text, harness), text
