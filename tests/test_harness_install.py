"""``harness install|uninstall|status``, ``--trust`` and doctor's harness check, with the
real CLI in real git repositories (HOME, CODEX_HOME and GEMINI_CLI_HOME isolated).

Cursor and OpenCode cannot run here; their files are checked against the documented
schemas, and these are the facts relied on:

- Cursor ``.cursor/hooks.json`` (cursor.com/docs/agent/hooks): an object with ``version``
  1 and ``hooks``, an object from camelCase event names (``sessionStart``,
  ``preToolUse``, ``beforeSubmitPrompt``, ``stop``, ``sessionEnd`` among them) to lists of
  handlers, each an object with a string ``command`` (run through a shell, event JSON on
  stdin) and optionally ``matcher``; exit 2 from a ``preToolUse`` handler blocks.
- Cursor ``.cursor/mcp.json``: ``{"mcpServers": {name: {"command": str, "args": [str]}}}``.
- OpenCode ``opencode.json`` (opencode.ai/docs/config, /docs/mcp-servers):
  ``"$schema": "https://opencode.ai/config.json"``; ``mcp`` maps a name to a local server
  ``{"type": "local", "command": [argv strings], "enabled": bool}``.
- OpenCode plugins (opencode.ai/docs/plugins): every ``.js`` file in ``.opencode/plugin/``
  is an ES module whose exported async functions take ``{project, client, $, directory,
  worktree}`` and return hooks; ``"tool.execute.before": async (input, output)`` gets
  ``input.tool``, ``input.sessionID`` and ``output.args``, and a throw stops the tool. The
  plugin is checked with ``node --check`` and run by node with a stub context.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from agent_registry.harness.command import LAUNCHER
from helpers import CLI, git

ALL = ("claude", "codex", "gemini", "cursor", "opencode", "aider")
PYTHON = str(Path(CLI).absolute().parent / "python")  # what the hooks run: the venv's, as is


def mcp(harness: str) -> list[str]:
    """--mcp for a harness that has an MCP configuration (named alone, aider refuses it)."""
    return [] if harness == "aider" else ["--mcp"]

# what a person had in each file before installing: all of it must survive
BEFORE = {
    "claude": {
        ".claude/settings.json": json.dumps({
            "permissions": {"allow": ["Bash(npm test)"]},
            "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
                {"type": "command", "command": "./lint.sh"}]}]}}, indent=4),
        "CLAUDE.md": "# Our rules\n\nUse tabs.\n",
        ".mcp.json": json.dumps({"mcpServers": {"db": {"command": "db-mcp"}}}),
    },
    "codex": {
        ".codex/hooks.json": json.dumps({"hooks": {"Stop": [{"hooks": [
            {"type": "command", "command": "./notify.sh"}]}]}}),
        ".codex/config.toml": '# ours\nmodel = "o3"\n\n[mcp_servers.db]\ncommand = "db-mcp"\n',
        "AGENTS.md": "# Agents\n\nRun make test.\n",
    },
    "gemini": {
        ".gemini/settings.json": json.dumps({"ui": {"theme": "Dracula"},
                                             "mcpServers": {"db": {"command": "db-mcp"}}}),
        "GEMINI.md": "Be brief.\n",
    },
    "cursor": {
        ".cursor/hooks.json": json.dumps({"version": 1, "hooks": {"afterFileEdit": [
            {"command": "./format.sh"}]}}),
        ".cursor/mcp.json": json.dumps({"mcpServers": {"db": {"command": "db-mcp"}}}),
    },
    "opencode": {
        "opencode.json": json.dumps({"$schema": "https://opencode.ai/config.json",
                                     "theme": "opencode"}),
    },
    "aider": {
        ".aider.conf.yml": "# mine\nmodel: gpt-4o  # the model\nread: CONVENTIONS.md\n",
    },
}


@pytest.fixture
def env(tmp_path) -> dict:
    """The harnesses' own homes, isolated (conftest already isolates HOME)."""
    home = Path(os.environ["HOME"])
    return {"CODEX_HOME": str(home / ".codex"), "GEMINI_CLI_HOME": str(home),
            "PATH": f"{Path(CLI).parent}:/usr/bin:/bin"}


