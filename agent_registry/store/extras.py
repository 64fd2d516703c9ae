"""The optional extras (pyproject's ``[project.optional-dependencies]``): which modules
each brings, whether they are installed, and the one line a command says when its extra
is missing.  Standard library only; nothing here imports an extra.

A command that needs an extra imports it inside a ``try``, and turns the ImportError into
:func:`needed` (``the dashboard needs the web extra: pip install '/src/agent-registry[web]'
(uvicorn is not installed)``, naming the folder a clone was installed from), never a traceback.  ``doctor`` asks the same question of
another interpreter (a hook's, a harness entry's) with :func:`probe_code`.
"""
from __future__ import annotations

import os

from ..errors import RegistryError

# extra -> (what needs it, the top-level modules it installs that the code imports)
EXTRAS: dict[str, tuple[str, tuple[str, ...]]] = {
    "mcp": ("the MCP server (agent-registry mcp)", ("mcp", "anyio", "pydantic")),
    "web": ("the dashboard", ("fastapi", "uvicorn", "sse_starlette")),
    "notify": ("sending notifications (agent-registry watch)", ("apprise",)),
    "llm": ("the LLM (wiki ingest, reranking)", ("langchain_openai",)),
}
PACKAGE = "agent_registry"


def missing(extra: str) -> list[str]:
    """The modules of *extra* this interpreter cannot find (found, not imported)."""
    import importlib.util
    gone = []
    for name in EXTRAS[extra][1]:
        try:
            if importlib.util.find_spec(name) is None:
                gone.append(name)
        except (ImportError, ValueError):
            gone.append(name)
    return gone


def install_command(extra: str) -> str:
    """The line that adds *extra* to this install, in the installer's own words (pipx
    and uv keep a tool in a venv of their own, where pip would not reach: issue 37):
    from the folder it was installed from (a clone: the package is not on PyPI, and a
    project of the same name there would be another program), else by name."""
    source = "agent-registry"
    try:
        import json
        from importlib.metadata import distribution
        url = json.loads(distribution("agent-registry").read_text("direct_url.json") or "{}")
        if str(url.get("url", "")).startswith("file://"):
            from urllib.parse import unquote, urlparse
            source = unquote(urlparse(url["url"]).path)
    except Exception:  # no metadata (run from a source tree): the name is all we know
        pass
    import sys
    parts = os.path.normpath(sys.prefix).split(os.sep)
    if len(parts) > 2 and parts[-2] == "venvs" and "pipx" in parts[-3]:  # ~/.local/share/pipx
        return f"pipx inject {parts[-1]} '{source}[{extra}]'"
    if len(parts) > 2 and parts[-2] == "tools" and parts[-3] == "uv":  # ~/.local/share/uv
        return f"uv tool install '{source}' --with '{source}[{extra}]'"
    return f"pip install '{source}[{extra}]'"


def needed(extra: str, exc: ImportError | None = None) -> RegistryError:
    """The one-line error of a command whose *extra* is missing (or broken: *exc*, the
    ImportError its import raised).  An ImportError of this package itself is a bug, not
    a missing extra: it is raised again."""
    if exc is not None and (exc.name or "").split(".")[0] == PACKAGE:
        raise exc
    what, _ = EXTRAS[extra]
    gone = missing(extra) or ([exc.name] if exc is not None and exc.name else [])
    why = (f"{', '.join(gone)} {'is' if len(gone) == 1 else 'are'} not installed" if gone
           else f"{exc}" if exc is not None else "it is not installed")
    return RegistryError(f"{what} needs the {extra} extra: "
                         f"{install_command(extra)} ({why})",
                         details={"extra": extra, "missing": gone})


def require(extra: str) -> None:
    """Raise :func:`needed` unless every module of *extra* can be found."""
    if missing(extra):
        raise needed(extra)


def probe_code(extras: list[str]) -> str:
    """Python source that imports this package and checks *extras* in whatever
    interpreter runs it, printing one line per problem (nothing when all is well)."""
    wanted = {extra: EXTRAS[extra][1] for extra in extras}
    return ("import importlib.util as u\n"
            "try:\n    import agent_registry\n"
            "except Exception as e:\n    print('package: ' + str(e)); raise SystemExit\n"
            f"for extra, names in {wanted!r}.items():\n"
            "    gone = [n for n in names if u.find_spec(n) is None]\n"
            "    if gone: print(extra + ': ' + ', '.join(gone))\n")
