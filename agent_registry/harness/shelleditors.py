"""The text editors harness/shellrules.py hands on, imported only for them: vi, vim, nvim,
ex (and their view, vimdiff, rvim … names) and emacs.  Each may write every file it is
given: their commands (``-c wq``, ``+wq``, ``-f save-buffer``) or the keys they read
from their input decide, and those are not read here (docs/hooks.md)."""
from __future__ import annotations

import posixpath

from .shellops import Place, word
from .shelltokens import Word, gnu_long

# vim's and nvim's short options that take the next word (-s: only when not in Ex mode;
# -w: unless digits follow, its window height; -c: unless its command follows)
_VIM_TAKES = "cSiTuUWws"
# their long options that take the next word
_VIM_LONG_TAKES = ("--cmd", "--startuptime", "--log", "--servername", "--remote-send",
                   "--remote-expr", "--listen", "--server", "--socketid", "--windowid",
                   "--role", "--gui-dialog-file")


def vim(name: str, args: list[Word], place: Place) -> list[Word]:
    """What vi, vim, nvim or ex may write: each file it edits (its operands, read with or
    without ``-c``/``+CMD``/``-e``/``-s``/``--headless``: in a tool call it has no
    terminal and takes its keys from its input, a pipe or here-document that may say
    ``:wq``), the ``-w``/``-W`` script it writes, its ``-i`` viminfo (shada),
    ``--startuptime`` and ``--log`` files and a ``-V`` log.  The files ``-t TAG`` or
    ``-q ERRORFILE`` take it to are not named: *place* is told."""
    exmode = name == "ex"
    out: list[Word] = []
    i = 0
    while i < len(args):
        text = args[i].text
        i += 1
        if text == "--":
            out += [a for a in args[i:] if a.text != "-"]
            break
        if text.startswith("+") or text == "-":
            continue  # +CMD, +N, +/pat: a command; -: the text from its input
        if text.startswith("--"):
            option, eq, _ = text.partition("=")
            if option in ("--startuptime", "--log") and not eq and i < len(args):
                out.append(args[i])
            i += option in _VIM_LONG_TAKES and not eq
            continue
        if not text.startswith("-"):
            out.append(args[i - 1])
            continue
        for j, flag in enumerate(text[1:], 2):
            rest = text[j:]
            exmode |= flag in "eE"
            if flag == "l" and name == "nvim":  # -l SCRIPT ARGS: a lua script's
                return out
            if flag == "V":  # -V[N][FILE]: its log
                out += [word(rest.lstrip("0123456789"))] if rest.lstrip("0123456789") else []
                break
            if flag in "tq":  # -t TAG, -tTAG, -q [ERRORFILE]
                place.unfollowed(f"{name} -{flag} edits files we cannot see")
                i += not rest
                break
            if flag in "opOw" and rest[:1].isdigit() or flag == "c" and rest:
                break  # -o2, -w40: a count; -c{command}
            if flag in _VIM_TAKES and not (flag == "s" and exmode):
                if flag in "wWi" and i < len(args) and (flag != "i" or args[i].text != "NONE"):
                    out.append(args[i])  # its script out, its viminfo (shada)
                i += 1
                break
    return out


# emacs's options that take the next word (a long one also by an unambiguous start);
# those naming a file it visits
_EMACS_TAKES = ("-t", "-d", "-display", "-u", "-user", "-L", "-directory", "-l", "-load",
                "-f", "-funcall", "-eval", "-execute", "-find-file", "-visit", "-file",
                "-insert", "-script", "-x", "-scriptload", "-chdir", "-init-directory",
                "-dump-file", "-seccomp", "-bg", "-fg", "-bd", "-bw", "-ib", "-fn", "-T",
                "-name", "-cr", "-ms", "-lsp", "-xrm", "-parent-id", "-geometry", "-g")
_EMACS_LONG = ("--terminal", "--display", "--user", "--directory", "--load", "--funcall",
               "--eval", "--execute", "--find-file", "--visit", "--file", "--insert",
               "--script", "--chdir", "--init-directory", "--dump-file", "--seccomp",
               "--background-color", "--foreground-color", "--border-color",
               "--border-width", "--internal-border", "--font", "--title", "--name",
               "--cursor-color", "--mouse-color", "--line-spacing", "--xrm", "--parent-id",
               "--geometry", "--color")
_EMACS_NAMES = (*_EMACS_LONG, *(f"--{n}" for n in (
    "version no-window-system no-windows batch daemon bg-daemon fg-daemon help "
    "no-loadup no-site-lisp no-build-details quick no-init-file no-x-resources "
    "no-site-file no-comp-spawn debug-init iconic basic-display no-blinking-cursor "
    "no-bitmap-icon reverse-video fullscreen fullheight fullwidth maximized "
    "no-splash no-desktop kill vertical-scroll-bars").split()))
_EMACS_VISITS = ("-find-file", "-visit", "-file", "--find-file", "--visit", "--file")


def emacs(args: list[Word]) -> list[Word]:
    """What emacs may write: each file it visits (its operands and ``--file``,
    ``--find-file``, ``--visit``; in ``--chdir DIR``), which ``-f save-buffer`` or any
    ``--eval`` writes, ``--batch`` or not."""
    files: list[Word] = []
    folder = ""
    i = 0
    while i < len(args):
        text = args[i].text
        i += 1
        if text == "--":
            files += args[i:]
            break
        if text.startswith("+") or text == "-":
            continue  # +LINE[:COLUMN] before a file
        if not text.startswith("-"):
            files.append(args[i - 1])
            continue
        option, eq, value = text.partition("=")
        if option.startswith("--"):
            option = gnu_long(option, _EMACS_NAMES)
        if option in _EMACS_TAKES or option in _EMACS_LONG:
            if not eq:
                value, i = (args[i].text if i < len(args) else ""), i + 1
            if option in _EMACS_VISITS:
                files.append(word(value))
            elif option in ("-chdir", "--chdir"):
                folder = value
    return [w if not folder or posixpath.isabs(w.text) else word(posixpath.join(
        folder, w.text)) for w in files]
