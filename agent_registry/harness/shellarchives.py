"""What the (un)packers and archivers write, for harness/shellrules.py: gzip, bzip2, xz,
zstd and lzma (and their ``un…`` forms), ``tar`` and ``unzip``.  Imported only when a
command names one of them."""
from __future__ import annotations

from .shellops import Place, operands, word
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
# GNU tar's long options (1.34, and 1.35's --set-mtime-…): those that take a value (the
# next word when not given with "="), then the others; any unambiguous start of one is
# that one, as getopt_long reads them (`--remove-f`, `--extr`, `--fi=a.tar`, `--dir`)
_TAR_LONG = tuple(f"--{n}" for n in (
    "add-file after-date blocking-factor checkpoint-action directory exclude exclude-from "
    "exclude-ignore exclude-ignore-recursive exclude-tag exclude-tag-all exclude-tag-under "
    "file files-from format group group-map hole-detection index-file info-script label "
    "level listed-incremental mode mtime new-volume-script newer newer-mtime "
    "no-quote-chars owner owner-map pax-option quote-chars quoting-style record-size "
    "rmt-command rsh-command set-mtime-command set-mtime-format sort sparse-version "
    "starting-file strip-components suffix tape-length to-command transform "
    "use-compress-program volno-file warning xattrs-exclude xattrs-include xform").split())
_TAR_NAMES = (*_TAR_LONG, *(f"--{n}" for n in (
    "absolute-names acls anchored append atime-preserve auto-compress backup block-number "
    "bzip2 catenate check-device check-links checkpoint clamp-mtime compare compress "
    "concatenate confirmation create delay-directory-restore delete dereference diff "
    "exclude-backups exclude-caches exclude-caches-all exclude-caches-under exclude-vcs "
    "exclude-vcs-ignores extract force-local full-time get gunzip gzip hard-dereference "
    "help ignore-case ignore-command-error ignore-failed-read ignore-zeros incremental "
    "interactive keep-directory-symlink keep-newer-files keep-old-files list lzip lzma "
    "lzop multi-volume no-acls no-anchored no-auto-compress no-check-device "
    "no-delay-directory-restore no-ignore-case no-ignore-command-error no-null "
    "no-overwrite-dir no-recursion no-same-owner no-same-permissions no-seek no-selinux "
    "no-unquote no-verbatim-files-from no-wildcards no-wildcards-match-slash no-xattrs "
    "null numeric-owner occurrence old-archive one-file-system one-top-level overwrite "
    "overwrite-dir portability posix preserve preserve-order preserve-permissions "
    "read-full-records recursion recursive-unlink remove-files restrict same-order "
    "same-owner same-permissions seek selinux show-defaults show-omitted-dirs "
    "show-snapshot-field-ranges show-stored-names show-transformed-names skip-old-files "
    "sparse test-label to-stdout totals touch uncompress ungzip unlink-first unquote "
    "update usage utc verbatim-files-from verbose verify version wildcards "
    "wildcards-match-slash xattrs xz zstd").split()))
_TAR_WRITES = {"-c", "-r", "-u", "-A", "--create", "--append", "--update",
               "--concatenate", "--catenate", "--delete"}


def tar(args: list[Word], place: Place | None = None) -> list[Word]:
    """What ``tar`` writes: the archive it creates, appends to or deletes from; the
    files ``--remove-files`` removes; its ``--index-file`` and ``--volno-file``; and,
    extracting (not to the standard output or a command), the folder it extracts to:
    the files the archive names are all in it.  A long option by a start of several of
    its names, which tar refuses, is not followed (*place* is told)."""
    if args and not args[0].text.startswith("-"):  # old style: `tar cf a.tar src`
        letters, rest, args = args[0].text, args[1:], []
        for letter in letters:
            args.append(word("-" + letter))
            if letter in _TAR_TAKES and rest:
                args.append(rest.pop(0))
        args += rest
    found, options = operands(args, _TAR_TAKES, _TAR_LONG, _TAR_NAMES)
    unsure = [o for o in options if o.startswith("--") and o not in _TAR_NAMES
              and sum(n.startswith(o) for n in _TAR_NAMES) > 1]
    if unsure and place is not None:
        place.unfollowed(f"tar's option {unsure[0]} may be any of several")
    out: list[Word] = []
    archive = options.get("-f") or options.get("--file")
    if options.keys() & _TAR_WRITES and archive and archive != "-":
        out.append(word(archive))
    snapshot = options.get("-g") or options.get("--listed-incremental")
    if snapshot and snapshot != "/dev/null":
        out.append(word(snapshot))  # the incremental dump's record, written each run
    out += [word(options[o]) for o in ("--index-file", "--volno-file") if options.get(o)]
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
