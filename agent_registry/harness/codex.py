"""Codex's hooks (≥ 0.124; Claude Code's format): ``session_id``, ``cwd``, ``tool_name``,
``tool_input``.  Files are written by ``apply_patch``, whose input is the patch envelope
(``*** Begin Patch`` … ``*** Update File: P`` / ``*** Add File: P`` / ``*** Delete File:
P`` / ``*** Move to: P``, paths relative to ``cwd``), and by the shell tools
(``exec_command``, ``shell``, … whose ``command`` is a string or an argv list; Codex may
name them ``Bash`` in hooks).  Answers as Claude Code's: ``hookSpecificOutput`` deny and
``additionalContext`` (also after a tool), Stop ``{"decision": "block", "reason": …}``."""
import os

from .adapter import Adapter, patch_targets
from .ctx import Ctx

SHELLS = frozenset({"Bash", "shell", "exec_command", "local_shell", "shell_command",
                    "container.exec", "unified_exec"})


class Codex(Adapter):
    name = "codex"
    shell_tools = SHELLS
    shell_fields = ("command", "cmd")
    # its PostToolUse decision: block replaces the tool's output with the reason (seen
    # with Codex 0.171 against a mock model); additionalContext goes beside the output
    blocks_after = False

    def other_targets(self, tool: str, args: dict, ctx: Ctx) -> list[str] | None:
        # apply_patch, or any tool whose input carries a patch envelope
        texts = [v for v in args.values() if isinstance(v, str)]
        found = [p for text in texts for p in patch_targets(text)]
        if not found and tool != "apply_patch":
            return None
        return [os.path.join(ctx.cwd, p) for p in dict.fromkeys(found)]

    def shell_command(self, command) -> str | list[str]:
        """A string, or the argv list Codex's exec tools send."""
        if isinstance(command, list) and all(isinstance(w, str) for w in command):
            return command
        return super().shell_command(command)

    def shell_cwd(self, args: dict, ctx: Ctx) -> str:
        workdir = args.get("workdir") or args.get("cwd")
        return os.path.join(ctx.cwd, str(workdir)) if workdir else ctx.cwd


ADAPTER = Codex()
