"""Which files a shell command writes, for the gate before an agent's shell tool.

Only the common write forms are read: redirections (``>``, ``>>``, ``>|``, ``&>``,
``2>``, ``<>``), ``tee``, ``sed -i``, ``cp``/``mv``/``install`` (the destination; for
``mv`` the sources too), ``rm``/``unlink``/``touch``/``truncate``, ``dd of=``, ``git
checkout -- P``, ``git restore P``, ``git rm``/``git mv``, through ``;``, ``&&``,
``||``, ``|``, newlines, here-documents, subshells, ``cd DIR`` (later relative names
are under DIR) and ``bash -c``/``sh -c``/``eval`` scripts.  A name that depends on
the shell (``$VAR``, ``$(...)``, a backquote) is skipped, and a command that cannot be
tokenized (an unclosed quote) yields nothing: the gate lets such a command through and
the git guard is the backstop.  Standard library only; no shell is ever run.  Over 400
lines: a small shell tokenizer (quotes, expansions, here-documents) and the operand
rules of each command it knows, which belong together.
"""
from __future__ import annotations

import glob
import os
import posixpath
import re
from typing import NamedTuple

__all__ = ["write_targets"]

# longest first, so ">>" is not read as ">" ">"
_OPERATORS = sorted(["&&", "||", "|&", ";;", ";", "&", "|", "(", ")", "\n",
                     ">>", ">|", "&>>", "&>", "<>", ">&", "<&", "<<<", "<<-", "<<",
                     ">", "<"], key=len, reverse=True)
