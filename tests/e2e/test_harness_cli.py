"""The real Claude Code, Codex and Gemini CLI, driven headless against a scripted model
(tests/e2e/mockmodel.py on 127.0.0.1), in a real git repository where `agent-registry
harness install <h> --mcp --trust --wake` was run and another session holds src/auth.py.

Nothing is mocked but the model: the CLIs run their own tools and their own hooks, which
run our installed hook commands. Each test isolates HOME (and CODEX_HOME, ~/.gemini under
it); trust is granted by `--trust`, as a person would.

Per harness, one scripted run (cached for the module) is checked by several tests:
- an edit of a free file goes through (the file changes on disk);
- an edit of src/auth.py is refused and the model's next request names the holder;
- a shell write (`echo x >> src/auth.py`) is refused likewise;
- the harness's session `<harness>-<native id>` is registered while it runs, bound to the
  harness's own process (Claude: the launched `claude`; Codex and Gemini: the process
  the launched node wrapper starts, which runs the agent and the hooks);
- a message sent to that session while the model works reaches the model at the end of
  its turn (the end-of-turn hook, installed with --wake, keeps it going with the message);
- a person's high message sent meanwhile (Claude Code, Codex, Gemini CLI) is in the
  model's request right after its next edit (before the tool: Claude's PreToolUse; after
  it: the others' after-tool hook);
- the session is finished when the CLI exits (its SessionEnd hook).
And, in a run of its own: with the hook's executable removed, an edit is blocked.

OpenCode (npm opencode-ai) runs the same main run, and a resumed run of its own (`opencode
run -s ID`: registered again, bound to the new process, finished at its end). Aider (PyPI
aider-chat, $AGENT_REGISTRY_AIDER or on PATH) has no edit gate: its auto-commit of a held
file is refused by the pre-commit guard `harness install aider` installs.

The CLIs are found in $AGENT_REGISTRY_HARNESS_BIN (a node_modules/.bin) or on PATH; a
missing one skips its tests and says so. Marker `harness_e2e` (make test-harness; make
test-harness-latest with npm's @latest of each).
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mockmodel import MockModel, Request, Text, Tool  # noqa: E402

pytestmark = pytest.mark.harness_e2e

HARNESSES = ("claude", "codex", "gemini", "opencode", "copilot", "qwen")
HOOK_DIRS = {"copilot": ".github/hooks"}  # where a harness's hooks are, when not .<harness>
MCP_LISTED = ("claude", "gemini", "opencode", "copilot")
# Qwen Code defers MCP tools behind its tool_search tool too, and names them in the request
MCP_ANNOUNCED = ("qwen",)  # Codex defers MCP tools behind its tool_search tool
SNEAK = "python3 -c \"open('src/auth.py', 'a').write('SNEAK = 1\\n')\""
HOLDER = "holder-alice"
HOLDER_WORK = "the auth rewrite"
# the harnesses whose next tool call tells a person's high message (before it or after it)
# and whose requests carry no normal message meanwhile (Qwen Code and OpenCode check for
# messages before each request: there everything arrives at the next request)
URGENT = ("claude", "codex", "gemini")
RUN_TIMEOUT = 300  # an OpenCode run takes ~110 s on a loaded 2-core machine
VENV_BIN = Path(sys.executable).parent
AGENT_REGISTRY = shutil.which("agent-registry", path=str(VENV_BIN)) or \
    shutil.which("agent-registry")


# read at import: the autouse hermetic seal (tests/conftest.py) drops AGENT_REGISTRY_*
HARNESS_BIN = os.environ.get("AGENT_REGISTRY_HARNESS_BIN")


def harness_bin(name: str) -> str | None:
    where = HARNESS_BIN
    if where:
        path = Path(where, name)
        return str(path) if os.access(path, os.X_OK) else None
    return shutil.which(name)


def need(name: str) -> str:
    path = harness_bin(name)
    if not path:
        pytest.skip(f"{name} CLI not found (set AGENT_REGISTRY_HARNESS_BIN to a node_modules/.bin "
                    f"holding it, or put it on PATH; .ci/run installs it from npm)")
    if not AGENT_REGISTRY:
        pytest.skip("agent-registry console script not found next to this python")
    return path


def git(repo: Path, *args: str, env: dict) -> str:
    proc = subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, f"git {' '.join(args)}: {proc.stderr}"
    return proc.stdout


def ppid_of(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])


# -- one repository, one HOME, one installed harness -----------------------------------

class Setup:
    """A git repository with src/auth.py (held by HOLDER) and src/free.py, agent-registry
    initialised and the harness installed with --mcp --trust --wake 2, and a HOME of its
    own. ``exe`` is the agent-registry the install ran (its hooks call it)."""

    def __init__(self, harness: str, root: Path, exe: str = AGENT_REGISTRY) -> None:
        self.harness = harness
        self.root = root
        self.exe = exe
        self.home = root / "home"
        self.repo = root / "repo"
        self.home.mkdir(parents=True)
        (self.home / ".gitconfig").write_text(
            "[user]\n\tname = Test User\n\temail = test@example.com\n"
            "[init]\n\tdefaultBranch = main\n")
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("GIT_", "AGENT_REGISTRY_", "ANTHROPIC_", "OPENAI_",
                                    "GEMINI_", "GOOGLE_", "CODEX_", "CLAUDE", "COPILOT_",
                                    "GITHUB_", "GH_", "QWEN_"))}
        env.update(HOME=str(self.home), XDG_CONFIG_HOME=str(self.home / ".config"),
                   XDG_CACHE_HOME=str(self.home / ".cache"),
                   GIT_CONFIG_GLOBAL=str(self.home / ".gitconfig"), GIT_CONFIG_NOSYSTEM="1",
                   CODEX_HOME=str(self.home / ".codex"), TZ="UTC",
                   # nothing but 127.0.0.1 is reachable here: tell the CLIs to stay quiet
                   DISABLE_TELEMETRY="1", DISABLE_ERROR_REPORTING="1",
                   DISABLE_AUTOUPDATER="1", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
                   GEMINI_TELEMETRY_ENABLED="false", NO_BROWSER="1", CI="1")
        # the CLIs' node must be found even when PATH is minimal
        env["PATH"] = os.pathsep.join([str(Path(exe).parent), env.get("PATH", "")])
        self.env = env
        (self.home / ".codex").mkdir()
        (self.home / ".gemini").mkdir()
        # Gemini CLI: API-key auth (the key is a dummy, the base URL our model)
        (self.home / ".gemini" / "settings.json").write_text(json.dumps(
            {"security": {"auth": {"selectedType": "gemini-api-key"}},
             "privacy": {"usageStatisticsEnabled": False}}))
        # Qwen Code: an OpenAI-compatible endpoint (OPENAI_BASE_URL), no memory subagent
        # (its extra request would take a turn of the script)
        (self.home / ".qwen").mkdir()
        (self.home / ".qwen" / "settings.json").write_text(json.dumps(
            {"security": {"auth": {"selectedType": "openai"}},
             "memory": {"enableManagedAutoMemory": False},
             "privacy": {"usageStatisticsEnabled": False}}))
        self.repo.mkdir()
        (self.repo / "src").mkdir()
        (self.repo / "src" / "auth.py").write_text("TOKEN = 'a'\n")
        (self.repo / "src" / "free.py").write_text("VALUE = 1\n")
        (self.repo / "README.md").write_text("# demo\n")
        git(self.repo, "init", "-q", env=env)
        git(self.repo, "add", ".", env=env)
        git(self.repo, "commit", "-qm", "initial", env=env)
        self.ar("init")
        # the other session: bound to this test process, which outlives the run
        self.ar("register", HOLDER, "--provider", "human", "--ai-version", "none",
                "--working-on", HOLDER_WORK, "--pid", str(os.getpid()))
        self.ar("lock", "acquire", "src/auth.py", "--session", HOLDER)
        # (Aider has no MCP client, no trust to grant and no end of a turn)
        flags = ["--mcp", "--trust", "--wake", "2"] if harness != "aider" else []
        self.install_out = self.ar("harness", "install", harness, *flags)

    def ar(self, *args: str, check: bool = True) -> str:
        proc = subprocess.run([self.exe, *args], cwd=self.repo, env=self.env,
                              capture_output=True, text=True, timeout=60)
        if check:
            assert proc.returncode == 0, (f"agent-registry {' '.join(args)} -> "
                                          f"{proc.returncode}\n{proc.stdout}\n{proc.stderr}")
        return proc.stdout

    def sessions(self, every: bool = False) -> list[dict]:
        args = ["--json", "status"] + (["--all"] if every else [])
        return json.loads(self.ar(*args))["sessions"]

    def ours(self, every: bool = False) -> list[dict]:
        return [s for s in self.sessions(every) if s["id"].startswith(f"{self.harness}-")]

    def read(self, rel: str) -> str:
        return (self.repo / rel).read_text()


# -- each harness: how to run it and how its model calls its tools ---------------------

class Driver:
    name = ""

    def __init__(self, setup: Setup, model: MockModel) -> None:
        self.s, self.m = setup, model

    def abs(self, rel: str) -> str:
        return str(self.s.repo / rel)

    def env(self) -> dict:
        return dict(self.s.env)

    def command(self, prompt: str) -> list[str]:
        raise NotImplementedError

    def edit(self, rel: str, old: str, new: str) -> list[Tool]:
        """The tool calls that replace *old* by *new* in *rel*; the last one is the edit."""
        raise NotImplementedError

    def shell(self, command: str) -> Tool:
        raise NotImplementedError

    grandparents: dict = {}  # parent pid -> its parent while the agent ran

    def agent_pid_ok(self, recorded: int, parent: int | None, launched: int) -> bool:
        """Whether *recorded* (the session's pid, whose parent was *parent* while the
        agent ran) is the harness's own process."""
        return recorded == launched or parent == launched


