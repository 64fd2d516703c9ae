"""The console both routes of the command line share: the click CLI (cli/main.py) and the
click-free fast paths (cli/fast.py, wiki/fastpath.py).  Standard library only, since the
fast paths import it on every claim: the session a command acts for, a lock command's
arguments, the global options, and the one place a failure becomes one line on stderr
(and a JSON document with --json) and an exit code."""
import os
import sys

SESSION_ENV = "AGENT_REGISTRY_SESSION"
BY_SESSION = "--session SID"  # how the lock commands, ack and the like are told a session


def resolve_session(sid: str | None, *, required: bool = True,
                    given_by: str = "SID") -> str | None:
    """*sid* as given, else $AGENT_REGISTRY_SESSION.  A given but empty id is bad input
    (a script's unset variable), never a reason to fall back to another session.  None
    anywhere (when *required*) is bad input naming *given_by*, how this command takes
    one: its SID argument, ``--session SID``, ``--from SID|NAME``."""
    from ..errors import BadInput
    if sid is not None and not sid.strip():
        raise BadInput("empty session id")
    sid = sid or os.environ.get(SESSION_ENV) or None
    if sid is None and required:
        raise BadInput(f"no session id: pass {given_by} or set {SESSION_ENV}")
    return sid


def lock_arguments(registry, args, sid: str | None, *,
                   need_path: bool = True) -> tuple[str | None, list[str]]:
    """(session, paths) of a lock command's positional *args*; *sid* is the --session
    given on the command line (None: the environment's default applies).

    The predecessor's scripts write ``lock acquire PATH SID``: a last argument that
    names a registered session is the session (unless --session names another).  An
    argument that names a registered session and no file is never taken for a path:
    locking it would be silent nonsense, so it is refused (exit 2).  So is a last
    argument that looks like a session id (``kimi-typo``: the grammar of
    :mod:`agent_registry.branch.sessionids`) and names neither a session nor a file,
    unless --session is given: the error names the live ids it may have meant, and
    $AGENT_REGISTRY_SESSION never turns it into a path of that session's."""
    from ..errors import BadInput
    paths = list(args)
    here = registry.repo.info

    def is_file(arg: str) -> bool:
        return bool(here.toplevel) and \
            os.path.lexists(os.path.join(here.toplevel, here.prefix, arg))

    last = paths[-1] if paths else None
    may_be_sid = len(paths) > 1 or not need_path
    # look up only what could matter: a trailing SID, and arguments that name no file (the
    # common claim of existing files reads nothing more from the branch)
    names = registry.session_names(
        [arg for i, arg in enumerate(paths)
         if (may_be_sid and i == len(paths) - 1) or not is_file(arg)])
    if last in names and sid in (None, last) and may_be_sid:
        if is_file(last):
            raise BadInput(f"{last!r} names both a file and a registered session: "
                           "give the session with --session")
        sid = paths.pop()
    elif may_be_sid and sid is None and last is not None and not is_file(last):
        from ..branch.sessionids import looks_like_session_id  # not with --session
        if looks_like_session_id(last):
            unknown = registry.unknown(None, last)
            raise BadInput(f"{unknown.message} (a last argument that looks like a session "
                           f"id is never locked as a path; a new file of that name: "
                           f"./{last})", details=unknown.details)
    for arg in paths:
        if arg in names and not is_file(arg):
            raise BadInput(f"{arg!r} names a registered session, not a file: give the "
                           "session last (PATH... SID) or with --session")
    return resolve_session(sid, required=False), paths


def changed_elsewhere(registry, sid: str, result: dict) -> list[str]:
    """After a claim: the paths it covers that another live session, on another branch,
    worktree or clone, already changed there, committed or not (forecast/edits.py; no
    process unless another live session works elsewhere and that pair of tips is new or
    its worktree's reading is old).  Put into *result* as ``changed_elsewhere``; the
    lines for stderr returned.  The claim stands either way."""
    from ..forecast.gate import elsewhere
    try:
        if not elsewhere(registry, sid):  # the usual case: the forecast is not imported
            return []
        from ..forecast.edits import changed_elsewhere as find
        from ..forecast.edits import described
        found = find(registry.repo, registry.tip(), sid,
                     [lock["path"] for lock in result.get("locks", [])],
                     host=registry.host, remote=registry.remote, now=registry.clock())
    except Exception as exc:  # noqa: BLE001 — advice after a claim that stands: never its exit
        return [f"agent-registry: warning: could not look for changes elsewhere: {exc}"]
    if found:
        result["changed_elsewhere"] = found
    return [f"agent-registry: {described(f)}: this claim will not prevent that merge "
            f"conflict; agree with it first (agent-registry send --to {f['session']} TEXT)"
            for f in found]


