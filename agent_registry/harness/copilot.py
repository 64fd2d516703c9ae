"""GitHub Copilot CLI's hooks in Claude Code's format (``.github/hooks/*.json`` with
PascalCase event names; measured with Copilot CLI 1.0.102 from npm ``@github/copilot``).

The payload is Claude Code's: ``hook_event_name``, ``session_id``, ``cwd``, and for
PreToolUse ``tool_name`` mapped to Claude's names (``edit`` -> ``Edit``, ``create`` ->
``Write``, ``bash`` -> ``Bash``) with ``tool_input`` as Copilot's tool has it: the file
is ``path`` (which the shared adapter reads beside ``file_path``), the command
``command``.  ``apply_patch``, the edit tool Copilot gives GPT-5 models, reaches the hook
as ``Edit`` whose ``tool_input`` is the patch text itself (``*** Update File: P``,
relative to ``cwd``).  Answers are Claude's, the deny in ``hookSpecificOutput`` (shown
to the model as ``Denied by preToolUse hook: <reason>``), Stop ``{"decision": "block",
"reason": …}``; but context is read only at the top level, ``{"additionalContext": …}``
(Claude's nested form is dropped, at session start and at a prompt alike); after a tool,
PostToolUse's ``decision: block`` replaces its result with ``Tool result blocked:
<reason>``.  A ``-p`` run fires SessionEnd once, at its end.  Copilot runs a hook through
``bash -c`` as a child of its own process: ``$PPID``.
"""
import os

from .adapter import Adapter, bad_input, patch_targets
from .ctx import Ctx


class Copilot(Adapter):
    name = "copilot"
    # PostToolUse's block replaces the tool's result: a message told there would hide it
    tells_after_tool = False

    def targets(self, event: dict, ctx: Ctx) -> list[str] | None:
        args = event.get(self.input_key)
        if isinstance(args, str):  # apply_patch: the patch is the whole input
            found = patch_targets(args)
            if not found:  # an edit we cannot read is not let through unchecked
                raise bad_input(f"{event.get(self.tool_key) or 'a tool'}'s input names no "
                               "file (not a *** Begin Patch envelope)")
            return [os.path.join(ctx.cwd, p) for p in found]
        return super().targets(event, ctx)

    def context(self, event: str, text: str) -> dict | None:
        return {"additionalContext": text}

    def after(self, event: dict, text: str) -> dict:
        if event.get("hook_event_name") == "PostToolUse":  # "Tool result blocked: <text>"
            return super().after(event, text)
        return {"additionalContext": text}  # a failed tool's: context, at the top level


ADAPTER = Copilot()
