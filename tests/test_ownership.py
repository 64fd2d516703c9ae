"""Who owns a session, and when it is dead (issue 9, section 1), and heartbeats dated in
the future (section 6): real processes, a real tmux, real git hooks."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest

from helpers import CLI, FakeClock, git, registry_ops, registry_refs, wait_for
from test_core_api import branch_file, put_on_branch
from test_harness import CLAUDE_ID, fire

DEADLINE = 60.0  # seconds to wait for a process we drive to get somewhere (not a timing check)


def as_json(proc: subprocess.CompletedProcess) -> dict:
    assert proc.returncode == 0, (proc.args, proc.stdout, proc.stderr)
    return json.loads(proc.stdout)


def claim_message(repo: Path, sid: str, path: str) -> str:
    """The message of *sid*'s newest claim of *path*, from the audit log (the registry's
    branches: a claim is committed on the lock shard recording its path)."""
    found = [message for op, message in registry_ops(repo, "claim")
             if op["session"] == sid and path in op["paths"]]
    assert found, f"no claim of {path} by {sid} in the registry's history"
    return found[0]


def start_sleeper(*args: str, **kw) -> subprocess.Popen:
    """A real process standing for an agent; reaped as soon as it dies, as an agent's
    parent would."""
    proc = subprocess.Popen(list(args) or ["sleep", "600"], **kw)
    threading.Thread(target=proc.wait, daemon=True).start()
    return proc


def gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


@pytest.fixture
def stop_later():
    """Kill these processes (with their process group, when they lead one) at the end."""
    procs: list[subprocess.Popen] = []
    yield procs.append
    for proc in procs:
        try:
            if os.getpgid(proc.pid) == proc.pid:
                os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if proc.poll() is None:
            proc.kill()


# -- short-lived helper processes ------------------------------------------------------

def test_a_session_registered_through_a_short_lived_wrapper_keeps_its_lock(repo, run):
    """An agent that runs each command through a Python subprocess wrapper: the old
    owner guess bound the session to the wrapper, which exits at once, and the lock was
    taken over a moment later."""
    wrapper = ("import subprocess, sys\n"
               "sys.exit(subprocess.run(sys.argv[1:]).returncode)\n")

    def wrapped(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", wrapper, CLI, *args], cwd=repo,
                              capture_output=True, text=True, timeout=120)

    bound = as_json(wrapped("--json", "register", "wrapped-1", "--provider", "Kimi"))["bound_to"]
    claim = wrapped("lock", "acquire", "src/auth.py", "--session", "wrapped-1")
    assert claim.returncode == 0, claim.stderr
    # every wrapper has exited; the session is bound to none of them (to an agent runtime
    # only when these tests run inside one)
    assert bound["how"] == "none" or (bound["how"] == "runtime" and not gone(bound["pid"]))
    assert run("register", "other-1", "--provider", "Codex").returncode == 0
    refused = run("lock", "acquire", "src/auth.py", "--session", "other-1")
    assert refused.returncode == 1 and "wrapped-1" in refused.stderr
    stopped = as_json(run("--json", "cleanup"))["stopped"]
    assert [s["session"] for s in stopped] == []
    checked = run("--json", "lock", "check", "src/auth.py")  # exit 1: held by another
    check = json.loads(checked.stdout)["paths"][0]
    assert (check["state"], check["owner"]) == ("locked", "wrapped-1")


# -- given, from the environment, recognised ------------------------------------------

def test_register_reports_which_process_and_why(repo, run, stop_later, tmp_path):
    agent = start_sleeper()
    stop_later(agent)
    given = as_json(run("--json", "register", "g-1", "--provider", "Kimi", "--pid", str(agent.pid)))
    assert given["bound_to"]["pid"] == agent.pid and given["bound_to"]["how"] == "given"
    assert "--pid" in given["bound_to"]["why"]
    assert given["session"]["owner"] == "given" and given["session"]["pid"] == agent.pid
    proc = run("register", "e-1", "--provider", "Kimi", env={"AGENT_REGISTRY_PID": str(agent.pid)})
    assert proc.returncode == 0 and proc.stdout == "e-1\n"  # stdout stays the id alone
    assert f"bound to pid {agent.pid}" in proc.stderr and "AGENT_REGISTRY_PID" in proc.stderr
    nobody = as_json(run("--json", "register", "n-1", "--provider", "Kimi",
                         env={"AGENT_REGISTRY_PID": "none"}))
    assert nobody["bound_to"]["pid"] is None and nobody["session"]["owner"] == "none"
    assert nobody["session"]["pid"] is None and "TTL" in nobody["bound_to"]["why"]


@pytest.mark.parametrize("name, env", [("kimi", {}),
                                       ("my-agent", {"AGENT_REGISTRY_RUNTIMES": "my-agent"})])
def test_an_ancestor_that_is_an_agent_runtime_is_the_owner_and_kill_signals_it(
        repo, run, tmp_path, name, env):
    """A process named like an agent (a script called `kimi`, or a name added by
    AGENT_REGISTRY_RUNTIMES) runs the registration in a child and lives on: it is found
    by walking the ancestors, vouched for, and it is what `kill` terminates."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    kimi = bin_dir / name
    kimi.write_text(f"#!{sys.executable}\n" + textwrap.dedent(f"""\
        import subprocess, sys
        out = subprocess.run([{CLI!r}, "--json", "register", "rt-1", "--provider", "Kimi"],
                             capture_output=True, text=True)
        print(out.stdout, flush=True)
        sys.stdin.read()  # live on, as an agent does, until told to stop
        """))
    kimi.chmod(0o755)
    agent = subprocess.Popen([str(kimi)], cwd=repo, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, env={**os.environ, **env})
    try:
        lines = []
        while not lines or lines[-1] != "}\n":
            lines.append(agent.stdout.readline())
            assert lines[-1], "the stand-in agent exited before registering"
        bound = json.loads("".join(lines))["bound_to"]
        assert (bound["pid"], bound["how"]) == (agent.pid, "runtime")
        assert name in bound["why"]
        result = as_json(run("--json", "kill", "rt-1"))
        assert result["signal"] == "SIGTERM" and result["not_signalled"] is None
        assert agent.wait(timeout=DEADLINE) != 0
    finally:
        agent.kill()
        agent.wait()


