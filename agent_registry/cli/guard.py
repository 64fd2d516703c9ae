"""``agent-registry guard`` and ``agent-registry hooks``: thin click commands over
:mod:`agent_registry.guard` and :mod:`agent_registry.enforce.hooks`.  (The git hooks
themselves run ``python -m agent_registry.guard``, which never imports click.)"""
from __future__ import annotations

import click

from .context import Output, pass_out


def _info(out: Output):
    from ..store.git import discover
    return discover(out.directory)


@click.command()
@click.argument("paths", nargs=-1)
@click.option("--range", "span", metavar="BASE..HEAD",
              help="Check every path the commits of BASE..HEAD change (a pull request's "
                   "check: docs/server.md), naming the commits that change a held one.")
@click.option("--branch", metavar="NAME",
              help="With --range: the branch the commits are on; a session working on "
                   "it is the one changing what it holds.")
@click.option("--session", "sid", metavar="SID",
              help="With --range: the session that made the commits.")
@pass_out
def guard(out: Output, paths, span: str | None, branch: str | None, sid: str | None) -> None:
    """Check PATHs (default: the staged paths) as the pre-commit hook does.

    Exit 1 when one is locked by another live session (named with what it works on),
    0 otherwise. The committer is $AGENT_REGISTRY_SESSION, else the live session whose
    process is an ancestor of this one, else a person.
    """
    from ..enforce.guard import PERSON, Guard, describe
    from ..errors import BadInput, Refused
    from ..branch.paths import normalize, plain
    info = _info(out)
    if span is not None or branch is not None or sid is not None:
        if span is None or paths:
            raise BadInput("--branch and --session go with --range, and --range takes no PATHs")
        return _guard_range(out, info, span, branch, sid)
    checker = Guard(info)
    try:
        if paths:
            # file names, each taken literally (as git diff gives them to the hook)
            targets = [normalize(plain(p), toplevel=info.toplevel, prefix=info.prefix,
                                 rule=checker.repo.path_rule) for p in paths]
        else:
            try:
                targets = checker.staged_paths()
            except RuntimeError as exc:
                raise BadInput(f"cannot read the staged paths: {exc}") from None
        report = checker.check(targets)
    finally:
        checker.close()
    for warning in report.warnings:
        out.warn(warning)
    if report.mode.startswith("off"):
        out.warn(f"guard {report.mode}: nothing checked")
    if report.unreadable:
        raise Refused(report.mode, details=report.to_dict())
    if report.blocked:
        if not out.json:
            for conflict in report.conflicts:
                click.echo("  " + describe(conflict), err=True)
        owners = ", ".join(sorted({c.owner for c in report.conflicts}))
        raise Refused(f"{len(report.conflicts)} path(s) locked by another live session "
                      f"({owners}); committing as {report.committer or PERSON}",
                      details=report.to_dict())
    out.emit(report.to_dict(),
             f"ok: {len(report.checked)} path(s), none locked by another live session")


def _guard_range(out: Output, info, span: str, branch: str | None, sid: str | None) -> None:
    """guard --range: every commit of BASE..HEAD against the locks."""
    from ..enforce.guard import PERSON, Guard, describe
    from ..enforce.pushcheck import judge, range_changes, reach
    from ..errors import Refused
    checker = Guard(info)
    checker.my_pids = set()  # the commits were made elsewhere: this process proves nothing
    try:
        changes = range_changes(checker, span)
        report, changed_by = judge(checker, changes, sid, branch)
    finally:
        checker.close()
    result = {**report.to_dict(), "range": span, "branch": branch, "commits": len(changes),
              "changed_by": changed_by}
    for warning in report.warnings:
        out.warn(warning)
    if report.mode.startswith("off"):
        out.warn(f"guard {report.mode}: nothing checked")
    if report.unreadable:
        raise Refused(report.mode, details=result)
    if report.blocked:
        if not out.json:
            for conflict in report.conflicts:
                click.echo(f"  {describe(conflict)}; changed by "
                           + ", ".join(changed_by.get(conflict.path, [])), err=True)
            for line in reach(report.conflicts):
                click.echo("  " + line, err=True)
        owners = ", ".join(sorted({c.owner for c in report.conflicts}))
        raise Refused(f"{len(report.conflicts)} path(s) changed in {span} locked by another "
                      f"live session ({owners}); changed by {sid or PERSON}"
                      + (f" on {branch}" if branch else ""), details=result)
    out.emit(result, f"ok: {len(report.checked)} path(s) changed by {len(changes)} commit(s) "
             f"in {span}, none locked by another live session")


@click.group()
def hooks() -> None:
    """Install, remove and inspect the git hooks (pre-commit, pre-merge-commit, pre-push,
    post-merge, post-checkout) that enforce locks."""


def _hook_lines(result: dict) -> str:
    lines = [f"hooks directory: {result['hooks_dir']}"]
    for hook in result["hooks"]:
        chained = f" (chains {hook['chained']})" if hook.get("chained") else ""
        lines.append(f"  {hook['hook']}: {hook['state']}{chained}")
    return "\n".join(lines)


@hooks.command("install")
@pass_out
def hooks_install(out: Output) -> None:
    """Install the hooks (honours core.hooksPath and worktrees); an existing hook is
    kept and still runs first, and uninstall restores it."""
    from ..enforce.hooks import install
    result = install(_info(out))
    out.emit(result, _hook_lines(result))


@hooks.command("uninstall")
@pass_out
def hooks_uninstall(out: Output) -> None:
    """Remove our hooks and put back the hooks they chained, byte for byte."""
    from ..enforce.hooks import uninstall
    result = uninstall(_info(out))
    out.emit(result, _hook_lines(result))


@hooks.command("status")
@pass_out
def hooks_status(out: Output) -> None:
    """Which hooks are installed, and the guard's mode (enforcing, or off and why)."""
    from ..enforce.hooks import status
    result = status(_info(out))
    out.emit(result, _hook_lines(result) + f"\nguard: {result['mode']}\n"
             f"pre-push guard: {'on' if result['push_guard'] else 'off'}")
