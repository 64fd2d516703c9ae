"""``agent-registry harness hook HARNESS EVENT``: one hook call, from the event JSON on
stdin to the answer, the stderr line and the exit code.

The edit gate (pre-tool-use) fails closed: when it cannot decide (bad input, no
repository, an error) it blocks with one stderr line and exit 2, the blocking exit
code of Claude Code, Codex, Gemini CLI and Cursor, unless ``AGENT_REGISTRY_ALLOW=1``.
The other events never block: a failure is one stderr line and exit 1.  Around a shell
or edit tool call the backstop (harness/backstop.py) notes the held files before
(pre-tool-use) and puts back what changed after (post-tool-use); a person's high message
is told at the first of the two whose answer can carry it (store/urgent.py).
"""
HARNESSES = ("claude", "codex", "gemini", "cursor", "opencode", "copilot", "qwen")
EVENTS = ("session-start", "pre-tool-use", "post-tool-use", "user-prompt-submit", "stop",
          "session-end")
BLOCK = 2  # exit code that blocks the tool call in each harness
WAKE_HEAD = "agent-registry: before you stop, answer or act on what arrived for you:"


class Outcome:
    """A hook's answer: stdout, one stderr line, the exit code.  (A plain class: the
    after-tool hook runs on every tool call and dataclasses costs it a few ms.)"""

    def __init__(self, stdout: str = "", stderr: str = "", code: int = 0) -> None:
        self.stdout, self.stderr, self.code = stdout, stderr, code


MODULES = {"claude": "claude", "codex": "codex", "gemini": "gemini", "cursor": "cursor",
           "opencode": "opencode_hook", "copilot": "copilot", "qwen": "qwen"}


def adapter(harness: str):
    """The adapter of *harness*, its module alone imported (a hook runs one harness's;
    by ``__import__``: importlib's package and the warnings it brings cost a hook ~0.5 ms)."""
    name = f"{__package__}.{MODULES[harness]}"
    return __import__(name, fromlist=["ADAPTER"]).ADAPTER


def run(harness: str, event: str, raw: str, env: dict, *, pid: int | None = None,
        auto_claim: bool = False, wake: int = 0, hold: float = 0,
        deny_overlap: bool = False, no_memory: bool = False) -> Outcome:
    """Run hook *event* of *harness* on the JSON *raw*; never raises.  *hold*: at the end
    of a turn with nothing waiting, listen that many seconds for a message to the session
    and keep the agent going with it (a tool cannot start a turn in an idle chat).
    *deny_overlap*: the gate refuses a file another session changed (else it warns);
    *no_memory*: the session start hands over no wiki entries."""
    try:
        return _run(adapter(harness), event, raw, env, pid, auto_claim, wake, hold,
                    deny_overlap=deny_overlap, no_memory=no_memory)
    except Exception as exc:  # noqa: BLE001 - a hook must answer, whatever went wrong
        why = _why(exc)
        if event != "pre-tool-use":
            return Outcome(stderr=f"agent-registry: {harness} {event} hook failed: {why}", code=1)
        from .ctx import ALLOW_ENV
        if env.get(ALLOW_ENV) == "1":
            return Outcome(stderr=f"agent-registry: edit allowed unchecked "
                                  f"({ALLOW_ENV}=1): {why}")
        return Outcome(stderr=f"agent-registry: edit blocked: the edit gate could not decide "
                              f"({why}); repair it (agent-registry doctor; agent-registry "
                              f"harness install {harness}), or let edits through unchecked: "
                              f"{ALLOW_ENV}=1", code=BLOCK)