def test_agent_runtimes_are_recognised_by_name_script_module_or_package(tmp_path, stop_later):
    from agent_registry.store.procinfo import runtime_of, shared_kind
    pkg = tmp_path / "node_modules" / "@google" / "gemini-cli" / "dist"
    pkg.mkdir(parents=True)
    (pkg / "index.py").write_text("import time; time.sleep(600)\n")
    (tmp_path / "aider").mkdir()
    (tmp_path / "aider" / "__main__.py").write_text("import time; time.sleep(600)\n")
    (tmp_path / "codex_helper.py").write_text("import time; time.sleep(600)\n")
    cases = {
        "gemini-cli": [sys.executable, str(pkg / "index.py")],  # the npm package
        "aider": [sys.executable, "-m", "aider"],  # a -m module
        None: [sys.executable, str(tmp_path / "codex_helper.py")],  # not an exact name
    }
    procs = {}
    for expected, args in cases.items():
        procs[expected] = start_sleeper(*args, cwd=tmp_path)
        stop_later(procs[expected])
    # a helper re-executed under another argv[0] (as Codex's sandbox is) is not the agent,
    # though its executable (and so its kernel name) is `codex`
    fake_codex = tmp_path / "codex"
    shutil.copy(shutil.which("sleep"), fake_codex)
    sandbox = start_sleeper("codex-linux-sandbox", "600", executable=str(fake_codex))
    stop_later(sandbox)
    wait_for(lambda: all(Path(f"/proc/{p.pid}/cmdline").read_bytes().count(b"\0") >= 2
                         for p in procs.values())
             and Path(f"/proc/{sandbox.pid}/cmdline").read_bytes().startswith(b"codex-linux"),
             "the stand-ins to start")
    for expected, proc in procs.items():
        assert runtime_of(proc.pid) == expected, cases[expected]
    assert runtime_of(sandbox.pid) is None
    assert shared_kind(os.getpid()) is None and shared_kind(1) == "the init process (pid 1)"


