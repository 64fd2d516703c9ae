"""The console script, with a click-free path for the commands agents run before every
edit: ``lock acquire`` and ``lock check``.

Importing click and building the command tree is about a third of a one-shot claim
(docs/benchmarks.md).  These two commands are parsed here by hand when their arguments
are plain (global ``--json``/``--quiet``/``-C PATH``; paths; ``--session``, ``--ttl``,
``--shared``); anything else (``--help``, an unknown or malformed option, no path) goes
to the click CLI, which owns the help texts and the usage errors.  Both paths call the
same library functions and print through :mod:`agent_registry.output`.
"""
from __future__ import annotations

import os
import sys

SESSION_ENV = "AGENT_REGISTRY_SESSION"


def parse(argv: list[str]) -> dict | None:
    """The hot command *argv* asks for, or None to leave it to click."""
    opts = {"json": False, "quiet": False, "directory": ".", "sid": None, "ttl": 600,
            "shared": False, "paths": []}
    args = list(argv)
    while args and args[0].startswith("-"):
        flag = args.pop(0)
        if flag == "--json":
            opts["json"] = True
        elif flag in ("--quiet", "-q"):
            opts["quiet"] = True
        elif flag == "-C" and args:
            opts["directory"] = args.pop(0)
        else:
            return None
    if args[:1] != ["lock"] or len(args) < 3 or args[1] not in ("acquire", "check"):
        return None
    opts["command"] = args[1]
    rest = args[2:]
    while rest:
        item = rest.pop(0)
        name, eq, value = item.partition("=")
        if not item.startswith("-") or item == "-":
            opts["paths"].append(item)
        elif name == "--session" and (eq or rest):
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
    opts["sid"] = opts["sid"] or os.environ.get(SESSION_ENV)
    if not opts["paths"] or (opts["command"] == "acquire" and not opts["sid"]):
        return None
    return opts


def execute(opts: dict) -> int:
    from . import output
    from .errors import RegistryError
    from .registry import Registry
    registry = None
    try:
        registry = Registry.open(opts["directory"])
        if opts["command"] == "acquire":
            result = registry.claim(opts["sid"], opts["paths"], ttl=opts["ttl"],
                                    shared=opts["shared"])
            data, text = result, output.claim_text(result)
        else:
            results = registry.check(opts["paths"], opts["sid"])
            data, text = {"paths": results}, output.check_text(results)
        if opts["json"]:
            print(output.to_json(data))
        elif not opts["quiet"]:
            print(text)
        return 0
    except RegistryError as exc:
        if opts["json"]:
            print(output.error_json(exc))
        print(f"agent-registry: {exc.message}", file=sys.stderr)
        return exc.exit_code
    finally:
        if registry is not None:
            if not opts["quiet"]:
                for message in registry.warnings:
                    print(f"agent-registry: warning: {message}", file=sys.stderr)
            registry.close()


def run() -> None:
    """The ``agent-registry`` console script.  Leaves with ``os._exit`` after flushing:
    the interpreter's teardown of every module costs a one-shot command several ms."""
    opts = parse(sys.argv[1:])
    if opts is not None:
        code = execute(opts)
    else:
        from .cli import main
        code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    run()
