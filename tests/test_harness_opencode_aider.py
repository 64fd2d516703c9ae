"""OpenCode whole, Cursor's shell gate, Aider's status (issue 33, item 2).

The OpenCode plugin `harness install opencode` writes runs here under the real node with a
stand-in for OpenCode's plugin context (its hooks called as OpenCode calls them: the same
names, inputs and outputs as OpenCode 1.18.33's bundled code), against a real repository
and the real installed hook command. (tests/e2e/test_harness_cli.py runs it inside the
real OpenCode.)
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import git, make_repo

CLI = str(Path(sys.executable).parent / "agent-registry")
NODE = shutil.which("node")

DRIVER = r"""
// a stand-in for OpenCode: load the plugin, call its hooks in the order given, report
import { spawnSync } from "node:child_process";
const [plugin, directory, steps] = process.argv.slice(2);
const mod = await import(plugin);
const prompts = [];
const client = { session: { promptAsync: async (o) => { prompts.push(o); return {}; } } };
const hooks = await mod.AgentRegistry({ client, directory, worktree: directory, project: {} });
const out = [];
for (const [name, input, output] of JSON.parse(steps)) {
  try {
    if (name === "event") await hooks.event({ event: input });
    else if (name === "dispose") await hooks.dispose();
    else if (name === "run") {  // a command run meanwhile (another session writes)
      const run = spawnSync(input[0], input.slice(1), { encoding: "utf8" });
      if (run.status !== 0) throw new Error("run failed: " + run.stderr);
    }
    else await hooks[name](input, output);
    out.push({ name, ok: true, output });
  } catch (error) {
    out.push({ name, ok: false, error: String(error.message || error) });
  }
}
console.log(JSON.stringify({ out, prompts }));
"""


def cli(repo: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([CLI, *args], cwd=repo, capture_output=True, text=True,
                          timeout=120, input=stdin)


@pytest.fixture
def held(repo, tmp_path):
    """The repository initialised, OpenCode installed (--wake 2), src/auth.py held by bob,
    a live session bound to a process that outlives the test's calls."""
    keeper = subprocess.Popen(["sleep", "300"])
    try:
        assert cli(repo, "init").returncode == 0
        assert cli(repo, "register", "bob", "--provider", "human", "--ai-version", "x",
                   "--working-on", "the auth rewrite", "--pid", str(keeper.pid)).returncode == 0
        assert cli(repo, "lock", "acquire", "src/auth.py", "--session", "bob").returncode == 0
        proc = cli(repo, "harness", "install", "opencode", "--wake", "2")
        assert proc.returncode == 0, proc.stderr
        yield repo
    finally:
        keeper.kill()
        keeper.wait()


def run_plugin(repo: Path, steps: list, directory: str | None = None, tmp=None) -> dict:
    if not NODE:
        pytest.skip("node not found")
    plugin_dir = repo / ".opencode" / "plugin"
    # an .mjs copy beside it: node reads it as a module, its repository is the same
    copy = plugin_dir / "agent-registry-under-test.mjs"
    copy.write_text((plugin_dir / "agent-registry.js").read_text())
    driver = repo.parent / "driver.mjs"
    driver.write_text(DRIVER)
    try:
        proc = subprocess.run([NODE, str(driver), str(copy), directory or str(repo),
                               json.dumps(steps)], capture_output=True, text=True, timeout=300,
                              cwd=directory or repo)
    finally:
        copy.unlink()
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def sessions(repo: Path) -> dict[str, dict]:
    data = json.loads(cli(repo, "--json", "status", "--all").stdout)["sessions"]
    return {s["id"]: s for s in data if s["id"].startswith("opencode-")}


