"""Agent harnesses: the settings written into Claude Code, Codex, Gemini CLI, and MCP
configs."""
