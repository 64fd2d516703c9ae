"""The working-tree files a git command writes, for harness/shellwrites.py.

Paths: ``checkout [REV] [--] P…`` (without ``--`` a lone operand is a revision unless
it names something on disk and no commit, as git decides; git is asked), ``restore P``
(not ``--staged`` alone), ``rm``, ``mv``, ``clean``, ``stash push -- P``.  The whole
tree (``TOP``): ``checkout -f``, ``reset --hard|--merge|--keep``, ``stash`` (push, save,
pop, apply, branch), ``clean`` without paths, ``am`` and ``apply`` of a patch we cannot
read, and what moves HEAD to another tree: a branch switch (``checkout REV``, ``switch``, a new
branch from a start point), ``merge``, ``pull``, ``rebase``, ``cherry-pick``,
``revert``, ``bisect``, ``read-tree -u``: each writes the files that differ between
the two trees, which the gate cannot know without reading them; git keeps a file with
changes of its own only where the other tree leaves it alone, and a file held but not
yet changed is overwritten.
``apply`` and ``am`` of a patch file: the files it names, relative to the top, as git
applies them.  ``-C DIR`` moves the relative names under DIR.  A word that is none of
git's own commands is the alias git would run, read as what it expands to.
"""
from __future__ import annotations

import posixpath

from .shellops import Place, copy_targets, operands, patch_files, word
from .shelltokens import TOP, Word

_STASH_READS = {"list", "show", "drop", "clear", "create", "store"}
_RESET_TREE = {"--hard", "--merge", "--keep"}
# subcommands that move the working tree to another commit's (or merge one into it)
_TREE_MOVES = {"merge", "pull", "rebase", "cherry-pick", "revert"}
# their forms that leave the working tree as it is: a report, or the sequencer's state
_MOVE_READS = {"--show-current-patch", "--quit", "--edit-todo", "-h", "--help", "--dry-run"}
_BISECT_READS = {"log", "visualize", "view", "terms", "help"}
_CURRENT = {"HEAD", "@"}  # a start point where the tree already is
# git's own options that take the next word as their value (``--git-dir=X`` is one word;
# ``--exec-path`` and ``--list-cmds`` take theirs only after ``=``)
_GLOBAL_TAKES = {"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env"}
# git's own commands (``git --list-cmds=main`` of 2.39): git runs these, never an alias
# of the same name, so only another word is looked up as an alias (a command a later git
# added, `replay`, `repo`, is looked up too: where git has it, the alias is one too many)
_OWN = frozenset("""
add add--interactive am annotate apply archive bisect bisect--helper blame branch
bugreport bundle cat-file check-attr check-ignore check-mailmap check-ref-format checkout
checkout--worker checkout-index cherry cherry-pick clean clone column commit commit-graph
commit-tree config count-objects credential credential-cache credential-cache--daemon
credential-store daemon describe diagnose diff diff-files diff-index diff-tree
difftool difftool--helper env--helper fast-export fast-import fetch fetch-pack
filter-branch fmt-merge-msg for-each-ref for-each-repo format-patch fsck fsck-objects
fsmonitor--daemon gc get-tar-commit-id grep hash-object help hook http-backend http-fetch
http-push imap-send index-pack init init-db instaweb interpret-trailers log
ls-files ls-remote ls-tree mailinfo mailsplit maintenance merge merge-base merge-file
merge-index merge-octopus merge-one-file merge-ours merge-recursive merge-recursive-ours
merge-recursive-theirs merge-resolve merge-subtree merge-tree mergetool mktag mktree
multi-pack-index mv name-rev notes pack-objects pack-redundant pack-refs patch-id pickaxe
prune prune-packed pull push quiltimport range-diff read-tree rebase receive-pack reflog
remote remote-ext remote-fd remote-ftp remote-ftps remote-http remote-https repack
replace request-pull rerere reset restore rev-list rev-parse revert rm
send-pack sh-i18n--envsubst shell shortlog show show-branch show-index show-ref
sparse-checkout stage stash status stripspace submodule submodule--helper subtree switch
symbolic-ref tag unpack-file unpack-objects update-index update-ref update-server-info
upload-archive upload-archive--writer upload-pack var verify-commit verify-pack verify-tag
version web--browse whatchanged worktree write-tree""".split())
_ALIAS_DEPTH = 10  # aliases expanded in a row before the command is not followed


def git_targets(args: list[Word], place: Place) -> list[Word]:
    return _targets(args, place, None, {}, 0, True)


