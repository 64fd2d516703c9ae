"""What every harness adapter shares: reading a hook's event JSON and answering it.

:class:`Adapter` is shaped like Claude Code's hooks (whose format Codex and, in part,
Gemini CLI follow); each harness module subclasses it and changes only what differs:
where the session id is, which tools write which fields, and the answer's shape.
"""
from __future__ import annotations

import json
import os
import re

from ..errors import BadInput
from .decision import Ctx
from .shellwrites import write_targets

_PATCH_FILE = re.compile(r"^\*\*\* (?:Update File|Add File|Delete File|Move to): (.+?)\s*$",
                         re.MULTILINE)
PATCH_START = "*** Begin Patch"
_DIFF_FILE = re.compile(r"^(?:\+\+\+|---) (?:[ab]/)?(\S[^\t\n]*?)\s*(?:\t.*)?$", re.MULTILINE)


def patch_targets(text: str) -> list[str]:
    """The files a Codex patch envelope (``*** Begin Patch`` …) writes: each Update,
    Add and Delete File, and where a file is moved to."""
    return list(dict.fromkeys(_PATCH_FILE.findall(text))) if PATCH_START in text else []


def diff_targets(text: str) -> list[str]:
    """The files a unified diff (``--- a/P``, ``+++ b/P``) writes; /dev/null is none."""
    return list(dict.fromkeys(p for p in _DIFF_FILE.findall(text) if p != "/dev/null"))


def shell_targets(command, cwd: str) -> list[str]:
    """The files a shell command writes (harness/shellwrites.py), and those of a patch
    envelope it pipes into ``apply_patch``."""
    found = write_targets(command, cwd or None)
    text = command if isinstance(command, str) else " ".join(map(str, command or []))
    return found + [os.path.join(cwd, p) if cwd else p for p in patch_targets(text)]


class Adapter:
    """Claude Code's hook protocol; subclasses override what their harness does else."""
    name = "claude"
    id_keys: tuple[str, ...] = ("session_id",)
    # tool name -> the tool_input fields naming the file it writes
    edit_tools: dict[str, tuple[str, ...]] = {
        "Edit": ("file_path",), "Write": ("file_path",), "MultiEdit": ("file_path",),
        "NotebookEdit": ("notebook_path", "file_path")}
    shell_tools: frozenset[str] = frozenset({"Bash"})
    shell_fields: tuple[str, ...] = ("command",)
    tool_key, input_key = "tool_name", "tool_input"
    # hookEventName of each of our events, where the answer names it
    event_names = {"session-start": "SessionStart", "user-prompt-submit": "UserPromptSubmit"}

    # -- reading the event ----------------------------------------------------------
    def parse(self, raw: str) -> dict:
        try:
            event = json.loads(raw or "{}")
        except ValueError as exc:
            raise BadInput(f"hook input is not JSON: {exc}") from None
        if not isinstance(event, dict) or not self.native_id(event):
            raise BadInput(f"hook input has no {' or '.join(self.id_keys)}")
        return event

    def native_id(self, event: dict) -> str:
        return next((str(event[k]) for k in self.id_keys if event.get(k)), "")

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
        args = args if isinstance(args, dict) else {}
        if tool in self.edit_tools:
            return [str(args[k]) for k in self.edit_tools[tool] if args.get(k)][:1]
        if tool in self.shell_tools:
            command = next((args[k] for k in self.shell_fields if args.get(k)), None)
            return shell_targets(command, self.shell_cwd(args, ctx)) if command else []
        return self.other_targets(tool, args, ctx)

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

    def empty(self) -> dict | None:
        """The answer that says nothing (None: no output at all)."""
        return None

    def context(self, event: str, text: str) -> dict | None:
        """*text* added to the agent's context at session start or prompt submit."""
        return {"hookSpecificOutput": {"hookEventName": self.event_names[event],
                                       "additionalContext": text}}

    def keep_going(self, text: str) -> dict:
        """The end-of-turn answer that keeps the agent working on *text*."""
        return {"decision": "block", "reason": text}

    injects_prompt = True  # whether a prompt-submit answer reaches the agent

    def exported(self, sid: str, env: dict) -> bool:
        """Make *sid* the default session of the agent's shell commands, if the harness
        lets a hook do that; whether it did."""
        return False
