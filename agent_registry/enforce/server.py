"""``agent-registry server install|uninstall|status``: the pre-receive hook of a bare
repository the team pushes to (docs/server.md).

The hook is one file: a ``#!/usr/bin/env python3`` line, our marker, then a zip archive
(Python runs one as a script) of ``templates/server/pre-receive.py`` as its ``__main__``
and the standard-library modules of this package it reads the registry through (the
guard's own lookup: ``enforce/receive.py``, ``pushcheck.py``, ``guard.py``, ``branch/``,
``store/``), so the server needs python3 and git and nothing installed, and judges by
exactly the rules the clones' hooks do.  An existing pre-receive hook is kept and runs
first, as ``hooks install`` keeps the clone's hooks.
"""
from __future__ import annotations

import io
import os
import zipfile
from pathlib import Path

from ..errors import BadInput
from ..store.git import RepoInfo, discover, run_git
from ..store.shipped import folder
from .hooks import MARKER, hooks_dir, is_ours, place, remove

NAME = "pre-receive"
HEADER = f"#!/usr/bin/env python3\n{MARKER}{NAME} (server)\n".encode()
# what the hook carries: the receive decision and everything it imports (test_server.py
# runs the installed hook with site-packages out of reach, so a missing module fails there)
BUNDLED = ("__init__.py", "errors.py", "enforce/__init__.py", "enforce/guard.py",
           "enforce/pushcheck.py", "enforce/receive.py", "branch/*.py", "store/*.py")
STAMP = (2020, 1, 1, 0, 0, 0)  # fixed dates: the same package builds the same hook


def bundle() -> bytes:
    """The hook file's bytes."""
    package = Path(__file__).resolve().parent.parent
    out = io.BytesIO()
    out.write(HEADER)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        main = folder("templates").joinpath("server", "pre-receive.py").read_bytes()
        archive.writestr(zipfile.ZipInfo("__main__.py", STAMP), main)
        for pattern in BUNDLED:
            for path in sorted(package.glob(pattern)):
                name = "agent_registry/" + path.relative_to(package).as_posix()
                archive.writestr(zipfile.ZipInfo(name, STAMP), path.read_bytes(),
                                 zipfile.ZIP_DEFLATED)
    return out.getvalue()


def bare_repo(path: str) -> RepoInfo:
    """The bare repository at *path* (BadInput for anything else)."""
    info = discover(path)
    if info.toplevel is not None:
        raise BadInput(f"{os.path.abspath(path)} is not a bare repository: the server hook "
                       "goes in the repository the clones push to (git init --bare)")
    return info


def install(path: str) -> dict:
    info = bare_repo(path)
    directory = hooks_dir(info)
    directory.mkdir(parents=True, exist_ok=True)
    result = place(directory, NAME, bundle())
    # `git push -o agent-registry.allow=REASON` needs the server to accept push options
    run_git(["config", "receive.advertisePushOptions", "true"], env=_env(info))
    return {"repository": info.common_dir, "push_options": True, **result}


def uninstall(path: str) -> dict:
    info = bare_repo(path)
    return {"repository": info.common_dir, **remove(hooks_dir(info), NAME)}


def status(path: str) -> dict:
    """Is the hook there and current, and the overrides recorded so far."""
    from ..store import jsontext
    from .receive import LOG
    info = bare_repo(path)
    target = hooks_dir(info) / NAME
    if not is_ours(target):
        state = "other hook (not ours)" if target.exists() else "not installed"
    elif target.read_bytes() != bundle():
        state = "outdated (run agent-registry server install again)"
    else:
        state = "installed"
    overrides = []
    log = Path(info.common_dir, "agent-registry", LOG)
    if log.exists():
        for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                overrides.append(jsontext.loads(line))
            except ValueError:
                continue  # a line cut short by a full disk: the rest still says what happened
    return {"repository": info.common_dir, "hook": NAME, "path": str(target),
            "state": state, "overrides": overrides}


def _env(info: RepoInfo) -> dict[str, str]:
    from ..store.git import clean_env
    return {**clean_env(), "GIT_DIR": info.git_dir}
