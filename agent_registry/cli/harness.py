"""``agent-registry harness``: thin click commands over :mod:`agent_registry.harness`
(install, uninstall, status: ``harness.install``; the hooks: ``harness.hook``)."""
from __future__ import annotations

import sys

import click

from .context import Output, pass_out


@click.group()
def harness() -> None:
    """Make agent harnesses follow the protocol by themselves: native hooks, MCP, a
    skill and the protocol text for Claude Code, Codex, Gemini CLI, Cursor, OpenCode,
    Copilot CLI, Qwen Code, and Aider's commit verification."""


HARNESS_NAMES = ["claude", "codex", "gemini", "cursor", "opencode", "aider", "copilot",
                 "qwen", "generic"]


def _repo(out: Output):
    from ..errors import BadInput
    from ..store.git import discover
    info = discover(out.directory)
    if info.toplevel is None:
        raise BadInput("harness commands need a working tree (this repository is bare)")
    return info


class NegativeValues(click.Command):
    """A command with an option whose value may be left out (``--wake [N]``): click
    takes a value that starts with ``-`` after such an option (``--wake -1``, ``--wake
    -0``, and ``--wake=-0``, which it splits) for the next option, an unknown one.  Here
    the option's own type judges a number given to an option that takes a value: a bad
    one's error names the option and its range (``Invalid value for '--wake': -1 is not
    in the range x>=1``), exit 2, as for any other bad value; a good one (``-0``) is
    handed on as the value it is (``--wake=0``)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        import re
        valued = {name: param for param in self.params if isinstance(param, click.Option)
                  and not param.is_flag and not param.count and param.nargs == 1
                  for name in param.opts if name.startswith("--")}
        args = list(args)
        position = 0
        while position < len(args) and args[position] != "--":
            name, eq, value = args[position].partition("=")
            if not eq:
                value = args[position + 1] if position + 1 < len(args) else ""
            if name in valued and re.fullmatch(r"-\d+(\.\d*)?", value):
                param = valued[name]
                value = str(param.type.convert(value, param, ctx))  # a bad one raises
                if not value.startswith("-"):
                    args[position:position + 1 + (not eq)] = [f"{name}={value}"]
            position += 1
        return super().parse_args(ctx, args)


def _names(name: str | None, every: bool, pick) -> list[str]:
    from ..errors import BadInput
    if bool(name) == every:
        raise BadInput("name one harness or give --all")
    return [name] if name else pick()


@harness.command("install", cls=NegativeValues)
@click.argument("name", required=False, type=click.Choice(HARNESS_NAMES))
@click.option("--all", "every", is_flag=True,
              help="Every harness found on this machine (its CLI on PATH or its config "
                   "directory in HOME) or already configured in this repository.")
@click.option("--mcp", "with_mcp", is_flag=True,
              help="Also write the `agent-registry mcp` server into the harness's project "
                   "MCP config (.mcp.json, .codex/config.toml, .gemini/settings.json, "
                   ".cursor/mcp.json, opencode.json, .qwen/settings.json).")
@click.option("--trust", "grant", is_flag=True,
              help="Take the trust step for the harness: Claude Code's MCP approval in "
                   ".claude/settings.local.json, Codex's project trust_level and each "
                   "hook's trusted hash in ~/.codex/config.toml, Gemini CLI's "
                   "~/.gemini/trustedFolders.json, Copilot CLI's trustedFolders in "
                   "~/.copilot/config.json, Qwen Code's ~/.qwen/trustedFolders.json.")
@click.option("--wake", type=click.IntRange(min=1), is_flag=False, flag_value=3,
              default=None, metavar="N",
              help="The end-of-turn hook keeps the agent going while messages wait for "
                   "it, at most N times per turn (--wake alone: 3).")
@click.option("--hold", type=click.IntRange(min=1, max=3600), default=None,
              metavar="SECONDS",
              help="The end-of-turn hook, when nothing waits, listens up to SECONDS for a "
                   "message to the session and keeps the agent going with it (keep it under "
                   "the harness's hook timeout; no harness lets a tool start a turn in an "
                   "idle chat).")
@click.option("--auto-claim", is_flag=True,
              help="The edit gate claims a free path before the edit (default: it only "
                   "denies paths others hold).")
@click.option("--deny-overlap", is_flag=True,
              help="The edit gate refuses a file another live session has changed (on its "
                   "branch, uncommitted in its worktree, or pushed from another clone); "
                   "default: it warns the agent, naming that session, and lets the edit on.")
@click.option("--no-memory", is_flag=True,
              help="The session-start hook hands the agent no wiki entries (default: the "
                   "few most relevant to its work and the paths it holds).")
@click.option("--file", "file_name", metavar="NAME",
              help="generic: the instructions file (default AGENTS.md).")
@pass_out
def harness_install(out: Output, name: str | None, every: bool, with_mcp: bool, grant: bool,
                    wake: int | None, hold: int | None, auto_claim: bool,
                    deny_overlap: bool, no_memory: bool, file_name: str | None) -> None:
    """Install the harness integration NAME (or --all) in this repository: the native
    hooks (session start registers, the edit gate denies edits and common shell writes
    of paths another session holds, prompts bring waiting messages, the end of a turn
    renews the heartbeat, session end finishes), the skill, the protocol text in the
    file the agent reads (CLAUDE.md, AGENTS.md, GEMINI.md, QWEN.md), and with --mcp the
    MCP server. Copilot CLI: .github/hooks/agent-registry.json. Aider: .aider.conf.yml (git-commit-verify, read AGENTS.md). Every file is
    merged with what is there, byte-identical on a second run, and restored byte for
    byte by `harness uninstall`. Prints the trust step a person must take."""
    from ..errors import BadInput
    from ..harness.install import Options, found, install_many
    from ..harness.mcp import FILES
    if with_mcp and name and name not in FILES:  # with --all, those without are skipped
        raise BadInput(f"--mcp: {name} has no MCP configuration ({', '.join(sorted(FILES))})")
    if file_name and name != "generic":  # the others' files are the ones their agents read
        raise BadInput("--file: only for generic")
    info = _repo(out)
    names = _names(name, every, lambda: found(info.toplevel, info.git_dir))
    result = install_many(info.toplevel, info.git_dir, names,
                          Options(mcp=with_mcp, auto_claim=auto_claim, wake=wake, hold=hold,
                                  deny_overlap=deny_overlap, no_memory=no_memory),
                          grant=grant, file_name=file_name)
    if with_mcp:  # the entries start this installation's server: it needs the extra
        from ..store.extras import missing, needed
        if missing("mcp"):
            result["mcp_extra_missing"] = missing("mcp")
            out.warn(f"the MCP entries written will not start: {needed('mcp').message}")
    out.emit(result, _install_text(result))


def _install_text(result: dict) -> str:
    lines = []
    for h in result["harnesses"]:
        same = [f for f in h["files"] if f not in h["written"]]
        what = f"wrote {', '.join(h['written'])}" if h["written"] else "already up to date"
        if h["written"] and same:
            what += f" (already current: {', '.join(same)})"
        lines.append(f"{h['harness']}: {what}")
        lines += [f"  trusted: {path}" for path in h["trust_granted"]]
        lines += [f"  note: {note}" for note in h["notes"]]
        if h["trust_step"]:
            lines.append(f"  to do: {h['trust_step']}")
    return "\n".join(lines) or "no harness found (name one: harness install claude)"


@harness.command("uninstall")
@click.argument("name", required=False, type=click.Choice(HARNESS_NAMES))
@click.option("--all", "every", is_flag=True, help="Every harness installed in this clone.")
@pass_out
def harness_uninstall(out: Output, name: str | None, every: bool) -> None:
    """Take back what `harness install` wrote for NAME (or --all): each file restored
    byte for byte, files it created deleted, directories it created removed when empty.
    A file edited since keeps those edits: only our parts are taken out (hooks, MCP
    entry, protocol block), or, when ours alone (a skill), it is left and named; a file
    another installed harness
    still uses stays until that one is uninstalled. Trust granted in your home
    directory stays."""
    from ..harness.files import installed
    from ..harness.install import uninstall_many
    info = _repo(out)
    names = _names(name, every, lambda: installed(info.git_dir))
    result = uninstall_many(info.toplevel, info.git_dir, names)
    lines = []
    for h in result["harnesses"]:
        parts = [f"{label} {', '.join(h[key])}" for key, label in (
            ("restored", "restored"), ("deleted", "deleted"),
            ("kept", "kept (another harness uses it):"),
            ("unmerged", "took our parts out of (edited since install):"),
            ("changed", "left (edited since install):")) if h[key]]
        lines.append(f"{h['harness']}: {'; '.join(parts) or 'nothing installed'}")
    out.emit(result, "\n".join(lines) or "nothing installed")


@harness.command("status")
@pass_out
def harness_status(out: Output) -> None:
    """Per harness: its hooks, MCP entry, skill and protocol text (current, stale,
    absent), the executable its hooks run, and whether the harness will run them
    (trusted or approved), with the step left to take. Exit 1 when an installed edit
    gate will not run (its executable gone, the harness not trusting it, Aider's git
    hook missing), naming the one command that fixes it."""
    from ..harness.install import HARNESSES, status
    info = _repo(out)
    result = {"harnesses": [status(info.toplevel, info.git_dir, h) for h in HARNESSES]}
    lines = []
    for h in result["harnesses"]:
        if not h["installed"]:
            lines.append(f"{h['harness']}: not installed")
            continue
        parts = [f"{k} {h[k]}" for k in ("hooks", "mcp", "skill", "protocol", "config")
                 if h.get(k) is not None]
        bad = [e["path"] for e in h["executable"] or [] if not e["ok"]]
        if bad:
            parts.append(f"hook executable missing: {', '.join(bad)}")
        if h["trusted"] is not None:
            parts.append("trusted" if h["trusted"] else "NOT trusted")
        if h.get("enforced_by"):
            parts.append(f"enforced by {h['enforced_by']}")
        lines.append(f"{h['harness']}: {', '.join(parts)}")
        if h.get("gate"):
            lines.append(f"  FAIL: the edit gate will not run: {h['gate']}; fix: {h['gate_fix']}")
        if h["trust_step"]:
            lines.append(f"  to do: {h['trust_step']}")
    out.emit(result, "\n".join(lines))
    if any(h.get("gate") for h in result["harnesses"]):
        click.get_current_context().exit(1)


@harness.command("hook", hidden=True, cls=NegativeValues)
@click.argument("harness_name", metavar="HARNESS",
                type=click.Choice(["claude", "codex", "gemini", "cursor", "opencode",
                                   "copilot", "qwen"]))
@click.argument("event", type=click.Choice(["session-start", "pre-tool-use", "post-tool-use",
                                                   "user-prompt-submit", "stop", "session-end"]))
@click.option("--auto-claim", is_flag=True, help="pre-tool-use: claim the path when it is free.")
@click.option("--deny-overlap", is_flag=True,
              help="pre-tool-use: refuse a file another live session has changed.")
@click.option("--no-memory", is_flag=True,
              help="session-start: hand the agent no wiki entries.")
@click.option("--pid", "agent_pid", metavar="PID",
              help="The harness's own pid (the hook passes $PPID); left unexpanded or "
                   "empty, the owner is found as for `register`.")
@click.option("--wake", type=click.IntRange(min=0), is_flag=False, flag_value=3, default=0,
              metavar="N", help="stop: keep the agent going while messages wait for it, at "
                                "most N times per turn (--wake alone: 3).")
@click.option("--hold", type=click.IntRange(min=0), default=0, metavar="SECONDS",
              help="stop: with nothing waiting, listen up to SECONDS for a message to the "
                   "session and keep the agent going with it.")
def harness_hook(harness_name: str, event: str, auto_claim: bool, deny_overlap: bool,
                 no_memory: bool, agent_pid: str | None, wake: int, hold: int) -> None:
    """Run by a harness: reads the hook's JSON on stdin, prints the answer in that
    harness's format (harness/hook.py).

    pre-tool-use fails closed: when it cannot decide it prints one line and exits 2,
    which blocks the tool call, unless AGENT_REGISTRY_ALLOW=1. post-tool-use is the
    backstop: it puts back a held file the tool call changed and says so. Other events
    exit 1 on a failure, a non-blocking error."""
    import os
    from ..harness.hook import agent_pid as parse_pid, run
    try:
        raw = sys.stdin.read()
    except (OSError, UnicodeDecodeError) as exc:
        raw = f"\0unreadable stdin: {exc}"  # not JSON: the hook answers as for bad input
    outcome = run(harness_name, event, raw, dict(os.environ), pid=parse_pid(agent_pid),
                  auto_claim=auto_claim, wake=wake, hold=hold, deny_overlap=deny_overlap,
                  no_memory=no_memory)
    if outcome.stdout:
        click.echo(outcome.stdout)
    if outcome.stderr:
        click.echo(outcome.stderr, err=True)
    sys.exit(outcome.code)


@harness.command("run", context_settings={"ignore_unknown_options": True})
@click.argument("harness_name", metavar="HARNESS", type=click.Choice(["aider"]))
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.option("--executable", "program", metavar="PATH", default="aider", show_default=True,
              help="The harness's command.")
@pass_out
def harness_run(out: Output, harness_name: str, args: tuple[str, ...], program: str) -> None:
    """Run a harness that starts nothing of ours (Aider) as a registered session: the
    session is registered, exported to it as AGENT_REGISTRY_SESSION and finished when it
    exits; after each of its edits the backstop puts back a held file it changed and
    tells the model (Aider's lint command). ARGS go to the harness (after `--`); its exit
    code is this command's."""
    import os
    from ..harness.aider_run import run
    from ..harness.command import executable
    code = run([program, *args], os.path.abspath(out.directory or "."), dict(os.environ),
               executable())
    click.get_current_context().exit(code)


@harness.command("after-edit", hidden=True)
@click.argument("files", nargs=-1)
@pass_out
def harness_after_edit(out: Output, files: tuple[str, ...]) -> None:
    """Run by Aider after each edit (the lint command `harness run aider` gives it): a
    held file the edit changed is put back and the model told; exit 1 when it was."""
    import os
    from ..harness.aider_run import after_edit
    told = after_edit(list(files), os.path.abspath(out.directory or "."), dict(os.environ))
    if told:
        click.echo(told)
        click.get_current_context().exit(1)
