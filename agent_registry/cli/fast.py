"""The console script, with a click-free path for the commands agents run all the time:
``lock acquire``, ``lock check``, ``lock heartbeat`` and ``status``.

Importing click and building the command tree costs more than the whole of such a command
otherwise (docs/benchmarks.md).  These commands are parsed here by hand when their
arguments are plain (global ``--json``/``--quiet``/``--no-color``/``-C PATH``; paths, the
predecessor's trailing SID; ``--session``, ``--ttl``, ``--shared``; status's filters and
``--all``); anything else (``--help``, an unknown or malformed option, no path) goes to
the click CLI, which owns the help texts and the usage errors.  Both routes read their
arguments with :func:`lock_arguments`, call the same library functions and print through
:mod:`agent_registry.cli.output` and :mod:`agent_registry.cli.reports`.  ``wiki query`` has
a click-free path of its own, in :mod:`agent_registry.wiki.fastpath`.  Tests:
tests/test_import_budget.py keeps click and other unused modules out of these commands.
"""
import gc
import os
import sys

from .console import (BY_SESSION, SESSION_ENV, changed_elsewhere, global_options, hoist_globals,
                      lock_arguments, resolve_session, serve)

SESSION_FLAGS = ("--session", "--session-id")  # --session-id: the predecessor's `check`


LOCK_COMMANDS = ("acquire", "check", "heartbeat")
STATUS_FILTERS = {"--status": "status_filter", "--provider": "provider", "--project": "project"}


def parse(argv: list[str]) -> dict | None:
    """The hot command *argv* asks for, or None to leave it to click."""
    args = list(argv)
    opts = global_options(args)
    if opts is None:
        return None
    if args[:1] == ["status"]:
        return parse_status(args[1:], opts)
    opts.update(sid=None, ttl=600, shared=False, paths=[])
    if args[:1] != ["lock"] or len(args) < 2 or args[1] not in LOCK_COMMANDS:
        return None
    opts["command"] = args[1]
    rest = args[2:]
    while rest:
        item = rest.pop(0)
        name, eq, value = item.partition("=")
        if not item.startswith("-") or item == "-":
            opts["paths"].append(item)
        elif name in SESSION_FLAGS and (eq or rest):
            opts["sid"] = value if eq else rest.pop(0)
        elif name == "--ttl" and opts["command"] == "acquire" and (eq or rest):
            raw = value if eq else rest.pop(0)
            if not raw.lstrip("-").isdigit():
                return None
            opts["ttl"] = int(raw)
        elif item == "--shared" and opts["command"] == "acquire":
            opts["shared"] = True
        else:
            return None  # --help, --, an unknown option: click says what is wrong
    if not opts["paths"] and opts["command"] != "heartbeat":
        return None
    if opts["command"] == "acquire" and opts["sid"] is None and len(opts["paths"]) < 2 \
            and not os.environ.get(SESSION_ENV):
        return None  # no session anywhere: click's usage error
    return opts


def parse_status(rest: list[str], opts: dict) -> dict | None:
    """``status`` with its filters and ``--all``; --remote, --room, --repos go to click."""
    opts.update(command="status", show_all=False, status_filter=None, provider=None,
                project=None)
    while rest:
        item = rest.pop(0)
        name, eq, value = item.partition("=")
        if item == "--all":
            opts["show_all"] = True
        elif name in STATUS_FILTERS and (eq or rest):
            value = value if eq else rest.pop(0)
            if value.startswith("-"):
                return None  # click decides whether that is a value
            opts[STATUS_FILTERS[name]] = value
        else:
            return None
    return opts


def execute(opts: dict) -> int:
    from . import output

    def command(registry) -> tuple[object, str, int]:
        if opts["command"] == "status":
            from .reports import status_report
            return (*status_report(registry, show_all=opts["show_all"],
                                   status_filter=opts["status_filter"],
                                   provider=opts["provider"], project=opts["project"]), 0)
        if opts["command"] == "heartbeat":
            from .reports import heartbeat_report
            return (*heartbeat_report(registry, opts["paths"], opts["sid"]), 0)
        sid, paths = lock_arguments(registry, opts["paths"], opts["sid"])
        if opts["command"] == "acquire":
            sid = resolve_session(sid, given_by=BY_SESSION)
            result = registry.claim(sid, paths, ttl=opts["ttl"], shared=opts["shared"])
            lines = output.takeover_lines(result) + changed_elsewhere(registry, sid, result)
            if not opts["quiet"]:
                for line in lines:
                    print(line, file=sys.stderr)
            return result, output.claim_text(result), 0
        if registry.remote:  # without one the clone is the registry: nothing to freshen
            from ..sync.fresh import checked  # fetched first when older than readFreshness
            results, view = checked(registry, paths, sid)
        else:
            results, view = registry.check(paths, sid), {}
        return {"paths": results, **view}, output.check_text(results), output.check_code(results)

    if opts["command"] == "check":  # read without the core where it can be
        from .quickcheck import open_check
        return serve(opts, command, open_check)
    return serve(opts, command)


def run() -> None:
    """The ``agent-registry`` console script.  Leaves with ``os._exit`` after flushing:
    the interpreter's teardown of every module costs a one-shot command several ms."""
    argv = sys.argv[1:]
    try:
        argv = hoist_globals(argv)
        opts = parse(argv)
        code = None
        if opts is not None:
            # a one-shot command's few cycles die with it; the collector's passes over
            # every object its imports make cost it about 1 ms (docs/benchmarks.md)
            gc.disable()
            code = execute(opts)
            gc.enable()  # not for what runs longer: click's commands (watch, mcp ...)
        if code is None and argv[:2] == ["harness", "hook"]:  # run by a harness, often
            from ..harness.hook import main as hook
            code = hook(argv[2:])
        if code is None and "wiki" in argv:  # `wiki query` has its own click-free path
            from ..wiki.fastpath import run as wiki_query
            code = wiki_query(argv)
        if code is None:
            from .main import main
            code = main(argv)
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError as exc:  # the reader stopped early (`status --json | head`): it
        from .console import report  # has what it asked for, exit 0; any other broken pipe
        code = report(exc, "--json" in argv, lambda text, err: None)  # is a failure
    except Exception as exc:  # noqa: BLE001 — a bug, on either route: exit 70, trace in a file
        from .console import crashed
        code = crashed(exc, argv)
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    run()
