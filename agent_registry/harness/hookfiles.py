"""Merging our hooks into a harness's JSON hook file, keeping everything else.

Two shapes exist.  Claude Code (``.claude/settings.json``), Codex (``.codex/hooks.json``)
and Gemini CLI (``.gemini/settings.json``) group handlers: ``{"hooks": {EVENT: [{"matcher":
…, "hooks": [{"type": "command", "command": …}]}]}}``.  Cursor (``.cursor/hooks.json``,
version 1) lists them flat: ``{"version": 1, "hooks": {event: [{"command": …, "matcher":
…}]}}``.  Our entries are recognised by their command (``harness hook <harness>``): one
per event, replaced in place on a second install; other events, groups and handlers are
kept.  A file whose data already says what we would write is left byte for byte, whatever
its formatting.
"""
from __future__ import annotations

import copy
import json
from pathlib import Path

from ..errors import BadInput
from .command import is_ours


def load_object(text: str, path: Path | str) -> dict:
    """A JSON object file's data ({} when empty); anything else is refused."""
    try:
        data = json.loads(text) if text.strip() else {}
    except ValueError as exc:
        raise BadInput(f"{path} is not valid JSON ({exc}); nothing changed") from None
    if not isinstance(data, dict):
        raise BadInput(f"{path} is not a JSON object; nothing changed")
    return data


def dump(data: dict) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def _hooks_of(data: dict, path) -> dict:
    hooks = data.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise BadInput(f"{path}: \"hooks\" is not an object; nothing changed")
    return hooks


def _event_list(hooks: dict, event: str, path) -> list:
    groups = hooks.setdefault(event, [])
    if not isinstance(groups, list):
        raise BadInput(f"{path}: hooks.{event} is not a list; nothing changed")
    return groups


def _group_is_ours(group, harness: str) -> bool:
    return isinstance(group, dict) and any(
        isinstance(h, dict) and is_ours(h.get("command"), harness)
        for h in group.get("hooks") or [])


def merge_grouped(data: dict, wanted: dict[str, dict], harness: str, path) -> dict:
    """*data* with one group of ours per event of *wanted* (event -> our group)."""
    hooks = _hooks_of(data, path)
    for event, group in wanted.items():
        groups = _event_list(hooks, event, path)
        mine = [i for i, g in enumerate(groups) if _group_is_ours(g, harness)]
        if mine:
            groups[mine[0]] = group
            for i in reversed(mine[1:]):
                del groups[i]
        else:
            groups.append(group)
    return data


def merge_flat(data: dict, wanted: dict[str, dict], harness: str, path) -> dict:
    """Cursor's shape: one handler of ours per event, ``version`` set to 1."""
    if data.get("version", 1) != 1:
        raise BadInput(f"{path}: version {data.get('version')!r} is not 1; nothing changed")
    data.setdefault("version", 1)
    hooks = _hooks_of(data, path)
    for event, handler in wanted.items():
        handlers = _event_list(hooks, event, path)
        mine = [i for i, h in enumerate(handlers)
                if isinstance(h, dict) and is_ours(h.get("command"), harness)]
        if mine:
            handlers[mine[0]] = handler
            for i in reversed(mine[1:]):
                del handlers[i]
        else:
            handlers.append(handler)
    return data


def merged_text(old: str, path, merge, wanted: dict, harness: str) -> str | None:
    """The file's new text, or None when its data already holds what we would write."""
    data = load_object(old, path)
    new = merge(copy.deepcopy(data), wanted, harness, path)
    return None if new == data and old.strip() else dump(new)


def our_commands(data: dict, harness: str) -> dict[str, list[str]]:
    """event -> our commands in a hook file's data (either shape)."""
    hooks = data.get("hooks") if isinstance(data, dict) else None
    out: dict[str, list[str]] = {}
    for event, entries in (hooks.items() if isinstance(hooks, dict) else []):
        for entry in entries if isinstance(entries, list) else []:
            handlers = entry.get("hooks") if isinstance(entry, dict) and "hooks" in entry \
                else [entry]
            for h in handlers if isinstance(handlers, list) else []:
                if isinstance(h, dict) and is_ours(h.get("command"), harness):
                    out.setdefault(event, []).append(h["command"])
    return out


def unmerge(data: dict, harness: str) -> dict:
    """*data* without our entries (empty events and an empty ``hooks`` dropped)."""
    hooks = data.get("hooks")
    if not isinstance(hooks, dict):
        return data
    for event in list(hooks):
        entries = hooks[event]
        if not isinstance(entries, list):
            continue
        kept = [e for e in entries if not (_group_is_ours(e, harness) or (
            isinstance(e, dict) and is_ours(e.get("command"), harness)))]
        if kept:
            hooks[event] = kept
        else:
            del hooks[event]
    if not hooks:
        del data["hooks"]
    return data


def grouped(harness: str, events: dict[str, tuple], options) -> dict[str, dict]:
    """Our group per harness event, from ``{event: (our event, matcher, pass pid)}``."""
    from .command import hook_command
    out = {}
    for event, (ours, matcher, pid) in events.items():
        command = hook_command(harness, ours, exe=options.exe, pid=pid,
                               auto_claim=options.auto_claim, wake=options.wake,
                               hold=getattr(options, "hold", None),
                               deny_overlap=getattr(options, "deny_overlap", False),
                               no_memory=getattr(options, "no_memory", False))
        group: dict = {"matcher": matcher} if matcher else {}
        group["hooks"] = [{"type": "command", "command": command}]
        out[event] = group
    return out


def installed_commands(toplevel: str, rel: str, harness: str) -> list[str]:
    """Our hook commands in the repository's file *rel* ([] when absent or unreadable)."""
    try:
        data = json.loads(Path(toplevel, rel).read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        return []
    return [c for cs in our_commands(data, harness).values() for c in cs]