class Claude(Driver):
    name = "claude"

    def env(self) -> dict:
        env = super().env()
        env.update(ANTHROPIC_BASE_URL=self.m.url, ANTHROPIC_API_KEY="dummy-key")
        return env

    def command(self, prompt: str) -> list[str]:
        # --dangerously-skip-permissions is refused as root; acceptEdits lets edits run,
        # --allowedTools Bash the shell
        return [need("claude"), "-p", prompt, "--output-format", "json",
                "--permission-mode", "acceptEdits", "--allowedTools", "Bash"]

    def edit(self, rel, old, new):
        # Claude Code refuses an edit of a file not read in the session, before any hook
        return [Tool("Read", {"file_path": self.abs(rel)}),
                Tool("Edit", {"file_path": self.abs(rel), "old_string": old,
                              "new_string": new})]

    def shell(self, command):
        return Tool("Bash", {"command": command, "description": "run it"})

    def agent_pid_ok(self, recorded, parent, launched):
        return recorded == launched  # the hook's shell is the claude process's child


class Codex(Driver):
    name = "codex"

    def env(self) -> dict:
        env = super().env()
        env.update(MOCK_MODEL_API_KEY="dummy-key")
        return env

    def command(self, prompt: str) -> list[str]:
        provider = (f'{{name="mock", base_url="{self.m.url}/v1", wire_api="responses", '
                    f'env_key="MOCK_MODEL_API_KEY"}}')
        # a model Codex knows (else it offers no apply_patch); the workspace-write sandbox
        # (hooks and the MCP server run outside it)
        return [need("codex"), "exec", "-s", "workspace-write", "-m", "gpt-5.5",
                "-c", 'model_provider="mock"', "-c", f"model_providers.mock={provider}",
                prompt]

    def edit(self, rel, old, new):
        return [Tool("apply_patch", f"*** Begin Patch\n*** Update File: {rel}\n@@\n-{old}\n"
                                    f"+{new}\n*** End Patch\n")]

    def shell(self, command):
        return Tool("exec_command", {"cmd": command})

    def agent_pid_ok(self, recorded, parent, launched):
        # $PPID of the hook is the Rust codex binary, the node wrapper's child
        return parent == launched