def main(args: list[str]) -> int | None:
    """``harness hook HARNESS EVENT [--pid PID] [--auto-claim] [--deny-overlap]
    [--no-memory] [--wake [N]] [--hold N]`` run without
    click (importing it and building the command tree cost a hook more than the backstop
    does); None when the arguments are anything else, for click to answer."""
    if len(args) < 2 or args[1] not in EVENTS or args[0] not in HARNESSES:
        return None
    options = {"pid": None, "auto_claim": False, "wake": 0, "hold": 0,
               "deny_overlap": False, "no_memory": False}
    rest = args[2:]
    while rest:
        item = rest.pop(0)
        name, eq, value = item.partition("=")
        if name == "--pid" and (eq or rest):
            options["pid"] = agent_pid(value if eq else rest.pop(0))
        elif item in ("--auto-claim", "--deny-overlap", "--no-memory"):
            options[item[2:].replace("-", "_")] = True
        elif name == "--hold" and (eq or rest):
            value = value if eq else rest.pop(0)
            if not value.isdigit():
                return None
            options["hold"] = int(value)
        elif name == "--wake":
            value = value if eq else (rest.pop(0) if rest and rest[0].isdigit() else "3")
            if not value.isdigit():
                return None
            options["wake"] = int(value)
        else:
            return None
    import os
    import sys
    if args[1] in ("pre-tool-use", "post-tool-use"):
        import gc
        # a hook around a tool call is over in milliseconds and its few cycles die with
        # it; the collector's passes over the objects a note of 1,000 held files makes
        # (and the imports') cost it more than they free (as cli/fast's commands)
        gc.disable()
    try:
        raw = sys.stdin.read()
    except (OSError, UnicodeDecodeError) as exc:
        raw = f"\0unreadable stdin: {exc}"  # not JSON: the hook answers as for bad input
    if args[1] == "post-tool-use":
        from .after import SAYS_NOTHING, quick
        if quick(args[0], raw, os.environ):  # no note, or nothing noted changed
            if args[0] in SAYS_NOTHING:  # the harness's answer that says nothing
                sys.stdout.write(SAYS_NOTHING[args[0]] + "\n")
            return 0
    outcome = run(args[0], args[1], raw, dict(os.environ), **options)
    if outcome.stdout:
        sys.stdout.write(outcome.stdout + "\n")
    if outcome.stderr:
        sys.stderr.write(outcome.stderr + "\n")
    return outcome.code


def agent_pid(text: str | None) -> int | None:
    """The pid the hook command passed (``--pid $PPID``); None when the shell left it
    unexpanded or empty, and the owner is then found as any other (an agent runtime)."""
    return int(text) if text and text.isdigit() and int(text) > 1 else None


def launched(args: list[str]) -> None:
    """:func:`main` as the hook command starts it (harness/launch.py), without the console
    script's modules, which every tool call would pay (cli/fast, cli/console: ~0.4 ms),
    leaving as it does (flushed, ``os._exit``: no teardown); returns only when *args*
    are not a hook's, for the console script to answer."""
    import os
    import sys
    try:
        code = main(args)
        if code is None:
            return
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception as exc:  # noqa: BLE001 - as the console script answers it (cli/fast.run)
        from ..cli.console import crashed, report
        argv = ["harness", "hook", *args]
        code = report(exc, False, lambda text, err: None) if isinstance(exc, BrokenPipeError) \
            else crashed(exc, argv)
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except OSError:
            pass
    os._exit(code)


def _why(exc: Exception) -> str:
    from ..errors import RegistryError, os_failure  # on failure only: the after-tool
    # hook's quick path (harness/after.py) imports no error classes
    if isinstance(exc, RegistryError):
        text = exc.message
    elif isinstance(exc, OSError):
        text = os_failure(exc).message
    else:
        text = f"{type(exc).__name__}: {exc}"
    return " ".join(str(text).split())  # one line


def _unnoted(a, ctx, told: str) -> dict | None:
    """The allowing answer of a call the backstop takes no note of, *told* handed to the
    model.  A person's high message is else told by the after-tool hook, which
    OpenCode's plugin runs only when this answer asks it to: asked only then."""
    from .where import urgent_waits
    after = not a.tells_before_tool and a.tells_after_tool and urgent_waits(ctx)
    return a.allow_noted() if after else a.allow_telling(told)


def _answer(value: dict | None, notice: str = "") -> Outcome:
    from ..store.jsontext import dumps
    return Outcome(dumps(value) if value is not None else "", notice)


def hold_for(ctx, seconds: float, sleep=None) -> list[str]:
    """Listen up to *seconds* for what arrives for the session (checked each second, a
    sync first when there is a remote); the lines to keep the agent going with, told once."""
    import time

    from . import decision
    sleep = sleep or time.sleep
    deadline = time.monotonic() + seconds
    while True:
        news = decision.prompt(ctx, new_turn=False)
        if news or time.monotonic() >= deadline:
            return news
        sleep(min(1.0, max(0.0, deadline - time.monotonic())))


