"""``agent-registry server`` and ``agent-registry ci``: thin click commands over
:mod:`agent_registry.enforce.server` and :mod:`agent_registry.enforce.ci` (docs/server.md)."""
from __future__ import annotations

import click

from .context import Output, pass_out


@click.group()
def server() -> None:
    """The remote's own check: a pre-receive hook in the bare repository the team pushes
    to, refusing a push that changes a path another live session holds."""


def _hook_line(result: dict) -> str:
    chained = f" (chains {result['chained']})" if result.get("chained") else ""
    return f"{result['hook']}: {result['state']}{chained}\n  {result['path']}"


@server.command("install")
@click.argument("bare_repo", default=".", metavar="[BARE_REPO]")
@pass_out
def server_install(out: Output, bare_repo: str) -> None:
    """Put the pre-receive hook in BARE_REPO (default: here), keeping an existing one
    (it runs first), and let pushes carry options (receive.advertisePushOptions), so
    `git push -o agent-registry.allow=REASON` overrides it, recorded on the server."""
    from ..enforce.server import install
    result = install(bare_repo)
    out.emit(result, _hook_line(result))


@server.command("uninstall")
@click.argument("bare_repo", default=".", metavar="[BARE_REPO]")
@pass_out
def server_uninstall(out: Output, bare_repo: str) -> None:
    """Remove the pre-receive hook from BARE_REPO, putting back the hook it chained."""
    from ..enforce.server import uninstall
    result = uninstall(bare_repo)
    out.emit(result, _hook_line(result))


@server.command("status")
@click.argument("bare_repo", default=".", metavar="[BARE_REPO]")
@pass_out
def server_status(out: Output, bare_repo: str) -> None:
    """Whether BARE_REPO's pre-receive hook is ours and current, and the overrides it
    recorded (who pushed over whose locks, and why)."""
    from ..enforce.server import status
    result = status(bare_repo)
    lines = [_hook_line(result), f"overrides recorded: {len(result['overrides'])}"]
    lines += [f"  {o['at']} {o['ref']} by {o.get('session') or o.get('user') or '?'}: "
              f"{o['reason']}" for o in result["overrides"][-10:]]
    out.emit(result, "\n".join(lines))


@click.group()
def ci() -> None:
    """A pull request's check: a workflow that runs `agent-registry guard --range`."""


@ci.command("install")
@click.argument("forge", type=click.Choice(["github", "gitlab"]))
@click.option("--force", is_flag=True, help="Overwrite a workflow file that is not ours.")
@click.option("--source", metavar="REQUIREMENT",
              help="What the workflow pip-installs agent-registry from (it is not on PyPI), "
                   "e.g. git+https://HOST/ORG/agent-registry@v0.3.0; default: the one the "
                   "workflow has, else this install's git URL, else unset (the check fails "
                   "until it is set).")
@pass_out
def ci_install(out: Output, forge: str, force: bool, source: str | None) -> None:
    """Write the workflow of FORGE into this repository's worktree (GitHub Actions:
    .github/workflows/agent-registry.yml; GitLab CI: .gitlab/agent-registry.yml, to
    include from .gitlab-ci.yml); commit it like any other file."""
    from ..enforce.ci import install
    from ..store.git import discover
    result = install(discover(out.directory), forge, force=force, source=source)
    said = (f"{result['path']}: unchanged" if result["state"] == "unchanged" else
            f"wrote {result['path']} ({result['state']})")
    out.emit(result, said + (f"\n{result['next']}" if result.get("next") else ""))