def _targets(args: list[Word], place: Place, outer: Word | None, given: dict[str, str],
             depth: int, plain: bool) -> list[Word]:
    """What ``git ARGS`` writes, run under ``-C`` *outer* (None: where the command runs),
    *given*: the aliases set with ``-c`` so far, *depth*: aliases expanded to get here,
    *plain*: no option of git's own but those (which git's config there then tells)."""
    sub, rest, where, own = _subcommand(args, given)
    if sub is None:
        return []
    where = outer if where is None else _under(outer, where)
    plain = plain and own and not place.env_set
    if sub.dynamic:
        place.unfollowed(f"a git command the shell computes ({sub.text})")
        return []
    if sub.text in _OWN:
        found = _rules(sub.text, rest, place, where)
    else:  # git runs an alias of that name, when one is set
        found = _alias(sub.text, rest, place, where, given, depth, plain)
        where = None  # the expansion's paths were placed under it
    if where is None:
        return found
    if where.dynamic:
        place.unfollowed(f"git -C {where.text}")
        return []
    top = _top_of(where, place) if plain and any(w.text.startswith(TOP) for w in found) \
        else None  # (--work-tree, GIT_WORK_TREE=: the tree is elsewhere than -C says)
    return [(w if top is None else word(posixpath.join(top, w.text[len(TOP):])))
            if w.text.startswith(TOP) else _under(where, w) for w in found]


def _top_of(where: Word, place: Place) -> str | None:
    """The top of the working tree git run with ``-C`` *where* works in (``git -C
    ../other pull`` writes that one, not this one); None when git cannot say (then the
    whole tree here, as without ``-C``)."""
    ran = place.git(["rev-parse", "--show-toplevel"], where)
    top = ran[1].strip() if ran is not None and ran[0] == 0 else ""
    return top if posixpath.isabs(top) else None


def _alias(name: str, rest: list[Word], place: Place, where: Word | None,
           given: dict[str, str], depth: int, plain: bool) -> list[Word]:
    """What the alias *name* writes, expanded as git expands it (``alias.NAME`` from a
    ``-c`` or git's config where the command runs; its words, then *rest*); none when
    no alias of that name is set (another program's subcommand, or a typo).  An alias
    that runs a shell command (``!…``), one git's config cannot tell, and a chain of them
    git would not end are not followed."""
    if depth >= _ALIAS_DEPTH:
        place.unfollowed(f"git {name}: aliases nested more than {_ALIAS_DEPTH} deep")
        return []
    if name.lower() in given:
        expansion = given[name.lower()]
    elif not plain:  # --config-env, -c include.path=, GIT_CONFIG_…=, HOME=: not ours to read
        place.unfollowed(f"git {name}: an alias under options or variables that change "
                         f"git's config")
        return []
    else:
        ran = place.git(["config", "--get", f"alias.{name}"], where)
        if ran is None:
            return []
        code, out, err = ran
        if code not in (0, 1):  # 1: no such alias (or no such key)
            why = err.strip().splitlines()[-1] if err.strip() else f"exit {code}"
            place.unfollowed(f"git {name}: its alias cannot be looked up ({why})")
            return []
        if code == 1:
            return []
        expansion = out.rstrip("\n")
    if expansion.lstrip().startswith("!"):
        place.unfollowed(f"git {name}: an alias that runs a shell command")
        return []
    import shlex  # the rare command that takes an alias: not every hook's import
    try:
        words = shlex.split(expansion)
    except ValueError:
        place.unfollowed(f"git {name}: an alias we cannot split")
        return []
    return _targets([*map(word, words), *rest], place, where, given, depth + 1, plain)


def git_writes(args: list[Word]) -> bool:
    """Whether the git command changes working-tree files (for xargs and find -exec):
    an alias, read nowhere here, may."""
    sub, rest, _, _ = _subcommand(args, {})
    return sub is not None and (sub.dynamic or sub.text not in _OWN or sub.text in (
        "checkout", "restore", "rm", "mv", "clean", "apply", "am", "stash", "reset",
        "switch", "bisect", "read-tree", "merge-file", "checkout-index", "sparse-checkout",
        *_TREE_MOVES))


def _subcommand(args: list[Word], given: dict[str, str]
                ) -> tuple[Word | None, list[Word], Word | None, bool]:
    """(the subcommand, its words, the ``-C`` directory, whether git's own options were
    only ``-C`` and ``-c alias.…``) of git's command line; the aliases its ``-c
    alias.NAME=VALUE`` set go into *given*."""
    i, where, plain = 0, None, True
    while i < len(args) and args[i].text.startswith("-"):
        if args[i].text in _GLOBAL_TAKES and i + 1 < len(args):
            key, _, value = args[i + 1].text.partition("=")
            if args[i].text == "-C":
                where = _under(where, args[i + 1])
            elif args[i].text == "-c" and key.lower().startswith("alias."):
                given[key[len("alias."):].lower()] = value
            else:
                plain = False
            i += 2
        else:
            plain = plain and args[i].text in ("--no-pager", "-P", "--paginate", "-p")
            i += 1
    if i >= len(args):
        return None, [], where, plain
    return args[i], args[i + 1:], where, plain


