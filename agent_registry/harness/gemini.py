"""Gemini CLI's hooks (docs/hooks/reference.md of gemini-cli): ``session_id``, ``cwd``,
``tool_name``, ``tool_input``.  BeforeTool on ``write_file``/``replace``
(``tool_input.file_path``) and ``run_shell_command`` (``tool_input.command``, run in
``dir_path``) denies with stdout ``{"decision": "deny", "reason": …}`` and exit 0 (the
reason goes to the agent as the tool's error).  SessionStart and BeforeAgent add
``hookSpecificOutput.additionalContext`` (JSON only: plain stdout is not added);
AfterAgent keeps the agent going with ``{"decision": "block", "reason": …}`` (the reason
is its next prompt, and BeforeAgent fires again for it).  AfterTool (the backstop) appends
``hookSpecificOutput.additionalContext`` to the tool's result."""
import os

from .adapter import Adapter
from .ctx import Ctx


class Gemini(Adapter):
    name = "gemini"
    edit_tools = {"write_file": ("file_path", "absolute_path"),
                  "replace": ("file_path", "absolute_path"), "edit": ("file_path",)}
    shell_tools = frozenset({"run_shell_command"})
    event_names = {"session-start": "SessionStart", "user-prompt-submit": "BeforeAgent"}

    project_env = "GEMINI_PROJECT_DIR"

    def shell_cwd(self, args: dict, ctx: Ctx) -> str:
        where = args.get("dir_path") or args.get("directory")
        return os.path.join(ctx.cwd, str(where)) if where else ctx.cwd

    def deny(self, reason: str) -> dict:
        return {"decision": "deny", "reason": reason}

    def warn(self, text: str, noted: bool = False) -> dict:
        return {"hookSpecificOutput": {"hookEventName": "BeforeTool", "additionalContext": text}}

    def after(self, event: dict, text: str) -> dict:
        # AfterTool appends additionalContext to the tool's result the model reads
        return {"hookSpecificOutput": {"hookEventName": "AfterTool", "additionalContext": text}}


ADAPTER = Gemini()