def test_the_plugin_hands_the_model_its_session_gates_and_finishes_at_dispose(held):
    auth = str(held / "src" / "auth.py")
    steps = [
        ["event", {"type": "session.created", "properties": {"sessionID": "ses1",
                                                              "info": {"id": "ses1"}}}, None],
        ["experimental.chat.system.transform", {"sessionID": "ses1"}, {"system": ["base"]}],
        ["tool.execute.before", {"tool": "edit", "sessionID": "ses1", "callID": "c1"},
         {"args": {"filePath": auth, "oldString": "a", "newString": "b"}}],
        # relative to the bash tool's workdir
        ["tool.execute.before", {"tool": "bash", "sessionID": "ses1", "callID": "c2"},
         {"args": {"command": "echo x >> auth.py", "workdir": "src", "description": "x"}}],
        ["tool.execute.before", {"tool": "read", "sessionID": "ses1", "callID": "c3"},
         {"args": {"filePath": auth}}],
        ["dispose", None, None],
    ]
    result = run_plugin(held, steps)
    start, system, edit, bash, read, end = result["out"]
    assert start["ok"] and system["ok"], result
    told = system["output"]["system"]
    assert told[0] == "base" and "you are session opencode-ses1" in told[1], told
    assert "bob" in told[1] and "src/auth.py" in told[1]  # who holds what
    assert not edit["ok"] and "locked by bob" in edit["error"], edit
    assert not bash["ok"] and "locked by bob" in bash["error"], bash
    assert read["ok"], read
    assert sessions(held)["opencode-ses1"]["status"] == "Finished"


def test_a_message_reaches_the_model_at_its_next_request_and_wakes_it(held):
    """Sent while the model works: in the system prompt of its next request. Sent after its
    last request: when its text is complete, queued as a prompt of its own (the wake)."""
    send = [CLI, "-C", str(held), "send", "--from", "bob", "--to", "opencode-ses2"]
    text_done = ["experimental.text.complete",
                 {"sessionID": "ses2", "messageID": "m", "partID": "p"}, {"text": "done"}]
    result = run_plugin(held, [
        ["event", {"type": "session.created", "properties": {"sessionID": "ses2"}}, None],
        ["experimental.chat.system.transform", {"sessionID": "ses2"}, {"system": []}],
        text_done,  # nothing waits: no wake
        ["run", [*send, "MSG-one"], None],
        ["experimental.chat.system.transform", {"sessionID": "ses2"}, {"system": []}],
        text_done,  # MSG-one was told already: no wake
        ["run", [*send, "MSG-late"], None],
        text_done,
        ["dispose", None, None]])
    first, second = result["out"][1], result["out"][4]
    assert "MSG" not in json.dumps(first) and first["ok"], result
    assert "MSG-one" in "\n".join(second["output"]["system"]), result
    (prompt,) = result["prompts"]
    assert prompt["path"] == {"id": "ses2"}
    wake = prompt["body"]["parts"][0]["text"]
    assert wake.startswith("agent-registry: before you stop") and "MSG-late" in wake
    assert "MSG-one" not in wake


def test_a_resumed_session_is_registered_at_its_first_hook_bound_to_the_process(held):
    first = run_plugin(held, [
        ["event", {"type": "session.created", "properties": {"sessionID": "ses5"}}, None],
        ["dispose", None, None]])
    assert first["out"][0]["ok"]
    assert sessions(held)["opencode-ses5"]["status"] == "Finished"
    # `opencode run -s ses5`: no session.created; the gate's call registers it first
    auth = str(held / "src" / "auth.py")
    second = run_plugin(held, [
        ["tool.execute.before", {"tool": "write", "sessionID": "ses5", "callID": "c"},
         {"args": {"filePath": auth, "content": "x"}}],
        ["dispose", None, None]])
    assert not second["out"][0]["ok"] and "locked by bob" in second["out"][0]["error"]
    resumed = [s for sid, s in sessions(held).items() if sid.startswith("opencode-ses5+")]
    assert len(resumed) == 1 and resumed[0]["status"] == "Finished", sessions(held)
    assert resumed[0]["pid"] != sessions(held)["opencode-ses5"]["pid"]


