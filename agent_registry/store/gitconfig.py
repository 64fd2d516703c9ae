"""git's config as the registry reads it from the files, without a ``git config`` process
in the usual case (no config file mentions agent-registry): the registry branch's and the
sync remote's names.

Apart from store/git.py (which re-exports it) so that a warm ``wiki query``
(wiki/fastpath.py) and the backstop's note before a shell tool call (harness/heldcache.py)
read the config without importing the git module and what it imports (zlib, the object
and ref writers).
"""
import os

DEFAULT_BRANCH = "agent-registry"


def branch_name(config: dict[str, str]) -> str:
    """The registry branch named by ``git config agent-registry.branch``, or the default."""
    return config.get("agent-registry.branch") or DEFAULT_BRANCH


def remote_name(config: dict[str, str]) -> str | None:
    """The remote the registry syncs with: ``agent-registry.remote``, else ``origin``
    when it exists; ``none`` (or empty, or ``false``) turns sync off.  The registry and
    the guard both ask this, so they judge by the same tracking ref."""
    name = config.get("agent-registry.remote")
    if name is None:
        return "origin" if "remote.origin.url" in config else None
    return None if name.lower() in ("", "none", "false") else name


def config_files(git_dir: str) -> list[str]:
    """The files git reads its config from for *git_dir*, by git's own rules (no
    includes, no ``-c``: :func:`config_from_files` sends those to git)."""
    common = git_dir
    try:  # a linked worktree's git dir names the shared one
        with open(os.path.join(git_dir, "commondir")) as f:
            common = os.path.normpath(os.path.join(git_dir, f.read().strip()))
    except OSError:
        pass
    home = os.path.expanduser("~")
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    files = [os.path.join(common, "config"), os.path.join(git_dir, "config.worktree"),
             os.environ.get("GIT_CONFIG_GLOBAL") or os.path.join(home, ".gitconfig"),
             os.path.join(xdg, "git", "config")]
    if not os.environ.get("GIT_CONFIG_NOSYSTEM"):
        files.append(os.environ.get("GIT_CONFIG_SYSTEM") or "/etc/gitconfig")
    return files


def config_from_files(git_dir: str) -> dict[str, str] | None:
    """read_config's answer without a process, in the usual case where no config file
    mentions agent-registry: then only whether ``origin`` exists matters, and the files
    say that (its url is not read: "(set)"), and ``core.ignorecase`` /
    ``core.precomposeunicode`` as git writes them on macOS and Windows (plain lines of a
    ``[core]`` section).  None (ask git) whenever a file mentions us, includes another,
    spells a remote the old way, writes those two keys any other way, or the
    environment adds settings."""
    if any(os.environ.get(name) for name in
           ("GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT", "GIT_CONFIG")):
        return None
    has_origin, found = False, {}
    local, worktree, *rest = config_files(git_dir)
    texts = {}
    for name in [*reversed(rest), local, worktree]:  # git's order: the last value wins
        try:
            with open(name, "rb") as f:
                texts[name] = f.read().lower()
        except OSError:
            continue
    # git reads config.worktree only where the repository's own config turns on
    # extensions.worktreeConfig; a file left there otherwise decides nothing
    if worktree in texts and b"worktreeconfig" not in texts.get(local, b""):
        del texts[worktree]
    elif worktree in texts:
        extension = _plain_flags(texts[local], b"[extensions]", (b"worktreeconfig",))
        if extension is None:
            return None
        if extension.get("extensions.worktreeconfig") != "true":
            del texts[worktree]
    for text in texts.values():
        if b"agent-registry" in text or b"[include" in text or b"[remote." in text:
            return None
        if b"ignorecase" in text or b"precomposeunicode" in text:
            flags = _plain_flags(text, b"[core]", (b"ignorecase", b"precomposeunicode"))
            if flags is None:
                return None
            found.update(flags)
        has_origin = has_origin or b'[remote "origin"]' in text
    return {**found, **({"remote.origin.url": "(set)"} if has_origin else {})}


_BOOLEANS = {b"": "true", b"true": "true", b"yes": "true", b"on": "true", b"1": "true",
             b"false": "false", b"no": "false", b"off": "false", b"0": "false"}


def _plain_flags(text: bytes, section: bytes, keys: tuple[bytes, ...]) -> dict[str, str] | None:
    """The boolean *keys* of *section* (``[core]``) in one config file's lower-cased
    *text* (``core.ignorecase`` -> ``"true"``), when each line naming one is ``key =
    BOOLEAN`` (or the bare key) in a plain *section*; None for anything else (a comment, a
    quote, a continuation, another section: git reads those)."""
    out, current = {}, b""
    for raw in text.splitlines():
        line = raw.strip()
        if not any(key in line for key in keys):
            current = line if line.startswith(b"[") else current
            continue
        key, eq, value = (part.strip() for part in line.partition(b"="))
        if current != section or key not in keys or (eq and value not in _BOOLEANS):
            return None
        out[f"{section[1:-1].decode()}.{key.decode()}"] = _BOOLEANS[value] if eq else "true"
    return out