class Gemini(Driver):
    name = "gemini"

    def env(self) -> dict:
        env = super().env()
        env.update(GEMINI_API_KEY="dummy-key", GOOGLE_GEMINI_BASE_URL=self.m.url)
        return env

    def command(self, prompt: str) -> list[str]:
        return [need("gemini"), "-p", prompt, "-o", "json", "--yolo"]

    def edit(self, rel, old, new):
        return [Tool("replace", {"file_path": self.abs(rel), "old_string": old,
                                 "new_string": new, "instruction": "edit it"})]

    def shell(self, command):
        return Tool("run_shell_command", {"command": command, "description": "run it"})

    def agent_pid_ok(self, recorded, parent, launched):
        # Gemini CLI relaunches itself once: the hooks' $PPID is that child
        return parent == launched


class OpenCode(Driver):
    """OpenCode (npm opencode-ai): its anthropic provider pointed at the mock model by
    OPENCODE_CONFIG_CONTENT (merged over the repository's opencode.json, which holds the
    MCP entry); the plugin `harness install opencode` wrote is the gate and the session."""
    name = "opencode"

    def env(self) -> dict:
        env = super().env()
        config = {"provider": {"anthropic": {"options": {"baseURL": f"{self.m.url}/v1",
                                                         "apiKey": "dummy-key"}}},
                  "model": "anthropic/claude-sonnet-4-5"}
        # OpenCode takes its project from $PWD (a shell sets it; subprocess does not)
        env.update(OPENCODE_CONFIG_CONTENT=json.dumps(config), PWD=str(self.s.repo),
                   OPENCODE_DISABLE_MODELS_FETCH="1", OPENCODE_DISABLE_AUTOUPDATE="1")
        return env

    def command(self, prompt: str) -> list[str]:
        return [need("opencode"), "run", "--format", "json", prompt]

    def edit(self, rel, old, new):
        # OpenCode's edit tool refuses a file not read first
        return [Tool("read", {"filePath": self.abs(rel)}),
                Tool("edit", {"filePath": self.abs(rel), "oldString": old, "newString": new})]

    def shell(self, command):
        return Tool("bash", {"command": command, "description": "run it"})


class Copilot(Driver):
    """GitHub Copilot CLI (npm @github/copilot), offline: its BYOK provider is the mock
    model's Chat Completions endpoint (COPILOT_PROVIDER_BASE_URL, default wire API
    "completions"); the hooks load because `--trust` put the repository in
    ~/.copilot/config.json's trustedFolders."""
    name = "copilot"

    def env(self) -> dict:
        env = super().env()
        env.update(COPILOT_OFFLINE="true", COPILOT_PROVIDER_BASE_URL=f"{self.m.url}/v1",
                   COPILOT_PROVIDER_API_KEY="dummy-key", COPILOT_MODEL="gpt-4.1")
        return env

    def command(self, prompt: str) -> list[str]:
        return [need("copilot"), "-p", prompt, "--allow-all-tools", "--output-format", "json"]

    def edit(self, rel, old, new):
        return [Tool("edit", {"path": self.abs(rel), "old_str": old, "new_str": new})]

    def shell(self, command):
        return Tool("bash", {"command": command, "description": "run it"})


