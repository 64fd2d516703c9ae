"""What the shell-write rules share (harness/shellrules.py, harness/gitwrites.py): how
a command line's operands and options are read, what cp/mv/ln write, the files a diff
names, and ``TOP`` (git's ``:/``), which stands for the whole working tree and so covers
every held path.
"""
from __future__ import annotations

import posixpath

from ..store.lazyre import LazyPattern
from .shelltokens import Word, gnu_long

_DIFF_FILE = LazyPattern(r"(?m)^(?:\+\+\+|---|\*\*\*) (\S[^\t\n]*?)\s*(?:\t.*)?$")
_GIT_HEADER = LazyPattern(r"(?m)^diff --git (\S+) (\S+)$")


class Place:
    """What a rule may ask about where its command runs (shellplace.Here is the one):
    ``is_dir(word)``, ``exists(word)``, ``read(word)`` (a file's text, or None), and
    ``unfollowed(why)``, a note of a write that cannot be followed, ``git(args, where)``
    (a read of git's run there: exit code, output and error output, or None), and
    ``env_set`` (the command assigned a variable before).  (Not a
    typing.Protocol: importing typing costs every hook call a few ms.)"""


def word(text: str) -> Word:
    """A file name a rule took from a word's text (an option's value, part of an
    operand), expansions kept as written: one with ``$`` or a backquote is the shell's
    to compute (the walker follows a plain variable, else it cannot tell)."""
    return Word(text, "$" in text or "`" in text, False)


def operands(args: list[Word], takes: str = "", long_takes: tuple[str, ...] = (),
             names: tuple[str, ...] = (), every: list[tuple[str, str]] | None = None
             ) -> tuple[list[Word], dict[str, str]]:
    """(the operands, the options given with their values, the last of each) of a
    POSIX-style command line; *takes* lists the short options that take an argument;
    *names*, when given, all the long ones, each also given by an unambiguous start of
    it; *every*, when given, gets each (option, value) in their order (``curl -o a -o
    b``)."""
    found: list[Word] = []
    options: dict[str, str] = {}
    i = 0
    while i < len(args):
        text = args[i].text
        i += 1
        if text == "--":
            found += args[i:]
            break
        if text.startswith("--"):
            name, eq, value = text.partition("=")
            name = gnu_long(name, names) if names else name
            if not eq and name in long_takes and i < len(args):
                value, i = args[i].text, i + 1
            options[name] = value
            if every is not None:
                every.append((name, value))
        elif text.startswith("-") and len(text) > 1:
            for j, flag in enumerate(text[1:], 1):
                if flag in takes:
                    value = text[j + 1:]
                    if not value and i < len(args):
                        value, i = args[i].text, i + 1
                    options["-" + flag] = value
                    if every is not None:
                        every.append(("-" + flag, value))
                    break
                options["-" + flag] = ""
        else:
            found.append(args[i - 1])
    return found, options


def copy_targets(found: list[Word], options: dict[str, str], is_dir, *, move: bool
                 ) -> list[Word]:
    """What ``cp``/``mv``/``install``/``ln`` write: the destination (a file in it per
    source when it is a directory) and, for ``mv``, the sources, which disappear."""
    directory = options.get("-t") or options.get("--target-directory")
    if directory is not None:
        sources, dest = found, word(directory)
    elif len(found) < 2:
        return []
    else:
        sources, dest = found[:-1], found[-1]
    into = directory is not None or (("-T" not in options and "--no-target-directory"
                                      not in options) and (len(sources) > 1 or is_dir(dest)))
    out = list(sources) if move else []
    if into and not dest.dynamic:
        out += [Word(posixpath.join(dest.text, posixpath.basename(s.text.rstrip("/"))),
                     s.dynamic, s.pattern) for s in sources]
    else:
        out.append(dest)  # a dynamic destination: the walker notes it cannot follow it
    return out


def patch_files(text: str, strip: int | None) -> list[str]:
    """The files a unified or context diff names (both sides; /dev/null is none): with
    *strip* (``-pN``) that many leading folders removed, else every shorter form too."""
    names = [n for pair in _GIT_HEADER.findall(text) for n in pair]
    names += [n for n in _DIFF_FILE.findall(text) if n != "/dev/null"]
    out: list[str] = []
    for name in dict.fromkeys(names):
        parts = name.split("/")
        cuts = [strip] if strip is not None else range(len(parts))
        out += ["/".join(parts[k:]) for k in cuts if k < len(parts)]
    return list(dict.fromkeys(out))
