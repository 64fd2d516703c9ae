"""Which operands each command writes, for harness/shellwrites.py.

Each rule gets the command's words after its name and a *place* (the walker) that can
tell whether a word names a directory or an existing path, read a patch file, and take
note of a write it cannot follow.  A rule returns the written files as words (git's in
harness/gitwrites.py).
"""
from __future__ import annotations

import posixpath

from .gitwrites import git_targets, git_writes
from .shellops import Place, copy_targets, operands, patch_files, word
from .shelltokens import Word, gnu_long, tokenize, unwrap

_VIMS = ("vi", "vim", "nvim", "ex", "view", "vimdiff", "rvim", "rview", "gvim", "vim.tiny",
         "vim.basic", "vim.nox")  # the vims shelleditors.vim reads

# commands that write the names xargs or find -exec hand them (we cannot see the names)
_WRITERS = {"rm", "unlink", "shred", "touch", "truncate", "tee", "cp", "mv", "install",
            "ln", "dd", "patch", "ed", "red", "rsync", "chmod", "chown", "chgrp", "gzip",
            "gunzip", "bzip2", "bunzip2", "xz", "unxz", "zstd", "unzstd", "lzma", "unlzma",
            "emacs", *_VIMS}
_FIND_ACTIONS = ("-exec", "-execdir", "-ok", "-okdir")


def targets_of(name: str, args: list[Word], place: Place, stdin: Word | None = None
               ) -> list[Word]:
    """The file operands command *name* writes (*stdin*: the file redirected into it)."""
    rule = RULES.get(name)
    return rule(name, args, place, stdin) if rule is not None else []


# each one's long options (GNU coreutils): an unambiguous start of one is that one
_COPY_NAMES = {name: tuple(f"--{n}" for n in names.split()) for name, names in {
    "cp": "archive attributes-only backup context copy-contents dereference force help "
          "interactive link no-clobber no-dereference no-preserve no-target-directory "
          "one-file-system parents preserve recursive reflink remove-destination sparse "
          "strip-trailing-slashes suffix symbolic-link target-directory update verbose "
          "version",
    "mv": "backup context force help interactive no-clobber no-target-directory "
          "strip-trailing-slashes suffix target-directory update verbose version",
    "install": "backup compare context directory group help mode no-target-directory "
               "owner preserve-context preserve-timestamps strip strip-program suffix "
               "target-directory verbose version",
    "ln": "backup directory force help interactive logical no-dereference "
          "no-target-directory physical relative suffix symbolic target-directory "
          "verbose version"}.items()}


def _copy(name: str, args: list[Word], place: Place, stdin: Word | None) -> list[Word]:
    # --backup takes its CONTROL only after "=": `cp --backup a b` copies a to b
    found, options = operands(args, "tSgmo" if name == "install" else "tS",
                              ("--target-directory", "--suffix", "--sparse"),
                              _COPY_NAMES[name])
    if name == "ln" and len(found) == 1 and "-t" not in options:
        # `ln -s a/b`: the link is made here, named after its target
        return [word(posixpath.basename(found[0].text.rstrip("/")) or ".")]
    return copy_targets(found, options, place.is_dir, move=name == "mv")


_PACKERS = ("gzip", "gunzip", "bzip2", "bunzip2", "xz", "unxz", "zstd", "unzstd", "lzma",
            "unlzma")  # shellarchives.PACKERS

_FORMATTERS = ("black", "ruff", "prettier", "eslint", "gofmt", "goimports", "clang-format",
               "rustfmt", "sponge")  # read by harness/shelltools.py

