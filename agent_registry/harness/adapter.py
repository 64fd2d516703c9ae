"""What every harness adapter shares: reading a hook's event JSON and answering it.

:class:`Adapter` is shaped like Claude Code's hooks (whose format Codex and, in part,
Gemini CLI follow); each harness module subclasses it and changes only what differs:
where the session id is, which tools write which fields, and the answer's shape.
"""
import os

from ..store.jsontext import loads
from .ctx import Ctx
from .ids import call_key
from .shellwrites import Targets, read_writes

# patterns compiled (and re imported) only for a text they are looked for in: not for a
# shell command with no patch envelope, which the gate of every shell call reads (issue 35)
# Codex accepts the envelope's headers indented, so they are read indented too
_PATCH_FILE = r"(?m)^[ \t]*\*\*\* (?:Update File|Add File|Delete File|Move to): (.+?)\s*$"
MAX_INPUT = 16 * 1024 * 1024  # characters of hook input read; more is refused
PATCH_START = "*** Begin Patch"
_DIFF_FILE = r"(?m)^(?:\+\+\+|---) (?:[ab]/)?(\S[^\t\n]*?)\s*(?:\t.*)?$"


def patch_targets(text: str) -> list[str]:
    """The files a Codex patch envelope (``*** Begin Patch`` …) writes: each Update,
    Add and Delete File, and where a file is moved to."""
    if PATCH_START not in text:
        return []
    import re
    return list(dict.fromkeys(re.findall(_PATCH_FILE, text)))


def diff_targets(text: str) -> list[str]:
    """The files a unified diff (``--- a/P``, ``+++ b/P``) writes; /dev/null is none."""
    import re
    return list(dict.fromkeys(p for p in re.findall(_DIFF_FILE, text) if p != "/dev/null"))


def shell_targets(command, cwd: str) -> Targets:
    """The files a shell command writes (harness/shellwrites.py), and those of a patch
    envelope it pipes into ``apply_patch``; what it could not follow is ``unfollowed``."""
    found = read_writes(command, cwd or None)
    text = command if isinstance(command, str) else " ".join(map(str, command or []))
    patched = [os.path.join(cwd, p) if cwd else p for p in patch_targets(text)]
    return Targets(list(found) + patched, found.unfollowed, found.reads_only)


def _text(value, what: str) -> str:
    """*value* when it is a string; hostile or malformed input is refused (BadInput:
    the gate blocks, in each harness's blocking form)."""
    if not isinstance(value, str):
        raise bad_input(f"hook input: {what} is {type(value).__name__}, not a string")
    return value


def bad_input(message: str) -> Exception:
    """The BadInput error refusing a hook's input: the error classes imported only on
    failure (a gate that allows does not import them: tests/test_import_budget.py)."""
    from ..errors import BadInput
    return BadInput(message)


