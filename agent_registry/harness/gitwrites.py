"""The working-tree files a git command writes, for harness/shellwrites.py.

Paths: ``checkout [REV] [--] P…`` (without ``--`` the first operand is a revision
unless it names something on disk, as git decides), ``restore P`` (not ``--staged``
alone), ``rm``, ``mv``, ``clean``, ``stash push -- P``.  The whole tree (``TOP``):
``checkout -f``, ``reset --hard|--merge|--keep``, ``stash`` (push, save, pop, apply,
branch), ``clean`` without paths, ``am`` and ``apply`` of a patch we cannot read.
``apply`` and ``am`` of a patch file: the files it names, relative to the top, as git
applies them.  ``-C DIR`` moves the relative names under DIR.
"""
from __future__ import annotations

import posixpath

from .shellops import TOP, Place, copy_targets, operands, patch_files, word
from .shelltokens import Word

_STASH_READS = {"list", "show", "drop", "clear", "create", "store"}
_BRANCH_FLAGS = {"-b", "-B", "--orphan"}
_RESET_TREE = {"--hard", "--merge", "--keep"}


def git_targets(args: list[Word], place: Place) -> list[Word]:
    sub, rest, where = _subcommand(args)
    if sub is None:
        return []
    found = _rules(sub, rest, place)
    if where is None:
        return found
    if where.dynamic:
        place.unfollowed(f"git -C {where.text}")
        return []
    return [w if w.text.startswith(TOP) or posixpath.isabs(w.text)
            else Word(posixpath.join(where.text, w.text), w.dynamic, w.pattern) for w in found]


def git_writes(args: list[Word]) -> bool:
    """Whether the git command changes working-tree files (for xargs and find -exec)."""
    sub, rest, _ = _subcommand(args)
    return sub in ("checkout", "restore", "rm", "mv", "clean", "apply", "am", "stash",
                   "reset", "switch")


def _subcommand(args: list[Word]) -> tuple[str | None, list[Word], Word | None]:
    """(the subcommand, its words, the ``-C`` directory) of git's command line."""
    i, where = 0, None
    while i < len(args) and args[i].text.startswith("-"):
        if args[i].text in ("-C", "-c") and i + 1 < len(args):
            if args[i].text == "-C":
                where = args[i + 1] if where is None else \
                    Word(posixpath.join(where.text, args[i + 1].text),
                         where.dynamic or args[i + 1].dynamic, False)
            i += 2
        else:
            i += 1
    if i >= len(args):
        return None, [], where
    return args[i].text, args[i + 1:], where


def _rules(sub: str, rest: list[Word], place: Place) -> list[Word]:
    texts = [w.text for w in rest]
    if sub == "checkout":
        return _checkout(rest, texts, place)
    if sub == "switch":
        return [word(TOP)] if {"-f", "--force", "--discard-changes"} & set(texts) else []
    if sub == "restore":
        found, options = operands(rest, "s", ("--source", "--pathspec-from-file",
                                              "--conflict"))
        staged_only = ("-S" in options or "--staged" in options) and not (
            "-W" in options or "--worktree" in options)
        return [] if staged_only else found
    if sub == "rm":
        found, options = operands(rest)
        return [] if "--cached" in options else found
    if sub == "mv":
        found, options = operands(rest)
        return copy_targets(found, options, place.is_dir, move=True)
    if sub == "reset":
        return [word(TOP)] if _RESET_TREE & set(texts) else []
    if sub == "clean":
        found, options = operands(rest, "e", ("--exclude",))
        if "-n" in options or "--dry-run" in options:
            return []
        return found or [word(TOP)]
    if sub == "stash":
        return _stash(rest, texts)
    if sub in ("apply", "am"):
        return _apply(sub, rest, place)
    return []


def _checkout(rest: list[Word], texts: list[str], place: Place) -> list[Word]:
    if "--" in texts:
        return rest[texts.index("--") + 1:]
    if _BRANCH_FLAGS & set(texts) or "-p" in texts or "--patch" in texts:
        return []  # a new branch (files unchanged), or interactive
    found, options = operands(rest, "", ("--conflict",))
    forced = "-f" in options or "--force" in options
    if len(found) == 1:
        if found[0].pattern or place.exists(found[0]):
            return found  # `git checkout .`, `git checkout src/auth.py`
        return [word(TOP)] if forced else []  # a branch switch
    if found and place.exists(found[0]):
        return found  # paths only
    return found[1:] + ([word(TOP)] if forced and not found[1:] else [])  # REV P…


def _stash(rest: list[Word], texts: list[str]) -> list[Word]:
    action = next((t for t in texts if not t.startswith("-")), "push")
    if action in _STASH_READS:
        return []
    if action in ("push", "save") and "--" in texts:
        return rest[texts.index("--") + 1:]
    return [word(TOP)]


def _apply(sub: str, rest: list[Word], place: Place) -> list[Word]:
    found, options = operands(rest, "pC", ("--directory", "--exclude", "--include",
                                            "--whitespace", "--patch-format"))
    if sub == "apply" and ("--cached" in options or (
            {"--check", "--stat", "--numstat", "--summary"} & set(options)
            and "--apply" not in options)):
        return []  # the index only, or a report: no file of the tree changes
    if sub == "am" and {"--quit", "--show-current-patch"} & set(options):
        return []
    texts = [place.read(w) for w in found]
    if not found or any(t is None for t in texts):
        return [word(TOP)]  # a patch from stdin or one we cannot read: anything
    strip = options.get("-p")
    inside = options.get("--directory", "")
    names = [n for t in texts for n in patch_files(t, int(strip) if strip and
                                                   strip.isdigit() else 1)]
    return [word(TOP + posixpath.join(inside, n)) for n in dict.fromkeys(names)]
