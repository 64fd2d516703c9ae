"""A click-free ``wiki query``: the console script (:mod:`agent_registry.cli.fast`) hands it
the command line first.

Importing click and building the command tree is a fifth of a warm whole-process query
(docs/benchmarks.md), so the question an agent asks before starting work is parsed here
by hand when its arguments are plain: the global ``--json``, ``--quiet``/``-q`` and
``-C PATH``, then ``wiki query TEXT`` with ``--limit N`` and ``--json``.  Anything else
(``--help``, an unknown or malformed option, no or two texts) returns None and goes to
the click command, which owns the help text and the usage errors.  Both call
:func:`.api.search` and print :func:`.api.query_text` or the same JSON.
"""
from __future__ import annotations


def parse(argv: list[str]) -> dict | None:
    """The options of a plain ``wiki query`` command line, or None to leave it to click."""
    from ..cli.console import global_options
    args = list(argv)
    opts = global_options(args)
    if opts is None:
        return None
    opts.update(limit=10, text=None)
    if args[:2] != ["wiki", "query"]:
        return None
    rest = args[2:]
    while rest:
        item = rest.pop(0)
        name, eq, value = item.partition("=")
        if not item.startswith("-") and opts["text"] is None:
            opts["text"] = item
        elif item == "--json":
            opts["json"] = True
        elif name == "--limit" and (eq or rest):
            raw = value if eq else rest.pop(0)
            if not (raw.isascii() and raw.isdigit()) or int(raw) < 1:
                return None  # click says what is wrong with it
            opts["limit"] = int(raw)
        else:
            return None
    return opts if opts["text"] is not None else None


def run(argv: list[str]) -> int | None:
    """Run a plain ``wiki query``: its exit code, or None when *argv* is not one."""
    opts = parse(argv)
    if opts is None:
        return None
    import gc
    # The imports below (Whoosh's sixty modules) allocate tens of thousands of objects
    # that live as long as the process: the collector would walk them again and again for
    # nothing (a tenth of a query's CPU).  Off while importing, then they are frozen out
    # of its sight and it runs as usual for the query (an index build makes garbage).
    gc.disable()
    from ..cli.console import serve
    from . import api
    from .index import load_whoosh
    from .progress import Progress
    load_whoosh()
    gc.freeze()
    gc.enable()

    def query(registry) -> tuple[dict, str, int]:
        from ..sync.fresh import freshen, said
        view = freshen(registry)  # fetched first when older than agent-registry.readFreshness
        answer = api.search(registry, opts["text"], opts["limit"], Progress.on_terminal())
        said(registry)
        return {**answer, **view}, api.query_text(answer), 0

    return serve(opts, query)
