"""What the (un)packers and archivers write, for harness/shellrules.py: gzip, bzip2, xz,
zstd and lzma (and their ``un…`` forms), ``tar`` and ``unzip``.  Imported only when a
command names one of them."""
from __future__ import annotations

from .shellops import operands, word
from .shelltokens import Word

SUFFIXES = {"gzip": ".gz", "bzip2": ".bz2", "xz": ".xz", "zstd": ".zst", "lzma": ".lzma"}
# the other names each unpacks (its own suffix first)
_UNPACKS = {"gzip": (".gz", "-gz", ".z", "-z", "_z", ".Z"), "bzip2": (".bz2", ".bz"),
            "xz": (".xz", ".lzma"), "zstd": (".zst",), "lzma": (".lzma",)}
# a packer's --format (-F): the suffix it writes then
_FORMATS = {"gzip": ".gz", "xz": ".xz", "lzma": ".lzma", "alone": ".lzma", "zstd": ".zst",
            "lz4": ".lz4"}
# each (un)packer -> the packer whose suffix it reads
PACKERS = {**{k: k for k in SUFFIXES}, "gunzip": "gzip", "bunzip2": "bzip2", "unxz": "xz",
           "unzstd": "zstd", "unlzma": "lzma"}
# the short names of a packed tar, unpacked to NAME.tar
_TARS = {"gzip": (".tgz", ".taz"), "bzip2": (".tbz2", ".tbz"), "xz": (".txz",),
         "zstd": (".tzst",), "lzma": (".tlz",)}
_PACKER_LONG = ("--suffix", "--threads", "--memlimit", "--memlimit-compress",
                "--memlimit-decompress", "--check", "--format", "--block-size",
                "--block-list", "--output-dir-flat", "--output-dir-mirror")
_NO_FILES = {"-c", "--stdout", "--to-stdout", "-l", "--list", "-t", "--test"}


def packed(name: str, args: list[Word]) -> list[Word]:
    """``gzip f`` replaces f with f.gz, ``gunzip f.gz`` f.gz with f (bzip2, xz, zstd and
    lzma alike): both names are written, the input only when it is removed (not with
    ``-k``; zstd keeps it unless ``--rm``); nothing with ``-c``, a listing or a test;
    ``-o FILE`` (zstd) or an output folder writes only there."""
    found, options = operands(args, "SoDTCMF", _PACKER_LONG)
    kind = PACKERS[name]
    keep = options.keys() & {"-k", "--keep"} or kind == "zstd" and "--rm" not in options
    inputs = [] if keep else found
    if options.keys() & _NO_FILES:
        return [word(options["-o"])] if "-o" in options else []
    elsewhere = options.get("-o") or options.get("--output-dir-flat") or \
        options.get("--output-dir-mirror")
    if elsewhere:
        return [word(elsewhere), *inputs]
    unpack = name != kind or options.keys() & {"-d", "--decompress", "--uncompress"}
    given_suffix = options.get("-S") or options.get("--suffix")
    form = _FORMATS.get(options.get("-F") or options.get("--format") or "")
    suffix = given_suffix or form or SUFFIXES[kind]
    known = (given_suffix,) if given_suffix else _UNPACKS[kind]
    out: list[Word] = []
    for given in found:
        text = given.text
        ends = next((k for k in known if text.endswith(k) and len(text) > len(k)), None)
        if not unpack:
            made = [text + suffix]
        elif ends:
            made = [text[:-len(ends)]]
        elif text.endswith(_TARS[kind]):
            made = [text.rpartition(".")[0] + ".tar"]
        elif kind == "bzip2":  # a name it does not know: NAME.out
            made = [text + ".out"]
        else:  # `gunzip g` unpacks g.gz into g
            made, given = [text], Word(text + suffix, given.dynamic, given.pattern)
        out += [Word(m, given.dynamic, given.pattern) for m in made]
        out += [] if keep else [given]
    return out


_TAR_TAKES = "fCXTbKNgVLFHI"
_TAR_LONG = ("--file", "--directory", "--exclude-from", "--files-from", "--exclude",
             "--blocking-factor", "--starting-file", "--newer", "--after-date",
             "--listed-incremental", "--label", "--tape-length", "--info-script",
             "--format", "--use-compress-program", "--owner", "--group", "--mode",
             "--mtime", "--transform", "--suffix")
_TAR_WRITES = {"-c", "-r", "-u", "-A", "--create", "--append", "--update",
               "--concatenate", "--catenate", "--delete"}


def tar(args: list[Word]) -> list[Word]:
    """What ``tar`` writes: the archive it creates, appends to or deletes from; the
    files ``--remove-files`` removes; and, extracting (not to the standard output or a
    command), the folder it extracts to: the files the archive names are all in it."""
    if args and not args[0].text.startswith("-"):  # old style: `tar cf a.tar src`
        letters, rest, args = args[0].text, args[1:], []
        for letter in letters:
            args.append(word("-" + letter))
            if letter in _TAR_TAKES and rest:
                args.append(rest.pop(0))
        args += rest
    found, options = operands(args, _TAR_TAKES, _TAR_LONG)
    out: list[Word] = []
    archive = options.get("-f") or options.get("--file")
    if options.keys() & _TAR_WRITES and archive and archive != "-":
        out.append(word(archive))
    snapshot = options.get("-g") or options.get("--listed-incremental")
    if snapshot and snapshot != "/dev/null":
        out.append(word(snapshot))  # the incremental dump's record, written each run
    if "--remove-files" in options:
        inside = options.get("-C") or options.get("--directory")
        out += [word(f"{inside}/{f.text}") if inside and not f.text.startswith("/") else f
                for f in found]
    if options.keys() & {"-x", "--extract", "--get"} and not options.keys() & {
            "-O", "--to-stdout", "--to-command"}:
        # the files the archive names, all in the folder it extracts to (GNU tar drops
        # a leading / and ../): that folder is written, and covers what is held in it
        out.append(word(options.get("-C") or options.get("--directory") or "."))
    return out


def unzip(args: list[Word]) -> list[Word]:
    """``unzip`` writes the files the archive names, all in the folder it extracts to
    (``-d DIR``, else here; it skips names with ``../``): that folder, unless it lists,
    tests, prints or shows the comment (``-l -t -p -c -v -Z -z``)."""
    letters = "".join(a.text[1:] for a in args if a.text.startswith("-")
                      and not a.text.startswith(("--", "-d")))
    if set(letters) & set("ltpcvZz"):
        return []
    folder = next((a.text[2:] or (args[i + 1].text if i + 1 < len(args) else ".")
                   for i, a in enumerate(args) if a.text.startswith("-d")), ".")
    return [word(folder)]
