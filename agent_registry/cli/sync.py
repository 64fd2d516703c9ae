"""Commands of the sync area: ``sync`` and ``gc``."""
from __future__ import annotations

import click

from .context import Output, pass_out


@click.command()
@click.option("--timeout", type=click.FloatRange(min=1), default=120, show_default=True,
              help="Seconds to keep retrying rejected pushes.")
@pass_out
def sync(out: Output, timeout: float) -> None:
    """Fetch, replay this clone's pending operations on the remote, and push.

    Each claim made while offline is confirmed or refused, as the remote decides. When
    the remote went back in time (force-pushed to an older state), this clone's live
    sessions and locks are re-applied, each refused only where another session took the
    path meanwhile. Exit 1 when a pending operation or a re-applied lock was refused,
    3 when the remote could not be used (unreachable, credentials refused, branch denied).
    """
    from ..errors import Refused
    from ..sync.remote import rewind_lines
    from ..sync.remote import sync as run_sync
    report = run_sync(out.registry, deadline=timeout)
    lines = [f"{'pushed to' if report['pushed'] else 'not pushed to'} {report['remote']}"
             + (f": {report['error']}" if report.get("error") else "")]
    lines += [f"confirmed: {', '.join(c['paths'] or [])} by {c['session']}" for c in report["confirmed"]]
    lines += [f"refused: {r.get('op')} {', '.join(r.get('paths') or [])} by {r.get('session')}: "
              f"{r['reason']}" for r in report["refused"]]
    lines += rewind_lines(report["rewind"]) if report["rewind"] else []
    lost = (report["rewind"] or {}).get("refused", [])
    if not report["refused"] and not lost and report["pushed"]:
        return out.emit(report, "\n".join(lines))
    if not out.json and not out.quiet:
        click.echo("\n".join(lines))
    if report["refused"] or lost:
        raise Refused(f"{len(report['refused']) + len(lost)} operation(s) refused by "
                      f"{report['remote']}", details=report)
    if not report["pushed"]:
        from ..errors import Unconfirmed
        raise Unconfirmed(report.get("error") or "not pushed", details=report)


@click.command()
@click.option("--keep-days", type=int, required=True, help="Keep this many days of history.")
@pass_out
def gc(out: Output, keep_days: int) -> None:
    """Squash registry history older than N days into one commit (state unchanged).
    On a terminal a progress bar on stderr counts the later commits as they are rewritten."""
    from ..sync.gc import gc as run_gc
    from ..wiki.progress import Progress
    result = run_gc(out.registry, keep_days, None if out.json else Progress.on_terminal())
    out.emit(result, f"squashed {result['squashed']} commit(s), kept {result['kept']}")