def cli(repo: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([CLI, *args], cwd=repo, capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=120)


def install(repo: Path, env: dict, *args: str) -> dict:
    proc = cli(repo, env, "--json", "harness", "install", *args)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def snapshot(repo: Path) -> dict[str, bytes]:
    """Every file and directory of the working tree (not .git), with its bytes."""
    out = {}
    for path in sorted(repo.rglob("*")):
        rel = path.relative_to(repo).as_posix()
        if rel == ".git" or rel.startswith(".git/"):
            continue
        out[rel] = path.read_bytes() if path.is_file() else b"<dir>"
    return out


def toplevel(repo: Path) -> str:
    return git(repo, "rev-parse", "--show-toplevel").strip()


def contains(old, new) -> bool:
    """Whether *new* keeps all of *old*: every key of an object, a list's items first."""
    if isinstance(old, dict):
        return isinstance(new, dict) and all(k in new and contains(v, new[k])
                                             for k, v in old.items())
    if isinstance(old, list):
        return isinstance(new, list) and len(new) >= len(old) and all(
            contains(a, b) for a, b in zip(old, new))
    return old == new


def write_before(repo: Path, harness: str) -> None:
    for rel, text in BEFORE[harness].items():
        path = repo / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


# -- every harness: merged, idempotent, restored -------------------------------------------

@pytest.mark.parametrize("harness", ALL)
def test_install_merges_is_byte_identical_again_and_uninstall_restores(repo, env, harness):
    write_before(repo, harness)
    before = snapshot(repo)
    first = install(repo, env, harness, *mcp(harness))["harnesses"][0]
    assert first["harness"] == harness and first["written"], first
    after = snapshot(repo)
    for rel, text in BEFORE[harness].items():  # the person's content is all still there
        new = after[rel].decode()
        if rel.endswith(".json"):
            assert contains(json.loads(text), json.loads(new)), rel
        elif rel.endswith(".yml"):
            from ruamel.yaml import YAML
            config = YAML(typ="safe").load(new)
            assert config["model"] == "gpt-4o" and config["read"][0] == "CONVENTIONS.md"
            assert "# the model" in new and new.startswith("# mine\n")
        elif rel.endswith(".md"):
            assert new.startswith(text) and "<!-- agent-registry:protocol:start -->" in new
        else:
            assert new.startswith(text), rel
    again = install(repo, env, harness, *mcp(harness))["harnesses"][0]
    assert again["written"] == [] and again["changed"] is False
    assert snapshot(repo) == after, "a second install changed bytes"
    assert cli(repo, env, "harness", "install", harness, *mcp(harness)).stdout.startswith(
        f"{harness}: already up to date")
    gone = json.loads(cli(repo, env, "--json", "harness", "uninstall", harness).stdout)
    assert gone["harnesses"][0]["changed"] == [] and gone["harnesses"][0]["kept"] == []
    assert snapshot(repo) == before, "uninstall did not restore every byte"
    assert not (repo / ".git" / "agent-registry" / "harness" / f"{harness}.json").exists()


def test_every_harness_at_once_and_back_leaves_the_tree_as_it_was(repo, env):
    for harness in ALL:
        write_before(repo, harness)
    (repo / "AGENTS.md").write_text("# Agents\n")
    before = snapshot(repo)
    for harness in ALL:
        install(repo, env, harness, *mcp(harness), "--auto-claim", "--wake")
    after = snapshot(repo)
    for harness in ALL:  # installing one again changes none of the others' shared files
        assert install(repo, env, harness, *mcp(harness), "--auto-claim",
                       "--wake")["harnesses"][0]["written"] == []
    assert snapshot(repo) == after
    # uninstalling codex keeps AGENTS.md and the .agents skill for the others
    codex = json.loads(cli(repo, env, "--json", "harness", "uninstall", "codex").stdout)
    assert set(codex["harnesses"][0]["kept"]) == {"AGENTS.md",
                                                  ".agents/skills/agent-registry/SKILL.md"}
    assert "agent-registry:protocol:start" in (repo / "AGENTS.md").read_text()
    assert (repo / ".codex" / "hooks.json").read_text() == BEFORE["codex"][".codex/hooks.json"]
    assert cli(repo, env, "harness", "uninstall", "--all").returncode == 0
    assert snapshot(repo) == before


def test_files_that_did_not_exist_are_deleted_with_the_directories_made_for_them(repo, env):
    before = snapshot(repo)
    for harness in ALL:
        install(repo, env, harness, *mcp(harness))
    made = set(snapshot(repo)) - set(before)
    assert {".claude", ".codex", ".gemini", ".cursor", ".opencode", ".agents",
            ".opencode/plugin/agent-registry.js", "opencode.json", ".aider.conf.yml",
            "CLAUDE.md", "GEMINI.md", "AGENTS.md"} <= made
    assert cli(repo, env, "harness", "uninstall", "--all").returncode == 0
    assert snapshot(repo) == before


def test_a_file_edited_after_install_keeps_the_edits_and_loses_our_parts(repo, env):
    write_before(repo, "gemini")
    (repo / ".codex").mkdir()
    (repo / ".codex" / "config.toml").write_text('model = "o3"\n')
    install(repo, env, "gemini", "--mcp")
    install(repo, env, "codex", "--mcp")
    settings = repo / ".gemini" / "settings.json"
    settings.write_text(settings.read_text().replace("{", '{"mine": 1,', 1))
    gemini_md = repo / "GEMINI.md"
    gemini_md.write_text(gemini_md.read_text() + "More of mine.\n")
    config = repo / ".codex" / "config.toml"
    config.write_text(config.read_text() + '\n[profiles.fast]\nmodel = "o4-mini"\n')
    skill = repo / ".agents/skills/agent-registry/SKILL.md"
    skill.write_text(skill.read_text() + "my note\n")
    proc = cli(repo, env, "--json", "harness", "uninstall", "gemini")
    gemini = json.loads(proc.stdout)["harnesses"][0]
    assert sorted(gemini["unmerged"]) == [".gemini/settings.json", "GEMINI.md"]
    assert gemini["kept"] == [".agents/skills/agent-registry/SKILL.md"]  # codex's too
    assert json.loads(settings.read_text()) == {"mine": 1, **json.loads(
        BEFORE["gemini"][".gemini/settings.json"])}
    assert gemini_md.read_text() == BEFORE["gemini"]["GEMINI.md"] + "More of mine.\n"
    codex = json.loads(cli(repo, env, "--json", "harness", "uninstall", "codex").stdout)
    codex = codex["harnesses"][0]
    assert codex["unmerged"] == [".codex/config.toml"]
    assert codex["changed"] == [".agents/skills/agent-registry/SKILL.md"]  # ours alone: left
    assert tomllib.loads(config.read_text()) == {"model": "o3",
                                                 "profiles": {"fast": {"model": "o4-mini"}}}
    assert skill.read_text().endswith("my note\n")
    assert not (repo / ".codex" / "hooks.json").exists()


def test_a_file_that_cannot_be_merged_refuses_the_whole_install(repo, env):
    home = Path(os.environ["HOME"])
    (home / ".codex").mkdir()  # found: planned first, and not written either
    (home / ".gemini").mkdir()
    (repo / ".gemini").mkdir()
    (repo / ".gemini" / "settings.json").write_text("{not json")
    before = snapshot(repo)
    proc = cli(repo, env, "harness", "install", "--all")
    assert proc.returncode == 2 and "not valid JSON" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert snapshot(repo) == before
    assert not (repo / ".git" / "agent-registry" / "harness").exists()


def test_all_installs_what_this_machine_has_and_the_repository_configures(repo, env):
    home = Path(os.environ["HOME"])
    (home / ".codex").mkdir()   # a Codex user
    (home / ".gemini").mkdir()  # a Gemini CLI user
    install(repo, env, "cursor")  # configured here already
    names = [h["harness"] for h in install(repo, env, "--all")["harnesses"]]
    assert names == ["codex", "gemini", "cursor"]
    assert cli(repo, env, "harness", "install").returncode == 2  # a name or --all
    assert cli(repo, env, "harness", "install", "claude", "--all").returncode == 2
    refused = cli(repo, env, "harness", "install", "aider", "--mcp")
    assert refused.returncode == 2 and "aider has no MCP configuration" in refused.stderr


# -- what each harness's files say ------------------------------------------------------------

GATES = {"claude": (".claude/settings.json", "PreToolUse"),
         "codex": (".codex/hooks.json", "PreToolUse"),
         "gemini": (".gemini/settings.json", "BeforeTool"),
         "cursor": (".cursor/hooks.json", "preToolUse")}


def gate_command(repo: Path, harness: str) -> str:
    """*harness*'s installed gate command."""
    rel, event = GATES[harness]
    entry = json.loads((repo / rel).read_text())["hooks"][event][-1]
    return entry["command"] if harness == "cursor" else entry["hooks"][0]["command"]


def test_hooks_call_this_installation_by_absolute_path_with_gate_matchers(repo, env):
    for harness in ("claude", "codex", "gemini", "cursor"):
        install(repo, env, harness)
    exe = f"{PYTHON} -I -S {LAUNCHER}"  # the interpreter without site, the launcher
    claude = json.loads((repo / ".claude/settings.json").read_text())["hooks"]
    assert claude["PreToolUse"][0]["matcher"] == "Edit|Write|MultiEdit|NotebookEdit|Bash"
    assert claude["SessionStart"][0]["hooks"][0]["command"] == \
        f"{exe} harness hook claude session-start --pid $PPID"
    codex = json.loads((repo / ".codex/hooks.json").read_text())
    assert set(codex) == {"hooks"}  # Codex refuses any other root key
    assert codex["hooks"]["PreToolUse"][0]["matcher"] == "apply_patch|Edit|Write|Bash"
    assert set(codex["hooks"]) == {"SessionStart", "PreToolUse", "PostToolUse",
                                   "UserPromptSubmit", "Stop", "SessionEnd"}
    gemini = json.loads((repo / ".gemini/settings.json").read_text())["hooks"]
    assert gemini["BeforeTool"][0]["matcher"] == "write_file|replace|run_shell_command"
    assert set(gemini) == {"SessionStart", "BeforeTool", "AfterTool", "BeforeAgent",
                           "AfterAgent", "SessionEnd"}
    for harness in GATES:
        command = gate_command(repo, harness)
        assert f"{exe} harness hook {harness} pre-tool-use" in command
        assert ("--pid $PPID" in command) == (harness != "cursor")
    # from this editable install (the package in the checkout, click in the venv's
    # site-packages, no site run): the gate answers, and a usage error reaches click
    event = {"session_id": "s1", "cwd": str(repo), "tool_name": "Write",
             "tool_input": {"file_path": str(repo / "src/free.py")}}
    clean = {k: v for k, v in os.environ.items() if k != "AGENT_REGISTRY_ALLOW"}
    proc = subprocess.run(["sh", "-c", gate_command(repo, "claude")], input=json.dumps(event),
                          capture_output=True, text=True, cwd=repo, env=clean, timeout=120)
    assert proc.returncode == 0 and "deny" not in proc.stdout, proc.stderr
    proc = subprocess.run([PYTHON, "-I", "-S", LAUNCHER, "harness", "hook", "claude",
                           "no-such-event"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "no-such-event" in proc.stderr, proc.stderr


def test_options_reach_the_hooks(repo, env):
    install(repo, env, "claude", "--auto-claim", "--wake", "5")
    hooks = json.loads((repo / ".claude/settings.json").read_text())["hooks"]
    assert "--auto-claim" in hooks["PreToolUse"][0]["hooks"][0]["command"]
    assert hooks["Stop"][0]["hooks"][0]["command"].endswith("harness hook claude stop --wake 5")
    install(repo, env, "claude", "--wake")
    hooks = json.loads((repo / ".claude/settings.json").read_text())["hooks"]
    assert hooks["Stop"][0]["hooks"][0]["command"].endswith("stop --wake 3")
    assert "--auto-claim" not in hooks["PreToolUse"][0]["hooks"][0]["command"]
    assert len(hooks["PreToolUse"]) == 1  # replaced in place, never added twice


def test_a_negative_wake_names_wake_and_its_range(repo, env):
    """`--wake -1` (or `--wake=-1`) is a bad value of --wake, said in one line with its
    range, exit 2, nothing written; never click's "No such option '-1'".  The same for
    the hook the install writes (`harness hook H stop --wake N`, N >= 0)."""
    before = snapshot(repo)
    for args, value, low in [(("install", "claude", "--wake", "-1"), "-1", 1),
                             (("install", "claude", "--wake=-1"), "-1", 1),
                             (("install", "--all", "--wake", "-3", "--mcp"), "-3", 1),
                             (("hook", "claude", "stop", "--wake", "-1"), "-1", 0),
                             (("hook", "claude", "stop", "--wake=-2"), "-2", 0)]:
        proc = cli(repo, env, "harness", *args)
        assert (proc.returncode, proc.stdout) == (2, ""), (args, proc.stderr)
        assert proc.stderr == (f"agent-registry harness {args[0]}: Invalid value for '--wake': "
                               f"{value} is not in the range x>={low}. (see --help)\n"), args
        assert snapshot(repo) == before, args


def test_cursor_and_opencode_files_follow_the_documented_schemas(repo, env):
    install(repo, env, "cursor", "--mcp")
    install(repo, env, "opencode", "--mcp")
    hooks = json.loads((repo / ".cursor/hooks.json").read_text())
    assert set(hooks) == {"version", "hooks"} and hooks["version"] == 1
    assert set(hooks["hooks"]) == {"sessionStart", "preToolUse", "beforeShellExecution",
                                   "postToolUse", "postToolUseFailure",
                                   "beforeSubmitPrompt", "stop", "sessionEnd"}
    for handlers in hooks["hooks"].values():
        assert isinstance(handlers, list)
        for handler in handlers:
            assert set(handler) <= {"command", "matcher", "timeout", "failClosed"}
            assert isinstance(handler["command"], str)
    servers = json.loads((repo / ".cursor/mcp.json").read_text())["mcpServers"]
    entry = servers["agent-registry"]
    assert set(entry) == {"command", "args"} and os.path.isabs(entry["command"])
    assert entry["args"] == ["-C", toplevel(repo), "mcp"]
    config = json.loads((repo / "opencode.json").read_text())
    assert config["$schema"] == "https://opencode.ai/config.json"
    local = config["mcp"]["agent-registry"]
    assert local == {"type": "local", "command": [entry["command"], "-C", toplevel(repo), "mcp"],
                     "enabled": True}
    plugin = repo / ".opencode/plugin/agent-registry.js"
    if shutil.which("node"):
        check = subprocess.run(["node", "--check", str(plugin)], capture_output=True, text=True)
        assert check.returncode == 0, check.stderr
    assert "export const AgentRegistry = async" in plugin.read_text()
    assert '"tool.execute.before": async (input, output)' in plugin.read_text()


def test_aider_verifies_commits_and_reads_the_protocol(repo, env):
    from ruamel.yaml import YAML
    install(repo, env, "aider")
    config = YAML(typ="safe").load((repo / ".aider.conf.yml").read_text())
    assert config == {"git-commit-verify": True, "read": ["AGENTS.md"]}
    assert "agent-registry:protocol:start" in (repo / "AGENTS.md").read_text()


# -- the gate fails closed ----------------------------------------------------------------------

@pytest.mark.parametrize("harness", ["claude", "codex", "gemini", "cursor"])
def test_the_gate_blocks_with_one_repair_line_when_the_executable_is_gone(repo, env, tmp_path,
                                                                         harness):
    """The installation renamed (its interpreter gone), its package removed (the
    launcher gone), or an interpreter that cannot import it: the edit is blocked with
    exit 2 and one line naming the command and the repair."""
    install(repo, env, harness)
    event = json.dumps({"session_id": "s1", "cwd": str(repo), "tool_name": "Write",
                        "tool_input": {"file_path": str(repo / "src/auth.py")}})
    clean = {k: v for k, v in os.environ.items() if k != "AGENT_REGISTRY_ALLOW"}
    gone = str(tmp_path / "venv-removed" / "bin" / "python")
    launcher = tmp_path / "site-packages" / "agent_registry" / "harness" / "launch.py"
    for python, script in ((gone, LAUNCHER), (PYTHON, str(launcher))):
        command = gate_command(repo, harness).replace(PYTHON, python) \
            .replace(LAUNCHER, script)
        proc = subprocess.run(["sh", "-c", command], input=event, capture_output=True,
                              text=True, cwd=repo, env=clean)
        assert proc.returncode == 2 and proc.stdout == ""
        assert proc.stderr.splitlines() == [
            f"agent-registry: the edit gate could not run ({python} {script}, exit 1); "
            f"repair: agent-registry harness install {harness}, or AGENT_REGISTRY_ALLOW=1"]
        allowed = subprocess.run(["sh", "-c", command], input=event, capture_output=True,
                                 text=True, cwd=repo, env={**clean, "AGENT_REGISTRY_ALLOW": "1"})
        assert allowed.returncode == 0
    # a launcher whose package is not beside it any more (a copy left behind)
    launcher.parent.mkdir(parents=True)
    launcher.write_text(Path(LAUNCHER).read_text())
    proc = subprocess.run(["sh", "-c", command], input=event, capture_output=True, text=True,
                          cwd=repo, env=clean)
    assert proc.returncode == 2 and "repair: agent-registry harness install" in proc.stderr
    assert "ModuleNotFoundError: No module named 'agent_registry" in proc.stderr
    # an interpreter that runs but cannot import agent_registry blocks the same way
    broken = tmp_path / "broken" / "python"
    broken.parent.mkdir()
    broken.write_text("#!/bin/sh\necho \"ModuleNotFoundError: No module named "
                      "'agent_registry'\" >&2\nexit 1\n")
    broken.chmod(0o755)
    proc = subprocess.run(["sh", "-c", gate_command(repo, harness).replace(PYTHON, str(broken))],
                          input=event, capture_output=True, text=True, cwd=repo, env=clean)
    assert proc.returncode == 2 and "repair: agent-registry harness install" in proc.stderr


@pytest.mark.skipif(not shutil.which("node"), reason="node is not installed")
def test_the_opencode_plugin_throws_when_the_hook_is_gone(repo, env, tmp_path):
    install(repo, env, "opencode")
    plugin = repo / ".opencode/plugin/agent-registry.js"
    gone = str(tmp_path / "gone" / "python")
    plugin.write_text(plugin.read_text().replace(PYTHON, gone))
    script = (f"import {{ AgentRegistry }} from {json.dumps(plugin.as_uri())};\n"
              "const hooks = await AgentRegistry({ directory: process.argv[1] });\n"
              "try {\n"
              "  await hooks['tool.execute.before']({ tool: 'write', sessionID: 's1' },"
              " { args: { filePath: 'src/auth.py' } });\n"
              "  console.log('allowed');\n"
              "} catch (e) { console.log('thrown: ' + e.message); }\n")
    clean = {k: v for k, v in os.environ.items() if k != "AGENT_REGISTRY_ALLOW"}
    run = lambda extra: subprocess.run(  # noqa: E731
        ["node", "--input-type=module", "-e", script, str(repo)], capture_output=True,
        text=True, env={**clean, **extra}, timeout=60)
    proc = run({})
    assert proc.stdout.startswith(f"thrown: agent-registry: the edit gate could not run "
                                  f"({gone} -I -S {LAUNCHER}, ENOENT: {gone}); repair: "
                                  "agent-registry harness install opencode"), proc.stdout
    assert run({"AGENT_REGISTRY_ALLOW": "1"}).stdout == "allowed\n"
    # the package removed from under the interpreter: the launcher is gone
    launcher = str(tmp_path / "old-site" / "agent_registry" / "harness" / "launch.py")
    plugin.write_text(plugin.read_text().replace(gone, PYTHON).replace(LAUNCHER, launcher))
    proc = run({})
    assert proc.stdout.startswith(f"thrown: agent-registry: the edit gate could not run "
                                  f"({PYTHON} -I -S {launcher}, ENOENT: {launcher}); repair: "
                                  "agent-registry harness install opencode"), proc.stdout


# -- status, trust, doctor ------------------------------------------------------------------

def status(repo: Path, env: dict) -> dict[str, dict]:
    proc = cli(repo, env, "--json", "harness", "status")
    states = {h["harness"]: h for h in json.loads(proc.stdout)["harnesses"]}
    # exit 1 exactly when an installed edit gate will not run
    assert proc.returncode == (1 if any(h["gate"] for h in states.values()) else 0), proc.stderr
    return states


def test_status_and_trust_under_an_isolated_home(repo, env):
    home = Path(os.environ["HOME"])
    for harness in ("claude", "codex", "gemini"):
        result = install(repo, env, harness, "--mcp")["harnesses"][0]
        assert result["trusted"] is False and result["trust_step"]
    states = status(repo, env)
    assert states["cursor"]["installed"] is False
    for harness in ("claude", "codex", "gemini"):
        state = states[harness]
        assert (state["hooks"], state["mcp"], state["skill"], state["protocol"]) == \
            ("current",) * 4, state
        assert state["trusted"] is False and state["executable"] == [
            {"path": PYTHON, "ok": True, "start": [PYTHON, "-I", "-S", LAUNCHER]}]
    text = cli(repo, env, "harness", "install", "gemini").stdout
    assert "to do: trust this folder when Gemini CLI asks" in text

    for harness in ("claude", "codex", "gemini"):
        granted = install(repo, env, harness, "--mcp", "--trust")["harnesses"][0]
        assert granted["trusted"] is True and granted["trust_step"] is None, granted
    top = toplevel(repo)
    local = json.loads((repo / ".claude/settings.local.json").read_text())
    assert local == {"enabledMcpjsonServers": ["agent-registry"]}
    folders = json.loads((home / ".gemini" / "trustedFolders.json").read_text())
    assert folders == {top: "TRUST_FOLDER"}
    config = tomllib.loads((home / ".codex" / "config.toml").read_text())
    assert config["projects"][top] == {"trust_level": "trusted"}
    hashes = config["hooks"]["state"]
    assert sorted(hashes) == sorted(f"{top}/.codex/hooks.json:{event}:0:0" for event in (
        "session_start", "pre_tool_use", "post_tool_use", "user_prompt_submit", "stop",
        "session_end"))
    assert all(re.fullmatch(r"sha256:[0-9a-f]{64}", v["trusted_hash"]) for v in hashes.values())
    assert all(s["trusted"] for name, s in status(repo, env).items()
               if name in ("claude", "codex", "gemini"))
    # trusting again writes nothing; a reinstall that changes a hook trusts it again
    # (tests/test_harness_trust.py); one changed by hand is no longer trusted
    again = install(repo, env, "codex", "--mcp", "--trust")["harnesses"][0]
    assert again["trust_granted"] == [] and again["written"] == []
    hooks = repo / ".codex" / "hooks.json"
    hooks.write_text(hooks.read_text().replace("codex stop", "codex stop --wake 1"))
    codex = status(repo, env)["codex"]
    assert codex["trusted"] is False and "/hooks" in codex["trust_step"]
    # uninstall leaves the trust a person granted in their home
    cli(repo, env, "harness", "uninstall", "--all")
    assert json.loads((home / ".gemini" / "trustedFolders.json").read_text()) == folders
    assert not (repo / ".claude").exists()


def test_hooks_of_an_older_install_are_stale_and_a_reinstall_keeps_codex_trust(repo, env):
    """Hooks an older install wrote (they started the console script, before the
    interpreter ran harness/launch.py without site) still run, and status calls them
    stale; reinstalled, they start the launcher, and the trust Codex had for the old ones
    is granted to the new ones without --trust (else Codex would skip the gate)."""
    from agent_registry.harness.install import Options, install_many
    top = toplevel(repo)
    script = str(Path(CLI).absolute())
    install_many(top, str(repo / ".git"), ["codex"], Options(exe=[script]), grant=True)
    old = status(repo, env)["codex"]
    assert (old["hooks"], old["trusted"], old["gate"]) == ("stale", True, None), old
    assert old["executable"] == [{"path": script, "ok": True, "start": [script]}]
    again = install(repo, env, "codex")["harnesses"][0]
    assert again["trusted"] is True and again["trust_step"] is None, again
    new = status(repo, env)["codex"]
    assert (new["hooks"], new["trusted"], new["gate"]) == ("current", True, None), new
    assert new["executable"][0]["start"] == [PYTHON, "-I", "-S", LAUNCHER]
    assert f"{PYTHON} -I -S {LAUNCHER} harness hook codex" in \
        (repo / ".codex" / "hooks.json").read_text()


def test_the_codex_trust_keeps_the_rest_of_the_config(repo, env):
    home = Path(os.environ["HOME"])
    (home / ".codex").mkdir()
    mine = '# mine\nmodel = "o3"\n\n[projects."/elsewhere"]\ntrust_level = "untrusted"\n'
    (home / ".codex" / "config.toml").write_text(mine)
    install(repo, env, "codex", "--trust")
    text = (home / ".codex" / "config.toml").read_text()
    assert text.startswith(mine)
    assert tomllib.loads(text)["projects"]["/elsewhere"] == {"trust_level": "untrusted"}


def doctor_harness(repo: Path, env: dict) -> tuple[int, dict]:
    proc = cli(repo, env, "--json", "doctor")
    report = json.loads(proc.stdout)
    return proc.returncode, next(c for c in report["checks"] if c["name"] == "harness")


def test_doctor_warns_untrusted_and_fails_when_a_hook_executable_is_gone(repo, env, tmp_path):
    assert cli(repo, env, "init").returncode == 0
    install(repo, env, "gemini")
    code, check = doctor_harness(repo, env)  # an untrusted folder: Gemini runs no hook
    assert code == 1 and check["status"] == "fail" and check["verdict"].startswith(
        "gemini: the edit gate will not run"), check
    assert check["fix"] == "agent-registry harness install gemini --trust", check
    install(repo, env, "gemini", "--trust")
    code, check = doctor_harness(repo, env)
    assert check == {"name": "harness", "status": "ok", "verdict": "current: gemini",
                     "fix": None, "fixable": False}
    # the hooks were installed from an environment that is gone since
    settings = repo / ".gemini" / "settings.json"
    gone = str(tmp_path / "old-venv" / "bin" / "python")
    settings.write_text(settings.read_text().replace(PYTHON, gone))
    code, check = doctor_harness(repo, env)
    assert code == 1 and check["status"] == "fail"
    assert check["verdict"].startswith(f"gemini hooks run {gone}, which is gone")
    # one that runs but cannot import agent_registry
    broken = tmp_path / "broken" / "python"
    broken.parent.mkdir()
    broken.write_text("#!/bin/sh\necho \"ModuleNotFoundError: No module named "
                      "'agent_registry'\" >&2\nexit 1\n")
    broken.chmod(0o755)
    settings.write_text(settings.read_text().replace(gone, str(broken)))
    code, check = doctor_harness(repo, env)
    assert code == 1 and "cannot import agent_registry" in check["verdict"]
    fixed = json.loads(cli(repo, env, "--json", "doctor", "--fix").stdout)
    assert "harness" in fixed["fixed"]
    assert doctor_harness(repo, env)[1]["status"] == "ok"


# -- the texts ----------------------------------------------------------------------------------

def test_skills_have_front_matter_and_texts_fit_each_reader(repo, env):
    from ruamel.yaml import YAML
    for harness in ("claude", "codex", "cursor"):
        install(repo, env, harness)
    for rel in (".claude/skills/agent-registry/SKILL.md", ".agents/skills/agent-registry/SKILL.md",
                ".cursor/skills/agent-registry/SKILL.md"):
        text = (repo / rel).read_text()
        head = text.split("---\n")[1]
        meta = YAML(typ="safe").load(head)
        assert meta["name"] == "agent-registry"
        assert "Use it before editing files" in meta["description"]
    claude, agents = (repo / "CLAUDE.md").read_text(), (repo / "AGENTS.md").read_text()
    # Claude's hooks register it: no "register" step; AGENTS.md serves agents without hooks
    assert "agent-registry register" not in claude and "registered for you" in claude
    assert "agent-registry register --provider" in agents
    for text in (claude, agents):
        assert "export " not in text and "heartbeat-loop" not in text
        assert "MCP tools first" in text and "Codex" in text
        assert "agent-registry wiki query" in text and "agent-registry end SID --router" in text


def test_every_command_in_the_texts_runs(repo, env):
    """Each `agent-registry …` example of the protocol and the skill, with SID (and the
    other placeholders) filled in, is accepted by the real CLI."""
    from agent_registry.harness.texts import protocol_text, skill_text
    def register(name):
        proc = cli(repo, env, "register", "--provider", "Test", "--working-on", name)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.strip()
    sid, other = register("me"), register("other")
    examples = set()
    for text in (protocol_text("AGENTS.md"), protocol_text("CLAUDE.md"), skill_text()):
        examples |= set(re.findall(r"`(agent-registry [^`]+)`", text))
    order = (" send ", " ack ", " lock acquire ", " release ", " end ")  # the rest first
    examples = sorted(examples, key=lambda e: next(
        (i for i, word in enumerate(order) if word in e), -1))
    assert len(examples) >= 10, examples
    msgid = None
    for example in examples:
        if "harness install" in example:  # named as a person's step, not run by agents
            continue
        example = (example.replace("OTHER_SID", other).replace("SID", sid)
                   .replace("<your name>", "Test").replace('"<the task>"', "task"))
        if "MSGID" in example:
            example = example.replace("MSGID", msgid)
        words = shlex.split(example)[1:]
        if words[0] == "register":
            continue  # done above, with the same flags
        proc = cli(repo, env, *words)
        assert proc.returncode == 0, (example, proc.stderr)
        if words[0] == "send":
            msgid = proc.stdout.strip()
            ack = cli(repo, env, "ack", msgid, "--session", other)  # the recipient's
            assert ack.returncode == 0, ack.stderr
            msgid = cli(repo, env, "send", "--from", other, "--to", sid, "back").stdout.strip()


def codex_binary() -> str | None:
    return os.environ.get("CODEX_BIN") or shutil.which("codex") or next(
        (str(p) for p in [Path("/work/npm-harness/node_modules/.bin/codex")] if p.exists()), None)


@pytest.mark.skipif(codex_binary() is None, reason="the Codex CLI is not installed")
def test_codex_itself_lists_the_trusted_hooks_as_trusted(repo, env):
    """--trust writes each hook's hash as Codex computes it: its app-server's hooks/list
    says trusted for all five (SessionEnd with its clamped 3 s timeout)."""
    install(repo, env, "codex", "--trust")
    top = toplevel(repo)
    proc = subprocess.Popen([codex_binary(), "app-server"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env={**os.environ, **env, "PATH": os.environ["PATH"]}, cwd=repo)
    try:
        for message in ({"id": 1, "method": "initialize", "params": {"clientInfo": {
                            "name": "t", "title": "t", "version": "1"}}},
                        {"method": "initialized"},
                        {"id": 2, "method": "hooks/list", "params": {"cwds": [top]}}):
            proc.stdin.write(json.dumps(message) + "\n")
        proc.stdin.flush()
        answer = None
        for line in proc.stdout:
            if line.startswith("{") and json.loads(line).get("id") == 2:
                answer = json.loads(line)
                break
    finally:
        proc.kill()
        proc.wait()
    found = []

    def walk(node):
        if isinstance(node, dict):
            if "trustStatus" in node:
                found.append((node.get("eventName"), node["trustStatus"]))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)
    walk(answer)
    assert sorted(found) == sorted((event, "trusted") for event in (  # postToolUse: the
        "sessionStart", "preToolUse", "postToolUse", "userPromptSubmit", "stop",  # backstop
        "sessionEnd")), answer


def test_a_linked_worktree_keeps_a_record_of_its_own(repo, env, tmp_path):
    other = tmp_path / "other"
    git(repo, "worktree", "add", "-q", str(other))
    main_before, other_before = snapshot(repo), snapshot(other)
    install(repo, env, "claude")
    install(other, env, "claude", "--auto-claim")
    main_after = snapshot(repo)
    assert cli(other, env, "harness", "uninstall", "claude").returncode == 0
    assert snapshot(other) == other_before and snapshot(repo) == main_after
    assert cli(repo, env, "harness", "uninstall", "claude").returncode == 0
    assert snapshot(repo) == main_before


def test_hooks_of_an_install_without_a_record_do_not_come_back(repo, env):
    """An earlier version (or another clone) installed without a record: the first
    recorded install takes our old parts out of what it records, so uninstall leaves
    only the person's."""
    settings = repo / ".claude" / "settings.json"
    settings.parent.mkdir()
    old = {"permissions": {"allow": ["Bash(make)"]}, "hooks": {
        "Stop": [{"hooks": [{"type": "command", "command": "./mine.sh"}]},
                 {"hooks": [{"type": "command",
                             "command": "agent-registry harness hook claude stop"}]}],
        "PreToolUse": [{"matcher": "Edit|Write|MultiEdit|NotebookEdit", "hooks": [
            {"type": "command", "command": "agent-registry harness hook claude pre-tool-use"}]}]}}
    settings.write_text(json.dumps(old, indent=2) + "\n")
    (repo / "CLAUDE.md").write_text("# Ours\n\n<!-- agent-registry:protocol:start -->\nold "
                                    "text\n<!-- agent-registry:protocol:end -->\n")
    install(repo, env, "claude")
    hooks = json.loads(settings.read_text())["hooks"]
    assert len(hooks["PreToolUse"]) == 1 and len(hooks["Stop"]) == 2  # replaced in place
    assert cli(repo, env, "harness", "uninstall", "claude").returncode == 0
    assert json.loads(settings.read_text()) == {
        "permissions": {"allow": ["Bash(make)"]},
        "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "./mine.sh"}]}]}}
    assert (repo / "CLAUDE.md").read_text() == "# Ours\n"


def test_a_persons_own_aider_config_is_not_an_install(repo, env):
    write_before(repo, "aider")
    assert status(repo, env)["aider"]["installed"] is False
    install(repo, env, "aider")
    assert status(repo, env)["aider"]["config"] == "current"
