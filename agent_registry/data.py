"""Files shipped with the package: the top-level ``templates/`` and ``hooks/`` folders.

A wheel installs them as ``agent_registry/templates`` and ``agent_registry/hooks``
(see pyproject.toml); an editable install of a checkout reads the folders in place.
"""
from __future__ import annotations

from pathlib import Path


def folder(name: str):
    """The shipped folder *name* ("templates" or "hooks") as a Traversable."""
    root = Path(__file__).resolve().parent.parent
    if (root / "pyproject.toml").is_file() and (root / name).is_dir():
        return root / name  # a source checkout: no importlib.resources on the hot path
    from importlib import resources
    return resources.files(f"agent_registry.{name}")


def read_text(folder_name: str, file_name: str) -> str:
    return folder(folder_name).joinpath(file_name).read_text(encoding="utf-8")
