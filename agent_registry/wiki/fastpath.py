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
    code = quick(opts)
    if code is not None:
        return code
    import gc
    # The imports below (Whoosh's sixty modules) allocate tens of thousands of objects
    # that live as long as the process: the collector would walk them again and again for
    # nothing (a tenth of a query's CPU).  Off while importing, then they are frozen out
    # of its sight and it runs as usual for the query (an index build makes garbage).
    gc.disable()
    from .index import load_whoosh
    load_whoosh()
    gc.freeze()
    gc.enable()
    from ..cli.console import serve
    from . import api
    from .progress import Progress

    def query(registry) -> tuple[dict, str, int]:
        from ..sync.fresh import freshen, said
        view = freshen(registry)  # fetched first when older than agent-registry.readFreshness
        answer = api.search(registry, opts["text"], opts["limit"], Progress.on_terminal())
        said(registry)
        return {**answer, **view}, api.query_text(answer), 0

    return serve(opts, query)


def quick(opts: dict) -> int | None:
    """The usual query answered from the files, without the registry core or Whoosh's
    reading modules (about half of a warm query's CPU): the repository, its config, the
    view's freshness and the branch tip read as the Registry reads them in the plain
    case, the index read by wiki/segfiles.py, and its commit is that tip.  None when any
    of it is not so (no plain layout, a config that mentions agent-registry, a fetch due,
    a damaged ref, no index, one behind the tip or one segfiles does not
    read, a search that failed): the whole path decides then, and brings the index up
    to the tip; the answer is the same either way."""
    import time
    from ..cli.console import answer, warn
    from ..store.freshness import fresh_view
    from ..store.gitconfig import branch_name, config_from_files, remote_name
    from ..store.layout import plain_layout, ref_from_files, state_path
    from .index import INDEX_DIR, open_current, up_to_date
    info = plain_layout(opts["directory"])
    config = config_from_files(info.git_dir) if info else None
    if config is None:
        return None
    branch, remote = branch_name(config), remote_name(config)
    view = fresh_view(info.common_dir, branch, config, time.time()) if remote else {}
    if view is None:
        return None  # the whole path fetches first
    try:  # Registry.tip: the local branch, else what a plain clone fetched
        tip = ref_from_files(info.common_dir, f"refs/heads/{branch}")
        if tip is None and remote:
            tip = ref_from_files(info.common_dir, f"refs/remotes/{remote}/{branch}")
    except ValueError:
        return None
    opened = open_current(state_path(info.common_dir, INDEX_DIR), light=True)
    if tip is None or opened is None or opened.commit != tip:
        return None
    from . import api
    try:
        found = api.candidates(opened.ix, opts["text"], opts["limit"])
    except Exception:  # noqa: BLE001 — segments replaced meanwhile: the whole path retries
        return None
    result = api.ranked(opts["text"], opts["limit"], found, up_to_date(opened.entries))
    answer(opts, {**result, **view}, api.query_text(result))
    warn(opts, [])
    return 0
