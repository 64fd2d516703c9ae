"""``agent-registry uninstall``: leave cleanly.  The git hooks go (the hooks they chained
restored), every harness integration goes (``harness uninstall --all``: hooks, MCP
entries, skills, protocol text, each file restored byte for byte), and with
``--branches`` the registry's branches (the registry branch, its lock shards, the clone
refs, the messages branch, the intent refs) are deleted here, with ``--remote`` on the
remote too, after a confirmation on a terminal.  The local state folder
(``<common dir>/agent-registry/``) goes with the branches.  Run it before ``pip
uninstall agent-registry``: hooks left behind by a package that is gone refuse every
commit (in one line that names the ways out)."""
from __future__ import annotations

import shutil
import subprocess
import sys

import click

from .context import Output, pass_out

# the refs of a registry branch B: B itself, B-shards/*, B-clones/*, B-intents/*,
# B-messages (and B-messages-intents/*, its intents; B-shards/NN-intents/*, theirs)
FAMILY = ("shards/", "clones/", "intents/", "messages")


def ours(name: str, branch: str) -> bool:
    """Is the branch *name* one of the registry branch *branch*'s refs?"""
    return name == branch or (name.startswith(branch + "-")
                              and name[len(branch) + 1:].startswith(FAMILY))


def local_refs(repo, branch: str, remote: str | None) -> list[str]:
    """This clone's refs of the registry: its branches, and their remote-tracking refs
    of the registry's remote."""
    out = repo.git("for-each-ref", "--format=%(refname)", "refs/heads/",
                   *([f"refs/remotes/{remote}/"] if remote else [])).stdout.decode()
    found = []
    for ref in out.split():
        short = ref[len("refs/heads/"):] if ref.startswith("refs/heads/") else \
            ref[len(f"refs/remotes/{remote}/"):]
        if ours(short, branch):
            found.append(ref)
    return found


def remote_refs(repo, remote: str, branch: str, timeout: float) -> list[str]:
    """The registry's branches on *remote* (``ls-remote``)."""
    from ..errors import RegistryError
    try:
        listed = _ls_remote(repo, remote, timeout)
    except subprocess.TimeoutExpired:
        raise RegistryError(f"{remote} did not answer within {timeout:g} s: nothing "
                            "deleted") from None
    names = [line.split("\t", 1)[1] for line in listed.splitlines() if "\t" in line]
    return [ref for ref in names if ref.startswith("refs/heads/")
            and ours(ref[len("refs/heads/"):], branch)]


def _ls_remote(repo, remote: str, timeout: float) -> str:
    from ..errors import RegistryError
    from ..store.git import run_git
    proc = run_git(["ls-remote", "--heads", remote], env=repo.env, check=False,
                   cwd=repo.info.toplevel or repo.info.git_dir, timeout=timeout)
    if proc.returncode:
        last = (proc.stderr.decode(errors="replace").strip().splitlines() or ["?"])[-1]
        raise RegistryError(f"cannot list the branches of {remote}: {last}: nothing deleted")
    return proc.stdout.decode(errors="replace")


def checked_out(repo) -> str | None:
    proc = repo.git("symbolic-ref", "-q", "HEAD", check=False)
    return proc.stdout.decode().strip() or None


@click.command()
@click.option("--branches", is_flag=True,
              help="Also delete the registry's branches in this clone (the registry "
                   "branch, its lock shards, the clone refs, the messages branch, the intent "
                   "refs, their remote-tracking refs) and the local state folder: the "
                   "sessions, locks, diaries, messages and wiki they hold are gone here.")
@click.option("--remote", "on_remote", is_flag=True,
              help="With --branches: delete them on the registry's remote too, for every "
                   "clone of it.")
@click.option("--yes", is_flag=True,
              help="Do not ask for confirmation (needed for --branches without a terminal).")
