"""OpenCode, through the plugin ``harness install opencode`` writes: its
``tool.execute.before`` runs the hook with ``{"tool", "args", "sessionID", "callID",
"cwd", "project"}`` on stdin and throws when the answer is ``{"deny": true, "reason": …}``;
an answer with ``"after": true`` (the backstop noted the held files, or a person's high
message waits for the session) makes its
``tool.execute.after`` run the after-tool hook with the same fields, whose
``{"context": …}`` it appends to the tool's output, which the model reads.
Files are written by ``write``/``edit``/``multiedit`` (``args.filePath``),
``patch``/``apply_patch`` (a patch envelope or a unified diff in ``args.patchText``) and
``bash`` (``args.command``, run in ``args.workdir`` when given).  ``cwd`` is OpenCode's
directory, ``project`` the repository the plugin file is in (used when ``cwd`` is not in
a repository).  Other events get ``{"sessionID", "cwd", "project"}`` (a prompt check in
the middle of a turn adds ``"midturn": true``); their answers are ``{"context": …}``
(start, prompt) and ``{"continue": …}`` (end of turn, waking) for the plugin to hand to
the model, ``{}`` when there is nothing to say."""
import os

from .adapter import Adapter, diff_targets, patch_targets
from .ctx import Ctx

FILE_FIELDS = ("filePath", "file_path", "path")


class OpenCode(Adapter):
    name = "opencode"
    id_keys = ("sessionID", "session_id")
    tool_key, input_key = "tool", "args"
    edit_tools = {name: FILE_FIELDS for name in ("write", "edit", "multiedit")}
    shell_tools = frozenset({"bash"})

    def cwd(self, event: dict, env: dict) -> str:
        return str(event.get("cwd") or event.get("directory") or event.get("project")
                   or os.getcwd())

    def project(self, event: dict, env: dict) -> str:
        return str(event.get("project") or "")

    def shell_cwd(self, args: dict, ctx: Ctx) -> str:
        workdir = args.get("workdir")
        return os.path.join(ctx.cwd, str(workdir)) if workdir else ctx.cwd

    def other_targets(self, tool: str, args: dict, ctx: Ctx) -> list[str] | None:
        texts = [v for v in args.values() if isinstance(v, str)]
        found = [p for text in texts for p in patch_targets(text)]
        if not found and tool not in ("patch", "apply_patch"):
            return None
        if not found:  # a patch tool given a unified diff
            found = [p for text in texts for p in diff_targets(text)]
        return [os.path.join(ctx.cwd, p) for p in dict.fromkeys(found)]

    def deny(self, reason: str) -> dict:
        return {"deny": True, "reason": reason}

    def allow(self) -> dict | None:
        return {"deny": False}

    def allow_noted(self) -> dict | None:
        return {"deny": False, "after": True}  # the plugin runs post-tool-use only then

    def after(self, event: dict, text: str) -> dict:
        return {"context": text}

    def warn(self, text: str, noted: bool = False) -> dict | None:
        # the plugin tells the model at its next step
        return {**(self.allow_noted() if noted else self.allow()), "context": text}

    def empty(self) -> dict | None:
        return {}  # the plugin parses every answer as JSON

    def context(self, event: str, text: str) -> dict | None:
        return {"context": text}

    def keep_going(self, text: str) -> dict:
        return {"continue": text}


ADAPTER = OpenCode()
