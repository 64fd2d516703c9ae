"""Files shipped with the package: the top-level ``templates/`` and ``hooks/`` folders.

A wheel installs them as ``agent_registry/templates`` and ``agent_registry/hooks``
(see pyproject.toml); an editable install of a checkout reads the folders in place.
Either way they are plain folders found from ``__file__`` and read with ``os`` alone:
every registry commit renders templates, and ``importlib.resources`` brings pathlib,
zipfile, tempfile, shutil, typing, re and more into every write (issue 35).  Only a
package imported from a zip archive, which has no folder to open, goes through it.
"""
from __future__ import annotations

import os

# "templates" -> where that folder is on disk, or None when only importlib.resources can
# read it (a zip import); a command reads a template once per commit, so look once
_FOLDERS: dict[str, str | None] = {}
_TEXTS: dict[tuple[str, str], str] = {}  # (folder, file) -> its text: the files ship, unchanged


def folder(name: str):
    """The shipped folder *name* ("templates" or "hooks") as a Traversable (a Path)."""
    found = _on_disk(name)
    if found is not None:
        from pathlib import Path
        return Path(found)
    from importlib import resources
    # through the package, a regular one: the folder has no __init__.py, and zipimport
    # finds no namespace package in an archive
    return resources.files("agent_registry").joinpath(name)


def read_text(folder_name: str, file_name: str) -> str:
    """A shipped file's text, read once per process: every commit renders two
    templates, and a long-lived server (MCP, the dashboard) commits many times."""
    key = (folder_name, file_name)
    text = _TEXTS.get(key)
    if text is None:
        found = _on_disk(folder_name)
        if found is not None:
            # text mode, as importlib.resources reads: a checkout's CRLF (core.autocrlf) is LF
            with open(os.path.join(found, file_name), encoding="utf-8") as f:
                text = f.read()
        else:
            text = folder(folder_name).joinpath(file_name).read_text(encoding="utf-8")
        _TEXTS[key] = text
    return text


def _on_disk(name: str) -> str | None:
    if name not in _FOLDERS:
        _FOLDERS[name] = _installed(name) or _checkout(name)
    return _FOLDERS[name]


def _installed(name: str) -> str | None:
    """``agent_registry/<name>`` beside this package, as a wheel installs it."""
    package = os.path.dirname(os.path.dirname(__file__))
    path = os.path.join(package, name)
    return path if os.path.isdir(path) else None


def _checkout(name: str) -> str | None:
    """``<name>/`` at the top of the source checkout this package is imported from."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
    if os.path.isfile(os.path.join(root, "pyproject.toml")) and \
            os.path.isdir(os.path.join(root, name)):
        return os.path.join(root, name)
    return None
