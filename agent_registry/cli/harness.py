"""``agent-registry harness``: thin click commands over :mod:`agent_registry.harness.settings`."""
from __future__ import annotations

import json
import sys

import click

from .context import Output, pass_out


@click.group()
def harness() -> None:
    """Make agent harnesses follow the protocol by themselves (Claude Code hooks; the
    protocol text for Codex, Gemini CLI and others)."""


@harness.command("install")
@click.argument("name", type=click.Choice(["claude", "codex", "gemini", "generic"]))
@click.option("--auto-claim", is_flag=True,
              help="claude: claim a free path before each edit (default: only deny held ones).")
@click.option("--file", "file_name", metavar="NAME",
              help="codex/gemini/generic: the instructions file (default AGENTS.md, GEMINI.md).")
@click.option("--mcp", "with_mcp", is_flag=True,
              help="Also write the `agent-registry mcp` server into the harness's project "
                   "MCP config (.mcp.json, .codex/config.toml, .gemini/settings.json).")
@pass_out
def harness_install(out: Output, name: str, auto_claim: bool, file_name: str | None,
                    with_mcp: bool = False) -> None:
    """Install the harness integration NAME in this repository.

    claude: merge hooks into .claude/settings.json (SessionStart registers, PreToolUse
    denies edits of paths others hold, UserPromptSubmit brings the messages waiting for
    the session into its context, Stop renews the heartbeat, SessionEnd finishes)
    and write the protocol into CLAUDE.md. codex, gemini, generic: write the protocol
    between markers into AGENTS.md or GEMINI.md (idempotent). --mcp (claude, codex,
    gemini): also merge this installation's MCP server into the project's MCP config,
    byte-identical on a second run (docs/mcp.md).
    """
    from ..errors import BadInput
    from ..store.git import discover
    from ..harness.settings import install_claude, install_protocol
    info = discover(out.directory)
    if info.toplevel is None:
        raise BadInput("harness install needs a working tree (this repository is bare)")
    if with_mcp:  # read and merged first: a bad config file changes nothing at all
        from ..harness.mcp import plan_mcp
        write_mcp = plan_mcp(info.toplevel, name)
    if name == "claude":
        result = install_claude(info.toplevel, auto_claim=auto_claim)
        text = f"merged Claude Code hooks into {result['settings']}; protocol in {result['protocol_file']}"
    else:
        result = install_protocol(info.toplevel, name, file_name=file_name)
        text = f"{'wrote' if result['changed'] else 'already up to date:'} protocol block in {result['file']}"
    if with_mcp:
        result["mcp"] = write_mcp()
        text += (f"\n{'wrote' if result['mcp']['changed'] else 'already up to date:'} "
                 f"MCP server {result['mcp']['server']} in {result['mcp']['file']}")
    out.emit(result, text)


@harness.command("hook", hidden=True)
@click.argument("harness_name", metavar="HARNESS",
                type=click.Choice(["claude", "codex", "gemini", "cursor", "opencode"]))
@click.argument("event", type=click.Choice(["session-start", "pre-tool-use",
                                                   "user-prompt-submit", "stop", "session-end"]))
@click.option("--auto-claim", is_flag=True, help="pre-tool-use: claim the path when it is free.")
@click.option("--pid", "agent_pid", metavar="PID",
              help="The harness's own pid (the hook passes $PPID); left unexpanded or "
                   "empty, the owner is found as for `register`.")
@click.option("--wake", type=click.IntRange(min=0), is_flag=False, flag_value=3, default=0,
              metavar="N", help="stop: keep the agent going while messages wait for it, at "
                                "most N times per turn (--wake alone: 3).")
def harness_hook(harness_name: str, event: str, auto_claim: bool, agent_pid: str | None,
                 wake: int) -> None:
    """Run by a harness: reads the hook's JSON on stdin, prints the answer in that
    harness's format (harness/hook.py).

    pre-tool-use fails closed: when it cannot decide it prints one line and exits 2,
    which blocks the tool call, unless AGENT_REGISTRY_ALLOW=1. Other events exit 1 on
    a failure, a non-blocking error."""
    import os
    from ..harness.decision import agent_pid as parse_pid
    from ..harness.hook import run
    try:
        raw = sys.stdin.read()
    except (OSError, UnicodeDecodeError) as exc:
        raw = f"\0unreadable stdin: {exc}"  # not JSON: the hook answers as for bad input
    outcome = run(harness_name, event, raw, dict(os.environ), pid=parse_pid(agent_pid),
                  auto_claim=auto_claim, wake=wake)
    if outcome.stdout:
        click.echo(outcome.stdout)
    if outcome.stderr:
        click.echo(outcome.stderr, err=True)
    sys.exit(outcome.code)
