"""Cursor's hooks (``.cursor/hooks.json`` version 1): every event has
``conversation_id`` and ``workspace_roots``; ``preToolUse`` gives ``tool_name`` and
``tool_input`` (a file in ``file_path``/``path``/``target_file``, a command in
``command``), ``beforeShellExecution`` gives ``command`` and ``cwd`` at the top.  A
deny is ``{"permission": "deny", "agent_message": …, "user_message": …}``;
``stop`` keeps the agent going with ``{"followup_message": …}``; a prompt submit
cannot add context (``beforeSubmitPrompt`` answers only ``continue``), so what waits is
handed over at session start and by waking.  (Checked against the documented schema:
Cursor does not run here.)"""

from .adapter import Adapter, shell_targets
from .ctx import Ctx

FILE_FIELDS = ("file_path", "path", "target_file", "filePath")


class Cursor(Adapter):
    name = "cursor"
    # no after-tool hook is installed: the backstop takes no note it would never check
    after_tool = False
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

    def keep_going(self, text: str) -> dict:
        return {"followup_message": text}


ADAPTER = Cursor()
