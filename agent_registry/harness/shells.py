"""The shell a harness runs its hook commands in, and how to write a command for it.

On Linux and macOS every harness runs hook commands through sh or bash.  On Windows
(from their issue trackers; none of them runs here): Claude Code uses Git Bash, Codex
its session shell (PowerShell; cmd only when it knows none), Gemini CLI and Cursor
PowerShell.  So a command is written in one of three dialects:

- POSIX sh: ``shlex.quote``; on Windows the executable's path with forward slashes,
  which MSYS reads as its own.  ``$PPID`` is the harness (not under MSYS, where it is
  no Windows pid).
- PowerShell: ``& 'path' args; exit $LASTEXITCODE``: a quoted path alone is a string to
  PowerShell, and without ``exit`` its exit code is 0 or 1, never the hook's 2.
- cmd: double quotes by the rules of ``subprocess.list2cmdline`` (what the program's C
  runtime splits back); ``%`` cannot be escaped inside them, so it goes outside as ``^%``.

Where there is no ``$PPID`` the hook finds the harness among its ancestors.  The
edit gate fails closed in each the same way (command.py says how).
"""
from __future__ import annotations

import dataclasses
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from typing import Callable

# Windows: the harness -> the dialect it runs hook commands in
WINDOWS = {"claude": "posix", "codex": "powershell", "gemini": "powershell",
           "cursor": "powershell", "copilot": "powershell", "qwen": "powershell"}
_PLAIN = re.compile(r"[A-Za-z0-9_./:=-]+")
REPAIR = ("agent-registry: the edit gate could not run ({why}); "
          "repair: agent-registry harness install {harness}, or AGENT_REGISTRY_ALLOW=1")


@dataclass(frozen=True)
class Dialect:
    name: str
    quote: Callable[[str], str]
    # the gate: (the hook command, the files it needs: the program first, the harness)
    # -> the wrapped command
    gate: Callable[[str, list[str], str], str]
    call: str = ""  # what runs a quoted executable
    end: str = ""  # what hands back its exit code
    ppid: str | None = None  # the shell's spelling of its parent's pid
    slashes: bool = False  # the executable's path written with / (MSYS on Windows)

    def path(self, exe: str) -> str:
        return exe.replace("\\", "/") if self.slashes else exe

    def command(self, words: list[str]) -> str:
        return self.call + " ".join(self.quote(w) for w in [self.path(words[0]), *words[1:]])


# -- POSIX sh -------------------------------------------------------------------------------

def _posix_gate(run: str, needs: list[str], harness: str) -> str:
    # the repair line names the program and the launcher: which one is gone is not known
    shown = re.sub(r'(["\\$`])', r"\\\1", " ".join(needs))  # inside echo's double quotes
    repair = REPAIR.format(why=f"{shown}, exit $rc", harness=harness)
    tests = " && ".join([f"[ -x {shlex.quote(needs[0])} ]",
                         *(f"[ -f {shlex.quote(p)} ]" for p in needs[1:])])
    return (f"{{ {tests} && {run}; }} || {{ rc=$?; "
            f"[ \"$AGENT_REGISTRY_ALLOW\" = 1 ] && exit 0; "
            f"[ $rc -eq 2 ] || echo \"{repair}\" >&2; exit 2; }}")


# -- PowerShell -----------------------------------------------------------------------------

def _ps_quote(word: str) -> str:
    return word if _PLAIN.fullmatch(word) else "'" + word.replace("'", "''") + "'"


def _ps_gate(run: str, needs: list[str], harness: str) -> str:
    repair = _ps_quote(REPAIR.format(why=f"{' '.join(needs)}, exit RC", harness=harness)) \
        .replace("RC", "' + $rc + '")
    there = " -and ".join(f"(Test-Path -LiteralPath {_ps_quote(p)})" for p in needs[1:])
    test = f"Test-Path -LiteralPath {_ps_quote(needs[0])}" + (f") -and {there}" if there
                                                               else "")
    return (f"if ({'(' if there else ''}{test}) {{ {run}; $rc = $LASTEXITCODE }} "
            f"else {{ $rc = 127 }}; if ($rc -eq 0) {{ exit 0 }}; "
            f"if ($env:AGENT_REGISTRY_ALLOW -eq '1') {{ exit 0 }}; "
            f"if ($rc -ne 2) {{ [Console]::Error.WriteLine({repair}) }}; exit 2")


def _ps_words(command: str) -> list[str]:
    """The words of a PowerShell command as :func:`_ps_quote` writes them ('' is one
    quote), its parentheses, braces and semicolons left out."""
    return [w[1:-1].replace("''", "'") if w.startswith("'") else w
            for w in re.findall(r"'(?:[^']|'')*'|[^\s;{}()]+", command)]


# -- cmd ------------------------------------------------------------------------------------

def _cmd_quote(word: str) -> str:
    quoted = word if _PLAIN.fullmatch(word) else subprocess.list2cmdline([word])
    if "%" not in quoted:
        return quoted
    quoted = quoted if quoted.startswith('"') else f'"{quoted}"'
    return quoted.replace("%", '"^%"')


def _cmd_gate(run: str, needs: list[str], harness: str) -> str:
    # inside the parentheses cmd has read the line already: no %ERRORLEVEL%, no path
    repair = REPAIR.format(why="it failed", harness=harness).replace("(", "^(") \
        .replace(")", "^)")
    fail = f"(echo {repair} 1>&2 & exit /b 2)"
    return (f"{run} || (if \"%AGENT_REGISTRY_ALLOW%\"==\"1\" (exit /b 0) "
            f"else if errorlevel 3 {fail} else if errorlevel 2 (exit /b 2) else {fail})")


POSIX = Dialect("posix", shlex.quote, _posix_gate, ppid="$PPID")
DIALECTS = {
    "posix": POSIX,
    "powershell": Dialect("powershell", _ps_quote, _ps_gate, call="& ",
                          end="; exit $LASTEXITCODE"),
    "cmd": Dialect("cmd", _cmd_quote, _cmd_gate),
}


def start_of(command: str) -> list[str] | None:
    """The words a hook command starts with, before ``harness hook``: its program and
    what it hands the program first (``-I -S`` and the launcher), whichever dialect it
    is written in (a cmd command splits as sh's would, up to there)."""
    if command.startswith(("& ", "if (")):
        words = _ps_words(command)
    else:
        try:
            words = shlex.split(command)
        except ValueError:
            return None
    for end in range(len(words) - 1):
        if words[end:end + 2] == ["harness", "hook"]:
            begin = end
            while begin > 0 and words[begin - 1] not in ("&&", "{", "&"):
                begin -= 1  # back to the shell's own words (the gate's tests, the call)
            return words[begin:end] or None
    return None


def for_harness(harness: str, windows: bool | None = None) -> Dialect:
    """The dialect *harness* runs hook commands in, on Windows or (by default) here."""
    if windows is None:
        windows = sys.platform == "win32"
    if not windows:
        return POSIX
    dialect = DIALECTS[WINDOWS.get(harness, "posix")]
    # MSYS's $PPID is no Windows pid (1 when a native process started the shell)
    return dataclasses.replace(dialect, slashes=True, ppid=None) if dialect is POSIX \
        else dialect