@pytest.mark.parametrize("env, args", [
    ({"AGENT_REGISTRY_PID": "abc"}, []),
    ({"AGENT_REGISTRY_PID": "999999999"}, []),
    ({}, ["--pid", "1"]),
])
def test_a_pid_that_cannot_own_a_session_is_refused(repo, run, env, args):
    assert run("init").returncode == 0
    before = registry_refs(repo)
    proc = run("register", "bad-1", "--provider", "Kimi", *args, env=env)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert registry_refs(repo) == before


def test_death_of_a_given_owner_ends_the_session_and_the_takeover_says_so(repo, run, stop_later):
    by_flag, by_env = start_sleeper(), start_sleeper()
    for proc in (by_flag, by_env):
        stop_later(proc)
    assert run("register", "p-1", "--provider", "Kimi", "--pid", str(by_flag.pid)).returncode == 0
    assert run("register", "p-2", "--provider", "Kimi",
               env={"AGENT_REGISTRY_PID": str(by_env.pid)}).returncode == 0
    assert run("lock", "acquire", "src/auth.py", "--session", "p-1").returncode == 0
    assert run("lock", "acquire", "README.md", "--session", "p-2").returncode == 0
    assert run("register", "next-1", "--provider", "Codex").returncode == 0
    assert run("lock", "acquire", "src/auth.py", "--session", "next-1").returncode == 1
    by_flag.kill()
    by_env.kill()
    wait_for(lambda: gone(by_flag.pid) and gone(by_env.pid), "the owners to die")

    # the hot path (plain arguments) and the click path (`--` sends it there) alike
    hot = run("--json", "lock", "acquire", "src/auth.py", "--session", "next-1")
    taken = as_json(hot)["locks"][0]
    assert taken["status"] == "taken-over" and taken["previous"] == ["p-1"]
    reason = f"its process {by_flag.pid} on "
    assert taken["taken_over"][0]["session"] == "p-1" and reason in taken["taken_over"][0]["reason"]
    assert "took over src/auth.py from p-1: " + reason in hot.stderr
    message = claim_message(repo, "next-1", "src/auth.py")
    assert message.splitlines()[0] == "claim src/auth.py by next-1, taking over from p-1"
    assert "Registry-Takeover: src/auth.py from p-1: " + reason in message

    slow = run("lock", "acquire", "--session", "next-1", "--", "README.md")
    assert slow.returncode == 0 and slow.stdout == "taken-over: README.md\n"
    assert f"took over README.md from p-2: its process {by_env.pid} on " in slow.stderr
    assert "Registry-Takeover: README.md from p-2" in claim_message(repo, "next-1", "README.md")


def test_an_old_session_file_without_owner_is_judged_by_heartbeat_only(registry, repo, clock):
    """Files written before owners were vouched for hold a guessed pid: its death proves
    nothing (it may have been a helper that exited at once), so the TTL decides."""
    helper = start_sleeper()
    registry.register("old-1", provider="Kimi", pid=helper.pid)
    registry.claim("old-1", ["src/auth.py"])
    path = "sessions/live/old-1.yaml"
    old = [l for l in branch_file(repo, path).splitlines(True) if not l.startswith("owner:")]
    put_on_branch(repo, {path: "".join(old).encode()})
    helper.kill()
    wait_for(lambda: gone(helper.pid), "the helper to die")
    registry.register("new-1", provider="Codex", pid=os.getpid())
    assert registry.check(["src/auth.py"])[0]["state"] == "locked"
    assert registry.cleanup()["stopped"] == []
    assert "never vouched for" in registry.kill("old-1")["not_signalled"]
    assert registry.check(["src/auth.py"])[0]["state"] == "free"


