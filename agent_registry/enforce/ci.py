"""``agent-registry ci install github|gitlab``: the workflow file of a pull request's check
(docs/server.md), from ``templates/ci/``.  The workflow installs agent-registry from a
source it names (the package is not on PyPI), fetches the registry refs the clones pushed
and runs ``agent-registry guard --range BASE..HEAD --branch BRANCH``.

It is a file of the project, written into the worktree for the person to commit: a file
that is not ours (no marker line) is left alone unless ``--force``.
"""
from __future__ import annotations

import re
from pathlib import Path

from .. import __version__
from ..errors import BadInput, Refused
from ..store.extras import install_source
from ..store.git import RepoInfo, branch_name, read_config
from ..store.shipped import folder

MARKER = "# agent-registry: "
FILES = {"github": ".github/workflows/agent-registry.yml",
         "gitlab": ".gitlab/agent-registry.yml"}
GITLAB_ROOT = ".gitlab-ci.yml"
GITLAB_INCLUDE = f"include:\n  - local: {FILES['gitlab']}\n"
# the value the workflow is written with when no source is known: its install step
# refuses to run on it (templates/ci/), so the check fails saying why, never installs
# whatever an index serves under the name
UNSET = "unset:"
UNSET_TEXT = UNSET + " agent-registry ci install FORGE --source REQUIREMENT"
SOURCE_LINE = re.compile(r"^\s*AGENT_REGISTRY_SOURCE: '((?:[^']|'')*)'\s*$", re.MULTILINE)


def example() -> str:
    """A source as the README installs from: a git URL of a clone, at a tag."""
    return f"git+https://HOST/ORG/agent-registry@v{__version__}"


def check_source(source: str) -> str:
    """*source* as a pip requirement the workflow can carry (BadInput otherwise)."""
    if not source.strip() or any(ord(c) < 32 or ord(c) == 127 for c in source):
        raise BadInput(f"--source {source!r}: one line, a pip requirement such as {example()}")
    if "$" in source:  # GitHub evaluates ${{ }} and GitLab expands $NAME in the value
        raise BadInput(f"--source {source!r}: no '$', which the forge would expand")
    if source.startswith(UNSET):
        raise BadInput(f"--source {source!r}: a pip requirement, such as {example()}")
    return source.strip()


def remote_source() -> str | None:
    """This install's own source, when a CI runner can reach it too: a git or archive URL
    pip recorded, never a folder or file of this machine."""
    source = install_source()
    if source and "://" in source and not source.startswith(("file:", "git+file:")):
        return source
    return None


def written_source(text: str) -> str | None:
    """The source a workflow of ours was written with (None: none, or still unset)."""
    found = SOURCE_LINE.search(text)
    if found is None:
        return None
    source = found.group(1).replace("''", "'")
    return None if source.startswith(UNSET) else source


def workflow_text(forge: str, branch: str, source: str | None) -> str:
    value = UNSET_TEXT.replace("FORGE", forge) if source is None else source
    return (folder("templates").joinpath("ci", f"{forge}.yml").read_text(encoding="utf-8")
            .replace("@SOURCE@", "'" + value.replace("'", "''") + "'")
            .replace("@UNSET@", UNSET)
            .replace("@EXAMPLE@", example())
            .replace("@BRANCH@", branch))


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def install(info: RepoInfo, forge: str, *, force: bool = False,
            source: str | None = None) -> dict:
    if info.toplevel is None:
        raise BadInput("ci install writes a workflow file into a worktree: run it in a clone")
    target = Path(info.toplevel, FILES[forge])
    before = _read(target)
    ours = before is not None and before.startswith(MARKER)
    if target.exists() and not ours and not force:
        raise Refused(f"{target} is not ours: move it away, or overwrite it with --force")
    # a source named now, else the one the workflow has, else this install's own
    source = (check_source(source) if source is not None else
              (written_source(before) if ours else None) or remote_source())
    text = workflow_text(forge, branch_name(read_config(info.git_dir)), source)
    state = ("unchanged" if ours and text == before else "updated" if ours else
             "overwritten" if target.exists() else "written")
    if state != "unchanged":
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8", newline="\n")
    todo = [] if source is not None else [
        f"set where the check installs agent-registry from (it is not on PyPI; until then "
        f"the check fails saying so): agent-registry ci install {forge} --source "
        f"REQUIREMENT, e.g. --source {example()}"]
    if forge == "gitlab":
        root = Path(info.toplevel, GITLAB_ROOT)
        if not root.exists():
            root.write_text(GITLAB_INCLUDE, encoding="utf-8", newline="\n")
            todo.append(f"wrote {root} (it includes {FILES['gitlab']})")
        elif FILES["gitlab"] not in root.read_text(encoding="utf-8", errors="replace"):
            todo.append(f"add to {root}:\n{GITLAB_INCLUDE}")
    return {"forge": forge, "path": str(target), "state": state, "source": source,
            "next": "\n".join(todo)}
