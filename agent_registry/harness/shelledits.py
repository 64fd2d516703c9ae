"""The in-place editors and copiers harness/shellrules.py hands on, imported only for
them: ``sed -i``, ``perl -i``, ``ruby -i``, gawk's ``-i inplace``, ``ed`` and
``rsync``.  Each rule gets the command's words after its name (and a *place*, for
rsync's destination folder and gawk's program file) and returns the files it writes
as words.  What their programs write by name (awk's ``print > "f"``, ed's ``w f``, a
perl or ruby script) is not read here: the backstop checks it (docs/hooks.md)."""
from __future__ import annotations

import posixpath

from .shellops import Place, operands, word
from .shelltokens import Word, gnu_long

# GNU sed's long options: (sets in place, gives the script, takes the next word)
_SED_LONG = {"--in-place": (True, False, False), "--expression": (False, True, True),
             "--file": (False, True, True), "--line-length": (False, False, True)}
# all of GNU sed's long options: an unambiguous start of one is that one (getopt_long:
# `--in` is --in-place, `--f` is none, being --file's and --follow-symlinks')
_SED_NAMES = (*_SED_LONG, "--debug", "--follow-symlinks", "--help", "--null-data",
              "--zero-terminated", "--posix", "--quiet", "--silent", "--regexp-extended",
              "--sandbox", "--separate", "--unbuffered", "--version")
# ruby's long options that take the next word when not given with "="
_RUBY_LONG = dict.fromkeys(("--enable", "--disable", "--encoding", "--external-encoding",
                            "--internal-encoding", "--dump", "--backtrace-limit",
                            "--crash-report", "--parser"), (False, False, True))


def sed(args: list[Word]) -> list[Word]:
    """``sed -i`` edits its file operands in place (options anywhere on the line)."""
    return _in_place(args, ends="efl", next_word="efl", script="ef", long=_SED_LONG,
                     names=_SED_NAMES)


def perl(args: list[Word]) -> list[Word]:
    """``perl -i`` (``-pi``, ``-i.bak``, ``-lpi``, ``-0777pi``) edits its file operands in
    place (options before the first operand).  ``-l`` and ``-0`` take the digits after
    them only (``-l0pi`` is -l0, -p, -i); ``-F``, ``-V:`` the rest of the word."""
    return _in_place(args, ends="eEMmIdxCFV", next_word="eEI", script="eE", digits="l0",
                     options_first=True)


def ruby(args: list[Word]) -> list[Word]:
    """``ruby -i`` (``-pi``, ``-pi.bak``, ``-i -pe``) edits its file operands in place,
    as perl's; its ``-0``, ``-T``, ``-W`` take digits, ``-C``, ``-I``, ``-r``, ``-e``,
    ``-E`` a value (the next word when none follows), ``-F``, ``-K``, ``-x`` the rest;
    with ``-C DIR`` it runs in DIR, where its operands are."""
    files = _in_place(args, ends="CIreEFKx", next_word="CIreE", script="e", digits="0TW",
                      long=_RUBY_LONG, options_first=True)
    first = next((k for k, a in enumerate(args) if files and a is files[0]), 0)
    at = next((k for k, a in enumerate(args[:first]) if a.text.startswith("-C")), None)
    if at is None:
        return files
    folder = args[at].text[2:] or (args[at + 1].text if at + 1 < len(args) else "")
    return [w if posixpath.isabs(w.text) else word(posixpath.join(folder, w.text))
            for w in files]


def in_place(name: str, args: list[Word]) -> bool:
    """Does *name* with *args* edit the files it is handed (by xargs, find -exec)?"""
    handed = [*args, Word("handed-name", False, False)]
    if name in ("sed", "gsed"):
        return bool(sed(handed))
    if name == "perl":
        return bool(perl(handed))
    if name == "ruby":
        return bool(ruby(handed))
    return bool(awk(handed))


