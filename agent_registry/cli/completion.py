"""``agent-registry completion bash|zsh|fish``: the shell completion script, made by click's
own machinery (the script calls ``agent-registry`` back with
``_AGENT_REGISTRY_COMPLETE=bash_complete``, ``zsh_complete`` or ``fish_complete``), and
the completers of values that come from the registry: live session ids (``--session``
and SID arguments) and the paths a session holds (``lock release``).

A completer never fails: outside a repository, or with a registry it cannot read, it
offers nothing."""
from __future__ import annotations

import os

import click

from .console import SESSION_ENV

PROG = "agent-registry"
COMPLETE_VAR = "_AGENT_REGISTRY_COMPLETE"
SHELLS = ("bash", "zsh", "fish")


def _registry(ctx: click.Context):
    from ..sync import Registry
    directory = ctx.find_root().params.get("directory") or "."
    return Registry.open(directory)


def session_ids(ctx: click.Context, param, incomplete: str) -> list[str]:
    """Live session ids starting with *incomplete*."""
    try:
        registry = _registry(ctx)
        try:
            return sorted(s.id for s in registry.sessions() if s.id.startswith(incomplete))
        finally:
            registry.close()
    except Exception:  # noqa: BLE001 - completion offers nothing rather than failing
        return []


def held_paths(ctx: click.Context, param, incomplete: str) -> list[str]:
    """Paths held by the session (``--session``, else $AGENT_REGISTRY_SESSION; neither:
    every held path) starting with *incomplete*."""
    sid = ctx.params.get("sid") or os.environ.get(SESSION_ENV)
    try:
        registry = _registry(ctx)
        try:
            return sorted({l["path"] for l in registry.locks()
                           if (sid is None or l["owner"] == sid)
                           and l["path"].startswith(incomplete)})
        finally:
            registry.close()
    except Exception:  # noqa: BLE001
        return []


@click.command()
@click.argument("shell", type=click.Choice(SHELLS))
def completion(shell: str) -> None:
    """Print the completion script for SHELL (bash, zsh or fish): commands, options,
    live session ids and the paths a session holds.

    \b
    bash:  eval "$(agent-registry completion bash)"   (in ~/.bashrc)
    zsh:   eval "$(agent-registry completion zsh)"    (in ~/.zshrc)
    fish:  agent-registry completion fish > ~/.config/fish/completions/agent-registry.fish
    """
    from click.shell_completion import get_completion_class
    root = click.get_current_context().find_root().command  # the CLI, without importing it
    script = get_completion_class(shell)(root, {}, PROG, COMPLETE_VAR).source()
    click.echo(script)