# command -> its rule (name, args, place, stdin); harness/shellwrites.RULED names the
# same commands, so that a command with none is read without importing this module
RULES = {
    "tee": lambda name, args, place, stdin: operands(args)[0],
    **dict.fromkeys(("rm", "unlink", "shred"), lambda name, args, place, stdin: operands(
        args, "nus" if name == "shred" else "")[0]),
    "touch": lambda name, args, place, stdin: operands(
        args, "dtr", ("--date", "--reference"))[0],
    "truncate": lambda name, args, place, stdin: operands(
        args, "sr", ("--size", "--reference"))[0],
    "dd": lambda name, args, place, stdin: [Word(a.text[3:], a.dynamic, a.pattern)
                                           for a in args if a.text.startswith("of=")],
    **dict.fromkeys(("sed", "gsed"), lambda name, args, place, stdin: _edits().sed(args)),
    "perl": lambda name, args, place, stdin: _edits().perl(args),
    "ruby": lambda name, args, place, stdin: _edits().ruby(args),
    **dict.fromkeys(("awk", "gawk"), lambda name, args, place, stdin: _edits().awk(args)),
    **dict.fromkeys(("ed", "red"), lambda name, args, place, stdin: _edits().ed(args)),
    "rsync": lambda name, args, place, stdin: _edits().rsync(args, place),
    **dict.fromkeys(("cp", "mv", "install", "ln"), _copy),
    "patch": lambda name, args, place, stdin: _patch(args, place, stdin),
    "xargs": lambda name, args, place, stdin: _fed(*_xargs_command(args), place, "xargs"),
    "parallel": lambda name, args, place, stdin: _parallel(args, place),
    "find": lambda name, args, place, stdin: _find(args, place),
    "git": lambda name, args, place, stdin: git_targets(args, place),
    **dict.fromkeys(("chmod", "chown", "chgrp"), lambda name, args, place, stdin: _owned(
        name, args)),
    "sort": lambda name, args, place, stdin: _sorted_into(args),
    **dict.fromkeys(_PACKERS, lambda name, args, place, stdin: _archives().packed(
        name, args)),
    "tar": lambda name, args, place, stdin: _archives().tar(args, place),
    "unzip": lambda name, args, place, stdin: _archives().unzip(args),
    **dict.fromkeys(_FORMATTERS,
                    lambda name, args, place, stdin: _tools().formatted(name, args)),
    **dict.fromkeys(_VIMS, lambda name, args, place, stdin: _editors().vim(name, args, place)),
    "emacs": lambda name, args, place, stdin: _editors().emacs(args),
    **dict.fromkeys(("go", "cargo"), lambda name, args, place, stdin: _tools().built(
        name, args)),
    **dict.fromkeys(("curl", "wget"),
                    lambda name, args, place, stdin: _tools().fetched(name, args)),
}


def _tools():
    from . import shelltools  # only for the commands it reads
    return shelltools


def _edits():
    from . import shelledits  # only for the commands it reads
    return shelledits


def _editors():
    from . import shelleditors  # only for the commands it reads
    return shelleditors


def _archives():
    from . import shellarchives  # only for the commands it reads
    return shellarchives


_SORT_TAKES = ("--output", "--key", "--field-separator", "--buffer-size",
               "--temporary-directory", "--files0-from", "--random-source",
               "--compress-program", "--batch-size", "--parallel", "--sort")
_SORT_FLAGS = tuple(f"--{n}" for n in (
    "check debug dictionary-order general-numeric-sort help human-numeric-sort "
    "ignore-case ignore-leading-blanks ignore-nonprinting merge month-sort numeric-sort "
    "random-sort reverse stable unique version version-sort zero-terminated").split())


def _sorted_into(args: list[Word]) -> list[Word]:
    """``sort -o FILE`` (``--output``) writes FILE, which may be one of its inputs."""
    options = operands(args, "koStT", _SORT_TAKES, (*_SORT_TAKES, *_SORT_FLAGS))[1]
    given = options.get("-o") or options.get("--output")
    return [word(given)] if given else []


_MODE = r"[0-7]{1,4}|([ugoa]*([-+=][rwxXstugo]*)+)(,[ugoa]*([-+=][rwxXstugo]*)+)*"


def _owned(name: str, args: list[Word]) -> list[Word]:
    """The files ``chmod``/``chown``/``chgrp`` change (their mode or owner is part of
    what a holder's file is): the operands after the mode or owner, all of them with
    ``--reference``.  chmod's ``-x``-like modes read as options are no file; a word that
    may be a mode is taken for one only first."""
    found, options = operands(args)
    if "--reference" in options or not found:
        return found
    if name != "chmod":
        return found[1:]
    import re
    mode_given = any(re.fullmatch(_MODE, a.text) for a in args
                     if a.text.startswith("-") and not a.text.startswith("--"))
    return found if mode_given else found[1:]


