"""What a person expects of a command line: a bare ``agent-registry`` gives short help;
``completion bash|zsh|fish`` prints a script made by click's machinery, which completes
commands, live session ids and the paths a session holds; colour on a terminal only
(never piped, never with NO_COLOR or --no-color); long-running commands say what they do
and how to stop them.  Real processes through the installed CLI; a pty for the terminal."""
from __future__ import annotations

import os
import pty
import select
import subprocess

import pytest

from helpers import CLI

ESC = "\x1b["


def complete(repo, words: str, cword: int, shell: str = "bash", env: dict | None = None):
    """The completion protocol the shell script speaks: the CLI run with COMP_WORDS,
    COMP_CWORD and _AGENT_REGISTRY_COMPLETE=<shell>_complete; the values it offers."""
    proc = subprocess.run([CLI], cwd=repo, capture_output=True, text=True, timeout=60,
                          env={**os.environ, **(env or {}), "COMP_WORDS": words,
                               "COMP_CWORD": str(cword),
                               "_AGENT_REGISTRY_COMPLETE": f"{shell}_complete"})
    assert proc.returncode == 0, proc.stderr
    if shell == "zsh":  # type, value, help: three lines an item
        return proc.stdout.splitlines()[1::3]
    return [line.split(",", 1)[1] for line in proc.stdout.splitlines() if "," in line]


def on_terminal(repo, *args: str, env: dict | None = None) -> tuple[int, str]:
    """(exit code, everything written to stdout and stderr) of the CLI run on a pty."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([CLI, *args], cwd=repo, stdin=slave, stdout=slave, stderr=slave,
                            env={**os.environ, "TERM": "xterm", **(env or {})}, close_fds=True)
    os.close(slave)
    chunks = []
    while True:
        ready, _, _ = select.select([master], [], [], 60)
        if not ready:
            proc.kill()
            pytest.fail(f"agent-registry {args} wrote nothing for 60 s")
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the pty's other end closed
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    return proc.wait(timeout=60), b"".join(chunks).decode(errors="replace")


def test_bare_command_prints_short_help_and_exits_0(repo, run):
    bare = run()
    assert bare.returncode == 0, bare.stderr
    assert "agent-registry lock acquire PATH" in bare.stdout
    assert "agent-registry --help" in bare.stdout
    assert len(bare.stdout.splitlines()) < 20 and bare.stderr == ""


@pytest.mark.parametrize("shell,marker", [
    ("bash", "complete -o nosort -F _agent_registry_completion agent-registry"),
    ("zsh", "compdef _agent_registry_completion agent-registry"),
    ("fish", "_AGENT_REGISTRY_COMPLETE=fish_complete"),
])
def test_completion_prints_clicks_script(repo, run, shell, marker):
    script = run("completion", shell)
    assert script.returncode == 0, script.stderr
    assert marker in script.stdout
    assert "_AGENT_REGISTRY_COMPLETE" in script.stdout
    assert run("completion", "tcsh").returncode == 2


def test_completion_offers_commands_live_sessions_and_held_paths(repo, run):
    assert complete(repo, "agent-registry lo", 1) == ["lock"]
    assert "acquire" in complete(repo, "agent-registry lock ", 2)
    assert "s1" not in complete(repo, "agent-registry show ", 2)  # no registry yet: nothing
    for sid in ("s1", "s2", "s3"):
        assert run("register", sid, "--provider", "Kimi").returncode == 0
    assert run("finish", "s3").returncode == 0
    assert run("lock", "acquire", "src/auth.py", "README.md", "--session", "s1").returncode == 0
    assert run("lock", "acquire", "src/other.py", "--session", "s2").returncode == 0
    # session ids: the live ones, for SID arguments and --session, in every shell
    assert complete(repo, "agent-registry show ", 2) == ["s1", "s2"]
    assert complete(repo, "agent-registry kill s", 2) == ["s1", "s2"]
    assert complete(repo, "agent-registry lock acquire x --session ", 5) == ["s1", "s2"]
    assert "s2" in complete(repo, "agent-registry finish ", 2, shell="zsh")
    # held paths of `lock release`: the session's (--session, else the environment's)
    assert complete(repo, "agent-registry lock release --session s1 ", 5) == \
        ["README.md", "src/auth.py"]
    assert complete(repo, "agent-registry lock release src/", 3,
                    env={"AGENT_REGISTRY_SESSION": "s2"}) == ["src/other.py"]
    # outside a repository: nothing, and no error
    assert complete(repo.parent, "agent-registry show ", 2) == []


def test_colour_on_a_terminal_only(repo, run):
    assert run("register", "s1", "--provider", "Kimi").returncode == 0
    assert run("register", "s2", "--provider", "Claude").returncode == 0
    assert run("lock", "acquire", "src/auth.py", "--session", "s1").returncode == 0
    code, shown = on_terminal(repo, "status")
    assert code == 0 and f"{ESC}32mOnWorking" in shown, repr(shown)
    code, shown = on_terminal(repo, "doctor")
    assert ESC in shown and "ok" in shown, repr(shown)
    # a refusal: red on stderr, through the click-free path and through click
    for args in (("lock", "acquire", "src/auth.py", "--session", "s2"),
                 ("lock", "release", "src/auth.py", "--session", "s2")):
        code, shown = on_terminal(repo, *args)
        assert code == 1 and f"{ESC}31magent-registry: " in shown, repr(shown)
    # NO_COLOR and --no-color (before or after the command): none
    for args, env in ((("status",), {"NO_COLOR": "1"}), (("--no-color", "status"), {}),
                      (("status", "--no-color"), {}), (("doctor",), {"NO_COLOR": "1"}),
                      (("--no-color", "lock", "acquire", "src/auth.py", "--session", "s2"), {}),
                      (("lock", "acquire", "src/auth.py", "--session", "s2"), {"NO_COLOR": "x"})):
        code, shown = on_terminal(repo, *args, env=env)
        assert "OnWorking" in shown or "agent-registry:" in shown or "ok" in shown
        assert ESC not in shown, (args, env, repr(shown))
    # piped: none
    for args in (("status",), ("doctor",), ("lock", "acquire", "src/auth.py", "--session", "s2")):
        proc = run(*args)
        assert ESC not in proc.stdout + proc.stderr, args


def first_stderr_line(repo, *args, env=None) -> str:
    proc = subprocess.Popen([CLI, *args], cwd=repo, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})})
    try:
        ready, _, _ = select.select([proc.stderr], [], [], 60)
        assert ready, f"agent-registry {args} said nothing on stderr"
        return proc.stderr.readline()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_long_running_commands_say_what_they_do_and_how_to_stop(repo, run):
    assert run("register", "s1", "--provider", "Kimi").returncode == 0
    line = first_stderr_line(repo, "lock", "heartbeat-loop", "--session", "s1",
                             "--interval", "30")
    assert line.startswith("agent-registry: heartbeat-loop: renewing s1") and "30 s" in line
    assert "Ctrl-C" in line and "kill " in line
    line = first_stderr_line(repo, "watch", "--interval", "30",
                             env={"AGENT_REGISTRY_NOTIFY_URLS": "json://127.0.0.1:9/"})
    assert line.startswith("agent-registry: watch: checking the registry every 30 s")
    assert "Ctrl-C" in line and "kill " in line
    # an unknown session: its error, not a start line
    unknown = run("lock", "heartbeat-loop", "--session", "nope", "--interval", "30")
    assert unknown.returncode == 1 and "heartbeat-loop:" not in unknown.stderr