@pass_out
def uninstall(out: Output, branches: bool, on_remote: bool, yes: bool) -> None:
    """Remove what agent-registry installed here: the git hooks (restoring the hooks they
    chained) and every harness integration (hooks, MCP entries, skills, protocol text,
    as `harness uninstall --all`).

    With --branches, also delete the registry's branches here and, with --remote, on the
    remote, after a confirmation on a terminal (--yes skips it; without a terminal and
    without --yes: exit 2, nothing changed). Run it before `pip uninstall agent-registry`.
    """
    from ..errors import BadInput, Refused
    from ..store.git import Repo, branch_name, discover, read_config, remote_name
    if on_remote and not branches:
        raise BadInput("--remote deletes the registry's branches on the remote: "
                       "give it with --branches")
    info = discover(out.directory)
    repo = Repo(info)
    try:
        config = read_config(info.git_dir)
        branch, remote = branch_name(config), remote_name(config)
        plan: dict = {"local": [], "remote": [], "remote_name": None, "state": None}
        if branches:
            if on_remote and not remote:
                raise BadInput("--remote: this clone has no registry remote "
                               "(git config agent-registry.remote)")
            plan["local"] = local_refs(repo, branch, remote)
            head = checked_out(repo)
            if head in plan["local"]:
                raise Refused(f"{head} is checked out in this worktree: switch to another "
                              "branch first, nothing changed")
            if on_remote:
                plan["remote_name"] = remote
                plan["remote"] = remote_refs(repo, remote, branch, _timeout(config))
            state = repo.state_dir
            plan["state"] = str(state) if state.exists() else None
            if not yes:
                _confirm(plan)
        result = {"hooks": _hooks(info), "harnesses": _harnesses(info)}
        if branches:
            result["branches"] = _delete(repo, plan, _timeout(config))
    finally:
        repo.close()
    failed = (result.get("branches") or {}).get("remote_error")
    if failed:
        raise Refused(f"{remote} did not delete the registry's branches ({failed}): the "
                      "hooks and harness integrations are removed, the branches here kept; "
                      "run it again", details=result)
    out.emit(result, _text(result))


def _timeout(config: dict) -> float:
    try:
        return max(1.0, float(config.get("agent-registry.networktimeout", 30)))
    except ValueError:
        return 30.0


def _confirm(plan: dict) -> None:
    from ..errors import BadInput, Refused
    what = [f"{len(plan['local'])} ref(s) in this clone"] + (
        [f"{len(plan['remote'])} branch(es) on {plan['remote_name']}"] if plan["remote_name"]
        else []) + (["the local state folder"] if plan["state"] else [])
    if not sys.stdin.isatty():
        raise BadInput(f"uninstall --branches would delete {', '.join(what)}: confirm on a "
                       "terminal, or pass --yes")
    for ref in plan["local"] + [f"{plan['remote_name']}: {r}" for r in plan["remote"]]:
        click.echo(f"  {ref}", err=True)
    if not click.confirm(f"Delete {', '.join(what)}? The sessions, locks, diaries, "
                         "messages and wiki they hold are gone", default=False, err=True):
        raise Refused("nothing changed")


def _hooks(info) -> dict:
    from ..enforce.hooks import uninstall
    return uninstall(info)


def _harnesses(info) -> dict:
    """``harness uninstall --all`` (harness/install.py)."""
    if info.toplevel is None:
        return {"harnesses": []}
    from ..harness.files import installed
    from ..harness.install import uninstall_many
    return uninstall_many(info.toplevel, info.git_dir, installed(info.git_dir))


def _delete(repo, plan: dict, timeout: float) -> dict:
    from ..store.git import run_git
    done = {"local": [], "remote": [], "remote_name": plan["remote_name"],
            "remote_error": None, "state": None}
    if plan["remote"]:  # first: a failure here leaves the local copy to try again from
        proc = run_git(["push", "--porcelain", plan["remote_name"],
                        *[f":{ref}" for ref in plan["remote"]]], env=repo.env, check=False,
                       cwd=repo.info.toplevel or repo.info.git_dir, timeout=timeout)
        done["remote"] = [line.split("\t")[1].lstrip(":") for line in
                          proc.stdout.decode(errors="replace").splitlines()
                          if line.startswith("-\t")]
        if proc.returncode:
            last = (proc.stderr.decode(errors="replace").strip().splitlines() or ["?"])[-1]
            done["remote_error"] = last
    if plan["local"] and not done["remote_error"]:
        repo.git("update-ref", "--stdin",
                 input="".join(f"delete {ref}\n" for ref in plan["local"]).encode())
        done["local"] = list(plan["local"])
        if plan["state"]:
            shutil.rmtree(plan["state"], ignore_errors=True)
            done["state"] = plan["state"]
    return done


def _text(result: dict) -> str:
    hooks = [h["hook"] for h in result["hooks"]["hooks"] if h["state"].startswith("removed")]
    lines = [f"git hooks: removed {', '.join(hooks)}" if hooks else "git hooks: none installed"]
    gone = [h["harness"] for h in result["harnesses"]["harnesses"]]
    lines.append(f"harnesses: uninstalled {', '.join(gone)}" if gone
                 else "harnesses: none installed")
    for h in result["harnesses"]["harnesses"]:
        left = h.get("changed") or []
        if left:
            lines.append(f"  {h['harness']}: left (edited since install): {', '.join(left)}")
    b = result.get("branches")
    if b is not None:
        lines.append(f"branches: deleted {len(b['local'])} ref(s) here"
                     + (f", {len(b['remote'])} on {b['remote_name']}" if b["remote_name"]
                        else "")
                     + (", and the local state folder" if b["state"] else ""))
    lines.append("settings left: git config agent-registry.* (git config --remove-section "
                 "agent-registry); now: pip uninstall agent-registry")
    return "\n".join(lines)