def test_kill_never_signals_a_login_shell_it_was_given(repo, run, stop_later):
    shell = start_sleeper("-bash", "-c", "sleep 600; :", executable="/bin/bash",
                          start_new_session=True)
    stop_later(shell)
    wait_for(lambda: Path(f"/proc/{shell.pid}/cmdline").read_bytes().startswith(b"-bash"),
             "the shell to start")
    assert run("register", "sh-1", "--provider", "human", "--pid", str(shell.pid)).returncode == 0
    proc = run("kill", "sh-1", "--force")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("sh-1 Killed (logical stop, no signal: ")
    assert "a login shell (-bash)" in proc.stdout and len(proc.stdout.splitlines()) == 1
    assert shell.poll() is None


# -- a terminal multiplexer ------------------------------------------------------------

class Tmux:
    """A real tmux server on a private socket, driven by send-keys."""

    def __init__(self, cwd: Path) -> None:
        self.socket = f"ar-test-{uuid.uuid4().hex[:10]}"
        self.cwd = cwd
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("TMUX")}

    def __call__(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["tmux", "-L", self.socket, "-f", "/dev/null", *args],
                              cwd=self.cwd, env=self.env, capture_output=True, text=True,
                              timeout=DEADLINE)

    def type(self, window: str, line: str) -> None:
        assert self("send-keys", "-t", window, line, "Enter").returncode == 0

    def server_pid(self) -> int:
        return int(self("display-message", "-p", "-t", "t", "#{pid}").stdout)


@pytest.fixture
def tmux(repo):
    if not shutil.which("tmux"):
        pytest.skip("tmux is not installed (Debian: apt-get install tmux)")
    server = Tmux(repo)
    shell = "bash --noprofile --norc"
    # both windows from one client command: under load a second client could find the
    # new server still starting (seen once as a failed new-window)
    started = server("new-session", "-d", "-s", "t", "-x", "200", "-y", "50", shell,
                     ";", "new-window", "-t", "t", shell)
    assert started.returncode == 0, started.stderr
    yield server
    server("kill-server")


def test_a_session_registered_inside_tmux_is_not_owned_by_the_tmux_server(repo, run, tmux, tmp_path):
    assert run("init").returncode == 0 and run("hooks", "install").returncode == 0
    out = tmp_path / "out"
    out.mkdir()
    tmux.type("t:0", f"{CLI} --json register tm-1 --provider Kimi > {out}/reg.json && "
                     f"{CLI} lock acquire src/auth.py --session tm-1; echo $? > {out}/claim.rc")
    wait_for(lambda: (out / "claim.rc").exists() and (out / "claim.rc").read_text().strip(),
             "the claim in window 0")
    assert (out / "claim.rc").read_text().strip() == "0"
    server = tmux.server_pid()
    bound = json.loads((out / "reg.json").read_text())["bound_to"]
    assert bound["pid"] != server and bound["how"] == "none"
    refused = run("register", "tm-2", "--provider", "Kimi", "--pid", str(server))
    assert refused.returncode == 2 and "a terminal multiplexer (tmux)" in refused.stderr

    # a person's commit in another window of the same tmux server
    before = git(repo, "rev-parse", "HEAD")
    tmux.type("t:1", f"echo changed > src/auth.py && git add src/auth.py && "
                     f"git commit -q -m touch > {out}/commit.log 2>&1; echo $? > {out}/commit.rc")
    wait_for(lambda: (out / "commit.rc").exists() and (out / "commit.rc").read_text().strip(),
             "the commit in window 1")
    assert (out / "commit.rc").read_text().strip() == "1", (out / "commit.log").read_text()
    log = (out / "commit.log").read_text()
    assert "commit refused" in log and "tm-1" in log and "committing as a person" in log
    assert git(repo, "rev-parse", "HEAD") == before

    killed = run("kill", "tm-1", "--force", check_untouched=False)
    assert killed.returncode == 0 and "logical stop" in killed.stdout
    assert tmux("has-session", "-t", "t").returncode == 0
    assert tmux.server_pid() == server and not gone(server)