def _in_place(args: list[Word], *, ends: str, next_word: str, script: str,
              long: dict | None = None, names: tuple[str, ...] = (), digits: str = "",
              options_first: bool = False) -> list[Word]:
    """The files an in-place editor writes: its operands (the first is the script when
    no ``-e`` gave one), when ``-i`` is among its options.  A flag of *ends* ends its
    cluster (the rest is its value), one of *next_word* last in its cluster takes the
    next word, one of *script* gives the script, one of *digits* takes the digits after
    it (``0x`` and hex digits too; ``-W:`` the rest); *long*: what its long options do,
    each also by an unambiguous start among *names*, all of them."""
    in_place = script_given = False
    files: list[Word] = []
    i = 0
    while i < len(args):
        text = args[i].text
        i += 1
        if text == "--" and not (options_first and files):
            files += args[i:]
            break
        if long is not None and text.startswith("--") and not (options_first and files):
            name, eq, _ = text.partition("=")
            sets, gives, takes = long.get(gnu_long(name, names), (False, False, False))
            in_place |= sets
            script_given |= gives
            i += 1 if takes and not eq else 0
        elif text.startswith("-") and len(text) > 1 and not (options_first and files):
            j = 1
            while j < len(text):
                flag = text[j]
                j += 1
                if flag == "i":
                    in_place = True
                    break  # the rest is the backup suffix
                if flag in digits:
                    if text[j:j + 1] == ":":  # ruby's -W:category
                        break
                    hexa = flag == "0" and text[j:j + 1] in ("x", "X")
                    j += hexa
                    while j < len(text) and (text[j].isdigit() or hexa and
                                             text[j] in "abcdefABCDEF"):
                        j += 1
                    continue
                if flag in ends:
                    script_given |= flag in script
                    if flag in next_word and j == len(text):
                        i += 1
                    break
        else:
            files.append(args[i - 1])
    if not in_place:
        return []
    return files if script_given else files[1:]


# gawk's options (it stops at its first operand): those that take a value (the next word
# when none follows), those whose value may only follow in the same word, and the files
# these write when given no name
_AWK_TAKES = "fFvEileZW"
_AWK_OPTIONAL = "dDLop"
_AWK_LONG_TAKES = ("--assign", "--exec", "--field-separator", "--file", "--include",
                   "--load", "--source", "--locale")
_AWK_NAMES = (*_AWK_LONG_TAKES, "--bignum", "--characters-as-bytes", "--copyright", "--csv",
              "--debug", "--dump-variables", "--gen-pot", "--help", "--lint",
              "--no-optimize", "--non-decimal-data", "--optimize", "--persist", "--posix",
              "--pretty-print", "--profile", "--re-interval", "--sandbox", "--traditional",
              "--trace", "--use-lc-numeric", "--version")
_AWK_SHORT = {"f": "--file", "F": "--field-separator", "v": "--assign", "E": "--exec",
              "i": "--include", "l": "--load", "e": "--source", "Z": "--locale",
              "d": "--dump-variables", "D": "--debug", "L": "--lint", "o": "--pretty-print",
              "p": "--profile"}
_AWK_OUTPUTS = {"--dump-variables": "awkvars.out", "--pretty-print": "awkprof.out",
                "--profile": "awkprof.out"}
_ASSIGNMENT = r"[A-Za-z_][A-Za-z0-9_]*="


def awk(args: list[Word]) -> list[Word]:
    """gawk with ``-i inplace`` (``--include=inplace``, ``-i inplace.awk``, or an
    ``@include "inplace"`` in its program text) rewrites its file operands (not
    ``var=value`` ones); ``-d``, ``-o``, ``-p`` write their file (``awkvars.out``,
    ``awkprof.out`` when none is named).  A ``-f`` program file is not read: what it
    does is the backstop's to check, as any script's."""
    options: list[tuple[str, str]] = []
    i = 0
    while i < len(args):
        text = args[i].text
        if text == "--":
            i += 1
            break
        if not text.startswith("-") or text == "-":
            break
        i += 1
        if text.startswith("--"):
            name, eq, value = text.partition("=")
            name = gnu_long(name, _AWK_NAMES)
            if name in _AWK_LONG_TAKES and not eq and i < len(args):
                value, i = args[i].text, i + 1
            options.append((name, value))
            if name == "--exec":
                break  # its file is the program; the options end
            continue
        for j, flag in enumerate(text[1:], 2):
            if flag in _AWK_TAKES or flag in _AWK_OPTIONAL:
                value = text[j:]
                if not value and flag in _AWK_TAKES and i < len(args):
                    value, i = args[i].text, i + 1
                options.append(("--" + value.partition("=")[0] if flag == "W"
                                else _AWK_SHORT[flag], value.partition("=")[2]
                                if flag == "W" else value))
                break
    rest = args[i:]
    written = [word(value or _AWK_OUTPUTS[name]) for name, value in options
               if name in _AWK_OUTPUTS]
    sources = [value for name, value in options if name == "--source"]
    if not sources and not any(name in ("--file", "--exec") for name, _ in options) \
            and rest:
        sources, rest = [rest[0].text], rest[1:]
    included = [posixpath.basename(value) for name, value in options if name == "--include"]
    if not ({"inplace", "inplace.awk"} & set(included) or any("inplace" in s for s in sources)):
        return written
    import re
    return written + [w for w in rest if w.text != "-" and not re.match(_ASSIGNMENT, w.text)]


