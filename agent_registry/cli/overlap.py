"""``agent-registry overlap``: the conflict forecast across live sessions (docs/overlap.md)."""
from __future__ import annotations

import click

from .context import Output, pass_out
from .output import local_time


def overlap_text(report: dict) -> str:
    lines = []
    for o in report["overlaps"]:
        a, b = o["sides"]
        lines.append(f"{', '.join(a['sessions'])} ({a['branch'] or 'detached'}) and "
                     f"{', '.join(b['sessions'])} ({b['branch'] or 'detached'}), since "
                     f"{local_time(o['since'])}:")
        for p in o["paths"]:
            held = f", held by {', '.join(p['held_by'])}" if p["held_by"] else ""
            lines.append(f"  {p['kind']:<13} {p['path']}{held}")
    if not lines:
        lines.append(f"no overlap among {len(report['sessions'])} live session(s)")
    lines += [f"skipped {s['session']}: {s['reason']}" for s in report["skipped"]]
    if report["note"]:
        lines.append(f"note: {report['note']}")
    return "\n".join(lines)


@click.command()
@click.option("--notify", is_flag=True,
              help="Send each session of an overlap one message naming the other side's "
                   "session, its work, the paths and the kind (once per overlap, paths and "
                   "kinds, however many sessions work on a side).")
@pass_out
def overlap(out: Output, notify: bool) -> None:
    """Forecast merge conflicts: for every pair of live sessions on different branches or
    worktrees (other clones' through their pushed branches), the paths both changed since
    their merge base, uncommitted changes included: a textual conflict (git merge-tree),
    the same file changed on both sides, or a path one holds and the other changed.
    Other clones' branches are as of this clone's last `git fetch`.  Exit 0 whether or
    not there is an overlap."""
    from ..forecast.overlap import overlaps
    from ..sync.fresh import freshen, said
    freshen(out.registry)  # the sessions fetched first when older than readFreshness
    report = overlaps(out.registry)
    report.update(said(out.registry))
    if notify:
        from ..forecast.tell import notify as tell
        report["notified"] = tell(out.registry, report)
    text = overlap_text(report)
    if notify:
        fresh = [n for n in report["notified"] if n["created"]]
        text += f"\nnotified: {len(fresh)} message(s) sent" + (
            "".join(f"\n  {n['to']} about {n['from']} ({n['id']})" for n in fresh))
    out.emit(report, text)
