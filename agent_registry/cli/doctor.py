"""``agent-registry doctor``: a thin click command over :mod:`agent_registry.doctor`."""
from __future__ import annotations

import click

from .context import Output, pass_out

MARK = {"ok": "ok  ", "warn": "warn", "fail": "fail"}


COLOR = {"ok": "green", "warn": "yellow", "fail": "red"}


def report_text(report: dict, color: bool = False) -> str:
    """One line per check (and the fix under a problem), then the summary line; with
    *color* (a terminal), the marks and the summary in green, yellow and red."""
    def paint(text: str, status: str) -> str:
        return click.style(text, fg=COLOR[status], bold=(status == "fail") or None) if color else text

    lines = []
    for check in report["checks"]:
        lines.append(f"{paint(MARK[check['status']], check['status'])}  "
                     f"{check['name']}: {check['verdict']}")
        if check["status"] != "ok" and check["fix"]:
            lines.append(f"      fix: {check['fix']}")
    lines += [f"fixed: {name}" for name in report["fixed"]]
    lines += [f"could not fix {e['name']}: {e['error']}" for e in report["fix_errors"]]
    failing = [c for c in report["checks"] if c["status"] == "fail"]
    fixable = sum(1 for c in report["checks"] if c["status"] != "ok" and c["fixable"])
    if not failing:
        lines.append(paint("healthy", "ok"))
    else:
        lines.append(paint(f"{len(failing)} problem(s) found", "fail")
                     + (f" (--fix can fix {fixable})" if fixable else ""))
    return "\n".join(lines)


@click.command()
@click.option("--fix", is_flag=True,
              help="Run the fixes that are safe (init, hooks install, harness install, "
                   "sync, cleanup, the wiki index), then check again.")
@click.option("--json", "json_here", is_flag=True,
              help="Print the result as JSON (same as the global --json).")
@pass_out
def doctor(out: Output, fix: bool, json_here: bool) -> None:
    """Check that this clone is ready for agents: git, the registry branch (every record
    parses), the git hooks, harness settings, sync and the remote, clock skew, session
    owners, zombie sessions and stale locks, the wiki index. One line per check: ok,
    warn or fail, with the fix. Exit 0 when nothing fails, 1 when a problem is found
    (after --fix: one that is left)."""
    from ..doctor import doctor as examine
    out.json = out.json or json_here
    report = examine(out.registry, fix=fix)
    import sys

    from .console import color_on
    out.emit(report, report_text(report, color=color_on(sys.stdout)))
    if not report["healthy"]:
        click.get_current_context().exit(1)
