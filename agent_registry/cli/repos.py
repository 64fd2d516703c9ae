"""Every repository of the user in one table: ``status --repos``, ``lock list --repos``
and the ``repos`` group (``repos list``, ``repos forget``).  The list is
sync/repolist.py's; the reading, read-only and without network, sync/repos.py's."""
from __future__ import annotations

import os
import time

import click

from .context import Output, pass_out
from .output import age
from .table import render_table, status_color


def home_text(path: str, width: int = 40) -> str:
    """*path* as a table cell: the home folder as ``~``, and, when too long, its end
    (the repository's name) kept rather than its start."""
    home = os.path.expanduser("~").rstrip("/")
    if home and (path == home or path.startswith(home + "/")):
        path = "~" + path[len(home):]
    return path if len(path) <= width else "…" + path[-(width - 1):]


def _report(out: Output, found: dict, kind: str, table: str, empty: str) -> None:
    """Print a multi-repository answer: the table, then how old the view of each
    repository with a remote is; each skipped repository and each warning one line on
    stderr.  ``--json``: ``repositories``, *kind* (the rows), ``skipped``."""
    from ..branch.records import parse_iso
    from ..store import freshness
    from ..sync.repos import skipped_line
    for skip in found["skipped"]:
        out.warn(skipped_line(skip))
    for line in found["warnings"]:
        out.warn(line)
    now = time.time()
    views = [f"{home_text(r['repository'])}: this clone's copy, "
             f"{freshness.as_of_text(parse_iso(r['as_of']), now)}"
             for r in found["repositories"] if r["remote"]]
    if not found["repositories"] and not found["skipped"]:
        empty = "no repositories yet: `init` or `register` in one adds it to the list"
    out.emit({"repositories": found["repositories"], kind: found["rows"],
              "skipped": found["skipped"]}, "\n".join([table or empty, *views]))


def status_repos(out: Output, *, include_ended: bool, status: str | None,
                 provider: str | None, project: str | None) -> None:
    """``status --repos``: the sessions of every listed repository."""
    from ..branch.records import parse_iso
    from ..sync.repos import across, remember_here
    remember_here(out.directory)
    found = across(lambda registry: registry.status(
        include_ended=include_ended, status=status, provider=provider,
        project=project)["sessions"], key=lambda session: session["id"])
    now = time.time()
    rows = [[home_text(s["repository"]), s["id"], s["provider"], s["working_on"], s["status"],
             age(now - (parse_iso(s["registered_at"]) or now))] for s in found["rows"]]
    table = render_table(["REPOSITORY", "SESSION", "PROVIDER", "WORKING ON", "STATUS", "AGE"],
                         rows, color=status_color) if rows else ""
    _report(out, found, "sessions", table, "no sessions")


def lock_list_repos(out: Output) -> None:
    """``lock list --repos``: the locks of every listed repository."""
    from ..sync.repos import across, remember_here
    remember_here(out.directory)
    found = across(lambda registry: registry.locks(),
                   key=lambda lock: (lock["path"], lock["owner"], lock["mode"]))
    rows = [[home_text(l["repository"]), l["path"], l["mode"], l["owner"], age(l["age_seconds"]),
             ("stale" if l["stale_reason"] else "fresh")
             + ("" if l["confirmed"] else ", unconfirmed")] for l in found["rows"]]
    table = render_table(["REPOSITORY", "PATH", "MODE", "OWNER", "AGE", "STATE"], rows) \
        if rows else ""
    _report(out, found, "locks", table, "no locks")


@click.group()
def repos() -> None:
    """The repositories `status --repos`, `lock list --repos` and `dashboard --repos` read:
    each one where `init` or `register` ran, listed in $AGENT_REGISTRY_HOME/repos, else
    $XDG_CONFIG_HOME/agent-registry/repos (default ~/.config/agent-registry/repos)."""


@repos.command("list")
@pass_out
def repos_list(out: Output) -> None:
    """Every remembered repository, and whether it can still be read (one git process
    each; nothing is fetched or written)."""
    from ..sync.repolist import list_path, listed
    from ..sync.repos import Gone, open_listed
    found = []
    for path in listed():
        try:
            registry = open_listed(path)
        except Gone as exc:
            found.append({"repository": path, "present": False, "reason": str(exc)})
            continue
        try:
            tip = registry.tip()
        finally:
            registry.close()
        found.append({"repository": path, "present": True, "branch": registry.branch,
                      "registry": tip is not None})
    rows = [[home_text(r["repository"]),
             (f"gone: {r['reason']}" if not r["present"] else
              r["branch"] if r["registry"] else f"{r['branch']} (not made yet)")]
            for r in found]
    out.emit({"file": list_path(), "repositories": found},
             render_table(["REPOSITORY", "REGISTRY BRANCH"], rows) if rows else
             f"no repositories yet ({list_path()}): `init` or `register` in one adds it")


@repos.command("forget")
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@pass_out
def repos_forget(out: Output, paths: tuple[str, ...]) -> None:
    """Take repositories off the list (a repository that is gone, or one you no longer
    want in `status --repos`); its registry is left as it is. Exit 1, nothing changed,
    when a PATH is not on the list. `init` or `register` there adds it back."""
    from ..sync.repolist import forget, list_path
    removed = forget([os.path.join(out.directory, path) for path in paths])  # -C PATH too
    out.emit({"forgotten": removed, "file": list_path()},
             "\n".join(f"forgot {path}" for path in removed))