def test_the_plugin_finds_its_repository_when_opencode_is_elsewhere(held, tmp_path):
    """OpenCode's directory outside the repository (a stale $PWD): the plugin's own
    repository is the one it guards."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    auth = str(held / "src" / "auth.py")
    result = run_plugin(held, [
        ["event", {"type": "session.created", "properties": {"sessionID": "ses6"}}, None],
        ["tool.execute.before", {"tool": "edit", "sessionID": "ses6", "callID": "c"},
         {"args": {"filePath": auth, "oldString": "a", "newString": "b"}}],
        ["dispose", None, None]], directory=str(elsewhere))
    start, edit, _ = result["out"]
    assert start["ok"] and not edit["ok"] and "locked by bob" in edit["error"], result
    assert sessions(held)["opencode-ses6"]["status"] == "Finished"


def test_the_opencode_options_are_read_back_from_the_plugin(repo):
    from agent_registry.harness import opencode
    from agent_registry.harness.install import options_of
    assert cli(repo, "harness", "install", "opencode", "--auto-claim", "--wake", "2",
               "--hold", "20").returncode == 0
    commands = opencode.installed_commands(str(repo))
    assert any(c.endswith("harness hook opencode pre-tool-use --auto-claim") for c in commands)
    assert any(c.endswith("harness hook opencode stop --wake 2 --hold 20") for c in commands)
    options = options_of(commands)
    assert (options.auto_claim, options.wake, options.hold) == (True, 2, 20)


# -- Cursor: the shell's own gate ---------------------------------------------------------------

def test_cursor_installs_the_shell_gate_and_both_gates_fail_closed(held):
    assert cli(held, "harness", "install", "cursor").returncode == 0
    hooks = json.loads((held / ".cursor" / "hooks.json").read_text())["hooks"]
    (shell,) = hooks["beforeShellExecution"]
    (tool,) = hooks["preToolUse"]
    assert shell["command"].endswith("harness hook cursor pre-tool-use; }") or \
        "harness hook cursor pre-tool-use" in shell["command"]
    assert shell["failClosed"] is True and tool["failClosed"] is True
    assert "failClosed" not in hooks["stop"][0]  # only a gate blocks
    # what beforeShellExecution sends: command and cwd at the top
    event = {"conversation_id": "c1", "workspace_roots": [str(held)],
             "command": "echo x > src/auth.py", "cwd": str(held),
             "hook_event_name": "beforeShellExecution"}
    proc = subprocess.run(["sh", "-c", shell["command"]], input=json.dumps(event),
                          capture_output=True, text=True, cwd=held, timeout=120)
    answer = json.loads(proc.stdout)
    assert answer["permission"] == "deny" and "locked by bob" in answer["agent_message"]


# -- Aider: harness run -------------------------------------------------------------------------

def test_harness_run_without_its_program_is_one_line_and_writes_nothing(tmp_path):
    """A reviewer's finding: `harness run aider` without Aider made the registry,
    registered a session, finished it and pushed, and only then failed (`system error:
    cannot run aider`, exit 1). Bad input now, before anything is written."""
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    repo = make_repo(tmp_path / "repo")
    git(repo, "remote", "add", "origin", str(remote))
    git(repo, "push", "-q", "origin", "HEAD:main")
    text = tmp_path / "aider.txt"
    text.write_text("not a program\n")
    refs = git(repo, "for-each-ref"), git(remote, "for-each-ref")
    for program in ("aider-not-installed", str(tmp_path / "nowhere" / "aider"), str(text)):
        proc = cli(repo, "harness", "run", "aider", "--executable", program, "--", "--help")
        assert proc.returncode == 2 and proc.stdout == "", (program, proc.stderr)
        assert proc.stderr.startswith(f"agent-registry: cannot run {program}: "), proc.stderr
        assert len(proc.stderr.splitlines()) == 1, proc.stderr
    assert (git(repo, "for-each-ref"), git(remote, "for-each-ref")) == refs
    assert not (repo / ".git" / "agent-registry").exists()


def test_aiders_edit_check_says_when_the_next_edit_goes_unnoted(held):
    """After each Aider edit its lint command checks and notes the held files again;
    when who holds what cannot be read (the registry branch names a commit that is not
    there) the note is not taken, and the model is told the next edit goes unchecked."""
    (held / ".git" / "refs" / "heads" / "agent-registry").write_text("1" * 40 + "\n")
    proc = subprocess.run([CLI, "harness", "after-edit", "README.md"], cwd=held,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "AGENT_REGISTRY_SESSION": "aider-1-2"})
    assert proc.returncode == 1, proc.stderr
    assert "backstop off until the next edit: the registry branch is unreadable" in proc.stdout
