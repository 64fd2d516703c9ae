"""Files shipped with the package: the top-level ``templates/`` and ``hooks/`` folders.

A wheel installs them as ``agent_registry/templates`` and ``agent_registry/hooks``
(see pyproject.toml); an editable install of a checkout reads the folders in place.
"""
from __future__ import annotations

import os


def folder(name: str):
    """The shipped folder *name* ("templates" or "hooks") as a Traversable (a Path)."""
    from pathlib import Path
    checkout = _checkout(name)
    if checkout:
        return Path(checkout)
    from importlib import resources
    return resources.files(f"agent_registry.{name}")


def read_text(folder_name: str, file_name: str) -> str:
    """A shipped file's text; in a source checkout read with os.path alone, since every
    registry commit renders templates and pathlib is a costly import."""
    checkout = _checkout(folder_name)
    if checkout:
        with open(os.path.join(checkout, file_name), encoding="utf-8") as f:
            return f.read()
    return folder(folder_name).joinpath(file_name).read_text(encoding="utf-8")


def _checkout(name: str) -> str | None:
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
    if os.path.isfile(os.path.join(root, "pyproject.toml")) and \
            os.path.isdir(os.path.join(root, name)):
        return os.path.join(root, name)
    return None
