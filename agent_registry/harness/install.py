"""``harness install|uninstall|status``: the per-harness installers behind one interface.

Each installer module (``install_claude``, ``install_codex``, ``install_gemini``,
``install_cursor``, ``opencode``, ``aider``, ``install_copilot``, ``install_qwen``,
``generic``) has ``plan(toplevel, options)``
returning a :class:`files.Plan` (every file's new text, read and merged before anything
is written) and, when the harness has hooks, ``HOOK_FILE`` and
``installed_commands(toplevel)`` (our commands found there: status and doctor read the
options and the executable from them; Aider has ``extra_state`` for its config instead).
The trust each harness needs is in :mod:`trust`.  Here: the shared parts (skill,
protocol, MCP), install and uninstall with their records, and the state of each harness.
"""
from __future__ import annotations

import importlib
import os
import re
import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..errors import BadInput
from . import files, hookfiles, mcp, texts
from .command import executable, needs
from .shells import start_of
from .unmerge import unmerge

HARNESSES = ("claude", "codex", "gemini", "cursor", "opencode", "aider", "copilot", "qwen")
MODULES = {"claude": "install_claude", "codex": "install_codex", "gemini": "install_gemini",
           "cursor": "install_cursor", "opencode": "opencode", "aider": "aider",
           "generic": "generic", "copilot": "install_copilot", "qwen": "install_qwen"}
# how --all finds a harness on this machine: its CLI on PATH, or its config dir in HOME
FOUND_BY = {"claude": ("claude", ".claude"), "codex": ("codex", ".codex"),
            "gemini": ("gemini", ".gemini"), "cursor": ("cursor-agent", ".cursor"),
            "opencode": ("opencode", ".config/opencode"), "aider": ("aider", None),
            "copilot": ("copilot", ".copilot"), "qwen": ("qwen", ".qwen")}


@dataclass
class Options:
    mcp: bool = False
    auto_claim: bool = False
    wake: int | None = None
    exe: list[str] = field(default_factory=executable)
    hold: int | None = None  # the end-of-turn hook listens this long for a message
    deny_overlap: bool = False  # the edit gate refuses a file another session changed
    no_memory: bool = False  # the session start hands over no wiki entries


def module(harness: str):
    if harness not in MODULES:
        raise BadInput(f"unknown harness {harness!r} ({', '.join(MODULES)})")
    return importlib.import_module(f"{__package__}.{MODULES[harness]}")


# -- the parts every harness shares -------------------------------------------------------

def add_texts(plan: files.Plan, harness: str, file_name: str | None = None) -> None:
    """The protocol block in the file *harness* reads at start, and its skill."""
    name = file_name or texts.PROTOCOL_FILES[harness]
    plan.edit(name, lambda old, path: texts.merge_block(old, name))
    skill = texts.skill_file(harness)
    if skill:
        plan.edit(skill, lambda old, path: texts.skill_text())


def add_mcp(plan: files.Plan, harness: str) -> None:
    command = mcp.server_command(plan.toplevel)
    plan.edit(mcp.FILES[harness],
              lambda old, path: mcp.merge_into(old, path, harness, command))


# -- install, uninstall -------------------------------------------------------------------

def plan_for(toplevel: str, harness: str, options: Options, **extra) -> files.Plan:
    return module(harness).plan(toplevel, options, **extra)


def uninstall(toplevel: str, common_dir: str, harness: str) -> dict:
    return {"harness": harness, **files.restore(toplevel, common_dir, harness,
                                                unmerge(harness))}


def found(toplevel: str, common_dir: str) -> list[str]:
    """--all: each harness whose CLI is on PATH or whose config dir is in HOME, or that
    this repository already configures (or this clone installed)."""
    home = Path(os.path.expanduser("~"))
    out = []
    for harness in HARNESSES:
        cli, config = FOUND_BY[harness]
        here = shutil.which(cli) or (config and (home / config).is_dir())
        if here or harness in files.installed(common_dir) or configured(toplevel, harness):
            out.append(harness)
    return out


def configured(toplevel: str, harness: str) -> bool:
    """Whether the repository holds our hooks, MCP entry or (Aider) config for *harness*
    (a skill or protocol text alone does not say which harness reads it)."""
    mod = module(harness)
    if getattr(mod, "HOOK_FILE", None) and mod.installed_commands(toplevel):
        return True
    if own_mcp_file(harness) and mcp.state(toplevel, harness) != "absent":
        return True
    extra = getattr(mod, "extra_state", None)
    return bool(extra and extra(toplevel).get("config") == "current")


def own_mcp_file(harness: str) -> bool:
    """Whether our server in *harness*'s MCP file says *harness* is configured: not when
    another harness reads that file too (Claude Code's .mcp.json, which Copilot CLI
    reads), where it cannot say which of them was installed."""
    rel = mcp.FILES.get(harness)
    return rel is not None and list(mcp.FILES.values()).count(rel) == 1


# -- status ---------------------------------------------------------------------------------

_WAKE = re.compile(r"--wake (\d+)")
_HOLD = re.compile(r"--hold (\d+)")


def options_of(commands: list[str]) -> Options:
    """The options installed hook *commands* were written with."""
    joined = " ".join(commands)
    wake, hold = _WAKE.search(joined), _HOLD.search(joined)
    return Options(auto_claim="--auto-claim" in joined, wake=int(wake.group(1)) if wake else None,
                   hold=int(hold.group(1)) if hold else None,
                   deny_overlap="--deny-overlap" in joined, no_memory="--no-memory" in joined)


def _part(toplevel: str, rel: str, expected: str) -> str:
    path = Path(toplevel, rel)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return "absent"
    return "current" if text == expected else "stale"