_REDIRECTS = {">", ">>", ">|", "&>", "&>>", "<>", ">&", "<", "<&", "<<", "<<-", "<<<"}
_WRITING = {">", ">>", ">|", "&>", "&>>", "<>", ">&"}
_SPECIAL = frozenset(";&|()<>\n")
_DEVICES = ("/dev/", "/proc/self/fd/")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\[[^]]*\])?\+?=")
_SHELLS = {"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "busybox"}
# words that only precede the command they run (with the options each takes an argument for)
_WRAPPERS = {"sudo": "ugCDhprTU", "env": "uCS", "nohup": "", "time": "fo", "command": "",
             "exec": "a", "builtin": "", "nice": "n", "timeout": "sk", "stdbuf": "ioe",
             "doas": "uC", "!": "", "then": "", "else": "", "do": "", "if": "", "elif": "",
             "while": "", "until": "", "{": ""}


class Unparsable(ValueError):
    """The command cannot be tokenized: no targets can be told."""


class Word(NamedTuple):
    text: str       # quotes removed, expansions kept as written
    dynamic: bool   # contains an expansion the shell would make ($, backquote)
    pattern: bool   # contains an unquoted glob character


class Op(NamedTuple):
    text: str


def write_targets(command: str | list[str], cwd: str | None = None) -> list[str]:
    """The files *command* (a shell string, or an argv list) would write, in order, once
    each.  Relative names are joined with *cwd* when given (and globs expanded there),
    else returned relative to where the command starts."""
    try:
        if isinstance(command, (list, tuple)):
            found = _Walker(cwd).simple([Word(str(a), False, False) for a in command], ".")
        else:
            found = _Walker(cwd).script(str(command), ".")
    except Exception:  # noqa: BLE001 - unparsable, or a form we got wrong: let it through
        return []  # (a gate that blocked every command on a parser slip would stop the agent)
    return list(dict.fromkeys(p for p in found if p))


# -- tokens ---------------------------------------------------------------------------

def tokenize(text: str) -> list[Word | Op]:
    """Shell words and operators, quotes removed; here-document bodies skipped."""
    tokens: list[Word | Op] = []
    heredocs: list[tuple[str, bool]] = []  # (delimiter, strip tabs) waiting for a newline
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in " \t\r":
            i += 1
        elif c == "\\" and text.startswith("\n", i + 1):
            i += 2  # a continued line
        elif c == "#":
            while i < n and text[i] != "\n":
                i += 1
        elif c in _SPECIAL:
            op = next(o for o in _OPERATORS if text.startswith(o, i))
            i += len(op)
            tokens.append(Op(op))
            if op in ("<<", "<<-"):
                word, i = _word(text, _skip_blanks(text, i))
                tokens.append(word)
                heredocs.append((word.text, op == "<<-"))
            elif op == "\n" and heredocs:
                i = _skip_heredocs(text, i, heredocs)
                heredocs = []
        else:
            start = i
            word, i = _word(text, i)
            if word.text.isdigit() and i < n and text[i] in "<>" and i - start == len(word.text):
                continue  # a file descriptor number ("2>"): part of the redirection
            tokens.append(word)
    return tokens


def _skip_blanks(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \t":
        i += 1
    return i


def _skip_heredocs(text: str, i: int, heredocs: list[tuple[str, bool]]) -> int:
    """The index after the bodies of *heredocs*, which start at *i*."""
    for delimiter, strip in heredocs:
        while i < len(text):
            end = text.find("\n", i)
            line = text[i:] if end == -1 else text[i:end]
            i = len(text) if end == -1 else end + 1
            if (line.lstrip("\t") if strip else line) == delimiter:
                break
    return i


def _word(text: str, i: int) -> tuple[Word, int]:
    """The word starting at *i* and the index after it."""
    out: list[str] = []
    dynamic = pattern = False
    n = len(text)
    while i < n:
        c = text[i]
        if c in " \t\r" or c in _SPECIAL:
            break
        if c == "'":
            end = text.find("'", i + 1)
            if end == -1:
                raise Unparsable("unclosed '")
            out.append(text[i + 1:end])
            i = end + 1
        elif c == '"':
            i += 1
            while True:
                if i >= n:
                    raise Unparsable('unclosed "')
                c = text[i]
                if c == '"':
                    i += 1
                    break
                if c == "\\" and i + 1 < n and text[i + 1] in '"\\$`\n':
                    out.append(text[i + 1] if text[i + 1] != "\n" else "")
                    i += 2
                elif c in "$`":
                    dynamic = True
                    end = _expansion_end(text, i)
                    out.append(text[i:end])
                    i = end
                else:
                    out.append(c)
                    i += 1
        elif c == "\\":
            if i + 1 < n:
                out.append(text[i + 1])
            i += 2
        elif c in "$`":
            dynamic = True
            end = _expansion_end(text, i)
            out.append(text[i:end])
            i = end
        else:
            if c in "*?[" or (c == "~" and not out):
                pattern = pattern or c != "~"
                dynamic = dynamic or c == "~"
            out.append(c)
            i += 1
    return Word("".join(out), dynamic, pattern), i


def _expansion_end(text: str, i: int) -> int:
    """The index after the expansion at *i*: ``$(...)``, ``${...}``, ``$NAME``, or a
    backquoted command."""
    n = len(text)
    if text[i] == "`":
        end = text.find("`", i + 1)
        if end == -1:
            raise Unparsable("unclosed `")
        return end + 1
    if text.startswith("$(", i) or text.startswith("${", i):
        close = ")" if text[i + 1] == "(" else "}"
        depth, j, quote = 0, i + 1, ""
        while j < n:
            c = text[j]
            if quote:
                if c == quote:
                    quote = ""
            elif c in "'\"":
                quote = c
            elif c == text[i + 1]:
                depth += 1
            elif c == close:
                depth -= 1
                if depth == 0:
                    return j + 1
            j += 1
        raise Unparsable(f"unclosed {text[i:i + 2]}")
    j = i + 1
    if j < n and (text[j].isalnum() or text[j] == "_"):
        while j < n and (text[j].isalnum() or text[j] == "_"):
            j += 1
    elif j < n and text[j] in "@*#?$!-0123456789":
        j += 1
    return j


# -- commands -------------------------------------------------------------------------

class _Walker:
    """Walks a script's simple commands, keeping the directory each starts in."""

    def __init__(self, cwd: str | None) -> None:
        self.cwd = cwd
        self.depth = 0

    def script(self, text: str, here: str | None) -> list[str]:
        """Targets of *text*, whose commands start in *here* (relative to the start;
        None when a ``cd`` went somewhere we cannot tell)."""
        self.depth += 1
        if self.depth > 8:
            raise Unparsable("too deeply nested")
        found: list[str] = []
        words: list[Word] = []
        stack: list[str | None] = []
        tokens = tokenize(text)
        i = 0
        while i < len(tokens):
            tok = tokens[i]
            if isinstance(tok, Op) and tok.text in _REDIRECTS:
                if i + 1 >= len(tokens) or not isinstance(tokens[i + 1], Word):
                    raise Unparsable(f"{tok.text} without a file")
                target = tokens[i + 1]
                if tok.text in _WRITING and not (tok.text == ">&" and
                                                  (target.text.isdigit() or target.text == "-")):
                    found += self.place(target, here)
                i += 2
                continue
            if isinstance(tok, Op):
                if words:
                    here = self.run(words, here, found)
                    words = []
                if tok.text == "(":
                    stack.append(here)
                elif tok.text == ")" and stack:
                    here = stack.pop()  # a subshell's cd ends with it
            else:
                words.append(tok)
            i += 1
        if words:
            self.run(words, here, found)
        self.depth -= 1
        return found

    def run(self, words: list[Word], here: str | None, found: list[str]) -> str | None:
        """Add the targets of one simple command; the directory after it (``cd``)."""
        words = _unwrap(words)
        if not words:
            return here
        name = posixpath.basename(words[0].text)
        if name == "cd" and not words[0].dynamic:
            args = [w for w in words[1:] if w.text != "--"]
            if len(args) != 1 or args[0].dynamic or args[0].text.startswith("-") \
                    or here is None:
                return None  # home, the previous directory, or an expansion: unknown
            return args[0].text if posixpath.isabs(args[0].text) else \
                posixpath.normpath(posixpath.join(here, args[0].text))
        found += self.simple(words, here)
        return here

    def simple(self, words: list[Word], here: str | None) -> list[str]:
        words = _unwrap(words)
        if not words or words[0].dynamic:
            return []
        name = posixpath.basename(words[0].text)
        args = words[1:]
        if name in _SHELLS or name == "eval":
            script = _shell_script(args) if name != "eval" else \
                Word(" ".join(w.text for w in args), False, False)
            return self.script(script.text, here) if script is not None else []
        files = _targets_of(name, args, lambda w: self.is_dir(w, here))
        return [p for w in files for p in self.place(w, here)]

    def place(self, word: Word, here: str | None) -> list[str]:
        """Where the file *word* names is, as this walker reports paths."""
        if word.dynamic or not word.text or word.text.startswith(_DEVICES) \
                or word.text in ("-", "/dev/null"):
            return []
        path = word.text
        if not posixpath.isabs(path):
            if here is None:
                return []  # after a cd we cannot follow
            path = posixpath.normpath(posixpath.join(here, path))
            if self.cwd:
                path = posixpath.join(self.cwd, path) if path != "." else self.cwd
        if word.pattern:
            if not self.cwd and not posixpath.isabs(path):
                return []  # nowhere to expand it
            return sorted(glob.glob(path))
        return [path]

    def is_dir(self, word: Word, here: str | None) -> bool:
        if word.text.endswith("/"):
            return True
        placed = self.place(word, here)
        return len(placed) == 1 and (posixpath.isabs(placed[0]) or bool(self.cwd)) \
            and os.path.isdir(placed[0])


def _unwrap(words: list[Word]) -> list[Word]:
    """*words* without leading assignments, reserved words and wrappers (``sudo``,
    ``env``, ``nohup``, ``time`` …) and their options."""
    i = 0
    while i < len(words):
        w = words[i]
        if _ASSIGNMENT.match(w.text) and not w.text.startswith("="):
            i += 1
        elif w.text in _WRAPPERS and not w.dynamic:
            takes = _WRAPPERS[w.text]
            i += 1
            while i < len(words) and words[i].text.startswith("-") and words[i].text != "-":
                flag = words[i].text
                i += 1
                if flag == "--":
                    break
                if len(flag) == 2 and flag[1] in takes:
                    i += 1
            if w.text == "timeout" and i < len(words):
                i += 1  # the duration
            if w.text == "nice" and i < len(words) and words[i].text.lstrip("-+").isdigit():
                i += 1
        else:
            break
    return words[i:]


def _shell_script(args: list[Word]) -> Word | None:
    """The script of ``sh -c SCRIPT`` (options may be grouped: ``-lc``, ``-ec``)."""
    for i, w in enumerate(args):
        if w.text.startswith("-") and len(w.text) > 1 and not w.text.startswith("--"):
            if "c" in w.text[1:]:
                rest = [a for a in args[i + 1:] if not a.text.startswith("-")]
                return rest[0] if rest else None
        elif w.text.startswith("--") or w.text.startswith("+"):
            continue
        else:
            return None  # sh FILE: a script we do not read
    return None


def _operands(args: list[Word], takes: str = "", long_takes: tuple[str, ...] = ()
              ) -> tuple[list[Word], dict[str, str]]:
    """(the operands, the options given with their values) of a POSIX-style command
    line; *takes* lists the short options that take an argument."""
    operands: list[Word] = []
    options: dict[str, str] = {}
    i = 0
    while i < len(args):
        text = args[i].text
        i += 1
        if text == "--":
            operands += args[i:]
            break
        if text.startswith("--"):
            name, eq, value = text.partition("=")
            if not eq and name in long_takes and i < len(args):
                value, i = args[i].text, i + 1
            options[name] = value
        elif text.startswith("-") and len(text) > 1:
            for j, flag in enumerate(text[1:], 1):
                if flag in takes:
                    value = text[j + 1:]
                    if not value and i < len(args):
                        value, i = args[i].text, i + 1
                    options["-" + flag] = value
                    break
                options["-" + flag] = ""
        else:
            operands.append(args[i - 1])
    return operands, options


def _targets_of(name: str, args: list[Word], is_dir) -> list[Word]:
    """The file operands command *name* writes."""
    if name == "tee":
        return _operands(args)[0]
    if name in ("rm", "unlink", "shred"):
        return _operands(args, "nus" if name == "shred" else "")[0]
    if name == "touch":
        return _operands(args, "dtr", ("--date", "--reference"))[0]
    if name == "truncate":
        return _operands(args, "sr", ("--size", "--reference"))[0]
    if name == "dd":
        return [Word(a.text[3:], a.dynamic, a.pattern) for a in args if a.text.startswith("of=")]
    if name in ("sed", "gsed"):
        return _sed(args)
    if name in ("cp", "mv", "install", "ln"):
        if name == "ln":
            return []  # a link names a file; it does not write one we guard
        operands, options = _operands(args, "tSgmo" if name == "install" else "tS",
                                      ("--target-directory", "--suffix", "--backup"))
        return _copy_targets(operands, options, is_dir, move=name == "mv")
    if name == "git":
        return _git(args, is_dir)
    return []


def _sed(args: list[Word]) -> list[Word]:
    in_place = False
    script_given = False
    files: list[Word] = []
    i = 0
    while i < len(args):
        text = args[i].text
        i += 1
        if text == "--":
            files += args[i:]
            break
        if text.startswith("--"):
            name, eq, _ = text.partition("=")
            in_place |= name == "--in-place"
            if name in ("--expression", "--file"):
                script_given = True
                i += 0 if eq else 1
            elif name == "--line-length" and not eq:
                i += 1
        elif text.startswith("-") and len(text) > 1:
            for j, flag in enumerate(text[1:], 1):
                if flag == "i":
                    in_place = True
                    break  # the rest is the backup suffix
                if flag in "efl":
                    script_given |= flag in "ef"
                    if j == len(text) - 1:
                        i += 1
                    break
        else:
            files.append(args[i - 1])
    if not in_place:
        return []
    return files if script_given else files[1:]


def _copy_targets(operands: list[Word], options: dict[str, str], is_dir, *, move: bool
                  ) -> list[Word]:
    """What ``cp``/``mv``/``install`` write: the destination (a file in it per source
    when it is a directory) and, for ``mv``, the sources, which disappear."""
    directory = options.get("-t") or options.get("--target-directory")
    if directory is not None:
        sources, dest = operands, Word(directory, False, False)
    elif len(operands) < 2:
        return []
    else:
        sources, dest = operands[:-1], operands[-1]
    into = directory is not None or (("-T" not in options and "--no-target-directory"
                                      not in options) and (len(sources) > 1 or is_dir(dest)))
    out = list(sources) if move else []
    if dest.dynamic:
        return out
    if into:
        out += [Word(posixpath.join(dest.text, posixpath.basename(s.text.rstrip("/"))),
                     s.dynamic, s.pattern) for s in sources]
    else:
        out.append(dest)
    return out


def _git(args: list[Word], is_dir) -> list[Word]:
    i = 0
    while i < len(args) and args[i].text.startswith("-"):
        i += 2 if args[i].text in ("-C", "-c") else 1  # global options (-C: see below)
    if any(a.text == "-C" for a in args[:i]):
        return []  # another directory: its paths are not relative to ours
    if i >= len(args):
        return []
    sub, rest = args[i].text, args[i + 1:]
    if sub == "checkout":
        texts = [w.text for w in rest]
        return rest[texts.index("--") + 1:] if "--" in texts else []
    if sub == "restore":
        return _operands(rest, "s", ("--source", "--pathspec-from-file", "--conflict"))[0]
    if sub == "rm":
        return _operands(rest)[0]
    if sub == "mv":
        operands, options = _operands(rest)
        return _copy_targets(operands, options, is_dir, move=True)
    return []
