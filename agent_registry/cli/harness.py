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
@click.argument("harness_name", metavar="HARNESS", type=click.Choice(["claude"]))
@click.argument("event", type=click.Choice(["session-start", "pre-tool-use",
                                                   "user-prompt-submit", "stop", "session-end"]))
@click.option("--auto-claim", is_flag=True, help="pre-tool-use: claim the path when it is free.")
@click.option("--pid", "agent_pid", metavar="PID",
              help="Claude Code's own pid (the hook passes $PPID); left unexpanded or "
                   "empty, the owner is found as for `register`.")
def harness_hook(harness_name: str, event: str, auto_claim: bool, agent_pid: str | None) -> None:
    """Run by Claude Code: reads the hook's JSON on stdin, prints the JSON decision.

    A failure exits 1, which Claude Code shows as a non-blocking error and goes on:
    exit 2 would block the tool call, and only a deny decision may do that."""
    from ..errors import RegistryError
    from ..harness.settings import agent_pid as parse_pid, run_claude_hook
    try:
        answer = run_claude_hook(event, sys.stdin.read(), auto_claim=auto_claim,
                                 pid=parse_pid(agent_pid))
    except RegistryError as exc:
        if exc.exit_code == 1:
            raise
        raise RegistryError(exc.message) from None
    if answer is not None:
        click.echo(json.dumps(answer))
