"""Harness hook commands in the dialect of the shell each harness runs them in: sh here
(run for real through `sh -c`), and on Windows Git Bash for Claude Code, PowerShell for
Codex, Gemini CLI and Cursor, cmd where asked; executables whose path has spaces, `&`,
`^`, `%`, parentheses, quotes and `$`."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from agent_registry.harness import shells
from agent_registry.harness.command import hook_command

NASTY = ["a b", "a&b", "x^y", "100%", "(x)", "it's", 'say "hi"', "$HOME", "`id`"]
WINDOWS_EXE = r"C:\Users\Ann O'Neil\tools & co (x86)\100% ^up\Scripts\agent-registry.exe"


@pytest.fixture
def fake_exe(tmp_path) -> Path:
    """An executable under a folder named with every nasty piece: it records its
    arguments and exits with $FAKE_RC."""
    folder = tmp_path.joinpath(*NASTY)
    folder.mkdir(parents=True)
    exe = folder / "agent-registry"
    exe.write_text(f"#!{sys.executable}\nimport json, os, sys\n"
                   f"open(os.environ['FAKE_OUT'], 'w').write(json.dumps(sys.argv[1:]))\n"
                   f"sys.exit(int(os.environ.get('FAKE_RC', '0')))\n")
    exe.chmod(0o755)
    return exe


def sh(command: str, tmp_path: Path, **env: str) -> tuple[subprocess.CompletedProcess, list]:
    out = tmp_path / "argv.json"
    out.unlink(missing_ok=True)
    proc = subprocess.run(["sh", "-c", command], capture_output=True, text=True,
                          env={**os.environ, "FAKE_OUT": str(out), **env})
    return proc, json.loads(out.read_text()) if out.exists() else None


def test_the_posix_form_runs_through_sh_with_any_path(fake_exe, tmp_path):
    start = hook_command("claude", "session-start", exe=[str(fake_exe)], pid=True)
    proc, argv = sh(start, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert argv == ["harness", "hook", "claude", "session-start", "--pid", str(os.getpid())]
    assert shells.start_of(start)[0] == str(fake_exe)
    stop = hook_command("codex", "stop", exe=[str(fake_exe)], wake=30)
    proc, argv = sh(stop, tmp_path, FAKE_RC="1")
    assert proc.returncode == 1 and argv[-2:] == ["--wake", "30"]


def test_the_posix_gate_fails_closed_naming_the_executable_as_it_is(fake_exe, tmp_path):
    gate = hook_command("gemini", "pre-tool-use", exe=[str(fake_exe)], pid=True,
                        auto_claim=True)
    assert shells.start_of(gate)[0] == str(fake_exe)
    proc, argv = sh(gate, tmp_path)
    assert proc.returncode == 0 and argv[:5] == ["harness", "hook", "gemini", "pre-tool-use",
                                                  "--auto-claim"]
    # the hook's own exit 2 passes through as it is, without a second line
    proc, _ = sh(gate, tmp_path, FAKE_RC="2")
    assert (proc.returncode, proc.stderr) == (2, "")
    # a hook that dies blocks the edit with one line naming the executable
    proc, _ = sh(gate, tmp_path, FAKE_RC="1")
    assert proc.returncode == 2
    assert proc.stderr == (f"agent-registry: the edit gate could not run ({fake_exe}, exit 1); "
                           "repair: agent-registry harness install gemini, or "
                           "AGENT_REGISTRY_ALLOW=1\n")
    assert sh(gate, tmp_path, FAKE_RC="1", AGENT_REGISTRY_ALLOW="1")[0].returncode == 0
    fake_exe.unlink()  # an executable that is gone
    proc, _ = sh(gate, tmp_path)
    assert proc.returncode == 2 and f"({fake_exe}, exit 1)" in proc.stderr


def test_on_windows_each_harness_gets_its_shells_form():
    exe = [WINDOWS_EXE]
    # Claude Code: Git Bash, the path forward-slashed; MSYS's $PPID is no Windows pid
    claude = hook_command("claude", "pre-tool-use", exe=exe, pid=True, windows=True)
    slashed = WINDOWS_EXE.replace("\\", "/")
    assert shells.start_of(claude)[0] == slashed and "$PPID" not in claude
    assert claude.startswith("{ [ -x 'C:/Users/Ann O'\"'\"'Neil/tools & co (x86)/")
    # Codex, Gemini CLI, Cursor: PowerShell, the call operator, the exit code handed back
    for harness in ("codex", "gemini", "cursor"):
        start = hook_command(harness, "session-start", exe=exe, pid=True, windows=True)
        assert start == (f"& '{WINDOWS_EXE.replace(chr(39), chr(39) * 2)}' harness hook "
                         f"{harness} session-start; exit $LASTEXITCODE")
        gate = hook_command(harness, "pre-tool-use", exe=exe, pid=True, windows=True)
        assert gate.startswith("if (Test-Path -LiteralPath 'C:\\Users\\Ann O''Neil\\")
        assert "$rc = $LASTEXITCODE" in gate and gate.endswith("exit 2")
        for command in (start, gate):
            assert shells.start_of(command)[0] == WINDOWS_EXE
            assert f"harness hook {harness} " in command  # how our entries are found
    # on this platform every harness gets sh
    assert hook_command("codex", "stop", exe=exe) == \
        hook_command("codex", "stop", exe=exe, windows=False)


def powershell_word(text: str) -> tuple[str, str]:
    """The first PowerShell single-quoted string in *text* read back ('' is one quote,
    nothing expands), and what follows it."""
    assert text.startswith("'"), text
    end = 1
    while True:
        end = text.index("'", end)
        if text[end + 1:end + 2] != "'":
            return text[1:end].replace("''", "'"), text[end + 1:]
        end += 2


DEFINED = {"PATH", "HOME", "TEMP", "USERPROFILE", "ERRORLEVEL", "AGENT_REGISTRY_ALLOW"}


def cmd_then_crt(line: str) -> list[str]:
    """What a program gets from a cmd command line: cmd expands %NAME% of a defined
    variable anywhere (none may be left to it), drops a ^ outside quotes keeping the next
    character, then the C runtime splits the rest: quotes group, and backslashes are
    literal unless they come before a quote (2n: n and a quote that groups; 2n+1: n and
    a literal quote)."""
    for name in re.findall(r"%([^%]*)%", line):
        assert name.upper() not in DEFINED, f"cmd expands %{name}% in {line}"
    text, quoted, i = [], False, 0
    while i < len(line):
        if line[i] == '"':
            quoted = not quoted
        elif line[i] == "^" and not quoted:
            i += 1
        text.append(line[i])
        i += 1
    args, word, quoted, started = [], "", False, False
    for piece in re.findall(r'\\*"|\\+|[ \t]|[^\\" \t]+', "".join(text)):
        if piece.endswith('"'):
            slashes = len(piece) - 1
            word += "\\" * (slashes // 2) + ('"' if slashes % 2 else "")
            if not slashes % 2:
                quoted, started = not quoted, True
        elif piece in (" ", "\t") and not quoted:
            if word or started:
                args.append(word)
            word, started = "", False
        else:
            word += piece
    return args + [word] if word or started else args


@pytest.mark.parametrize("path", [WINDOWS_EXE, "C:\\plain\\agent-registry.exe",
                                  "C:\\a b\\trailing\\", "C:\\100%\\x%PATH%y\\a.exe"])
def test_cmd_and_powershell_quoting_reads_back_as_written(path):
    words = [path, "harness", "hook", "codex", "stop"]
    powershell = shells.DIALECTS["powershell"].command(words)
    assert powershell.startswith("& ")
    assert powershell_word(powershell[2:]) == (path, " harness hook codex stop")
    assert shells.start_of(powershell)[0] == path
    assert cmd_then_crt(shells.DIALECTS["cmd"].command(words)) == words