class Qwen(Driver):
    """Qwen Code (npm @qwen-code/qwen-code): its OpenAI auth pointed at the mock model's
    Chat Completions endpoint (OPENAI_BASE_URL; ~/.qwen/settings.json selects "openai")."""
    name = "qwen"

    def env(self) -> dict:
        env = super().env()
        env.update(OPENAI_BASE_URL=f"{self.m.url}/v1", OPENAI_API_KEY="dummy-key",
                   OPENAI_MODEL="qwen3-coder-plus", QWEN_CODE_SUPPRESS_YOLO_WARNING="1")
        return env

    def command(self, prompt: str) -> list[str]:
        return [need("qwen"), "-p", prompt, "-o", "json", "--yolo"]

    def edit(self, rel, old, new):
        # Qwen Code's edit tool refuses a file not read first in the session
        return [Tool("read_file", {"file_path": self.abs(rel)}),
                Tool("edit", {"file_path": self.abs(rel), "old_string": old,
                              "new_string": new})]

    def shell(self, command):
        return Tool("run_shell_command", {"command": command, "description": "run it"})

    def agent_pid_ok(self, recorded, parent, launched):
        # the launched cli-entry.js starts cli.js with --expose-gc, which relaunches
        # itself once, as Gemini CLI does: the hooks' $PPID is that grandchild
        return self.grandparents.get(parent) == launched


DRIVERS = {"claude": Claude, "codex": Codex, "gemini": Gemini, "opencode": OpenCode,
           "copilot": Copilot, "qwen": Qwen}


