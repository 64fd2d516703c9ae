"""The console script, with a click-free path for the commands agents run before every
edit: ``lock acquire`` and ``lock check``.

Importing click and building the command tree is about a third of a one-shot claim
(docs/benchmarks.md).  These two commands are parsed here by hand when their arguments
are plain (global ``--json``/``--quiet``/``-C PATH``; paths, the predecessor's trailing
SID; ``--session``, ``--ttl``, ``--shared``); anything else (``--help``, an unknown or
malformed option, no path) goes to the click CLI, which owns the help texts and the usage
errors.  Both paths read their arguments with :func:`lock_arguments`, call the same
library functions and print through :mod:`agent_registry.output`.  ``wiki query`` has a
click-free path of its own, in :mod:`agent_registry.wiki.fastpath`.
"""
from __future__ import annotations

import os
import sys

SESSION_ENV = "AGENT_REGISTRY_SESSION"
SESSION_FLAGS = ("--session", "--session-id")  # --session-id: the predecessor's `check`


def resolve_session(sid: str | None, *, required: bool = True) -> str | None:
    """*sid* as given, else $AGENT_REGISTRY_SESSION.  A given but empty id is bad input
    (a script's unset variable), never a reason to fall back to another session."""
    from .errors import BadInput
    if sid is not None and not sid.strip():
        raise BadInput("empty session id")
    sid = sid or os.environ.get(SESSION_ENV) or None
    if sid is None and required:
        raise BadInput(f"no session id: pass SID or set {SESSION_ENV}")
    return sid


def lock_arguments(registry, args, sid: str | None, *,
                   need_path: bool = True) -> tuple[str | None, list[str]]:
    """(session, paths) of a lock command's positional *args*; *sid* is the --session
    given on the command line (None: the environment's default applies).

    The predecessor's scripts write ``lock acquire PATH SID``: a last argument that
    names a registered session is the session (unless --session names another).  An
    argument that names a registered session and no file is never taken for a path:
    locking it would be silent nonsense, so it is refused (exit 2)."""
    from .errors import BadInput
    paths = list(args)
    names = registry.session_names(paths)
    here = registry.repo.info

    def is_file(arg: str) -> bool:
        return bool(here.toplevel) and \
            os.path.lexists(os.path.join(here.toplevel, here.prefix, arg))

    last = paths[-1] if paths else None
    if last in names and sid in (None, last) and (len(paths) > 1 or not need_path):
        if is_file(last):
            raise BadInput(f"{last!r} names both a file and a registered session: "
                           "give the session with --session")
        sid = paths.pop()
    for arg in paths:
        if arg in names and not is_file(arg):
            raise BadInput(f"{arg!r} names a registered session, not a file: give the "
                           "session last (PATH... SID) or with --session")
    return resolve_session(sid, required=False), paths


def global_options(args: list[str]) -> dict | None:
    """The global ``--json``, ``--quiet``/``-q`` and ``-C PATH`` that lead *args*,
    popped from it; None for any other leading option (click's to judge)."""
    opts = {"json": False, "quiet": False, "directory": "."}
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
    return opts


def parse(argv: list[str]) -> dict | None:
    """The hot command *argv* asks for, or None to leave it to click."""
    args = list(argv)
    opts = global_options(args)
    if opts is None:
        return None
    opts.update(sid=None, ttl=600, shared=False, paths=[])
    if args[:1] != ["lock"] or len(args) < 3 or args[1] not in ("acquire", "check"):
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
    if not opts["paths"]:
        return None
    if opts["command"] == "acquire" and opts["sid"] is None and len(opts["paths"]) < 2 \
            and not os.environ.get(SESSION_ENV):
        return None  # no session anywhere: click's usage error
    return opts


def execute(opts: dict) -> int:
    from . import output

    def lock_command(registry) -> tuple[object, str, int]:
        sid, paths = lock_arguments(registry, opts["paths"], opts["sid"])
        if opts["command"] == "acquire":
            result = registry.claim(resolve_session(sid), paths, ttl=opts["ttl"],
                                    shared=opts["shared"])
            if not opts["quiet"]:
                for line in output.takeover_lines(result):
                    print(line, file=sys.stderr)
            return result, output.claim_text(result), 0
        results = registry.check(paths, sid)
        return {"paths": results}, output.check_text(results), output.check_code(results)

    return serve(opts, lock_command)


def serve(opts: dict, command) -> int:
    """Open the registry of ``opts["directory"]``, run *command* on it (which returns
    its JSON document, its text and its exit code) and print the answer as ``--json`` or
    ``--quiet`` ask; an error is one line on stderr and its exit code, and the
    registry's warnings follow, as :func:`agent_registry.cli.main` reports them."""
    from . import output
    from .errors import RegistryError, os_failure
    from .registry import Registry
    registry = None
    try:
        registry = Registry.open(opts["directory"])
        data, text, code = command(registry)
        if opts["json"]:
            print(output.to_json(data))
        elif not opts["quiet"]:
            print(text)
        return code
    except (RegistryError, OSError) as exc:
        error = exc if isinstance(exc, RegistryError) else os_failure(exc)
        if opts["json"]:
            print(output.error_json(error))
        print(f"agent-registry: {error.message}", file=sys.stderr)
        for line in output.takeover_lines(error.details):  # a claim kept locally (exit 3)
            print(line, file=sys.stderr)
        return error.exit_code
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
    code = execute(opts) if opts is not None else None
    if code is None and "wiki" in sys.argv:  # `wiki query` has its own click-free path
        from .wiki.fastpath import run as wiki_query
        code = wiki_query(sys.argv[1:])
    if code is None:
        from .cli import main
        code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    run()
