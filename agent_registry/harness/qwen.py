"""Qwen Code's hooks (``.qwen/settings.json``; measured with Qwen Code 0.24.4 from npm
``@qwen-code/qwen-code``): Gemini CLI's fork, with Claude Code's event names.

The payload has ``session_id``, ``cwd``, ``hook_event_name``; PreToolUse gives Qwen's tool
ids, as Gemini's: ``write_file`` and ``edit`` (``tool_input.file_path``),
``notebook_edit`` (``notebook_path``) and ``run_shell_command`` (``command``, run in
``directory``).  A deny is Gemini's ``{"decision": "deny", "reason": …}`` (the reason is
the tool's result for the model); SessionStart and UserPromptSubmit add
``hookSpecificOutput.additionalContext``; Stop keeps the agent going with
``{"decision": "block", "reason": …}``; PostToolUse and PostToolUseFailure (the backstop)
append ``hookSpecificOutput.additionalContext`` to the tool's result.

Two differences from Gemini CLI: UserPromptSubmit fires before every model request of a
turn, after each tool result too, with an empty ``prompt`` (a check in the middle of the
turn, which must not restart the wake count); and a headless run (``qwen -p``) fires no
SessionEnd: it exits when its one turn ends, so its last Stop, when nothing keeps it
going, finishes the session.  Qwen runs a hook through bash as a child of its own node
process (``$PPID``), whose command line tells a ``-p`` run.
"""
from .gemini import Gemini

# Qwen Code's options that make a run of one prompt, and those that keep it interactive
ONE_PROMPT = ("-p", "--prompt")
INTERACTIVE = ("-i", "--prompt-interactive")


class Qwen(Gemini):
    name = "qwen"
    edit_tools = {"write_file": ("file_path",), "edit": ("file_path",),
                  "notebook_edit": ("notebook_path",)}
    event_names = {"session-start": "SessionStart", "user-prompt-submit": "UserPromptSubmit"}
    project_env = "QWEN_PROJECT_DIR"

    def parse(self, raw: str) -> dict:
        event = super().parse(raw)
        if event.get("hook_event_name") == "UserPromptSubmit" and not event.get("prompt"):
            event["midturn"] = True  # before the request after a tool result
        return event

    def after(self, event: dict, text: str) -> dict:
        # PostToolUse(Failure) appends hookSpecificOutput.additionalContext to the tool's
        # result (measured); a decision: block there reaches nobody
        name = str(event.get("hook_event_name") or "PostToolUse")
        return {"hookSpecificOutput": {"hookEventName": name, "additionalContext": text}}

    def ends_with_turn(self, event: dict, pid: int | None) -> bool:
        if pid is None:
            return False
        from ..store.procinfo import cmdline
        words = [w.split("=", 1)[0] for w in cmdline(pid)]
        return any(w in ONE_PROMPT for w in words) and not any(w in INTERACTIVE for w in words)


ADAPTER = Qwen()