def ed(args: list[Word]) -> list[Word]:
    """``ed FILE`` (``red``): the file it edits, which its ``w`` writes (its commands,
    from its input, are not read: any of them may)."""
    found = operands(args, "p", ("--prompt",))[0]
    return [w for w in found[:1] if not w.text.startswith("!") and w.text != "-"]


_RSYNC_TAKES = ("--rsh", "--rsync-path", "--filter", "--exclude", "--exclude-from",
                "--include", "--include-from", "--files-from", "--temp-dir", "--partial-dir",
                "--backup-dir", "--suffix", "--compare-dest", "--copy-dest", "--link-dest",
                "--block-size", "--remote-option", "--modify-window", "--chmod", "--chown",
                "--usermap", "--groupmap", "--max-delete", "--max-size", "--min-size",
                "--max-alloc", "--timeout", "--contimeout", "--address", "--port",
                "--sockopts", "--bwlimit", "--log-file", "--log-file-format", "--out-format",
                "--password-file", "--write-batch", "--only-write-batch", "--read-batch",
                "--protocol", "--iconv", "--checksum-choice", "--cc", "--compress-choice",
                "--zc", "--compress-level", "--zl", "--skip-compress", "--info", "--debug",
                "--stop-after", "--stop-at", "--outbuf", "--checksum-seed", "--copy-as",
                "--early-input")


def _remote(w: Word) -> bool:
    """Is *w* another host's path (``host:path``, ``user@host::module``, ``rsync://``)?"""
    head = w.text.split("/", 1)[0]
    return ":" in head or w.text.startswith("rsync://")


def rsync(args: list[Word], place: Place) -> list[Word]:
    """What ``rsync`` writes here: a local destination (the file, or each source's name
    in it when it is a folder: the folder itself for a source whose contents are copied,
    ``dir/``, ``.``, or with ``--relative``), the local sources with
    ``--remove-source-files``, its ``--log-file``, ``--write-batch`` and
    ``--backup-dir``; nothing with ``--dry-run`` but its log."""
    found, options = operands(args, "efTBM@", _RSYNC_TAKES)
    out = [word(options[o]) for o in ("--log-file",) if options.get(o)]
    for batch in ("--write-batch", "--only-write-batch"):
        if options.get(batch):
            out += [word(options[batch]), word(options[batch] + ".sh")]
    if "-n" in options or "--dry-run" in options or len(found) < 2:
        return out
    sources, dest = found[:-1], found[-1]
    if "--remove-source-files" in options:
        out += [s for s in sources if not _remote(s)]
    if _remote(dest) or "--only-write-batch" in options:
        return out
    into = len(sources) > 1 or dest.text.endswith("/") or place.is_dir(dest)
    if not into or dest.dynamic:
        out.append(dest)
    for s in sources if into and not dest.dynamic else []:
        name = posixpath.basename(s.text.rstrip("/"))
        whole = s.text.endswith("/") or name in ("", ".", "..") or s.dynamic or s.pattern \
            or "-R" in options or "--relative" in options
        out.append(dest if whole else Word(posixpath.join(dest.text, name), False, False))
    backup = options.get("--backup-dir")
    if backup:
        out.append(word(backup if posixpath.isabs(backup) else posixpath.join(
            dest.text if into else posixpath.dirname(dest.text) or ".", backup)))
    return list({w.text: w for w in out}.values())
