"""``agent-registry shard``: convert the registry to lock shards, or upgrade lock shards
of layout format 2 to format 3 (sync/convert.py)."""
from __future__ import annotations

import click

from .context import Output, pass_out


@click.command()
@click.option("--count", metavar="N",
              help="How many lock shards (2 to 256; default: git config "
                   "agent-registry.shards, else 16).")
@pass_out
def shard(out: Output, count: str | None) -> None:
    """Convert the registry branch to lock shards (layout format 3).

    A new registry is made in lock shards already (`init`); this converts one made as
    one branch (by an earlier version, or by `init --shards 0`).
    The lock records move to N shard branches beside it (`<branch>-shards/00` …), each
    with the held lists of the sessions holding locks there; sessions, diaries and the
    wiki stay on the registry branch, which gains `layout.json` and a fence that makes
    older agent-registry versions refuse to claim; heartbeats and diary lines go to
    each clone's own ref. With a remote, pending operations are pushed first and the
    conversion lands in one atomic push; a clone that loses the race adopts the winner's.
    A registry in lock shards of format 2 (agent-registry 0.2) is upgraded instead: one
    registry-branch commit rewrites `layout.json` and the fence's text, its shards (and
    their count) stay. Idempotent: a registry in format 3 is left as it is (exit 0).
    Exit 1 when the registry uses a layout this version does not write, 2 for a bad
    --count. See docs/shards.md.
    """
    from ..sync.convert import convert, shard_count
    wanted = shard_count(count) if count is not None else None  # bad input: nothing opened
    result = convert(out.registry, wanted)
    if result["converted"]:
        moved = result["moved"]
        text = (f"converted {result['branch']} to {result['shards']} lock shards: "
                f"{moved['locks']} lock record(s) and {moved['held']} held list(s) moved")
    elif result.get("upgraded"):
        text = (f"upgraded {result['branch']} to layout format {result['format']}: its "
                f"{result['shards']} lock shards stay; heartbeats and diary lines go to "
                "clone refs")
    else:
        text = (f"{result['branch']} is already in lock shards ({result['shards']}, layout "
                f"format {result['format']})"
                + (", converted or upgraded by another clone" if result.get("by") else ""))
    out.emit(result, text)
