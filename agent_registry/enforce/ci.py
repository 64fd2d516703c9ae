"""``agent-registry ci install github|gitlab``: the workflow file of a pull request's check
(docs/server.md), from ``templates/ci/``.  The workflow fetches the registry refs the
clones pushed and runs ``agent-registry guard --range BASE..HEAD --branch BRANCH``.

It is a file of the project, written into the worktree for the person to commit: a file
that is not ours (no marker line) is left alone unless ``--force``.
"""
from __future__ import annotations

from pathlib import Path

from .. import __version__
from ..errors import BadInput, Refused
from ..store.git import RepoInfo, branch_name, read_config
from ..store.shipped import folder

MARKER = "# agent-registry: "
FILES = {"github": ".github/workflows/agent-registry.yml",
         "gitlab": ".gitlab/agent-registry.yml"}
GITLAB_ROOT = ".gitlab-ci.yml"
GITLAB_INCLUDE = f"include:\n  - local: {FILES['gitlab']}\n"


def workflow_text(forge: str, branch: str) -> str:
    return (folder("templates").joinpath("ci", f"{forge}.yml").read_text(encoding="utf-8")
            .replace("@VERSION@", __version__)
            .replace("@BRANCH@", branch))


def _ours(path: Path) -> bool:
    try:
        return path.read_text(encoding="utf-8").startswith(MARKER)
    except (OSError, UnicodeDecodeError):
        return False


def install(info: RepoInfo, forge: str, *, force: bool = False) -> dict:
    if info.toplevel is None:
        raise BadInput("ci install writes a workflow file into a worktree: run it in a clone")
    target = Path(info.toplevel, FILES[forge])
    state = "updated" if _ours(target) else "written"
    if target.exists() and state == "written":
        if not force:
            raise Refused(f"{target} is not ours: move it away, or overwrite it with --force")
        state = "overwritten"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(workflow_text(forge, branch_name(read_config(info.git_dir))),
                      encoding="utf-8", newline="\n")
    result = {"forge": forge, "path": str(target), "state": state, "next": ""}
    if forge == "gitlab":
        root = Path(info.toplevel, GITLAB_ROOT)
        if not root.exists():
            root.write_text(GITLAB_INCLUDE, encoding="utf-8", newline="\n")
            result["next"] = f"wrote {root} (it includes {FILES['gitlab']})"
        elif FILES["gitlab"] not in root.read_text(encoding="utf-8", errors="replace"):
            result["next"] = f"add to {root}:\n{GITLAB_INCLUDE}"
    return result
