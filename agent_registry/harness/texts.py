"""The protocol text and the skill, from one source: ``templates/harness/``.

``protocol.md`` is the text; ``variants.md`` holds its per-reader parts.  A file only
harnesses with registering hooks read (CLAUDE.md for Claude Code, GEMINI.md for Gemini
CLI, QWEN.md for Qwen Code) gets the "hook" parts: its session is registered for it, the edit gate refuses held
paths.  A file read by agents with and without hooks (AGENTS.md: Codex, Cursor, OpenCode,
Copilot CLI, Aider, any other; the shared skills) gets the "any" parts, true for both.  The text is
per file, not per harness, so two harnesses sharing AGENTS.md write the same bytes and a
second install of either changes nothing.
"""
from __future__ import annotations

import re
from string import Template

from ..store.shipped import read_text

BLOCK_START = "<!-- agent-registry:protocol:start -->"
BLOCK_END = "<!-- agent-registry:protocol:end -->"
# the instruction file each harness reads at start
PROTOCOL_FILES = {"claude": "CLAUDE.md", "gemini": "GEMINI.md", "codex": "AGENTS.md",
                  "cursor": "AGENTS.md", "opencode": "AGENTS.md", "aider": "AGENTS.md",
                  "generic": "AGENTS.md", "copilot": "AGENTS.md", "qwen": "QWEN.md"}
HOOKED_FILES = {"CLAUDE.md", "GEMINI.md", "QWEN.md"}
SKILL_NAME = "agent-registry"
# where each harness loads project skills from
SKILL_DIRS = {"claude": ".claude/skills", "codex": ".agents/skills",
              "gemini": ".agents/skills", "opencode": ".agents/skills",
              "cursor": ".cursor/skills", "copilot": ".claude/skills",
              "qwen": ".agents/skills"}
_PART = re.compile(r"^<!-- ([a-z-]+) -->$", re.M)


def _variants() -> dict[str, str]:
    text = read_text("templates", "harness/variants.md")
    marks = list(_PART.finditer(text))
    return {m.group(1): text[m.end():marks[i + 1].start() if i + 1 < len(marks) else None]
            .strip() for i, m in enumerate(marks)}


def protocol_body(hooked: bool) -> str:
    """The protocol as markdown, for a reader whose session a hook registers (*hooked*)
    or for any reader."""
    kind = "hook" if hooked else "any"
    parts = _variants()
    body = Template(read_text("templates", "harness/protocol.md")).substitute(
        identity=parts[f"identity-{kind}"], gate=parts[f"gate-{kind}"],
        heartbeat=parts[f"heartbeat-{kind}"])
    # an empty part leaves a blank line or a trailing space behind: drop them
    body = re.sub(r"[ \t]+\n", "\n", body)
    return re.sub(r"\n{3,}", "\n\n", body).strip() + "\n"


def protocol_text(file_name: str = "AGENTS.md") -> str:
    return protocol_body(file_name in HOOKED_FILES)


def skill_text() -> str:
    body = protocol_body(False).replace("## agent-registry: working beside other agents\n\n",
                                        "", 1)
    return Template(read_text("templates", "harness/skill.md")).substitute(body=body.strip())


def skill_file(harness: str) -> str | None:
    directory = SKILL_DIRS.get(harness)
    return f"{directory}/{SKILL_NAME}/SKILL.md" if directory else None


def merge_block(old: str, file_name: str) -> str:
    """*old* with the protocol block for *file_name* between our markers: replaced when
    present, appended otherwise; everything else kept as it is."""
    block = f"{BLOCK_START}\n{protocol_text(file_name)}{BLOCK_END}"
    if BLOCK_START in old and BLOCK_END in old.split(BLOCK_START, 1)[1]:
        head, rest = old.split(BLOCK_START, 1)
        return head + block + rest.split(BLOCK_END, 1)[1]
    separator = "" if not old else "\n" if old.endswith("\n") else "\n\n"
    return old + separator + block + "\n"


def has_block(text: str) -> bool:
    return BLOCK_START in text and BLOCK_END in text
