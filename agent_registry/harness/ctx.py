"""What one hook call is about (:class:`Ctx`) and what the gate answers
(:class:`Decision`), shared by every harness adapter and harness/decision.py.  Plain
classes, not dataclasses: importing dataclasses costs every hook call more than its
whole decision when nothing is written (issue 35)."""
from ..store.tuples import named

ALLOW_ENV = "AGENT_REGISTRY_ALLOW"
# provider (as `status` shows it) and product name of each harness
HARNESSES = {"claude": ("Claude", "Claude Code"), "codex": ("Codex", "Codex"),
             "gemini": ("Gemini", "Gemini CLI"), "cursor": ("Cursor", "Cursor"),
             "opencode": ("OpenCode", "OpenCode"),
             "copilot": ("Copilot", "Copilot CLI"), "qwen": ("Qwen", "Qwen Code"),
             "aider": ("Aider", "Aider")}


class Ctx:
    """One hook call: which harness, its own session id, where the agent works."""
    __slots__ = ("harness", "native_id", "cwd", "model", "source", "env", "project", "repo")

    def __init__(self, harness: str, native_id: str, cwd: str, model: str = "",
                 source: str = "", env: dict | None = None, project: str = "") -> None:
        self.harness, self.native_id, self.cwd = harness, native_id, cwd
        self.model, self.source, self.env = model, source, {} if env is None else env
        self.project = project  # the project the harness was started in, when it says (env)
        self.repo = None  # its repository, once found (harness/where.repo_of)

    def __repr__(self) -> str:
        return f"Ctx({self.harness!r}, {self.native_id!r}, {self.cwd!r})"

    @property
    def provider(self) -> str:
        return HARNESSES[self.harness][0]

    @property
    def product(self) -> str:
        return HARNESSES[self.harness][1]

    @property
    def allowed(self) -> bool:
        """The person let edits through unchecked (AGENT_REGISTRY_ALLOW=1)."""
        return self.env.get(ALLOW_ENV) == "1"


# allow; reason: why denied (for the agent); notice: said on stderr when let through
# unchecked; warning: told the agent while the edit goes on (changed elsewhere)
Decision = named("Decision", "allow reason notice warning", ("", "", ""))
