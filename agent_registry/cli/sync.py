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
    path meanwhile; such a lost lock is named (also when another command met the rewind
    first) and its session is sent a message. Exit 1 when a pending operation or a
    re-applied lock was refused,
    3 when the remote could not be used (unreachable, credentials refused, branch denied).
    In the lock-shard layout, each shard branch holding operations the remote has not
    seen (a claim made offline) is synced the same way after the registry branch, and
    counts toward the exit code; with clone refs (layout format 3), so is this clone's
    own ref when it holds heartbeats or diary lines the remote has not seen. The
    messages branch is synced the same way, after them.
    """
    from ..core.messages_branch import mailbox
    from ..errors import Refused, Unconfirmed
    from ..sync.remote import rewind_lines
    from ..sync.remote import sync as run_sync
    report = run_sync(out.registry, deadline=timeout)
    lines = [pushed_line(report, report["remote"])]
    lines += [f"confirmed: {', '.join(c['paths'] or [])} by {c['session']}" for c in report["confirmed"]]
    lines += [f"refused: {r.get('op')} {', '.join(r.get('paths') or [])} by {r.get('session')}: "
              f"{r['reason']}" for r in report["refused"]]
    lines += rewind_lines(report["rewind"]) if report["rewind"] else []
    from ..sync.shardsync import own_clone, sync_clone, sync_shards
    shards = sync_shards(out.registry, timeout, report["remote"])
    if shards is not None:  # lock shards (layout format 2): those that had something to push
        report["shards"] = shards
    parts = [("shard", part) for part in shards or []]
    clone = own_clone(out.registry)
    if clone is not None:  # layout format 3: this clone's own ref, when it has commits to push
        report["clone"] = sync_clone(clone, timeout, report["remote"])
        parts += [("clone ref", report["clone"])] if report["clone"] else []
    for kind, part in parts:
        lines.append(f"{kind} {part['branch']}: {pushed_line(part, part['remote'])}")
        lines += [f"confirmed: {', '.join(c['paths'] or [])} by {c['session']}"
                  for c in part["confirmed"]]
        lines += [f"refused: {r.get('op')} {', '.join(r.get('paths') or [])} by "
                  f"{r.get('session')}: {r['reason']}" for r in part["refused"]]
        lines += rewind_lines(part["rewind"]) if part.get("rewind") else []
    from .reports import layout_doc, layout_text
    report["layout"] = layout_doc(out.registry)
    lines.append(f"layout: {layout_text(report['layout'])}")
    branches = [part for _, part in parts]  # the exit code counts each like the registry's
    box = mailbox(out.registry)
    if box is not out.registry:  # the messages branch, synced the same way
        try:
            mail = run_sync(box, deadline=timeout)
        except Unconfirmed as exc:
            mail = {"remote": report["remote"], "pushed": False, "error": exc.message,
                    "remote_error": exc.details.get("remote_error"), "refused": []}
        report["messages"] = {k: mail.get(k) for k in (
            "pushed", "error", "remote_error", "tip", "pending", "refused", "sent", "made",
            "created", "landed")}
        if mail.get("tip") or mail.get("error"):  # said once there are messages
            lines.append(f"messages ({box.branch}): {pushed_line(mail, mail['remote'])}")
        lines += [f"refused: {r.get('op')} by {r.get('session')}: {r['reason']}"
                  for r in mail["refused"]]
    from ..sync.rooms import mark_arrived
    mark_arrived(out.registry)  # a high message fetched now: told at the next tool call
    refused = report["refused"] + report.get("messages", {}).get("refused", []) + \
        [r for part in branches for r in part["refused"]]
    pushed = report["pushed"] and report.get("messages", {}).get("pushed", True) and \
        all(part["pushed"] for part in branches)
    from ..sync.lost import lost_line, take_lost
    lost = report["lost"] = take_lost(out.registry)  # met by this sync or any command since
    lines += [lost_line(r) for r in lost]
    missing = _nowhere(out.registry, report["layout"])
    if missing:  # pushed what it could, and still no clone can read it: say so, and why
        report["missing"] = missing
        if not out.json and not out.quiet:
            click.echo("\n".join(lines))
        from ..branch.shards import missing_text
        raise Refused(missing_text(out.registry.repo, out.registry.branch,
                                   out.registry.remote, missing[0], report["layout"]["shards"]),
                      details=report)
    if not refused and not lost and pushed:
        return out.emit(report, "\n".join(lines))
    if not out.json and not out.quiet:
        click.echo("\n".join(lines))
    if refused or lost:
        raise Refused(f"{len(refused) + len(lost)} operation(s) refused by "
                      f"{report['remote']}", details=report)
    raise Unconfirmed(report.get("error") or report.get("messages", {}).get("error")
                      or next((p["error"] for p in branches if p.get("error")), None)
                      or "not pushed", details=report)


def _nowhere(registry, layout: dict) -> list[str]:
    """The lock shards *layout* names that neither this clone nor the remote has after
    the sync (its fetch pruned the remote's deleted ones; it pushed back those this clone
    has): a sync that leaves one so has fixed nothing, whatever it pushed."""
    if layout["format"] < 2 or not registry.remote:
        return []
    from ..branch.shards import absent
    return absent(registry.repo, registry.branch, registry.remote, layout["shards"])


def pushed_line(report: dict, remote: str) -> str:
    """What one branch's sync did, as it happened: the operations it pushed, that there
    was nothing to push, or why it did not push."""
    if not report["pushed"]:
        return f"not pushed to {remote}" + (f": {report['error']}" if report.get("error") else "")
    if report.get("made"):
        sent = f" with {report['sent']} operation(s)" if report.get("sent") else ""
        return f"made the branch anew on {remote} (it was gone there): pushed its tip{sent}"
    if report.get("created"):  # the remote never had it, as far as this clone knows
        sent = f" with {report['sent']} operation(s)" if report.get("sent") else ""
        return f"created the branch on {remote}: pushed its tip{sent}"
    if report.get("sent"):
        return f"pushed {report['sent']} operation(s) to {remote}"
    if report.get("landed"):  # what it carried for other clones, a page rendered again
        return f"pushed to {remote} (no operation of this clone's was pending)"
    return f"up to date with {remote}: nothing to push"


@click.command()
@click.option("--keep-days", type=int, required=True, help="Keep this many days of history.")
@click.option("--dry-run", is_flag=True,
              help="Say what would be squashed and kept on each branch; change nothing.")
@click.option("--yes", "-y", "assume_yes", is_flag=True,
              help="Do not ask for confirmation on a terminal.")
@pass_out
def gc(out: Output, keep_days: int, dry_run: bool = False, assume_yes: bool = False) -> None:
    """Squash registry history older than N days into one commit (state unchanged),
    on the registry branch, on each lock shard branch (layout format 2), on this clone's
    own ref (layout format 3; the other clones' refs are theirs to squash) and on its
    messages branch.  With a remote this rewrites the shared history every clone
    follows: on a terminal gc first says how many commits it would squash and asks
    (--yes skips the question; --dry-run only says it); without a terminal, or with
    --json (which asks nothing), a rewrite it would force-push needs --yes (exit 2
    otherwise, nothing changed).  On a terminal a progress bar on stderr counts the
    later commits as they are rewritten.  Exit 1 when a shard's or the clone ref's
    rewrite could not be pushed (the others stand; run gc again)."""
    import sys
    from ..core.messages_branch import mailbox
    from ..core.sharded import shards_of
    from ..errors import Refused, RegistryError
    from ..sync.gc import gc as run_gc
    from ..sync.shardsync import own_clone
    from ..wiki.progress import Progress
    asks = sys.stdin.isatty() and not out.json
    if not dry_run and not assume_yes and (asks or out.registry.remote):
        # every ref gc would rewrite (and force-push), not only the registry branch's
        plans = [(each.branch, run_gc(each, keep_days, dry_run=True)["squashed"])
                 for each in _rewritten(out.registry)]
        plans = [(branch, count) for branch, count in plans if count]
        where = f" and push the rewrites to {out.registry.remote}" if out.registry.remote else ""
        if plans and not asks:  # a rewrite every clone follows, forced there: never unasked
            from ..errors import BadInput
            from ..sync.state import redact
            raise BadInput(f"gc would rewrite the registry's history and force-push it to "
                           f"{redact(out.registry.remote)}: confirm on a terminal, or pass "
                           f"--yes")
        if plans and not click.confirm(
                "gc: squash " + ", ".join(f"{count} commit(s) of {branch}" for branch, count
                                          in plans)
                + f" older than {keep_days} day(s) into one each{where}?", err=True):
            raise Refused("gc: not confirmed; nothing changed (--yes skips the question)")
    result = run_gc(out.registry, keep_days, None if out.json else Progress.on_terminal(),
                    dry_run=dry_run)
    verb = "would squash" if dry_run else "squashed"
    lines = [f"{verb} {result['squashed']} commit(s), kept {result['kept']}"
             + (f", pruned {result['pruned_intents']} intent ref(s)" if result["pruned_intents"]
                else "")]
    shards = shards_of(out.registry)
    failed = []
    if shards:  # each lock shard is a branch of its own, rewritten under its own lease
        result["shards"] = []
        for shard in shards:
            try:
                part = {"branch": shard.branch, **run_gc(
                    shard, keep_days, None if out.json else Progress.on_terminal(), dry_run)}
                lines.append(f"shard {shard.branch}: {verb} {part['squashed']} commit(s), "
                             f"kept {part['kept']}")
            except RegistryError as exc:
                part = {"branch": shard.branch, "error": exc.message}
                failed.append(f"{shard.branch}: {exc.message}")
                lines.append(f"shard {shard.branch}: not squashed: {exc.message}")
            result["shards"].append(part)
    clone = own_clone(out.registry)
    if clone is not None and clone.tip() is not None:  # its heartbeats and diary lines
        try:
            result["clone"] = {"branch": clone.branch, **run_gc(
                clone, keep_days, None if out.json else Progress.on_terminal(), dry_run)}
            lines.append(f"clone ref {clone.branch}: {verb} {result['clone']['squashed']} "
                         f"commit(s), kept {result['clone']['kept']}")
        except RegistryError as exc:
            result["clone"] = {"branch": clone.branch, "error": exc.message}
            failed.append(f"{clone.branch}: {exc.message}")
            lines.append(f"clone ref {clone.branch}: not squashed: {exc.message}")
    box = mailbox(out.registry)
    if box is not out.registry and box.tip() is not None:  # the messages branch too
        result["messages"] = run_gc(box, keep_days, None if out.json else Progress.on_terminal(),
                                    dry_run)
        lines.append(f"messages ({box.branch}): {verb} {result['messages']['squashed']} "
                     f"commit(s), kept {result['messages']['kept']}")
    if failed:
        if not out.json and not out.quiet:
            click.echo("\n".join(lines))
        raise RegistryError(f"gc of {len(failed)} branch(es) failed: {'; '.join(failed)}",
                            details=result)
    out.emit(result, "\n".join(lines))


def _rewritten(registry) -> list:
    """The registries of every ref `gc` rewrites: the registry branch, each lock shard,
    this clone's own ref and the messages branch, where they exist here."""
    from ..core.messages_branch import mailbox
    from ..core.sharded import shards_of
    from ..sync.shardsync import own_clone
    clone, box = own_clone(registry), mailbox(registry)
    return [registry, *shards_of(registry),
            *([clone] if clone is not None and clone.tip() is not None else []),
            *([box] if box is not registry and box.tip() is not None else [])]