def _rules(sub: str, rest: list[Word], place: Place, where: Word | None) -> list[Word]:
    texts = [w.text for w in rest]
    if sub == "checkout":
        return _checkout(rest, texts, place, where)
    if sub == "switch":
        return _switch(rest)
    if sub in _TREE_MOVES:
        done = sub == "merge" and "--continue" in texts  # the merge's commit, no file
        return [] if done or _MOVE_READS & set(texts) else [word(TOP)]
    if sub == "merge-file":  # the merge is written over the first file
        found, options = operands(rest, "L", ("--marker-size", "--diff-algorithm"))
        return [] if "-p" in options or "--stdout" in options else found[:1]
    if sub == "bisect":
        action = next((t for t in texts if not t.startswith("-")), "")
        return [] if not action or action in _BISECT_READS or "--no-checkout" in texts \
            else [word(TOP)]
    if sub == "read-tree":
        _, options = operands(rest, "", ("--prefix", "--index-output", "--exclude-per-directory"))
        return [word(TOP)] if "-u" in options else []
    if sub == "sparse-checkout":  # files leave and come back as the patterns change
        action = next((t for t in texts if not t.startswith("-")), "")
        return [] if action in ("", "list", "check-rules") else [word(TOP)]
    if sub == "checkout-index":
        found, options = operands(rest, "", ("--prefix", "--stage"))
        if "--prefix" in options or "--temp" in options:
            return []  # written under the prefix, or as temporary files: not the tree's
        return [word(TOP)] if "-a" in options or "--all" in options or \
            "--stdin" in options else found
    if sub == "restore":
        found, options = operands(rest, "s", ("--source", "--pathspec-from-file",
                                              "--conflict"))
        staged_only = ("-S" in options or "--staged" in options) and not (
            "-W" in options or "--worktree" in options)
        return [] if staged_only else _listed(options, place, found)
    if sub == "rm":
        found, options = operands(rest, "", ("--pathspec-from-file",))
        return [] if "--cached" in options else _listed(options, place, found)
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


def _checkout(rest: list[Word], texts: list[str], place: Place, where: Word | None
              ) -> list[Word]:
    if "--" in texts:
        before, paths = rest[:texts.index("--")], rest[texts.index("--") + 1:]
        if paths:  # REV -- P…: the paths, from REV
            return paths
        rest, texts = before, texts[:texts.index("--")]  # `git checkout main --`
    found, options = operands(rest, "bB", ("--conflict", "--orphan",
                                           "--pathspec-from-file"))
    forced = bool({"-f", "--force"} & set(options))
    if "--pathspec-from-file" in options:
        return _listed(options, place, found)
    if {"-b", "-B", "--orphan"} & set(options):
        # a new branch: at HEAD the files stay as they are; at a start point they
        # become its
        return [word(TOP)] if forced or found and found[0].text not in _CURRENT else []
    if not found:  # a report (or `-p`: each change of the tree offered for discarding)
        return [word(TOP)] if forced or {"-p", "--patch"} & set(options) else []
    if len(found) == 1:
        if found[0].pattern or place.exists(_under(where, found[0])) and \
                not _commit(found[0], place, where):
            return found  # `git checkout .`, `git checkout src/auth.py`
        # a branch switch (to HEAD itself: the tree as it is)
        return [word(TOP)] if forced or found[0].text not in _CURRENT else []
    if place.exists(_under(where, found[0])):
        return found  # paths only
    return found[1:]  # REV P…


def _under(where: Word | None, name: Word) -> Word:
    """*name* as git run with ``-C`` *where* finds it."""
    if where is None or posixpath.isabs(name.text):
        return name
    return Word(posixpath.join(where.text, name.text), where.dynamic or name.dynamic,
                name.pattern)


def _commit(name: Word, place: Place, where: Word | None) -> bool:
    """Does *name*, a file or folder on disk, also name a commit?  git's checkout then
    switches to it (``git checkout docs`` with a branch and a folder ``docs``).  Asked
    of git only for a name a branch can have."""
    text = name.text
    if name.dynamic or text.startswith((".", "/", "-")) or text.endswith("/") or \
            ".." in text or "//" in text:
        return False
    ran = place.git(["rev-parse", "--verify", "--quiet", f"{text}^{{commit}}"], where)
    return ran is not None and ran[0] == 0


def _listed(options: dict[str, str], place: Place, found: list[Word]) -> list[Word]:
    """*found*, or with ``--pathspec-from-file FILE`` the paths FILE lists (the whole
    tree when they are on stdin, or the file cannot be read)."""
    listed = options.get("--pathspec-from-file")
    if listed is None:
        return found
    text = place.read(word(listed)) if listed != "-" else None
    if text is None:
        return [word(TOP)]
    nul = "--pathspec-file-nul" in options
    return [word(p) for p in text.split("\0" if nul else "\n") if p.strip()]


def _switch(rest: list[Word]) -> list[Word]:
    """``git switch``: a branch switch writes the tree; a new branch at HEAD does not."""
    found, options = operands(rest, "cC", ("--conflict", "--create", "--force-create",
                                           "--orphan"))
    # a branch (`-` the last one), an orphan branch (its tree is empty), or the tree
    # put back as HEAD has it (`-f`); not a new branch where HEAD is (`-c topic`)
    return [word(TOP)] if {"--orphan", "-f", "--force", "--discard-changes"} & set(options) \
        or any(w.text not in _CURRENT for w in found) else []


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
