"""Taking our parts out of a file a person (or the harness) edited since install, and out
of a file an install without a record left our parts in: the hooks (by their ``harness
hook <harness>`` command), the MCP entry or table, Claude Code's ``enabledMcpjsonServers``
entry, the protocol block.  A file that is ours alone (a skill, the OpenCode plugin) is
not taken apart."""
from __future__ import annotations

from . import mcp, texts


def unmerge(harness: str):
    """``unmerge(rel, text)`` for :func:`files.restore` and :func:`files.apply`: *text*
    without what install put there ("" when nothing else is left), or None when none of
    ours is in it, or the file is ours alone (a skill, the plugin) or of a kind we cannot
    take apart."""
    def run(rel: str, text: str) -> str | None:
        if rel.endswith(".md") and texts.has_block(text):
            return _without_block(text)
        if rel.endswith(".json"):
            return _without_json(text, harness)
        if rel == mcp.FILES["codex"]:
            return _without_table(text)
        return None
    return run


def _without_block(text: str) -> str:
    head, rest = text.split(texts.BLOCK_START, 1)
    tail = rest.split(texts.BLOCK_END, 1)[1]
    if tail.startswith("\n"):  # the newline merge_block put after the block
        tail = tail[1:]
        head = head[:-1] if head.endswith("\n\n") else head
    return head + tail


def _without_json(text: str, harness: str) -> str | None:
    import copy
    from . import hookfiles
    before = hookfiles.load_object(text, "file")
    data = hookfiles.unmerge(copy.deepcopy(before), harness)
    for key in ("mcpServers", "mcp"):
        servers = data.get(key)
        if isinstance(servers, dict) and mcp.SERVER in servers:
            del servers[mcp.SERVER]
            if not servers:
                del data[key]
    enabled = data.get("enabledMcpjsonServers")
    if isinstance(enabled, list) and mcp.SERVER in enabled:
        enabled.remove(mcp.SERVER)
        if not enabled:
            del data["enabledMcpjsonServers"]
    # what only we put in an otherwise empty file (Cursor's version, OpenCode's schema)
    if data == before:
        return None  # none of ours in it
    if set(data) <= {"version", "$schema"}:
        data = {}
    return hookfiles.dump(data) if data else ""


def _without_table(text: str) -> str:
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if mcp._TABLE.match(line)), None)
    if start is None:
        return None
    end = next((i for i in range(start + 1, len(lines)) if mcp._HEADER.match(lines[i])),
               len(lines))
    kept = lines[:start] + lines[end:]
    return "".join(kept).strip("\n") + "\n" if "".join(kept).strip() else ""
