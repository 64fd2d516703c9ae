"""Cursor's hooks (``.cursor/hooks.json`` version 1): every event has
``conversation_id`` and ``workspace_roots``; ``preToolUse`` gives ``tool_name``,
``tool_input`` (a file in ``file_path``/``path``/``target_file``, a command in
``command``, run in ``working_directory``), ``tool_use_id`` and ``cwd``;
``beforeShellExecution`` gives ``command`` and ``cwd`` at the top, and no call id.  A
deny is ``{"permission": "deny", "agent_message": …, "user_message": …}``;
``stop`` keeps the agent going with ``{"followup_message": …}``; a prompt submit
cannot add context (``beforeSubmitPrompt`` answers only ``continue``), so what waits is
handed over at session start and by waking.

The backstop: ``postToolUse`` (after a tool that succeeded) and ``postToolUseFailure``
(one that failed, timed out or was denied: a shell command's non-zero exit) carry the
``tool_use_id`` of the call's ``preToolUse``, so a call is noted there and checked at
either, paired by that id.  A shell call is gated twice (``preToolUse`` and
``beforeShellExecution``) and noted once: ``beforeShellExecution`` has no call id, and
``afterShellExecution`` (no id, no ``cwd``, no answer read) is not installed.
``postToolUse`` tells the model with ``{"additional_context": …}`` ("injected into the
conversation after the tool result"); ``postToolUseFailure`` has no output fields, so
there the put-back and the holder's message happen and the agent's text goes to stderr
(Cursor's Hooks output channel), not to the model.  (Checked against the documented
schema, cursor.com/docs/hooks: Cursor does not run here.)"""

import os

from .adapter import Adapter, shell_targets
from .ctx import Ctx

FILE_FIELDS = ("file_path", "path", "target_file", "filePath")


class Cursor(Adapter):
    name = "cursor"
    # a person's high message is not told after a tool: postToolUseFailure's answer
    # would lose it (told at session start and by waking instead)
    tells_after_tool = False
    id_keys = ("conversation_id", "session_id")
    edit_tools = {name: FILE_FIELDS for name in (
        "Write", "Edit", "MultiEdit", "StrReplace", "Delete", "edit_file", "write",
        "delete_file", "search_replace", "EditNotebook")}
    shell_tools = frozenset({"Shell", "run_terminal_cmd", "Bash", "terminal"})
    injects_prompt = False

    def project(self, event: dict, env: dict) -> str:
        roots = event.get("workspace_roots")
        root = roots[0] if isinstance(roots, list) and roots else None
        return str(root or env.get("CURSOR_PROJECT_DIR") or "")

    def notes(self, event: dict) -> bool:
        return "tool_name" in event  # preToolUse, whose tool_use_id the after-events carry

    def shell_cwd(self, args: dict, ctx: Ctx) -> str:
        where = args.get("working_directory")
        return os.path.join(ctx.cwd, where) if isinstance(where, str) and where else ctx.cwd

    def targets(self, event: dict, ctx: Ctx) -> list[str] | None:
        if "tool_name" not in event and isinstance(event.get("command"), str):
            return shell_targets(event["command"], ctx.cwd)  # beforeShellExecution
        return super().targets(event, ctx)

    def empty(self) -> dict | None:
        return {}  # a JSON object always: no "permission" leaves Cursor's own flow

    def deny(self, reason: str) -> dict:
        return {"permission": "deny", "agent_message": reason, "user_message": reason}

    def warn(self, text: str, noted: bool = False) -> dict:
        return {"agent_message": text}  # no permission: Cursor's own flow goes on

    def context(self, event: str, text: str) -> dict | None:
        return {"additional_context": text} if event == "session-start" else {"continue": True}

    def after(self, event: dict, text: str) -> dict:
        if not self.after_reaches_model(event):
            return {}  # no output fields: told on stderr and in the agent's inbox
        return {"additional_context": text}

    def after_reaches_model(self, event: dict) -> bool:
        return event.get("hook_event_name") != "postToolUseFailure"

    def keep_going(self, text: str) -> dict:
        return {"followup_message": text}


ADAPTER = Cursor()
