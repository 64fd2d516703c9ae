#!/usr/bin/env python3
"""Benchmark of the hooks a harness runs around every tool call (issue 35, item 2): the
installed ``harness hook <harness> pre-tool-use`` (the edit gate, and the backstop's
note) and ``post-tool-use`` (the backstop's check), started as ``harness install`` writes
them (``PYTHON -I -S …/harness/launch.py``), whole processes fed each
harness's own event JSON on stdin, for two shell commands the gate only has to say
"allowed" to: ``ls -la src`` (programs that write no file: no note is taken) and
``python3 tool.py`` (an interpreter the gate cannot see into: the backstop notes the
held files before it and compares them after), with 0, 10 and 1,000 files (each its
own content) held by another live session, against a bare interpreter (``python -c
pass``, the same Python).  Target: each hook within 1.5x the bare interpreter.

Every process is timed in one loop, alternating over harnesses, events and states, so
that other load on the machine hits all alike; CPU time (the process's and its git
children's) is the figure least disturbed by it, wall time is reported beside it.
Cursor runs no after-tool hook (its adapter takes no note), so it has no post column.
Results go to the section of docs/benchmarks.md between ``<!-- hooks:start -->`` and
``<!-- hooks:end -->`` (bench/report.py: bench/results/ unless BENCH_WRITE_DOCS=1).

    .venv/bin/python bench/hook_bench.py [--reps N] [--no-doc] [--checkout]

A benchmark, not a test: it asserts nothing about time.
"""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))

import install  # noqa: E402
from backstop_bench import bench, held_repository, hook_start, timed  # noqa: E402  (the same repository)
from run import stats  # noqa: E402  (the core benchmark's own)

TARGET_RATIO = 1.5
HELD = (0, 10, 1000)
# what the call runs -> its command: one that reads only, one the gate cannot see into
COMMANDS = {"ls": "ls -la src", "python": "python3 tool.py"}
NATIVE = "bench-session"
# harness -> (its shell tool, the event names of its before- and after-tool hooks)
SHELL = {"claude": ("Bash", "PreToolUse", "PostToolUse"),
         "codex": ("Bash", "PreToolUse", "PostToolUse"),
         "copilot": ("Bash", "PreToolUse", "PostToolUse"),
         "gemini": ("run_shell_command", "BeforeTool", "AfterTool"),
         "qwen": ("run_shell_command", "PreToolUse", "PostToolUse"),
         "opencode": ("bash", None, None), "cursor": ("Shell", None, None)}
HARNESSES = tuple(SHELL)


def event(harness: str, repo: Path, when: str, command: str) -> bytes:
    """*harness*'s own event for its shell tool running *command*, before or after it."""
    tool, pre, post = SHELL[harness]
    if harness == "opencode":  # its plugin's payload (templates/harness/opencode-plugin.js)
        body = {"tool": tool, "args": {"command": command}, "sessionID": NATIVE,
                "callID": "call-1", "cwd": str(repo), "project": str(repo)}
    elif harness == "cursor":
        body = {"conversation_id": NATIVE, "generation_id": "g", "hook_event_name": "preToolUse",
                "tool_name": tool, "tool_input": {"command": command},
                "workspace_roots": [str(repo)], "cwd": str(repo)}
    else:
        body = {"session_id": NATIVE, "cwd": str(repo), "transcript_path": "/tmp/t.jsonl",
                "hook_event_name": pre if when == "pre" else post, "tool_name": tool,
                "tool_input": {"command": command}}
        if harness != "gemini":  # Gemini CLI sends no call id: the call is its digest
            body["tool_use_id"] = "call-1"
    return json.dumps(body).encode()


FLOOR = ("floor", "", "")


def hooks_run(harness: str, kind: str) -> tuple[str, ...]:
    """The hooks *harness* runs around a call of the *kind* of command: Cursor has no
    after-tool hook, and OpenCode's plugin runs it only when the gate asks (not after a
    command of programs that write no file)."""
    if harness == "cursor" or (harness == "opencode" and kind == "ls"):
        return ("pre",)
    return ("pre", "post")