def writes(name: str, args: list[Word]) -> bool:
    """Does command *name* write files (those it names, or those it is handed)?"""
    if name in _WRITERS:
        return True
    if name in ("go", "cargo"):
        return bool(_tools().built(name, args))
    if name in _FORMATTERS or name in ("curl", "wget"):  # as when handed one more name
        handed = Word("https://host/name", False, False)
        return bool(_tools().formatted(name, [*args, handed]) if name in _FORMATTERS
                    else _tools().fetched(name, [*args, handed]))
    if name in ("sed", "gsed", "perl", "ruby", "awk", "gawk"):
        return _edits().in_place(name, args)
    if name == "tar":  # --remove-files removes the names it is handed
        return any(w.text.endswith("\0handed") for w in _archives().tar(
            [*args, Word("\0handed", False, False)]))
    if name == "git":
        return git_writes(args)
    return False


def _patch(args: list[Word], place: Place, stdin: Word | None) -> list[Word]:
    found, options = operands(args, "iopdBDFrVxYzg", (
        "--input", "--output", "--directory", "--strip", "--reject-file", "--prefix",
        "--fuzz", "--suffix", "--basename-prefix", "--version-control", "--quoting-style",
        "--read-only", "--reject-format", "--get"))
    output = options.get("-o") or options.get("--output")
    if output:  # the patched text goes there (- : the standard output); the file is read
        return [word(output)] if output != "-" else []
    if found:
        return found[:1]  # `patch FILE [PATCH]`: the file named is the one patched
    source = options.get("-i") or options.get("--input")
    given = word(source) if source else stdin
    if given is not None and given.body is not None:  # <<EOF: the diff is its body,
        text = None if given.dynamic else given.body  # unless the shell computes it
    else:
        text = place.read(given) if given is not None else None
    if text is None:
        place.unfollowed("patch applies a diff we cannot read (give it as -i FILE "
                         "or < FILE)")
        return []
    strip = options.get("-p") or options.get("--strip")
    inside = options.get("-d") or options.get("--directory") or ""
    return [word(posixpath.join(inside, n)) for n in
            patch_files(text, int(strip) if strip and strip.isdigit() else None)]


_XARGS_TAKES = ("--max-args", "--max-procs", "--max-chars", "--delimiter", "--arg-file",
                "--process-slot-var")  # --eof, --max-lines, --replace: only with "="
_XARGS_NAMES = (*_XARGS_TAKES, "--eof", "--max-lines", "--null", "--no-run-if-empty",
                "--open-tty", "--interactive",
                "--verbose", "--exit", "--show-limits", "--replace", "--help", "--version")


def _xargs_command(args: list[Word]) -> tuple[list[Word], tuple[str, ...]]:
    """The command xargs runs (its words after xargs's own options, long ones also by an
    unambiguous start), and the strings it replaces with each name (``{}``, and the last
    ``-I R``, ``-iR``, ``--replace=R``)."""
    takes = "IEdLnPsa"
    i, replace = 0, "{}"
    while i < len(args) and args[i].text.startswith("-") and args[i].text != "-":
        text = args[i].text
        i += 1
        if text == "--":
            break
        if text.startswith("--"):
            option, eq, value = text.partition("=")
            option = gnu_long(option, _XARGS_NAMES)
            if option == "--replace" and value:
                replace = value
            i += not eq and option in _XARGS_TAKES
            continue
        for j, letter in enumerate(text[1:], 1):  # a cluster: -0n 1, -tI {}, -n1
            if letter in takes:
                value = text[j + 1:] or (args[i].text if i < len(args) else "")
                i += j == len(text) - 1  # its value is the next word unless attached
                if letter == "I" and value:
                    replace = value
                break
            if letter == "i" and text[j + 1:]:  # -iR
                replace = text[j + 1:]
                break
    return args[i:], ("{}", replace)


# GNU parallel's options: those that take the next word, those that do not; another
# leaves its command unknown
_PARALLEL_TAKES = frozenset(("-j", "-a", "-I", "-d", "-E", "-S", "-n", "-N", "-L", "-s", "-C",
                             "-P", "--jobs", "--arg-file", "--delimiter", "--colsep",
                             "--max-args", "--max-lines", "--max-chars", "--sshlogin",
                             "--tagstring", "--results", "--res", "--joblog", "--tmpdir",
                             "--halt", "--delay", "--timeout", "--retries", "--memfree",
                             "--load", "--block", "--header", "--env", "--max-procs", "--eof"))
_PARALLEL_FLAGS = frozenset(("-k", "-q", "-v", "-u", "-0", "-r", "-t", "-X", "-m", "-p",
                             "--keep-order", "--quote", "--verbose", "--ungroup", "--null",
                             "--no-run-if-empty", "--dry-run", "--tag", "--line-buffer",
                             "--group", "--bar", "--progress", "--eta", "--pipe", "--xargs",
                             "--plus", "--will-cite"))


