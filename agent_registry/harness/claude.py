"""Claude Code's hooks (its hooks reference): the event JSON on stdin has ``session_id``,
``cwd`` and per event ``tool_name``/``tool_input``; a PreToolUse hook denies with
``hookSpecificOutput.permissionDecision: "deny"``, SessionStart and UserPromptSubmit add
``hookSpecificOutput.additionalContext``, and Stop keeps the agent going with
``{"decision": "block", "reason": …}``.  Edit tools name ``file_path`` (NotebookEdit
``notebook_path``); Bash gives ``command``.  SessionStart may export variables for the
agent's shell through ``$CLAUDE_ENV_FILE``.  PostToolUse (the backstop) hands the model a
reason with ``{"decision": "block", "reason": …}``; PostToolUseFailure takes
``hookSpecificOutput.additionalContext``."""
from .adapter import Adapter


# Claude Code 2.1.3xx shows the model every PreToolUse deny as "PreToolUse:Edit hook error:
# <reason>", answered with permissionDecision deny or with exit 2 alike (measured with
# 2.1.332): the reason says first that the hook worked and refused
REFUSAL = "refused on purpose (the hook worked; the edit was not made): "


class Claude(Adapter):
    name = "claude"
    tells_before_tool = True  # a person's high message, at the next tool call

    def deny(self, reason: str) -> dict:
        return super().deny(REFUSAL + reason)

    def exported(self, sid: str, env: dict) -> bool:
        if not env.get("CLAUDE_ENV_FILE"):
            return False
        with open(env["CLAUDE_ENV_FILE"], "a", encoding="utf-8") as f:
            f.write(f"export AGENT_REGISTRY_SESSION={sid}\n")
        return True


ADAPTER = Claude()