class State:
    """A repository where another live session holds *held* files (each with
    uncommitted work in it), and each harness's session is registered."""

    def __init__(self, held: int, root: Path, tool: install.Install) -> None:
        self.env, self.repo, self.holder = held_repository(held, root, tool)
        repo = self.repo
        hook = hook_start(tool)
        self.runs: dict[tuple[str, str, str], tuple[list[str], bytes]] = {
            FLOOR: ([tool.python, "-c", "pass"], b"")}
        for harness in HARNESSES:
            start = {"session_id": NATIVE, "sessionID": NATIVE, "conversation_id": NATIVE,
                     "cwd": str(repo), "hook_event_name": "SessionStart", "source": "startup",
                     "workspace_roots": [str(repo)]}
            subprocess.run([*hook, harness, "session-start"], cwd=repo,
                           env=self.env, input=json.dumps(start).encode(), check=True,
                           capture_output=True)
            for kind, command in COMMANDS.items():
                for when in hooks_run(harness, kind):
                    name = "pre-tool-use" if when == "pre" else "post-tool-use"
                    self.runs[(harness, when, kind)] = ([*hook, harness, name],
                                                        event(harness, repo, when, command))
        self.times: dict[tuple[str, str, str], list[tuple[float, float]]] = \
            {key: [] for key in self.runs}
        self.round(keep=False)  # warm up: bytecode, page cache, the held targets read once

    def round(self, keep: bool = True) -> None:
        for key, (args, stdin) in self.runs.items():  # each post right after its pre
            result = timed(args, self.repo, self.env, stdin)
            if keep:
                self.times[key].append(result)

    def close(self) -> None:
        self.holder.kill()
        self.holder.wait()


def render(results: dict[int, dict], reps: int, tool: install.Install) -> str:
    load = os.getloadavg()
    lines = ["## The hooks around every tool call", "",
             f"`bench/hook_bench.py`, {reps} runs of each, alternating over harnesses, "
             f"commands, events and states; {platform.python_implementation()} "
             f"{platform.python_version()}, {os.cpu_count()} cores, load average "
             f"{load[0]:.1f} at the end, the {tool.kind} (bench/install.py). Whole processes, `harness hook <harness> "
             "pre-tool-use|post-tool-use` started as `harness install` writes them "
             "(`PYTHON -I -S …/harness/launch.py`), fed each harness's own event for its "
             "shell tool running a command the gate only has to say \"allowed\" to: "
             f"`{COMMANDS['ls']}` (ls: programs that write no file, around which no note "
             f"is taken) and `{COMMANDS['python']}` (python: an interpreter the gate "
             "cannot see into; the backstop notes the held files before it and compares "
             "them after), with 0, 10 and 1,000 files held by another live session, each "
             "with its own content. Each cell: median CPU ms (the process's and its git "
             "children's, the figure least disturbed by other load) and, in brackets, its "
             "ratio to the bare interpreter (`python -c pass`, the same Python) of the same "
             "run; wall medians below. Target: each hook within "
             f"{TARGET_RATIO}x the bare interpreter. Cursor runs no after-tool hook, and "
             "OpenCode's plugin none after a command of programs that write no file.", ""]
    header = "| harness | command | " + " | ".join(
        f"{held:,} held: pre | {held:,} held: post" for held in results) + " |"
    lines += [header, "|---|---|" + "---|" * (2 * len(results))]
    worst: list[tuple[float, str]] = []
    walls = []
    for harness in HARNESSES:
        for kind in COMMANDS:
            cells, wall_cells = [], []
            for held, times in results.items():
                floor = stats([c for _, c in times[FLOOR]])["median"]
                floor_wall = stats([w for w, _ in times[FLOOR]])["median"]
                for when in ("pre", "post"):
                    got = times.get((harness, when, kind))
                    if not got:
                        cells.append("—")
                        wall_cells.append("—")
                        continue
                    cpu = stats([c for _, c in got])["median"]
                    wall = stats([w for w, _ in got])["median"]
                    cells.append(f"{cpu:.1f} ({cpu / floor:.2f}x)")
                    wall_cells.append(f"{wall:.1f} ({wall / floor_wall:.2f}x)")
                    worst.append((cpu / floor, f"{harness} {when}, {kind}, {held:,} held"))
            lines.append(f"| {harness} | {kind} | " + " | ".join(cells) + " |")
            walls.append(f"| {harness} | {kind} | " + " | ".join(wall_cells) + " |")
    floors = ", ".join(
        f"{held:,} held: {stats([c for _, c in t[FLOOR]])['median']:.1f} ms CPU, "
        f"{stats([w for w, _ in t[FLOOR]])['median']:.1f} ms wall"
        for held, t in results.items())
    over = [name for ratio, name in sorted(worst, reverse=True) if ratio > TARGET_RATIO]
    ratio, name = max(worst)
    lines += ["", f"Bare interpreter, medians: {floors}.", "",
              "Wall ms (ratio to the bare interpreter's wall):", "", header,
              "|---|---|" + "---|" * (2 * len(results)), *walls, "",
              f"Highest ratio: {ratio:.2f}x ({name}). " +
              (f"Over the {TARGET_RATIO}x target: {', '.join(over)}." if over else
               f"Every hook is within the {TARGET_RATIO}x target.")]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return bench(State, HELD, "hooks", render, 20, argv)


if __name__ == "__main__":
    sys.exit(main())