def _parallel(args: list[Word], place: Place) -> list[Word]:
    """GNU parallel: the files its ``--results`` and ``--joblog`` write, and its command
    (the words before ``:::``/``::::``, joined and run by a shell) read as xargs's, each
    run handed names we cannot see; a command it reads from its input, one with shell
    operators, or an option not known here: it runs what we cannot read."""
    written: list[Word] = []
    i, dry, mark = 0, False, "{"
    while i < len(args) and args[i].text.startswith("-"):
        option, eq, value = args[i].text.partition("=")
        i += 1
        if option[:2] in _PARALLEL_TAKES and len(option) > 2 and option[1] != "-":
            option, value, eq = option[:2], args[i - 1].text[2:], "="  # -j4
        elif option in _PARALLEL_TAKES and not eq and i < len(args):
            value, eq, i = args[i].text, "=", i + 1
        elif option not in _PARALLEL_FLAGS and not (eq and option in _PARALLEL_TAKES):
            place.unfollowed("parallel runs a command we cannot read")
            return written
        dry = dry or option == "--dry-run"
        if option == "-I" and value:
            mark = value  # the string replaced by each name
        if option in ("--results", "--res") and "{" in value:
            place.unfollowed("parallel writes results under names we cannot see")
        elif option in ("--results", "--res", "--joblog") and value:
            written.append(word(value[1:] if option == "--joblog" and value[:1] == "+"
                                else value))  # --joblog +FILE: appended to FILE
    end = next((k for k in range(i, len(args)) if args[k].text.startswith(":::")), len(args))
    text = " ".join(a.text for a in args[i:end])
    if dry:
        return written
    command = tokenize(text) if text else []
    if not command or any(not isinstance(t, Word) or t.subs or t.process for t in command) \
            or any(a.dynamic for a in args[i:end]):
        place.unfollowed("parallel runs a command we cannot read")
        return written
    return written + _fed(command, (mark,), place, "parallel")


_FED = [0]  # commands handed names, one inside another (xargs parallel xargs …) now
# what runs the command it is handed (shells, su, busybox's applets)
_RUNS_OTHERS = frozenset(("sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "su", "runuser",
                          "busybox", "eval"))


def _fed(command: list[Word], marks: tuple[str, ...], place: Place, how: str,
         each_in_its_folder: bool = False) -> list[Word]:
    """The files of a command run by xargs, parallel or find -exec: those it names, and,
    when it writes, or a file it names holds one of *marks* (the strings replaced by a
    name: ``{}``), or it runs in another folder (a wrapper's, or each name's:
    *each_in_its_folder*, find -execdir), a note that the names it is handed cannot be
    followed."""
    if _FED[0] >= 8:
        place.unfollowed(f"{how} runs commands nested too deep to read")
        return []
    command, chdir, outputs, _ = unwrap(command)  # `xargs sudo rm`, `-exec timeout 5 rm`
    if not command or command[0].dynamic:
        return outputs  # what a wrapper writes all the same (`xargs time -o F $CMD`)
    name = posixpath.basename(command[0].text)
    _FED[0] += 1
    try:
        found = targets_of(name, command[1:], place) + outputs
    finally:
        _FED[0] -= 1
    kept = [t for t in found if not any(m in t.text for m in marks)]
    if writes(name, command[1:]) or name in _RUNS_OTHERS or len(kept) < len(found) or \
            (chdir is not None or each_in_its_folder) and found:
        place.unfollowed(f"{how} hands {name} names we cannot see")
    return kept


def _find(args: list[Word], place: Place) -> list[Word]:
    out: list[Word] = []
    i = 0
    while i < len(args):
        text = args[i].text
        i += 1
        if text == "-delete":
            place.unfollowed("find -delete removes files we cannot see")
        elif text in ("-fprint", "-fprint0", "-fls", "-fprintf") and i < len(args):
            out.append(args[i])
            i += 1
        elif text in _FIND_ACTIONS:
            end = next((j for j in range(i, len(args)) if args[j].text in (";", "+")),
                       len(args))
            out += _fed(args[i:end], ("{}",), place, f"find {text}",
                        each_in_its_folder=text.endswith("dir"))  # -execdir, -okdir
            i = end + 1
    return out
