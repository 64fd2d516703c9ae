"""``harness install generic [--file NAME]``: the protocol alone, for an agent with no
hooks of ours (Kimi, a person's own script): AGENTS.md by default."""
from __future__ import annotations

from .files import Plan

NAME = "generic"


def plan(toplevel: str, options, file_name: str | None = None) -> Plan:
    from . import texts
    name = file_name or "AGENTS.md"
    plan = Plan(NAME, toplevel)
    plan.edit(name, lambda old, path: texts.merge_block(old, name))
    return plan
