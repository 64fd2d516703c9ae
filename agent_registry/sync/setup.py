"""``init --remote URL`` (and the dashboard's sync card): share this clone's registry
through a remote given by its URL, as the predecessor's git-sync setup did.

The URL is checked with ``git ls-remote`` before anything changes; then it is added as a
remote (``origin`` unless named otherwise), made the sync remote, and the branch is
pushed.  An http(s) URL that also answers an anonymous ``ls-remote`` (no user in the URL,
no credential helper, no prompt) is publicly readable: every session, diary and wiki entry
on the branch would be too, so the caller is warned.
"""
from __future__ import annotations

import os
import re

from ..core.registry import Registry
from ..errors import BadInput, RegistryError
from ..store.git import clean_env, run_git
from ..store.spawn import Completed, TimedOut
from .remote import NETWORK_TIMEOUT, Offline, network_timeout, sync
from .state import redact

_SCP = re.compile(r"^[\w.-]+@[\w.-]+:")  # git's scp-like form, user@host:path
_NAME = re.compile(r"[A-Za-z0-9][\w.-]*")
# an anonymous reader: no credential helper (an empty value resets the list), no prompt
ANONYMOUS = {"GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "", "SSH_ASKPASS": "",
             "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "credential.helper",
             "GIT_CONFIG_VALUE_0": ""}


def looks_like_url(text: str) -> bool:
    """Is *text* a repository's location (a URL, ``user@host:path``, or an existing
    directory) rather than the name of a remote?"""
    return "://" in text or bool(_SCP.match(text)) or os.path.isdir(text)


def _ls_remote(url: str, env: dict[str, str], timeout: float) -> Completed:
    """``git ls-remote`` of *url*; a server that never answers is a failed one whose
    stderr says so, as git_net says it (run_git raises spawn.TimedOut, the child killed)."""
    try:
        return run_git(["ls-remote", "--heads", "--", url], env=env, check=False,
                       timeout=timeout)
    except TimedOut:
        return Completed([], 128, b"", f"no answer within {timeout:g} s (git ls-remote)".encode())


def publicly_readable(url: str, timeout: float = NETWORK_TIMEOUT) -> bool:
    """Does the http(s) *url* answer ``ls-remote`` to anyone, with no credentials at all?
    (ssh and local paths are read as whoever runs them: never called public here.)"""
    if not url.lower().startswith(("http://", "https://")):
        return False
    env = {**clean_env(), **ANONYMOUS}
    env.pop("GIT_ASKPASS")  # an empty askpass would be run; unset, the prompt is off
    env.pop("SSH_ASKPASS")
    return _ls_remote(redact(url), env, timeout).returncode == 0


def connect(registry: Registry, url: str, name: str = "origin",
            shards: int | None = None) -> dict:
    """Check *url* with ``ls-remote``, add it as remote *name* (unless that remote is
    already *url*), sync through it and push the branch (a new one made in *shards*
    lock shards, as ``init`` makes it).  Nothing changes when the URL does not answer.  ``{"branch", "created", "remote": {"name", "url", "added",
    "public", "pushed"[, "error"]}}``."""
    if not url.strip() or url.startswith("-") or "\n" in url:
        raise BadInput(f"invalid remote URL {redact(url)!r}")
    if not _NAME.fullmatch(name) or name.lower() == "none":
        raise BadInput(f"invalid remote name {name!r}")
    if "://" not in url and not _SCP.match(url) and os.path.isdir(url):
        url = os.path.abspath(url)  # git reads a relative path from wherever it runs
    repo = registry.repo
    known = repo.git("remote", "get-url", name, check=False)
    current = known.stdout.decode().strip() if known.returncode == 0 else None
    if current is not None and current != url:
        raise BadInput(f"remote {name!r} already points at {redact(current)}: "
                       "name this one with --remote-name")
    timeout = network_timeout(registry)
    proc = _ls_remote(url, repo.env, timeout)
    if proc.returncode != 0:
        failure = Offline.from_stderr(url, proc.stderr.decode(errors="replace"),
                                      f"git ls-remote exited {proc.returncode}", registry.branch)
        raise RegistryError(f"{failure.message}; nothing changed")
    public = publicly_readable(url, timeout)
    if current is None:
        repo.git("remote", "add", "--", name, url)
    repo.git("config", "agent-registry.remote", name)
    # the same repository and class (a face's makes a new registry in lock shards), the new config
    shared = type(registry)(repo, branch=registry.branch)
    created = shared.init(shards)["created"]
    # its warnings are the caller's (made as one branch: a remote without atomic pushes)
    registry.warnings.extend(w for w in shared.warnings if w not in registry.warnings)
    from ..core.sharded import shards_of
    for shard in shards_of(shared):  # the lock shards first: the marker never lands alone
        sync(shard)
    report = sync(shared)
    remote = {"name": name, "url": redact(url), "added": current is None, "public": public,
              "pushed": bool(report["pushed"])}
    if not report["pushed"]:
        remote["error"] = report.get("error") or "not pushed"
    return {"branch": registry.branch, "created": created, "remote": remote}


def public_warning(remote: dict) -> str:
    return (f"{remote['url']} is publicly readable (an anonymous ls-remote succeeds): anyone "
            "can read the registry branch, every session, diary and wiki entry on it")