def _run(a, event: str, raw: str, env: dict, pid: int | None, auto_claim: bool,
         wake: int, hold: float = 0, *, deny_overlap: bool = False,
         no_memory: bool = False) -> Outcome:
    event_json = a.parse(raw)
    ctx = a.ctx(event_json, env)
    if event == "pre-tool-use":
        # the decision and the registry are imported only for what they are needed for:
        # most tool calls write nothing and find no message marked (issue 35)
        from .where import urgent_waits
        # a person's high message, told now where the harness's answer can carry it
        news = ""
        if a.tells_before_tool and urgent_waits(ctx):
            from .decision import urgent
            news = "\n".join(urgent(ctx))
        targets = a.targets(event_json, ctx)
        if targets is None:
            return _answer(_unnoted(a, ctx, news))
        if targets or getattr(targets, "unfollowed", None):
            from .decision import may_write
            verdict = may_write(ctx, targets, auto_claim=auto_claim, pid=pid,
                                deny_overlap=deny_overlap)
        else:  # most shell commands write nothing: no repository, no registry needed
            from .ctx import Decision
            verdict = Decision(True)
        if not verdict.allow:
            return _answer(a.deny(verdict.reason + (f"\n{news}" if news else "")),
                           verdict.notice)
        # what another session changed of these files (the edit goes on), and the news
        told = "\n".join(t for t in (verdict.warning, news) if t)
        if not a.notes(event_json) or getattr(targets, "reads_only", False):
            # no backstop at this event (Cursor's beforeShellExecution: its preToolUse
            # notes the call), or a shell command of programs that write no file (ls,
            # grep, git status): no note to take, no check after it
            return _answer(_unnoted(a, ctx, told), verdict.notice)
        # the backstop: what the held files hold now, for the after-tool check
        from .backstop import note
        try:
            notices = [verdict.notice, note(ctx, a.call_key(event_json))]
        except Exception as exc:  # noqa: BLE001 - held.Unreadable, imported only then
            from .held import Unreadable
            if not isinstance(exc, Unreadable):
                raise
            # what the command may write is unchecked: refused as the gate's writes are
            from .decision import unnoted
            unchecked = unnoted(ctx, exc.message)
            if not unchecked.allow:
                return _answer(a.deny(unchecked.reason + (f"\n{news}" if news else "")))
            return _answer(_unnoted(a, ctx, told), "\n".join(
                n for n in (verdict.notice, unchecked.notice) if n))
        return _answer(a.warn(told, noted=True) if told else a.allow_noted(),
                       "\n".join(n for n in notices if n))
    from . import decision
    if event == "post-tool-use":
        from .putback import check
        reaches = a.after_reaches_model(event_json)
        told = check(ctx, a.call_key(event_json), a.described(event_json), inbox=not reaches)
        # and a person's high message, where this answer reaches the model
        news = decision.urgent(ctx) if a.tells_after_tool and reaches else []
        told = "\n".join(t for t in (told, *news) if t)
        return _answer(a.after(event_json, told) if told else a.empty(),
                       "" if reaches else told)
    if event == "session-start":
        _, lines = decision.start(ctx, pid, export=lambda sid: a.exported(sid, env),
                                  memory=not no_memory)
        return _answer(a.context(event, "\n".join(lines)))
    if event == "user-prompt-submit":
        # a prompt a wake made (Gemini CLI submits it again), or a check in the middle of a
        # turn (OpenCode's plugin, before each request): not a new turn
        woken = str(event_json.get("prompt") or "").startswith(WAKE_HEAD) or \
            event_json.get("midturn") is True
        if not a.injects_prompt:  # told at session start and by waking instead
            if not woken:
                decision.new_turn(ctx)
            return _answer(a.context(event, ""))
        news = decision.prompt(ctx, new_turn=not woken)
        return _answer(a.context(event, "\n".join(news)) if news else a.empty())
    if event == "stop":
        news, notice = decision.turn_end(ctx, wake)
        if not news and hold > 0 and not notice:
            news = hold_for(ctx, hold)
        if not news:
            if a.ends_with_turn(event_json, pid):
                decision.end(ctx)
            return _answer(a.empty(), notice)
        return _answer(a.keep_going(WAKE_HEAD + "\n" + "\n".join(news)))
    if event == "session-end":
        decision.end(ctx)
        return _answer(a.empty())
    from ..errors import RegistryError
    raise RegistryError(f"unknown hook event {event!r} ({', '.join(EVENTS)})")
