"""Trust that cannot lapse in silence (issue 33, item 3), and ``--hold`` (item 4).

- A reinstall keeps the trust the harness had: after ``harness install codex --trust``,
  a reinstall that changes the gate command (``--auto-claim``) trusts the new hooks again
  (Codex trusts each hook by a hash of its command and skips a changed one in silence);
  a harness never trusted is not trusted by a reinstall.
- ``harness status`` and ``doctor`` fail (exit 1, not a warning) while an installed edit
  gate will not run, naming the one command that fixes it: Codex not trusting the
  project or the gate's hook, Gemini CLI's untrusted folder, Aider's git hook missing.
- The protocol texts never suggest a flag that turns the hooks off.
- ``--hold SECONDS`` on the end-of-turn hook: with nothing waiting, it listens that long
  for a message to the session and keeps the agent going with it.

Real git repositories and the real console script; HOME is isolated by tests/conftest.py
(Codex's and Gemini CLI's homes under it, as tests/test_harness_install.py does).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

CLI = str(Path(sys.executable).parent / "agent-registry")


@pytest.fixture
def env(tmp_path) -> dict:
    home = Path(os.environ["HOME"])
    return {"CODEX_HOME": str(home / ".codex"), "GEMINI_CLI_HOME": str(home),
            "PATH": f"{Path(CLI).parent}:/usr/bin:/bin"}


def cli(repo: Path, env: dict, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([CLI, *args], cwd=repo, capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=120, input=stdin)


def install(repo: Path, env: dict, *args: str) -> dict:
    proc = cli(repo, env, "--json", "harness", "install", *args)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["harnesses"][0]


def status(repo: Path, env: dict) -> tuple[int, dict[str, dict]]:
    proc = cli(repo, env, "--json", "harness", "status")
    return proc.returncode, {h["harness"]: h for h in json.loads(proc.stdout)["harnesses"]}


def doctor_harness(repo: Path, env: dict) -> tuple[int, dict]:
    proc = cli(repo, env, "--json", "doctor")
    report = json.loads(proc.stdout)
    return proc.returncode, next(c for c in report["checks"] if c["name"] == "harness")


def codex_hashes() -> dict:
    home = Path(os.environ["HOME"])
    config = tomllib.loads((home / ".codex" / "config.toml").read_text())
    return {k: v["trusted_hash"] for k, v in config["hooks"]["state"].items()}


# -- a reinstall keeps the trust ---------------------------------------------------------------

def test_a_reinstall_that_changes_the_codex_gate_trusts_it_again(repo, env):
    assert cli(repo, env, "init").returncode == 0
    first = install(repo, env, "codex", "--mcp", "--trust")
    assert first["trusted"] is True
    before = codex_hashes()
    again = install(repo, env, "codex", "--mcp", "--auto-claim")  # no --trust
    assert "--auto-claim" in (repo / ".codex" / "hooks.json").read_text()
    assert again["trusted"] is True and again["trust_granted"], again
    after = codex_hashes()
    gate = next(k for k in after if ":pre_tool_use:" in k)
    assert after[gate] != before[gate]  # the new gate's hash, trusted
    code, states = status(repo, env)
    assert code == 0 and states["codex"]["gate"] is None, states["codex"]


def test_a_reinstall_does_not_trust_what_was_never_trusted(repo, env):
    assert cli(repo, env, "init").returncode == 0
    install(repo, env, "codex", "--mcp")
    again = install(repo, env, "codex", "--mcp", "--auto-claim")
    assert again["trust_granted"] == [] and again["trusted"] is False
    assert not (Path(env["CODEX_HOME"]) / "config.toml").exists()


# -- status and doctor fail while a gate will not run --------------------------------------------

def test_status_and_doctor_fail_while_the_codex_gate_is_not_trusted(repo, env):
    assert cli(repo, env, "init").returncode == 0
    install(repo, env, "codex", "--mcp", "--wake", "2")
    code, states = status(repo, env)
    codex = states["codex"]
    assert code == 1 and codex["gate"] == "Codex loads no hooks of an untrusted project"
    assert codex["gate_fix"] == "agent-registry harness install codex --mcp --wake 2 --trust"
    text = cli(repo, env, "harness", "status")
    assert text.returncode == 1
    assert "FAIL: the edit gate will not run: Codex loads no hooks of an untrusted project; " \
           "fix: agent-registry harness install codex --mcp --wake 2 --trust" in text.stdout
    code, check = doctor_harness(repo, env)
    assert code == 1 and check["status"] == "fail", check
    assert check["fix"] == "agent-registry harness install codex --mcp --wake 2 --trust"
    # the one command named fixes it
    fix = cli(repo, env, *check["fix"].split()[1:])
    assert fix.returncode == 0, fix.stderr
    assert status(repo, env)[0] == 0
    assert doctor_harness(repo, env)[1]["status"] == "ok"
    # a gate hook changed since it was trusted (by hand: a reinstall trusts it again)
    hooks = repo / ".codex" / "hooks.json"
    hooks.write_text(hooks.read_text().replace("codex pre-tool-use", "codex pre-tool-use "
                                               "--auto-claim"))
    code, states = status(repo, env)
    assert code == 1 and "new or changed since it was trusted" in states["codex"]["gate"]
    assert states["codex"]["gate_fix"] == ("agent-registry harness install codex --mcp "
                                           "--auto-claim --wake 2 --trust")


def test_an_untrusted_gemini_folder_fails_and_the_claude_approval_only_warns(repo, env):
    assert cli(repo, env, "init").returncode == 0
    install(repo, env, "claude", "--mcp")  # an MCP server not approved: no gate involved
    code, check = doctor_harness(repo, env)
    assert check["status"] == "warn", check
    assert status(repo, env)[0] == 0
    install(repo, env, "gemini")
    code, states = status(repo, env)
    assert code == 1 and states["gemini"]["gate"] == "gemini reads no hooks of an untrusted folder"
    assert states["gemini"]["gate_fix"] == "agent-registry harness install gemini --trust"
    assert states["claude"]["gate"] is None
    code, check = doctor_harness(repo, env)
    assert code == 1 and check["status"] == "fail"
    assert check["fix"] == "agent-registry harness install gemini --trust"


def test_a_gone_hook_executable_fails_status_with_the_reinstall(repo, env, tmp_path):
    assert cli(repo, env, "init").returncode == 0
    install(repo, env, "claude", "--auto-claim")
    settings = repo / ".claude" / "settings.json"
    # the package removed from under the interpreter: its launcher is gone
    from agent_registry.harness.command import LAUNCHER
    gone = str(tmp_path / "old-site" / "agent_registry" / "harness" / "launch.py")
    settings.write_text(settings.read_text().replace(LAUNCHER, gone))
    code, states = status(repo, env)
    assert code == 1 and gone in states["claude"]["gate"]
    assert states["claude"]["executable"][0] == {
        "path": gone, "ok": False, "start": [str(Path(CLI).parent / "python"), "-I", "-S", gone]}
    assert states["claude"]["gate_fix"] == "agent-registry harness install claude --auto-claim"


# -- Aider: the git hook is its gate ---------------------------------------------------------

def test_aider_install_writes_the_git_hooks_and_status_says_the_commit_holds_it(repo, env):
    assert cli(repo, env, "init").returncode == 0
    result = install(repo, env, "aider")
    hook = repo / ".git" / "hooks" / "pre-commit"
    assert hook.is_file() and "agent-registry hook" in hook.read_text()
    assert any("installed the git hooks" in n for n in result["notes"]), result
    code, states = status(repo, env)
    aider = states["aider"]
    assert code == 0 and aider["git_hooks"] == "installed" and aider["gate"] is None
    assert aider["enforced_by"] == ("the pre-commit guard at its commits; run through harness "
                                    "run aider: its session and the backstop after each edit "
                                    "(no edit gate)")
    text = cli(repo, env, "harness", "status").stdout
    assert "aider: protocol current, config current" in text
    assert "enforced by the pre-commit guard at its commits; run through harness run aider" \
        in text
    # the hook removed: Aider's only gate is gone
    assert cli(repo, env, "hooks", "uninstall").returncode == 0
    code, states = status(repo, env)
    assert code == 1 and "pre-commit hook, Aider's only gate, is not installed" in \
        states["aider"]["gate"]
    assert states["aider"]["gate_fix"] == "agent-registry harness install aider"
    code, check = doctor_harness(repo, env)
    assert code == 1 and check["fixable"], check
    fixed = json.loads(cli(repo, env, "--json", "doctor", "--fix").stdout)
    assert "harness" in fixed["fixed"] and hook.is_file()


def test_aider_install_refuses_when_the_git_hooks_cannot_be_installed(repo, env):
    hooks = repo / ".git" / "hooks"
    hooks.mkdir(exist_ok=True)
    for name in ("pre-commit", "pre-commit.agent-registry-chained"):
        (hooks / name).write_text("#!/bin/sh\nexit 0\n")
    proc = cli(repo, env, "harness", "install", "aider")
    assert proc.returncode == 1, proc.stdout
    assert "Aider is held by the git pre-commit hook alone" in proc.stderr
    assert "nothing changed" in proc.stderr
    assert not (repo / ".aider.conf.yml").exists() and not (repo / "AGENTS.md").exists()


# -- the texts ----------------------------------------------------------------------------------

HOOKS_OFF = ("--skip-trust", "--no-verify", "--no-git-commit-verify", "core.hooksPath",
             "OPENCODE_DISABLE_PROJECT_CONFIG", "disableAllHooks")


def test_the_protocol_texts_suggest_no_flag_that_turns_the_hooks_off(repo, env):
    for harness in ("claude", "codex", "gemini", "cursor", "opencode", "aider"):
        install(repo, env, harness)
    texts = {p: p.read_text() for p in repo.rglob("*.md") if ".git" not in p.parts}
    texts.update({p: p.read_text() for p in Path(__file__).parents[1].joinpath(
        "templates", "harness").glob("*.md")})
    assert len(texts) > 4
    for path, text in texts.items():
        for flag in HOOKS_OFF:
            assert flag not in text, f"{path} mentions {flag}"


# -- --hold ---------------------------------------------------------------------------------------

def test_hold_is_written_into_the_end_of_turn_hook(repo, env):
    install(repo, env, "claude", "--hold", "45")
    settings = json.loads((repo / ".claude" / "settings.json").read_text())
    stop = settings["hooks"]["Stop"][0]["hooks"][0]["command"]
    assert stop.endswith("harness hook claude stop --hold 45")
    install(repo, env, "opencode", "--wake", "2", "--hold", "30")
    plugin = (repo / ".opencode" / "plugin" / "agent-registry.js").read_text()
    assert 'const STOP_ARGS = ["--wake", "2", "--hold", "30"];' in plugin
    _, states = status(repo, env)
    assert states["opencode"]["hooks"] == "current"  # the options read back from the plugin


def test_hold_keeps_the_agent_listening_for_a_message(repo, env):
    """The end-of-turn hook with --hold: the message sent while it listens is what it
    answers with (the sleep between looks sends it, so no clock is involved)."""
    from agent_registry.harness import hook
    assert cli(repo, env, "init").returncode == 0
    event = {"session_id": "s1", "cwd": str(repo)}
    start = hook.run("claude", "session-start", json.dumps(event), {}, pid=os.getpid())
    assert start.code == 0, start.stderr
    assert cli(repo, env, "register", "bob", "--provider", "human", "--ai-version", "x",
               "--working-on", "review", "--pid", str(os.getpid())).returncode == 0
    ctx = hook.adapter("claude").ctx(event, {})
    sent = []

    def sleep(seconds: float) -> None:  # the first pause: bob writes
        if not sent:
            proc = cli(repo, env, "send", "--from", "bob", "--to", "claude-s1", "HOLD-PING")
            assert proc.returncode == 0, proc.stderr
            sent.append(seconds)

    news = hook.hold_for(ctx, 600, sleep=sleep)
    assert sent and any("HOLD-PING" in line for line in news), news
    # through the command: told once, so the next turn end says nothing, after the hold
    out = cli(repo, env, "harness", "hook", "claude", "stop", "--hold", "1",
              stdin=json.dumps(event))
    assert out.returncode == 0 and out.stdout == "", out.stderr
    cli(repo, env, "send", "--from", "bob", "--to", "claude-s1", "SECOND-PING")
    out = cli(repo, env, "harness", "hook", "claude", "stop", "--hold", "30",
              stdin=json.dumps(event))
    answer = json.loads(out.stdout)
    assert answer["decision"] == "block" and "SECOND-PING" in answer["reason"], answer
