"""What `status` and `lock heartbeat` compute and say, without click: the click commands
(cli/main.py) and the click-free fast path (cli/fast.py) both call these, so the two
routes answer alike.  Each returns ``(document for --json, text)``."""
from __future__ import annotations

from .output import age, local_time


def heartbeat_report(registry, args, sid: str | None) -> tuple[dict, str]:
    """``lock heartbeat [PATH...] [SID]``: renew the session and its locks; carried over
    to the hub when the repository has one (sync.rooms is imported only then)."""
    from .console import BY_SESSION, lock_arguments, resolve_session
    sid, paths = lock_arguments(registry, args, sid, need_path=False)
    result = registry.heartbeat(resolve_session(sid, given_by=BY_SESSION), paths)
    unpushed = dict(registry.unpushed)  # before the rooms' mirror writes elsewhere
    if registry.config.get("agent-registry.hub"):
        from ..sync.rooms import mirror
        mirror(registry, result["session"], "heartbeat")
    return {**result, **unpushed}, f"heartbeat {result['session']} ({result['locks']} lock(s))"


def layout_doc(registry) -> dict:
    """The registry's layout, as `init`, `status` and `sync` report it: ``format`` (1:
    one branch; 3: lock shards with clone refs) and ``shards`` (0 for one branch)."""
    from ..core.sharded import layout
    marker = layout(registry)
    return {"format": marker["format"], "shards": marker.get("shards", 0)}


def layout_text(doc: dict) -> str:
    if doc["format"] == 1:
        return "one branch, layout format 1"
    refs = " with clone refs" if doc["format"] >= 3 else ""
    shards = "1 lock shard" if doc["shards"] == 1 else f"{doc['shards']} lock shards"
    return f"{shards}{refs}, layout format {doc['format']}"


def sync_line(state: dict) -> str:
    if not state.get("enabled"):
        return f"sync: off ({state.get('detail', 'no remote configured')})"
    parts = [f"sync: {state.get('remote')}", f"ahead {state.get('ahead', 0)}",
             f"behind {state.get('behind', 0)}"]
    parts.append(f"last fetch {local_time(state['last_fetch'])}" if state.get("last_fetch")
                 else "never fetched here")
    if state.get("last_success"):
        parts.append(f"last success {local_time(state['last_success'])}")
    if state.get("last_error"):
        parts.append(f"last error: {state['last_error']}")
    shards = state.get("shards")
    if shards:
        parts.append(f"shards ahead {shards['ahead']} of {shards['count']}")
    clone = state.get("clone") or {}
    if clone.get("ahead"):  # layout format 3: heartbeats or diary lines not pushed yet
        parts.append(f"clone ref ahead {clone['ahead']}")
    mail = state.get("messages") or {}
    if mail.get("ahead") or mail.get("behind"):
        parts.append(f"messages ahead {mail['ahead']} behind {mail['behind']}")
    rewind = state.get("rewind")
    if not rewind:
        return ", ".join(parts)
    lost = "".join(f"; not re-applied {r['path'] or 'session ' + r['session']}: {r['reason']}"
                   for r in rewind["refused"])
    return ", ".join(parts) + (
        f"\nsync: {state.get('remote')} went back in time at {local_time(rewind['at'])}: "
        f"re-applied {len(rewind['reapplied'])} session/lock record(s) of this clone{lost}")


def status_report(registry, *, show_all: bool = False, status_filter: str | None = None,
                  provider: str | None = None, project: str | None = None) -> tuple[dict, str]:
    """``status``: the sessions table, the layout and the sync line."""
    from ..branch.records import parse_iso
    from ..sync.fresh import freshen, said
    freshen(registry)  # fetched first when older than agent-registry.readFreshness
    doc = registry.status(include_ended=show_all, status=status_filter,
                          provider=provider, project=project)
    doc.update(said(registry))
    doc["layout"] = layout_doc(registry)
    if doc["sync"].get("enabled"):  # the messages branch syncs on its own: its ahead/behind
        from ..core.messages_branch import mailbox
        box = mailbox(registry)
        if box is not registry:
            mail = box.sync_state()
            doc["sync"]["messages"] = {"branch": box.branch, "ahead": mail["ahead"],
                                       "behind": mail["behind"]}
        from ..sync.shardsync import clone_sync_state, shard_sync_state
        shards = shard_sync_state(registry)  # lock shards: how many have unpushed work
        if shards is not None:
            doc["sync"]["shards"] = shards
        clone = clone_sync_state(registry)  # format 3: this clone's own ref
        if clone is not None:
            doc["sync"]["clone"] = clone
    now = registry.clock()
    rows = [[s["id"], s["provider"], s["project"], s["working_on"],
             "zombie" if s.get("zombie") else s["status"],
             age(now - (parse_iso(s["registered_at"]) or now))] for s in doc["sessions"]]
    from .table import render_table, status_color  # status only, not a heartbeat
    text = (render_table(["SESSION", "PROVIDER", "PROJECT", "WORKING ON", "STATUS", "AGE"], rows,
                         color=status_color) if rows else "no sessions") + "\n" + \
        f"layout: {layout_text(doc['layout'])}\n" + sync_line(doc["sync"])
    text += "".join(f"\nclock: {c['session']}'s heartbeat is dated {c['ahead_seconds']} s in "
                    f"the future: the clock of {c['host'] or 'its host'} runs ahead; its locks "
                    f"age from when this clone first saw it ({local_time(c['first_seen'])})"
                    for c in doc["clock"])
    text += "".join(f"\nreason: {r['owner']} holds {r['path']}: {r['reason']}"
                    for r in doc["reasons"])
    text += "".join(f"\nzombie: {s['id']}: {s['zombie']} (`agent-registry cleanup` stops it)"
                    for s in doc["sessions"] if s.get("zombie"))
    return doc, text