# -- the Claude Code hook passes Claude Code's pid -------------------------------------

def test_the_claude_code_hook_binds_the_session_to_claude_code_itself(repo, run):
    assert run("harness", "install", "claude", check_untouched=False).returncode == 0
    settings = json.loads((repo / ".claude" / "settings.json").read_text())
    command = settings["hooks"]["SessionStart"][0]["hooks"][0]["command"]
    assert command.endswith("session-start --pid $PPID")
    # fire() runs the command through a shell, as Claude Code does: $PPID is this process
    proc = fire(repo, "SessionStart", {"source": "startup", "model": "claude-opus-4"})
    assert proc.returncode == 0, proc.stderr
    session = as_json(run("--json", "show", f"claude-{CLAUDE_ID}"))["sessions"][0]
    assert (session["pid"], session["owner"]) == (os.getpid(), "given")


# -- heartbeats dated in the future -----------------------------------------------------

def test_a_heartbeat_from_a_clock_ahead_does_not_hold_a_lock_forever(repo, clock, monkeypatch):
    from agent_registry import Registry
    monkeypatch.setenv("AGENT_REGISTRY_PID", "none")
    ahead = FakeClock(clock.now + 3600)  # another machine, its clock an hour ahead
    with Registry.open(str(repo), clock=ahead, host="far-host") as far:
        far.register("far-1", provider="Kimi")
        far.claim("far-1", ["src/auth.py"])
    with Registry.open(str(repo), clock=clock) as near:
        near.register("near-1", provider="Codex")
        assert near.check(["src/auth.py"])[0]["state"] == "locked"
        clocks = near.clocks_ahead(near.sessions())
        assert [(c["session"], c["host"]) for c in clocks] == [("far-1", "far-host")]
        assert clocks[0]["ahead_seconds"] >= 3500

        # a real heartbeat from the far host, seen 300 s later, renews it once more
        clock.advance(300)
        ahead.advance(300)
        with Registry.open(str(repo), clock=ahead, host="far-host") as far:
            far.heartbeat("far-1")
        assert near.check(["src/auth.py"])[0]["state"] == "locked"
        clock.advance(400)  # 700 s after the first sighting, 400 s after the second
        assert near.check(["src/auth.py"])[0]["state"] == "locked"
        clock.advance(300)  # 700 s without a new heartbeat: past TTL and skew margin
        state = near.check(["src/auth.py"])[0]
        assert state["state"] == "stale" and "in the future" in state["stale_reason"]
        taken = near.claim("near-1", ["src/auth.py"])["locks"][0]
        assert taken["status"] == "taken-over" and taken["previous"] == ["far-1"]


def test_status_flags_a_clock_running_ahead(repo, run, monkeypatch):
    from agent_registry import Registry
    monkeypatch.setenv("AGENT_REGISTRY_PID", "none")
    with Registry.open(str(repo), clock=lambda: time.time() + 7200, host="far-host") as far:
        far.register("far-1", provider="Kimi")
    data = as_json(run("--json", "status"))
    (flag,) = data["clock"]
    assert (flag["session"], flag["host"]) == ("far-1", "far-host")
    assert flag["ahead_seconds"] > 7000 and flag["first_seen"].endswith("Z")
    text = run("status").stdout
    assert "clock: far-1's heartbeat is dated" in text and "far-host runs ahead" in text
