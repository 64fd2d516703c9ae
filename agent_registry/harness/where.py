"""Where a hook call acts: the repository the agent works in and the session a native id
stands for, found from files (store/layout.py, harness/ids.py), and whether a person's
high message waits for it.  Apart from harness/decision.py so that a gate that has
nothing to decide (a command that writes nothing: most shell calls) and the backstop's
note import neither the decision, the registry nor the error classes (issue 35: about
0.4 ms of a hook that is mostly the interpreter starting; tests/test_import_budget.py)."""
import os

from ..store.layout import RepoInfo, plain_layout
from . import ids
from .ctx import Ctx


def repo_of(ctx: Ctx) -> RepoInfo:
    """The repository the agent works in: its cwd's, else (the agent's shell went
    elsewhere: Claude Code's cwd follows a `cd`) the project's the harness started in.
    BadInput (store/git.discover's) when neither is in one.  Found once per hook call
    (kept on *ctx*): the message check, the gate and the note each ask."""
    if ctx.repo is None:
        ctx.repo = _found(ctx)
    return ctx.repo


def _found(ctx: Ctx) -> RepoInfo:
    try:
        return _discover(ctx.cwd or ".")
    except Exception as exc:
        if not ctx.project or ctx.project == ctx.cwd or not _bad_input(exc):
            raise
        return _discover(ctx.project)


def repo_or_none(ctx: Ctx) -> RepoInfo | None:
    """:func:`repo_of`, None when the agent works in no repository."""
    try:
        return repo_of(ctx)
    except Exception as exc:
        if _bad_input(exc):
            return None
        raise


def _bad_input(exc: Exception) -> bool:
    # the error classes imported only on failure: store/git, which raises it, has them
    from ..errors import BadInput
    return isinstance(exc, BadInput)


def _discover(path: str) -> RepoInfo:
    """store/git.discover, its usual case found from the files (store/layout.py) without
    importing the git module: a gate or a note that needs no registry read spares ~1.5 ms."""
    found = plain_layout(path) if os.path.isdir(path) else None
    if found is not None:
        return found
    from ..store.git import discover
    return discover(path)


def session_for(info: RepoInfo, ctx: Ctx) -> str:
    """Our session id for the native one: remembered locally, else derived."""
    return ids.session_of(info.common_dir, ctx.harness, ctx.native_id)


def urgent_waits(ctx: Ctx) -> bool:
    """Whether a high-importance message is marked for the session (store/urgent.py): one
    folder listing, usually of no folder at all.  Never raises (False)."""
    try:
        info = repo_of(ctx)
        return ids.urgent_waits(info.common_dir, ctx.harness, ctx.native_id)
    except Exception:  # noqa: BLE001 - the hooks' answers must not depend on it
        return False