def run_cli(driver: Driver, prompt: str, box: dict) -> subprocess.CompletedProcess:
    """Run the harness headless in the repository; *box* gets the launched pid."""
    proc = subprocess.Popen(driver.command(prompt), cwd=driver.s.repo, env=driver.env(),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    box["pid"] = proc.pid
    try:
        out, err = proc.communicate(timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"{driver.name} did not finish in {RUN_TIMEOUT}s\nstdout:\n{out[-3000:]}\n"
                    f"stderr:\n{err[-3000:]}\nrequests:\n{driver.m.dump()[-6000:]}")
    finally:
        # a hook the CLI started at its exit (Codex's SessionEnd) may still run: let it
        # end, then nothing it started may outlive the test (an MCP server, a shell)
        deadline = time.monotonic() + 20
        while group_alive(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def processes() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command line) of every process."""
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError, IndexError):
            continue
        out[int(entry.name)] = (ppid, cmdline)
    return out


def wait_for_descendant(root: int, needle: str, timeout: float) -> bool:
    """Wait until a descendant of *root* runs a command line containing *needle*."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        table = processes()
        below, grew = {root}, True
        while grew:
            new = {pid for pid, (ppid, _) in table.items() if ppid in below} - below
            below |= new
            grew = bool(new)
        if any(needle in table[pid][1] for pid in below - {root} if pid in table):
            return True
        time.sleep(0.2)
    return False


def group_alive(pgid: int) -> bool:
    """Whether a process of group *pgid* (not a zombie) still runs."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


# -- the main scripted run, once per harness --------------------------------------------

class MainRun:
    def __init__(self, harness: str, root: Path) -> None:
        need(harness)
        self.harness = harness
        self.setup = Setup(harness, root)
        self.seen: dict = {}
        self.errors: list[str] = []
        self.message = f"MSG-{harness}-please-call-me-back"
        self.urgent = f"URGENT-{harness}-a-person-says-stop"  # issue 36
        box: dict = {}
        self.model = MockModel([])
        driver = DRIVERS[harness](self.setup, self.model)
        free = driver.edit("src/free.py", "VALUE = 1", "VALUE = 2")
        held = driver.edit("src/auth.py", "TOKEN = 'a'", "TOKEN = 'b'")
        shell = driver.shell("echo x >> src/auth.py")
        # no gate reads inside python -c: the backstop's case
        sneak = [driver.shell(SNEAK)]

        def first(req: Request):
            """The model's first request: the session is registered by now. Look at it,
            send it a message (it arrives while the agent works), then go on."""
            try:
                self.seen["launched"] = box.get("pid")
                self.seen["sessions"] = self.setup.ours()
                self.seen["parents"] = {s["pid"]: ppid_of(s["pid"])
                                        for s in self.seen["sessions"] if s.get("pid")}
                self.seen["grandparents"] = {p: ppid_of(p) for p in self.seen["parents"].values()
                                             if p}
                sid = self.seen["sessions"][0]["id"] if self.seen["sessions"] else None
                if sid:
                    self.setup.ar("send", "--from", HOLDER, "--to", sid, self.message)
                    if harness in URGENT:  # a person's high message, told at a tool call
                        self.setup.ar("send", "--from", "boss", "--to", sid,
                                      "--importance", "high", self.urgent)
                    self.seen["sent_at"] = len(self.model.main_requests)
                # the MCP server starts beside the first request (Claude Code does not wait
                # for it): give it time to start, so a later request lists its tools
                if harness in MCP_LISTED + MCP_ANNOUNCED:
                    self.seen["mcp_started"] = wait_for_descendant(box["pid"], " mcp", 20)
            except Exception as exc:  # reported by the tests, never a hung CLI
                self.errors.append(repr(exc))
            return free[0]

        # which output index belongs to which step (each protocol resends the history)
        steps = [first, *free[1:], *held, shell, *sneak]
        self.index = {"free": len(free) - 1, "held": len(free) + len(held) - 1,
                      "shell": len(free) + len(held), "sneak": len(free) + len(held) + 1}
        self.model.script = steps + [Text("I am done with this turn."),
                                     Text("Read the message; done.")]
        with self.model:
            self.started = time.monotonic()
            self.result = run_cli(driver, "Edit src/free.py and src/auth.py.", box)
            self.elapsed = time.monotonic() - self.started
        self.outputs = self.model.tool_outputs()
        self.after = self.setup.ours(every=True)

    def explain(self) -> str:
        return (f"exit {self.result.returncode} after {self.elapsed:.1f}s; errors {self.errors}; "
                f"mock errors {self.model.errors}\noutputs: {json.dumps(self.outputs)[:3000]}\n"
                f"stdout: {self.result.stdout[-2000:]}\nstderr: {self.result.stderr[-3000:]}")

    def output(self, step: str) -> str:
        i = self.index[step]
        assert len(self.outputs) > i, f"no tool output for {step}\n{self.explain()}"
        return self.outputs[i]


_RUNS: dict[str, MainRun | BaseException] = {}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The main run of a harness, made once: its tests share it (a run that failed or
    skipped fails or skips each of them the same way, without running again)."""
    def get(harness: str) -> MainRun:
        if harness not in _RUNS:
            try:
                _RUNS[harness] = MainRun(harness, tmp_path_factory.mktemp(f"main-{harness}"))
            except (Exception, pytest.skip.Exception, pytest.fail.Exception) as exc:
                _RUNS[harness] = exc
        found = _RUNS[harness]
        if isinstance(found, BaseException):
            raise found
        return found
    yield get
    _RUNS.clear()


@pytest.mark.parametrize("harness", HARNESSES)
def test_cli_runs_to_the_end(runs, harness):
    run = runs(harness)
    assert run.result.returncode == 0, run.explain()
    assert not run.model.errors and not run.errors, run.explain()


@pytest.mark.parametrize("harness", HARNESSES)
def test_edit_of_a_free_file_goes_through(runs, harness):
    run = runs(harness)
    assert run.setup.read("src/free.py") == "VALUE = 2\n", run.explain()
    assert HOLDER not in run.output("free"), run.explain()


@pytest.mark.parametrize("harness", HARNESSES)
def test_edit_of_a_held_file_is_refused_naming_the_holder(runs, harness):
    run = runs(harness)
    assert run.setup.read("src/auth.py") == "TOKEN = 'a'\n", run.explain()
    # the deny reason reached the model as the tool's result
    assert HOLDER in run.output("held"), run.explain()


@pytest.mark.parametrize("harness", HARNESSES)
def test_shell_write_to_a_held_file_is_refused(runs, harness):
    run = runs(harness)
    assert "x" not in run.setup.read("src/auth.py").splitlines(), run.explain()
    assert HOLDER in run.output("shell"), run.explain()


@pytest.mark.parametrize("harness", HARNESSES)
def test_a_held_file_changed_by_an_unreadable_shell_write_is_put_back_and_told(runs, harness):
    """The gate lets `python3 -c ...` run (it cannot read inside it); the write lands on
    the held file, and the after-tool backstop puts the holder's content back at once
    and tells the model who holds it (issue 33)."""
    run = runs(harness)
    assert "SNEAK" not in run.setup.read("src/auth.py"), run.explain()
    assert run.setup.read("src/auth.py") == "TOKEN = 'a'\n", run.explain()
    main = run.model.main_requests
    shown = next((i for i, r in enumerate(main) if len(r.tool_outputs()) > run.index["sneak"]),
                 None)  # the first request that carries the sneak's result
    assert shown is not None, run.explain()
    # the backstop's answer names the agent's version kept (git show BLOB) and the holder
    assert run.model.saw("git show", after=shown), run.explain()
    assert any(HOLDER in r.text and "git show" in r.text for r in main[shown:]), run.explain()


@pytest.mark.parametrize("harness", HARNESSES)
def test_session_is_registered_bound_to_the_harness_process(runs, harness):
    run = runs(harness)
    sessions = run.seen.get("sessions")
    assert sessions, f"no {harness}- session while the agent ran\n{run.explain()}"
    (session,) = sessions
    assert session["provider"].lower() == harness, session
    assert session["status"] == "OnWorking", session
    driver = DRIVERS[harness](run.setup, run.model)
    parent = run.seen["parents"].get(session["pid"])
    driver.grandparents = run.seen.get("grandparents", {})
    assert session["pid"] and driver.agent_pid_ok(session["pid"], parent, run.seen["launched"]), \
        f"pid {session['pid']} (parent {parent}) is not {harness}'s own " \
        f"process (launched {run.seen['launched']}); cmdline {session.get('cmdline')!r}"


def offered_tools(req: Request) -> list[str]:
    body = req.body
    if req.kind == "gemini":
        return [f.get("name", "") for t in body.get("tools") or []
                for f in t.get("functionDeclarations") or []]
    names = []
    for tool in body.get("tools") or []:
        # (Chat Completions: {"type": "function", "function": {"name": …}})
        names.append(tool.get("name") or (tool.get("function") or {}).get("name") or "")
        names += [t.get("name") or "" for t in tool.get("tools") or []]  # Codex namespaces
    return names


def deferred_tools(req: Request) -> list[str]:
    """The MCP tools a harness names behind its tool search instead of offering them
    (Claude Code 2.1.3xx: a ToolSearch tool, and a system message listing each deferred
    tool by name, `mcp__<server>__<tool>`; the model loads one with ToolSearch)."""
    if req.kind != "anthropic" or "ToolSearch" not in offered_tools(req):
        return []
    import re
    return re.findall(r"mcp__[\w-]+__\w+", req.text)


@pytest.mark.parametrize("harness", HARNESSES)
def test_the_model_is_told_its_session_and_the_protocol(runs, harness):
    run = runs(harness)
    sid = run.seen["sessions"][0]["id"] if run.seen.get("sessions") else "?"
    first = run.model.main_requests[0].text
    # the session-start hook's context, and the protocol text the harness reads at start
    assert f"you are session {sid}" in first, run.explain()
    # (Claude Code drops HTML comments, the block markers, from CLAUDE.md)
    assert "agent-registry: working beside other agents" in first, run.explain()


@pytest.mark.parametrize("harness", MCP_LISTED)
def test_the_mcp_server_trusted_by_install_offers_its_tools(runs, harness):
    # (Codex defers MCP tools behind its tool_search tool: not listed up front)
    run = runs(harness)
    assert run.seen.get("mcp_started"), f"no `agent-registry ... mcp` process under {harness}"
    names = {n for req in run.model.main_requests
             for n in offered_tools(req) + deferred_tools(req)}
    assert [n for n in names if "agent-registry" in n and n.endswith("lock_acquire")], names


@pytest.mark.parametrize("harness", MCP_ANNOUNCED)
def test_the_mcp_server_trusted_by_install_is_announced_behind_tool_search(runs, harness):
    run = runs(harness)
    assert run.seen.get("mcp_started"), f"no `agent-registry ... mcp` process under {harness}"
    names = {n for req in run.model.main_requests for n in offered_tools(req)}
    assert "tool_search" in names, names
    assert run.model.saw("mcp__agent-registry__lock_acquire"), run.explain()


@pytest.mark.parametrize("harness", HARNESSES)
def test_a_message_sent_while_it_works_reaches_the_model(runs, harness):
    run = runs(harness)
    assert "sent_at" in run.seen, run.explain()
    assert run.model.saw(run.message, after=run.seen["sent_at"]), run.explain()


@pytest.mark.parametrize("harness", URGENT)
def test_a_persons_high_message_reaches_the_model_within_one_tool_call(runs, harness):
    """Sent while the model works on its first request, a person's high message is in the
    request right after the next edit or shell call, not only after the turn (issue 36):
    Claude Code's PreToolUse context (its first call is a Read, which the gate's matcher
    leaves alone: the Edit after it tells), Codex's PostToolUse and Gemini CLI's
    AfterTool context of that first edit (Codex's PostToolUse context: a message beside
    the edit's output, which stays)."""
    run = runs(harness)
    at = run.seen.get("sent_at")
    texts = [r.text for r in run.model.main_requests]
    told = at + run.index["free"] if at is not None else None  # after the first edit
    assert told is not None and len(texts) > told, run.explain()
    assert not any(run.urgent in t for t in texts[:told]), run.explain()
    assert run.urgent in texts[told] and "boss (a person)" in texts[told], run.explain()
    assert run.message not in texts[told]  # a normal one waits for the turn's end
    # the edit's own result reaches the model too (Codex's PostToolUse decision: block
    # replaced it with the message; its additionalContext goes beside it)
    edited = run.model.main_requests[told].tool_outputs()[run.index["free"]]
    assert "free.py" in edited, run.explain()


@pytest.mark.parametrize("harness", HARNESSES)
def test_session_end_finishes_the_session(runs, harness):
    run = runs(harness)
    assert run.seen.get("sessions"), run.explain()
    sid = run.seen["sessions"][0]["id"]
    (after,) = [s for s in run.after if s["id"] == sid]
    assert after["status"] == "Finished", after
    assert not after["locks"], after


# -- fail closed: the hook's executable is gone --------------------------------------------

def console_script_copy(where: Path) -> str:
    """A copy of the agent-registry console script in a venv of its own, so `harness
    install` run by it writes hooks naming it: a directory with pyvenv.cfg, lib/ linked
    to this venv's, bin/python linked to the interpreter and bin/agent-registry copied."""
    venv = VENV_BIN.parent
    (where / "bin").mkdir(parents=True)
    shutil.copy(venv / "pyvenv.cfg", where / "pyvenv.cfg")
    (where / "lib").symlink_to(venv / "lib")
    python = where / "bin" / "python"
    python.symlink_to(Path(sys.executable).resolve())
    script = Path(AGENT_REGISTRY).read_text().split("\n", 1)[1]
    exe = where / "bin" / "agent-registry"
    exe.write_text(f"#!{python}\n{script}")
    exe.chmod(0o755)
    return str(exe)


@pytest.mark.parametrize("harness", HARNESSES)
def test_edit_is_blocked_when_the_hook_executable_is_gone(tmp_path, harness):
    need(harness)
    exe = console_script_copy(tmp_path / "venv-copy")
    setup = Setup(harness, tmp_path, exe=exe)
    where = setup.repo / HOOK_DIRS.get(harness, f".{harness}")
    installed = "\n".join(p.read_text() for p in where.rglob("*") if p.is_file())
    # the hooks start the copy's interpreter (-I -S, the package's launcher): it goes
    python = str(Path(exe).parent / "python")
    assert f"{python} -I -S " in installed or f'"{python}", "-I", "-S"' in installed, \
        f"the hooks do not run the copy's {python}:\n{installed[:3000]}"
    os.unlink(python)
    model = MockModel([])
    driver = DRIVERS[harness](setup, model)
    steps = driver.edit("src/free.py", "VALUE = 1", "VALUE = 3")
    model.script = [*steps, Text("done")]
    with model:
        result = run_cli(driver, "Edit src/free.py.", {})
    outputs = model.tool_outputs()
    explain = (f"exit {result.returncode}; outputs {outputs}\nstderr {result.stderr[-3000:]}")
    assert setup.read("src/free.py") == "VALUE = 1\n", explain
    if harness == "gemini" and not model.main_requests:
        # Gemini CLI blocks on any failing hook (exit 127 too): its BeforeAgent hook,
        # which cannot start either, stops the prompt before the model is asked
        assert "failed for event BeforeAgent" in result.stderr, explain
        return
    # Copilot CLI shows the model a fixed line for a hook's exit 2, not what it said
    said = "hook exited with code 2" if harness == "copilot" else "edit gate could not run"
    assert len(outputs) >= len(steps) and said in outputs[len(steps) - 1], explain


# -- OpenCode: a resumed run ---------------------------------------------------------------

def test_opencode_resumed_run_is_registered_bound_to_its_process_and_finished(tmp_path):
    """`opencode run -s ID` fires no session.created: the plugin registers the session at
    its first hook, bound to the new process (a fresh id: the first run's has ended), and
    finishes it when the run ends, as it does the first run's (which fires no
    session.deleted either)."""
    need("opencode")
    setup = Setup("opencode", tmp_path)
    seen: dict = {}

    def look(key):
        def turn(req: Request):
            seen[key] = setup.ours()
            seen[key + " parents"] = {s["pid"]: ppid_of(s["pid"]) for s in seen[key]}
            return Text("done")
        return turn

    def run(args: list[str], key: str) -> tuple[subprocess.CompletedProcess, dict]:
        model = MockModel([look(key)])
        driver = OpenCode(setup, model)
        box: dict = {}
        with model:
            proc = subprocess.Popen([need("opencode"), "run", "--format", "json", *args],
                                    cwd=setup.repo, env=driver.env(), stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            box["pid"] = proc.pid
            out, err = proc.communicate(timeout=RUN_TIMEOUT)
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), box

    first, box1 = run(["Say hello."], "first")
    assert first.returncode == 0, first.stderr[-3000:]
    native = json.loads(first.stdout.splitlines()[0])["sessionID"]
    second, box2 = run(["-s", native, "Go on."], "second")
    assert second.returncode == 0, second.stderr[-3000:]
    (one,), (two,) = seen["first"], seen["second"]
    assert one["id"] == f"opencode-{native}" and two["id"].startswith(f"opencode-{native}+"), seen
    assert two["status"] == "OnWorking" and two["pid"] != one["pid"], seen
    assert box2["pid"] in (two["pid"], seen["second parents"][two["pid"]]), seen
    after = {s["id"]: s["status"] for s in setup.ours(every=True)}
    assert after == {one["id"]: "Finished", two["id"]: "Finished"}, after


# -- Aider: its auto-commit of a held file is refused by the guard -------------------------------

# read at import, as HARNESS_BIN (the hermetic seal drops AGENT_REGISTRY_*): Aider is a PyPI
# package, installed into a venv of its own (.ci/run: .venv-aider)
AIDER = os.environ.get("AGENT_REGISTRY_AIDER") or shutil.which("aider")


def need_aider() -> None:
    if not AIDER or not os.access(AIDER, os.X_OK):
        pytest.skip("aider not found (set AGENT_REGISTRY_AIDER to its executable, or put it "
                    "on PATH; .ci/run installs aider-chat into .venv-aider)")
    if not AGENT_REGISTRY:
        pytest.skip("agent-registry console script not found next to this python")


def run_aider(setup: Setup, model: MockModel, command: list[str],
              holder_work: str | None = None) -> subprocess.CompletedProcess:
    """Run *command* (Aider, or the wrapper that starts it, then Aider's arguments) on
    the mock model, asked to rotate the token in src/auth.py, which holder-bob (a live
    session bound to a process that is no ancestor of Aider's: the guard would take a
    commit for its own) holds, with *holder_work* uncommitted in it when given."""
    holder = subprocess.Popen(["sleep", str(RUN_TIMEOUT + 60)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        setup.ar("lock", "release", "src/auth.py", "--session", HOLDER)
        setup.ar("register", "holder-bob", "--provider", "human", "--ai-version", "none",
                 "--working-on", "the token rotation", "--pid", str(holder.pid))
        setup.ar("lock", "acquire", "src/auth.py", "--session", "holder-bob")
        if holder_work is not None:
            (setup.repo / "src" / "auth.py").write_text(holder_work)
        assert (setup.repo / ".git" / "hooks" / "pre-commit").is_file(), setup.install_out
        model.untooled_main = True  # Aider sends no tools: its edits are in the answer
        env = dict(setup.env, OPENAI_API_KEY="dummy-key", LITELLM_LOCAL_MODEL_COST_MAP="True")
        with model:
            env["OPENAI_API_BASE"] = f"{model.url}/v1"
            return subprocess.run(
                [*command, "--model", "openai/mock", "--edit-format", "whole", "--yes-always",
                 "--no-check-update", "--analytics-disable", "--no-show-model-warnings",
                 "--no-pretty", "--no-fancy-input", "--map-tokens", "0", "--no-gitignore",
                 "--no-stream", "--message", "Rotate the token.", "src/auth.py"],
                cwd=setup.repo, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT,
                stdin=subprocess.DEVNULL)
    finally:
        holder.kill()
        holder.wait()


def test_aider_auto_commit_of_a_held_file_is_refused_by_the_guard(tmp_path):
    """`harness install aider` (git-commit-verify, the git hooks): Aider applies the edit the
    mock model sends (whole-file format over Chat Completions) and auto-commits it; the
    pre-commit guard refuses that commit, naming the holder, and Aider says so. The edit
    stays in the working tree, uncommitted: the commit is all that holds Aider."""
    need_aider()
    setup = Setup("aider", tmp_path)
    model = MockModel([Text("src/auth.py\n```python\nTOKEN = 'b'\n```\n"),
                       Text("fix: rotate the token")])
    result = run_aider(setup, model, [AIDER])
    explain = f"exit {result.returncode}\nstdout {result.stdout[-4000:]}\nstderr {result.stderr[-2000:]}"
    assert model.main_requests and "agent-registry" in model.main_requests[0].text, explain
    assert "Applied edit to src/auth.py" in result.stdout, explain  # Aider has no edit gate
    assert "commit refused" in result.stdout and "holder-bob" in result.stdout, explain
    log = git(setup.repo, "log", "--format=%s", "main", env=setup.env).splitlines()
    assert log == ["initial"], log  # nothing of Aider's was committed
    assert git(setup.repo, "show", "HEAD:src/auth.py", env=setup.env) == "TOKEN = 'a'\n"


def test_aider_run_is_a_session_and_its_edit_of_a_held_file_is_put_back_and_told(tmp_path):
    """`agent-registry harness run aider -- ARGS`: the run is a session of its own while
    Aider works (registered before it starts, finished when it exits), and after Aider's
    edit of the held file (Aider has no edit gate) its lint command, the backstop, puts
    the holder's uncommitted work back, keeps Aider's version as a blob, and the model is
    told who holds it (Aider hands a failing lint's output to the model); the holder gets
    a message."""
    need_aider()
    setup = Setup("aider", tmp_path)
    seen: dict = {}

    def edit(req: Request):
        seen["sessions"] = setup.ours()
        return Text("src/auth.py\n```python\nTOKEN = 'b'\n```\n")

    model = MockModel([edit, Text("fix: rotate the token"), Text("I leave src/auth.py alone."),
                       Text("done")])
    holders = "TOKEN = 'a'\nROTATED = True  # holder-bob's work\n"
    result = run_aider(setup, model, [AGENT_REGISTRY, "harness", "run", "aider",
                                      "--executable", AIDER, "--"], holder_work=holders)
    explain = (f"exit {result.returncode}\nstdout {result.stdout[-4000:]}\n"
               f"stderr {result.stderr[-2000:]}\nrequests {model.dump()[-3000:]}")
    assert result.returncode == 0, explain
    [session] = seen["sessions"]  # registered while Aider ran, as the model was asked
    assert session["status"] == "OnWorking" and session["provider"] == "Aider", session
    assert session["id"] in model.main_requests[0].text, explain  # the model knows its id
    assert "Applied edit to src/auth.py" in result.stdout, explain
    assert setup.read("src/auth.py") == holders, explain  # put back at once
    told = [r.text for r in model.main_requests if "git show" in r.text and "holder-bob" in r.text]
    assert told, explain  # the lint output reached the model
    kept = told[0].split("git show ")[1].split(".")[0].split()[0]
    assert git(setup.repo, "show", kept, env=setup.env) == "TOKEN = 'b'\n"
    inbox = json.loads(setup.ar("--json", "inbox", "holder-bob"))["messages"]
    assert any(m.get("subject") == "backstop" and session["id"] in m["body"] for m in inbox)
    [after] = [s for s in setup.ours(every=True) if s["id"] == session["id"]]
    assert after["status"] != "OnWorking", after  # finished when Aider exited