def status(toplevel: str, common_dir: str, harness: str) -> dict:
    """One harness: ``hooks``, ``mcp``, ``skill``, ``protocol`` (``current``, ``stale``,
    ``absent`` or None when the harness has none), ``executable`` (what the hooks run,
    whether it is there, and the words they start with), ``trusted`` (True, False, None: nothing to grant) and
    ``trust_step``."""
    from . import trust
    mod = module(harness)
    commands = mod.installed_commands(toplevel) if getattr(mod, "HOOK_FILE", None) else []
    opts = replace(options_of(commands), mcp=harness in mcp.FILES
                   and mcp.state(toplevel, harness) != "absent")
    try:
        plan = plan_for(toplevel, harness, opts)
    except BadInput as exc:
        plan, broken = None, exc.message
    else:
        broken = None
    out: dict = {"harness": harness, "installed": False, "hooks": None, "mcp": None,
                 "skill": None, "protocol": None, "executable": None, "broken": broken}
    hook_file = getattr(mod, "HOOK_FILE", None)
    if hook_file:
        out["hooks"] = "absent" if not commands else (
            "current" if plan and _part(toplevel, hook_file, plan.files[hook_file]) == "current"
            else "stale")
        starts = sorted({tuple(start) for c in commands if (start := start_of(c))})
        out["executable"] = [_start_state(list(start)) for start in starts]
    if harness in mcp.FILES:
        out["mcp"] = mcp.state(toplevel, harness)
    skill = texts.skill_file(harness)
    if skill:
        out["skill"] = _part(toplevel, skill, texts.skill_text())
    protocol = texts.PROTOCOL_FILES[harness]
    try:
        text = Path(toplevel, protocol).read_text(encoding="utf-8")
    except OSError:
        text = ""
    out["protocol"] = "absent" if not texts.has_block(text) else (
        "current" if texts.merge_block(text, protocol) == text else "stale")
    extra = getattr(mod, "extra_state", None)
    if extra:
        out.update(extra(toplevel))
    # a person's own .aider.conf.yml without our keys is not an install of ours
    out["installed"] = harness in files.installed(common_dir) or \
        out["hooks"] not in (None, "absent") or out.get("config") == "current" or \
        (own_mcp_file(harness) and out["mcp"] not in (None, "absent"))
    out["trusted"], out["trust_step"] = trust.state(toplevel, harness, out)
    # an installed gate that will not run lets every edit through: status and doctor fail
    from .gate import gate, gate_fix
    out["gate"] = gate(toplevel, harness, out)
    out["gate_fix"] = gate_fix(harness, opts, out["gate"])
    return out


def _start_state(start: list[str]) -> dict:
    """{"path", "ok", "start"} of hooks that start with *start*: the program, or the
    first file it needs that is gone (the launcher, with the package); its words."""
    gone = [p for p in needs(start) if not os.path.isfile(p) or
            (p == start[0] and not os.access(p, os.X_OK))]
    return {"path": gone[0] if gone else start[0], "ok": not gone, "start": start}


# -- several at once, as the CLI asks -----------------------------------------------------

def install_many(toplevel: str, common_dir: str, names: list[str], options: Options, *,
                 grant: bool = False, file_name: str | None = None) -> dict:
    """Plan every harness first (a file that cannot be merged refuses them all, nothing
    written), then write each, then take the trust steps when *grant*."""
    from . import trust
    extra = {"file_name": file_name} if file_name else {}
    plans = [plan_for(toplevel, name, options, **extra) for name in names]
    for name in names:  # what a harness needs besides its files (Aider: the git hooks)
        check = getattr(module(name), "preflight", None)
        if check:
            check(toplevel)
    # trust a person granted to what is installed is granted again to what replaces it
    # (Codex trusts a hook by its hash: a changed command would be skipped in silence)
    kept = {name for name in names if name in HARNESSES
            and status(toplevel, common_dir, name)["trusted"] is True}
    out = []
    for plan in plans:
        written = files.apply(plan, common_dir, unmerge(plan.harness))
        after = getattr(module(plan.harness), "after_install", None)
        if after:
            plan.notes.extend(after(toplevel))
        granted = trust.grant(toplevel, common_dir, plan.harness) \
            if grant or plan.harness in kept else []
        state = status(toplevel, common_dir, plan.harness) if plan.harness in HARNESSES \
            else {"trusted": None, "trust_step": None}
        entry = {"harness": plan.harness, "files": sorted(plan.files),
                 "written": written, "changed": bool(written), "notes": plan.notes,
                 "trust_granted": granted, "trusted": state["trusted"],
                 "trust_step": state["trust_step"]}
        if options.mcp and plan.harness in mcp.FILES:
            rel = mcp.FILES[plan.harness]
            entry["mcp"] = {"file": str(Path(toplevel, rel)), "server": mcp.SERVER,
                            "command": mcp.server_command(toplevel),
                            "changed": rel in written}
        out.append(entry)
    return {"harnesses": out, "changed": any(h["changed"] or h["trust_granted"] for h in out)}


def uninstall_many(toplevel: str, common_dir: str, names: list[str]) -> dict:
    out = [uninstall(toplevel, common_dir, name) for name in names]
    return {"harnesses": out}


def hooks_plan(harness: str, toplevel: str, options, hook_file: str, merge,
               wanted: dict[str, dict]) -> files.Plan:
    """The install plan of a harness whose hooks sit in one JSON file: its hooks merged
    into *hook_file* (with *merge*: grouped or flat), then its MCP entry (``--mcp``;
    Gemini's is in the same file, merged after the hooks), then its texts."""
    plan = files.Plan(harness, toplevel)
    plan.edit(hook_file, lambda old, path: hookfiles.merged_text(old, path, merge, wanted,
                                                                  harness))
    if options.mcp:
        add_mcp(plan, harness)
    add_texts(plan, harness)
    return plan
