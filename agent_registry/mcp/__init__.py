"""``agent-registry mcp``: the registry as a stdio MCP server (server.py), and the
transport that reads and writes its wire on the event loop (stdio.py)."""
