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


def install_source() -> str | None:
    """Where this copy of agent-registry was installed from, as pip takes it again, from
    the ``direct_url.json`` pip records (PEP 610) for an install not made from an index:
    the folder (or wheel) of a local install, ``git+URL@COMMIT`` for a git checkout
    (the commit installed), or an archive's URL.  None when nothing says (run from a
    source tree, or installed by name from an index)."""
    try:
        import json
        from importlib.metadata import distribution
        recorded = json.loads(distribution("agent-registry").read_text("direct_url.json")
                              or "{}")
    except Exception:  # no metadata, or unreadable: nothing is known
        return None
    url, vcs = str(recorded.get("url", "")), recorded.get("vcs_info") or {}
    if vcs.get("vcs") == "git" and vcs.get("commit_id"):
        source = f"git+{url}@{vcs['commit_id']}"
    elif url.startswith("file://"):
        from urllib.parse import unquote, urlparse
        return unquote(urlparse(url).path)
    elif "archive_info" in recorded and url:
        source = url
    else:
        return None
    sub = recorded.get("subdirectory")
    return f"{source}#subdirectory={sub}" if sub else source


def install_command(extra: str) -> str:
    """The line that adds *extra* to this install, in the installer's own words (pipx
    and uv keep a tool in a venv of their own, where pip would not reach: issue 37):
    from where it was installed (a clone's folder, a git URL: the package is not on
    PyPI, and a project of the same name there would be another program), or the clone
    it runs from uninstalled; by name only when installed by name from an index."""
    source = install_source()
    tree = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if source is None and os.path.exists(os.path.join(tree, "pyproject.toml")):
        source = tree  # run from a clone, not installed: that clone
    if source is None:  # installed by name from an index: the same index again
        spec, base = f"agent-registry[{extra}]", "agent-registry"
    elif "://" in source:  # a URL: pip's "name[extra] @ URL"
        spec, base = f"agent-registry[{extra}] @ {source}", source
    else:
        spec, base = f"{source}[{extra}]", source
    import sys
    parts = os.path.normpath(sys.prefix).split(os.sep)
    if len(parts) > 2 and parts[-2] == "venvs" and "pipx" in parts[-3]:  # ~/.local/share/pipx
        return f"pipx inject {parts[-1]} '{spec}'"
    if len(parts) > 2 and parts[-2] == "tools" and parts[-3] == "uv":  # ~/.local/share/uv
        return f"uv tool install '{base}' --with '{spec}'"
    return f"pip install '{spec}'"


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