def hoist_globals(argv: list[str]) -> list[str]:
    """*argv* with a ``--json`` or ``--quiet`` given after the command moved before it,
    where click reads global options (agents type ``status --json``).  Nothing after a
    ``--`` moves: there it is an argument."""
    out, later = [], []
    for position, item in enumerate(argv):
        if item == "--":
            return later + out + argv[position:]
        (later if item in ("--json", "--quiet", "--no-color") and out else out).append(item)
    return later + out


_color = {"off": False}  # --no-color given


def no_color() -> None:
    """The global ``--no-color``: no colour on any stream, terminal or not."""
    _color["off"] = True


def color_on(stream) -> bool:
    """Colour only on a terminal, and never with ``--no-color`` or a non-empty $NO_COLOR
    (https://no-color.org)."""
    if _color["off"] or os.environ.get("NO_COLOR"):
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False


ANSI = {"red": "31", "green": "32", "yellow": "33", "bold": "1", "dim": "2"}


def paint(text: str, color: str, stream) -> str:
    """*text* in *color* when *stream* gets colour (:func:`color_on`); the same codes as
    click.style, without importing click (the fast path's refusals use it)."""
    return f"\033[{ANSI[color]}m{text}\033[0m" if color_on(stream) else text


def global_options(args: list[str]) -> dict | None:
    """The global ``--json``, ``--quiet``/``-q``, ``--no-color`` and ``-C PATH`` that
    lead *args*, popped from it; None for any other leading option (click's to judge)."""
    opts = {"json": False, "quiet": False, "directory": "."}
    while args and args[0].startswith("-"):
        flag = args.pop(0)
        if flag == "--json":
            opts["json"] = True
        elif flag in ("--quiet", "-q"):
            opts["quiet"] = True
        elif flag == "--no-color":
            no_color()
        elif flag == "-C" and args:
            opts["directory"] = args.pop(0)
        else:
            return None
    return opts


def serve(opts: dict, command, opener=None) -> int:
    """Open the registry of ``opts["directory"]``, run *command* on it (which returns
    its JSON document, its text and its exit code) and print the answer as ``--json`` or
    ``--quiet`` ask; an error is one line on stderr and its exit code, and the
    registry's warnings follow, as :func:`agent_registry.cli.main.main` reports them.
    *opener*: what opens a lighter registry for *command*, or says None where the
    core's must (cli/quickcheck.py); the core's Registry without one."""
    from ..errors import RegistryError
    registry = None
    try:
        registry = opener(opts["directory"]) if opener is not None else None
        if registry is None:
            from ..sync import Registry
            registry = Registry.open(opts["directory"])
        data, text, code = command(registry)
        answer(opts, data, text)
        return code
    except (RegistryError, OSError) as exc:
        return report(exc, opts["json"], lambda text, err: print(
            text, file=sys.stderr if err else sys.stdout))
    finally:
        if registry is not None:
            warn(opts, registry.warnings)
            registry.close()


def answer(opts: dict, data, text: str) -> None:
    """A command's answer on stdout: its JSON document with ``--json``, its text unless
    ``--quiet``."""
    if opts["json"]:
        from . import output
        print(output.to_json(data))
    elif not opts["quiet"]:
        print(text)


def warn(opts: dict, warnings: list[str]) -> None:
    """The registry's *warnings* and the predecessor's variables set, on stderr, unless
    ``--quiet``."""
    if not opts["quiet"]:
        for message in warnings + ignored_variables():
            print(f"agent-registry: warning: {message}", file=sys.stderr)


def reader_gone() -> bool:
    """Whether standard output is a pipe whose reader has closed it: only then is a
    BrokenPipeError the reader's choice (`status | head`), not a git pipe that broke
    under a command, which must never read as done.  Asked on the error path only."""
    try:
        import select
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (OSError, ValueError, AttributeError):
        return False