class Adapter:
    """Claude Code's hook protocol; subclasses override what their harness does else."""
    name = "claude"
    id_keys: tuple[str, ...] = ("session_id",)
    # tool name -> the tool_input fields naming the file it writes (Claude Code's
    # file_path; Copilot CLI, which sends Claude's tool names, names the file path)
    edit_tools: dict[str, tuple[str, ...]] = {
        "Edit": ("file_path", "path"), "Write": ("file_path", "path"),
        "MultiEdit": ("file_path", "path"), "NotebookEdit": ("notebook_path", "file_path")}
    shell_tools: frozenset[str] = frozenset({"Bash"})
    shell_fields: tuple[str, ...] = ("command",)
    tool_key, input_key = "tool_name", "tool_input"
    # hookEventName of each of our events, where the answer names it
    event_names = {"session-start": "SessionStart", "user-prompt-submit": "UserPromptSubmit"}

    # -- reading the event ----------------------------------------------------------
    def parse(self, raw: str) -> dict:
        if len(raw or "") > MAX_INPUT:
            raise bad_input(f"hook input is over {MAX_INPUT} characters")
        try:
            event = loads(raw or "{}")
        except (ValueError, RecursionError) as exc:
            raise bad_input(f"hook input is not JSON: {exc}") from None
        if not isinstance(event, dict) or not self.native_id(event):
            raise bad_input(f"hook input has no {' or '.join(self.id_keys)}")
        for key in ("cwd", self.tool_key):
            if event.get(key) is not None:
                _text(event[key], key)
        return event

    def native_id(self, event: dict) -> str:
        found = next((event[k] for k in self.id_keys if event.get(k)), "")
        if isinstance(found, bool) or not isinstance(found, (str, int)):
            raise bad_input(f"hook input: the session id is {type(found).__name__}")
        return str(found)

    def call_key(self, event: dict) -> str:
        """What names one tool call in both its before- and after-tool events."""
        return call_key(event, self.tool_key, self.input_key)

    def described(self, event: dict) -> str:
        """The tool call in a few words, for the holders' message."""
        args = event.get(self.input_key)
        args = args if isinstance(args, dict) else {}
        shown = next((args[k] for k in (*self.shell_fields, "file_path", "filePath", "path")
                      if args.get(k)), "")
        return f"{event.get(self.tool_key)}: " + (shown if isinstance(shown, str) else repr(shown))

    project_env = "CLAUDE_PROJECT_DIR"  # where the harness says its project is

    def cwd(self, event: dict, env: dict) -> str:
        return str(event.get("cwd") or self.project(event, env) or os.getcwd())

    def project(self, event: dict, env: dict) -> str:
        return str(env.get(self.project_env) or "")

    def ctx(self, event: dict, env: dict) -> Ctx:
        return Ctx(self.name, self.native_id(event), self.cwd(event, env),
                   model=str(event.get("model") or ""),
                   source=str(event.get("source") or event.get("trigger") or ""), env=env,
                   project=self.project(event, env))

    def targets(self, event: dict, ctx: Ctx) -> list[str] | None:
        """The files the tool call writes; None when the tool writes none we know of
        (no decision: the harness's own flow goes on)."""
        tool = str(event.get(self.tool_key) or "")
        args = event.get(self.input_key)
        if (tool in self.edit_tools or tool in self.shell_tools) and not isinstance(args, dict):
            raise bad_input(f"hook input: {self.input_key} of {tool} is not an object")
        args = args if isinstance(args, dict) else {}
        if tool in self.edit_tools:
            return [_text(args[k], k) for k in self.edit_tools[tool] if args.get(k)][:1]
        if tool in self.shell_tools:
            command = next((args[k] for k in self.shell_fields if args.get(k)), None)
            if command is None:
                return []
            return shell_targets(self.shell_command(command), self.shell_cwd(args, ctx))
        return self.other_targets(tool, args, ctx)

    def shell_command(self, command) -> str | list[str]:
        """The shell tool's command as this harness sends it: a string."""
        return _text(command, "the shell command")

    def other_targets(self, tool: str, args: dict, ctx: Ctx) -> list[str] | None:
        return None

    def shell_cwd(self, args: dict, ctx: Ctx) -> str:
        return ctx.cwd

    # -- answering ------------------------------------------------------------------
    def deny(self, reason: str) -> dict:
        return {"hookSpecificOutput": {"hookEventName": "PreToolUse",
                                       "permissionDecision": "deny",
                                       "permissionDecisionReason": reason}}

    def allow(self) -> dict | None:
        """No decision: the harness's normal permission flow goes on (an explicit
        "allow" would skip the person's own approval)."""
        return self.empty()

    def allow_noted(self) -> dict | None:
        """The allowing answer of a call the backstop took a note for, which its
        after-tool hook is to check."""
        return self.allow()

    # whether a pre-tool answer can add to the agent's context (Claude Code's
    # PreToolUse additionalContext, read in its 2.1 schema): where it cannot, a person's
    # high message is not taken there, but told by the after-tool hook (the answer
    # :meth:`after` makes, as the backstop's) where *tells_after_tool*, else at the next
    # prompt or end of turn
    tells_before_tool = False
    tells_after_tool = True

    def allow_telling(self, text: str) -> dict | None:
        """No decision, and *text* (a person's urgent message) added to the agent's
        context before the tool runs: PreToolUse's ``additionalContext``."""
        return self.warn(text) if text else self.allow()

    def warn(self, text: str, noted: bool = False) -> dict | None:
        """Let the tool call go on (the normal permission flow) and hand the model *text*
        (PreToolUse's ``additionalContext``); *noted*: as :meth:`allow_noted`."""
        return {"hookSpecificOutput": {"hookEventName": "PreToolUse",
                                       "additionalContext": text}}

    def empty(self) -> dict | None:
        """The answer that says nothing (None: no output at all)."""
        return None

    def context(self, event: str, text: str) -> dict | None:
        """*text* added to the agent's context at session start or prompt submit."""
        return {"hookSpecificOutput": {"hookEventName": self.event_names[event],
                                       "additionalContext": text}}

    blocks_after = True  # whether PostToolUse's decision: block tells the model (see after)

    def after(self, event: dict, text: str) -> dict:
        """The after-tool answer that tells the agent *text* (what the backstop did):
        PostToolUse's ``decision: block`` hands the reason to the model; a failed tool's
        event (PostToolUseFailure), and a harness whose block would replace the tool's
        output (``blocks_after`` False), take context."""
        name = str(event.get("hook_event_name") or "PostToolUse")
        if name == "PostToolUse" and self.blocks_after:
            return {"decision": "block", "reason": text}
        return {"hookSpecificOutput": {"hookEventName": name, "additionalContext": text}}

    def keep_going(self, text: str) -> dict:
        """The end-of-turn answer that keeps the agent working on *text*."""
        return {"decision": "block", "reason": text}

    injects_prompt = True  # whether a prompt-submit answer reaches the agent
    # whether the harness runs our after-tool hook (post-tool-use), so the backstop
    # notes the held files before a tool call for it to check after
    after_tool = True

    def notes(self, event: dict) -> bool:
        """Whether the backstop takes its note at this before-tool event: where the
        after-tool hook runs, at the one event whose call it checks (Cursor gates a shell
        call twice, and notes it once: harness/cursor.py)."""
        return self.after_tool

    def after_reaches_model(self, event: dict) -> bool:
        """Whether this after-tool event's answer reaches the model.  Where it cannot
        (Cursor's postToolUseFailure has no output fields) the backstop's text goes to
        stderr and to the agent's own inbox (its session start or a wake reads it)."""
        return True

    def ends_with_turn(self, event: dict, pid: int | None) -> bool:
        """Whether the harness process *pid* exits when this turn ends, firing no session
        end of its own (a one-prompt run): its end of turn then finishes the session."""
        return False

    def exported(self, sid: str, env: dict) -> bool:
        """Make *sid* the default session of the agent's shell commands, if the harness
        lets a hook do that; whether it did."""
        return False
