"""``agent-registry harness hook HARNESS EVENT``: one hook call, from the event JSON on
stdin to the answer, the stderr line and the exit code.

The edit gate (pre-tool-use) fails closed: when it cannot decide (bad input, no
repository, an error) it blocks with one stderr line and exit 2, the blocking exit
code of Claude Code, Codex, Gemini CLI and Cursor, unless ``AGENT_REGISTRY_ALLOW=1``.
The other events never block: a failure is one stderr line and exit 1.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from ..errors import RegistryError, os_failure
from . import decision

HARNESSES = ("claude", "codex", "gemini", "cursor", "opencode")
EVENTS = ("session-start", "pre-tool-use", "user-prompt-submit", "stop", "session-end")
BLOCK = 2  # exit code that blocks the tool call in each harness
WAKE_HEAD = "agent-registry: before you stop, answer or act on what arrived for you:"


@dataclass
class Outcome:
    stdout: str = ""
    stderr: str = ""
    code: int = 0


def adapter(harness: str):
    from . import claude, codex, cursor, gemini, opencode_hook
    modules = {"claude": claude, "codex": codex, "gemini": gemini, "cursor": cursor,
               "opencode": opencode_hook}
    return modules[harness].ADAPTER


def run(harness: str, event: str, raw: str, env: dict, *, pid: int | None = None,
        auto_claim: bool = False, wake: int = 0) -> Outcome:
    """Run hook *event* of *harness* on the JSON *raw*; never raises."""
    try:
        return _run(adapter(harness), event, raw, env, pid, auto_claim, wake)
    except Exception as exc:  # noqa: BLE001 - a hook must answer, whatever went wrong
        why = _why(exc)
        if event != "pre-tool-use":
            return Outcome(stderr=f"agent-registry: {harness} {event} hook failed: {why}", code=1)
        if env.get(decision.ALLOW_ENV) == "1":
            return Outcome(stderr=f"agent-registry: edit allowed unchecked "
                                  f"({decision.ALLOW_ENV}=1): {why}")
        return Outcome(stderr=f"agent-registry: edit blocked: the edit gate could not decide "
                              f"({why}); repair it (agent-registry doctor; agent-registry "
                              f"harness install {harness}), or let edits through unchecked: "
                              f"{decision.ALLOW_ENV}=1", code=BLOCK)


def _why(exc: Exception) -> str:
    if isinstance(exc, RegistryError):
        text = exc.message
    elif isinstance(exc, OSError):
        text = os_failure(exc).message
    else:
        text = f"{type(exc).__name__}: {exc}"
    return " ".join(str(text).split())  # one line


def _answer(value: dict | None, notice: str = "") -> Outcome:
    return Outcome(json.dumps(value) if value is not None else "", notice)


def _run(a, event: str, raw: str, env: dict, pid: int | None, auto_claim: bool,
         wake: int) -> Outcome:
    event_json = a.parse(raw)
    ctx = a.ctx(event_json, env)
    if event == "pre-tool-use":
        targets = a.targets(event_json, ctx)
        if targets is None:
            return _answer(a.allow())
        verdict = decision.may_write(ctx, targets, auto_claim=auto_claim, pid=pid)
        return _answer(a.allow() if verdict.allow else a.deny(verdict.reason), verdict.notice)
    if event == "session-start":
        _, lines = decision.start(ctx, pid, export=lambda sid: a.exported(sid, env))
        return _answer(a.context(event, "\n".join(lines)))
    if event == "user-prompt-submit":
        woken = str(event_json.get("prompt") or "").startswith(WAKE_HEAD)
        if not a.injects_prompt:  # told at session start and by waking instead
            if not woken:
                decision.new_turn(ctx)
            return _answer(a.context(event, ""))
        news = decision.prompt(ctx, new_turn=not woken)
        return _answer(a.context(event, "\n".join(news)) if news else a.empty())
    if event == "stop":
        news, notice = decision.turn_end(ctx, wake)
        if not news:
            return _answer(a.empty(), notice)
        return _answer(a.keep_going(WAKE_HEAD + "\n" + "\n".join(news)))
    if event == "session-end":
        decision.end(ctx)
        return _answer(a.empty())
    raise RegistryError(f"unknown hook event {event!r} ({', '.join(EVENTS)})")