# the predecessor's variables for where its files lived: this registry is the repository
# itself, so they name nothing here, and a user who set them is told rather than ignored
PREDECESSOR_VARIABLES = {
    "AGENT_REGISTRY_PATH": "the predecessor's registry.md",
    "AGENT_REGISTRY_LOCK_DIR": "the predecessor's lock folder"}


def ignored_variables() -> list[str]:
    """One line for each of the predecessor's variables set in the environment."""
    return [f"${name} ({what}) is ignored: the registry is this repository's "
            f"agent-registry branch; unset it (`agent-registry import-home` brings the "
            f"predecessor's records in)" for name, what in PREDECESSOR_VARIABLES.items()
            if os.environ.get(name)]


def report(exc: Exception, json_mode: bool, say) -> int:
    """The one error map: a RegistryError, or an OSError (disk full, read-only .git,
    permission denied: one line too, never a traceback), said through
    ``say(text, to_stderr)`` as one line (and the documented JSON document with --json);
    returns its exit code."""
    from . import output
    from ..errors import RegistryError, os_failure
    if isinstance(exc, BrokenPipeError) and reader_gone():  # `status | head`: the reader
        return 0  # has what it wanted (a broken pipe to git is a failure, said below)
    error = exc if isinstance(exc, RegistryError) else os_failure(exc)
    if json_mode:
        say(output.error_json(error), False)
    say(paint(f"agent-registry: {error.message}", "red", sys.stderr), True)
    for line in output.takeover_lines(error.details):  # a claim kept locally (exit 3)
        say(line, True)
    return error.exit_code


TRACES_KEPT = 20  # a harness hook that crashes on every tool call leaves this many


def crashed(exc: Exception, argv: list[str]) -> int:
    """An exception no command expected (a bug, not a refusal) as one line naming it
    and the file its traceback went to (and the ``{"error"}`` document with --json):
    exit :data:`~agent_registry.errors.CRASHED`, never 1, which an agent reads as "held".
    The traceback goes to the repository's state folder (``crashes/``), else to a
    temporary file; both routes of the console script end here (cli/fast.run)."""
    from ..errors import CRASHED, Crashed
    trace = _write_trace(exc, argv)
    what = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
    where = f"its traceback is in {trace}" if trace else "no file could hold its traceback"
    error = Crashed(f"internal error ({what}); {where}: please report it", details={
        "trace": trace})
    try:
        return report(error, "--json" in argv, lambda text, err: print(
            text, file=sys.stderr if err else sys.stdout))
    except Exception:  # noqa: BLE001 — the reporting is what broke: the bare line
        print(f"agent-registry: {error.message}", file=sys.stderr)
        return CRASHED


def _write_trace(exc: Exception, argv: list[str]) -> str | None:
    """*exc*'s traceback, with the command and the versions, in a new file; its path
    (None when nowhere could be written)."""
    import time
    import traceback
    from .. import __version__
    text = (f"agent-registry {__version__}, Python {sys.version.split()[0]}, "
            f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n"
            f"argv: {argv!r}\n\n"
            + "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
    name = f"crash-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{os.getpid()}.txt"
    try:
        folder = _crash_folder(argv)
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, name)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except Exception:  # noqa: BLE001 — no repository here, or the failure is in finding it
        folder = None
        import tempfile
        try:
            fd, path = tempfile.mkstemp(prefix="agent-registry-crash-", suffix=".txt")
        except OSError:
            return None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError:
        return None
    if folder is not None:
        for old in sorted(n for n in os.listdir(folder) if n.startswith("crash-"))[:-TRACES_KEPT]:
            try:
                os.unlink(os.path.join(folder, old))
            except OSError:
                pass  # another crash pruned it first
    return path


def _crash_folder(argv: list[str]) -> str:
    """``crashes/`` in the state folder of the repository the command ran in (``-C``)."""
    from ..store.git import discover
    opts = global_options(list(argv)) or {"directory": "."}
    return os.path.join(discover(opts["directory"]).common_dir, "agent-registry", "crashes")


def new_session_id(provider: str) -> str:
    """An id made up for a session registered without one: <provider>-<unix time>-<hex>."""
    import secrets
    import time
    slug = "".join(c for c in provider.lower() if c.isalnum()) or "agent"
    return f"{slug}-{int(time.time())}-{secrets.token_hex(2)}"
