"""The shell gate's rules for the tools agents run on files they were given
(harness/shellrules.py): formatters that rewrite them in place (``black``, ``ruff``,
``prettier``, ``eslint --fix``, ``gofmt -w``, ``clang-format -i``, ``rustfmt``,
``sponge``, ``go fmt``, ``cargo fmt``), and downloads into a file (``curl -o``,
``wget``).  Each writes its
operands only in the modes that write (not ``--check``, ``--diff``, a dry run, the
standard input); a folder operand stands for every file in it."""
import posixpath
import re

from .shellops import operands, word
from .shelltokens import TOP, Word


# formatters that rewrite the files and folders they are given: (the short options that
# take a value, the long ones that do, the options that make them write (None: they
# write unless told not to), those that keep them from writing, the folder they rewrite
# given no operand (None: none))
_FORMATTERS = {
    "black": ("lWtc", ("--line-length", "--target-version", "--include", "--exclude",
                       "--extend-exclude", "--force-exclude", "--stdin-filename",
                       "--workers", "--config", "--required-version", "--python-cell-magics",
                       "--line-ranges", "--enable-unstable-feature", "--code"),
              None, ("--check", "--diff", "-c", "--code", "--stdin-filename"), None),
    "prettier": ("", ("--config", "--ignore-path", "--plugin", "--parser", "--print-width",
                      "--tab-width", "--trailing-comma", "--arrow-parens", "--end-of-line",
                      "--log-level", "--loglevel", "--cache-location", "--stdin-filepath",
                      "--config-precedence", "--prose-wrap", "--quote-props",
                      "--cache-strategy", "--embedded-language-formatting",
                      "--html-whitespace-sensitivity", "--object-wrap", "--cursor-offset",
                      "--range-start", "--range-end"),
                 ("--write", "-w"), ("--stdin-filepath",), None),
    "eslint": ("cfo", ("--config", "--ext", "--parser", "--parser-options", "--rulesdir",
                       "--resolve-plugins-relative-to", "--plugin", "--rule", "--env",
                       "--global", "--ignore-path", "--ignore-pattern", "--format",
                       "--output-file", "--max-warnings", "--cache-location",
                       "--cache-strategy", "--fix-type", "--stdin-filename", "--flag",
                       "--concurrency", "--report-unused-disable-directives-severity",
                       "--print-config"),
               ("--fix",), ("--fix-dry-run", "--stdin"), "."),
    # Go's flags: a word each, one dash or two (-w, -r RULE, -local=PREFIX)
    **dict.fromkeys(("gofmt", "goimports"), ("", ("r", "local", "srcdir", "cpuprofile",
                                                  "memprofile", "memrate", "trace"),
                                             ("-w",), (), None)),
    # rustfmt also rewrites the module files a `mod` line pulls in: the operand's folder
    "rustfmt": ("", ("--edition", "--config-path", "--config", "--emit", "--color",
                     "--print-config", "--style-edition"), None, ("--check",), None),
    "sponge": ("", (), None, (), None),
}
# clang-format's options that may take their value as the next word
_CLANG_TAKES = ("style", "assume-filename", "lines", "offset", "length", "fallback-style",
                "cursor", "qualifier-alignment", "files", "ferror-limit")
# ruff's subcommands that write: `format` (unless --check or --diff), `check --fix`,
# `--fix-only`, `--add-noqa`; the options of both that take a value, its own before them
_RUFF_TAKES = ("--config", "--line-length", "--target-version", "--select", "--ignore",
               "--extend-select", "--exclude", "--extend-exclude", "--cache-dir",
               "--stdin-filename", "--output-format", "--output-file", "--per-file-ignores",
               "--extend-per-file-ignores", "--fixable", "--unfixable", "--extend-fixable",
               "--range", "--dependency", "--extension", "--target", "--python",
               "--add-noqa")


def formatted(name: str, args: list[Word]) -> list[Word]:
    """The files and folders a formatter rewrites in place: its operands (a folder: each
    file in it), when the options it is given make it write (``prettier --write``,
    ``eslint --fix``, ``gofmt -w``, ``clang-format -i``; ``black``, ``ruff format``,
    ``rustfmt`` but with ``--check`` or ``--diff``), what ``-o``/``--output-file`` names.
    ``clang-format``'s options are single words (``-style=file``)."""
    if name == "clang-format":  # LLVM's options: -opt=VALUE, or -opt VALUE for these
        found, i, given = [], 0, set()
        while i < len(args):
            text = args[i].text
            i += 1
            option = text.lstrip("-").partition("=")[0]
            if not text.startswith("-"):
                found.append(args[i - 1])
            elif "=" not in text and option in _CLANG_TAKES:
                i += 1
            given.add(option)
        return found if "i" in given and not given & {"n", "dry-run"} else []
    if name == "ruff":
        found, options = operands(args, "o", _RUFF_TAKES)  # the subcommand: the first
        command = found[0].text if found else ""
        found = found[1:]
        fixes = options.keys() & {"--fix", "--fix-only", "--add-noqa"} and \
            "--no-fix" not in options
        writes = "--stdin-filename" not in options and "--diff" not in options and (
            command == "format" and "--check" not in options or command == "check" and fixes)
        output = options.get("-o") or options.get("--output-file")
        return ([*found] or [word(".")] if writes else []) + ([word(output)] if output else [])
    takes, long_takes, writing, keeping, default = _FORMATTERS[name]
    if name in ("gofmt", "goimports"):  # flags until the first operand, as Go reads them
        i, given = 0, set()
        while i < len(args) and args[i].text.startswith("-") and args[i].text != "-":
            if args[i].text == "--":
                i += 1
                break
            flag, eq, value = args[i].text.lstrip("-").partition("=")
            if not eq or value in ("true", "1"):  # -w=false: not given
                given.add(flag)
            i += 1 if eq or flag not in long_takes else 2
        return [a for a in args[i:] if a.text != "-"] if "w" in given else []
    found, options = operands(args, takes, long_takes)
    output = options.get("-o") or options.get("--output-file")
    extra = [word(output)] if output else []
    if name == "eslint" and "--cache" in options:  # what it learned, for the next run
        extra.append(word(options.get("--cache-location") or ".eslintcache"))
    if writing is not None and not options.keys() & set(writing) or \
            options.keys() & set(keeping) or options.get("--emit") == "stdout":  # rustfmt's
        return extra
    found = [_glob_folder(a) if name in ("prettier", "eslint") else
             word(posixpath.dirname(a.text) or ".") if name == "rustfmt" else a
             for a in found if a.text != "-"]  # "-": the standard input, no file
    return [*found] + extra if found or default is None else [word(default), *extra]


# go's build flags that take the next word; cargo's options before its subcommand that do
_GO_TAKES = frozenset(("-C", "-mod", "-modfile", "-p", "-tags", "-overlay", "-pgo",
                       "-toolexec", "-gcflags", "-ldflags", "-asmflags", "-gccgoflags",
                       "-compiler", "-installsuffix", "-pkgdir", "-buildmode", "-buildvcs"))
_CARGO_TAKES = frozenset(("--color", "-Z", "--config", "-C"))


def built(name: str, args: list[Word]) -> list[Word]:
    """What ``go fmt`` and ``cargo fmt`` rewrite.  ``go [-C DIR] fmt [-C DIR] [FLAGS]
    [PACKAGES]``: each package's folder (``./…`` and ``../…``; with ``/...``, also those
    under it; a ``.go`` file, that file), an import path (which only Go resolves) the
    whole tree, none the command's folder; not with ``-n`` (Go's flags end at the first
    package).  ``cargo [+TOOLCHAIN] [OPTIONS] fmt``: the whole tree (it formats the crate
    or workspace it finds above the folder: from a subfolder, what is above), or the
    folder of ``--manifest-path``; not with ``--check`` or rustfmt's ``--emit stdout``."""
    i, where = 0, ""
    while i < len(args) and args[i].text != "fmt":  # the tool's own options
        text = args[i].text
        if not text.startswith(("-", "+")):
            return []  # another subcommand
        i += 1
        option, eq, value = text.partition("=")
        if option.lstrip("-") == "C" and name == "go":
            where, i = (value, i) if eq else (args[i].text if i < len(args) else "", i + 1)
        elif not eq and text in (_GO_TAKES if name == "go" else _CARGO_TAKES):
            i += 1
    if i >= len(args):
        return []
    args, top = args[i + 1:], word(TOP)
    if name == "go":
        j = 0
        while j < len(args) and args[j].text.startswith("-"):  # flags end at a package
            option, eq, value = args[j].text.partition("=")
            j += 1
            if option.lstrip("-") == "n" and (not eq or value in ("true", "1", "t", "T",
                                                                   "TRUE", "True")):
                return []
            if option.lstrip("-") == "C":
                where, j = (posixpath.join(where, value), j) if eq else (posixpath.join(
                    where, args[j].text if j < len(args) else ""), j + 1)
            elif not eq and "-" + option.lstrip("-") in _GO_TAKES:
                j += 1
        packages = [a.text for a in args[j:]]
        found = [top if not p.startswith(("./", "../", "/")) and p != "." and p != ".." and
                 not p.endswith(".go") else p[:-4] or "." if p.endswith("/...") else p
                 for p in packages or ["."]]
        return [f if f is top else word(posixpath.join(where, f) if where else f)
                for f in found]
    texts = [a.text for a in args]
    rustfmt = texts[texts.index("--") + 1:] if "--" in texts else []
    if "--check" in texts or any(t in ("--emit=stdout", "stdout") for t in rustfmt) or \
            {"--help", "-h", "--version"} & set(texts):
        return []
    options = operands(args, "p", ("--manifest-path", "--package", "--message-format"))[1]
    manifest = options.get("--manifest-path")
    if manifest is None or options.keys() & {"-p", "--package", "--all"}:
        return [top]  # the crate above the folder, a workspace's other members
    return [word(posixpath.dirname(manifest) or ".")]


def _glob_folder(operand: Word) -> Word:
    """A quoted glob prettier or eslint expands itself (``'src/**/*.js'``): the folder
    before its first pattern character, which holds every file it can match."""
    text = operand.text
    at = min((text.find(c) for c in "*?[{" if c in text), default=-1)
    if at < 0 or operand.pattern:
        return operand  # a name, or a glob the shell expanded
    return word(posixpath.dirname(text[:at]) or ".")


# curl's options that take a value (an unambiguous start of a long one is that one), the
# files those of _CURL_WRITES write, and options that take none
_CURL_TAKES = ("--output", "--header", "--data", "--data-raw", "--data-binary", "--request",
               "--user", "--user-agent", "--referer", "--cookie", "--cookie-jar", "--config",
               "--max-time", "--connect-timeout", "--write-out", "--proxy", "--form",
               "--upload-file", "--retry", "--range", "--dump-header", "--output-dir",
               "--trace", "--trace-ascii", "--stderr", "--libcurl", "--etag-save",
               "--etag-compare", "--hsts", "--alt-svc", "--url", "--cacert", "--cert",
               "--key", "--data-urlencode", "--json", "--limit-rate", "--max-filesize")
_CURL_WRITES = frozenset(("-D", "--dump-header", "-c", "--cookie-jar", "--trace",
                          "--trace-ascii", "--stderr", "--libcurl", "--etag-save", "--hsts",
                          "--alt-svc"))
_CURL_FLAGS = ("--remote-name", "--remote-name-all", "--globoff", "--silent", "--show-error",
               "--location", "--fail", "--insecure", "--verbose", "--include", "--head",
               "--compressed", "--create-dirs", "--remote-header-name", "--progress-bar")


def fetched(name: str, args: list[Word]) -> list[Word]:
    """The files a download writes (``-`` is the standard output): ``curl -o FILE``
    (``--output``), ``-O`` (each URL's last name), under ``--output-dir``, and the
    headers and cookies it keeps (``-D``, ``-c``); ``wget -O FILE``
    (``--output-document``), else each URL's last name (``index.html`` for none) under
    ``-P DIR``, the host's folder with ``-r``, and its log (``-o``, ``-a``)."""
    if name == "curl":
        every: list[tuple[str, str]] = []
        found, options = operands(args, "AbcCdDeEFHKmoPQrTuUwxXyYz", _CURL_TAKES,
                                  names=_CURL_TAKES + _CURL_FLAGS, every=every)
        formats = [v for k, v in every if k in ("-w", "--write-out")]
        if options.keys() & {"-K", "--config"} or any(f.startswith("@") for f in formats):
            return [word(TOP)]  # a file that may name what it writes: not read
        into = options.get("--output-dir") or ""
        out = [posixpath.join(into, v) for k, v in every if k in ("-o", "--output") and v]
        if options.keys() & {"-O", "--remote-name", "--remote-name-all"}:
            globbed = not options.keys() & {"-g", "--globoff"}
            urls = [u.text for u in found] + [v for k, v in every if k == "--url"]
            out += [posixpath.join(into, "#0" if globbed and re.search(r"[{\[]", u)
                                   else _last_name(u)) for u in urls]  # "http://" or not
        out += [v for k, v in every if k in _CURL_WRITES]
        out += [m.removeprefix(">>") for f in formats  # %output{>>F}: appended to F
                for m in re.findall(r"%output\{([^}]*)\}", f)]
        # "#1" in a name: the part of a URL's {a,b} or [1-9] each file takes: the folder
        # before it (a URL's glob with -O: the folder it writes into)
        out = [posixpath.dirname(o[:m.start()]) or "." if (m := re.search("#[0-9]", o))
               else o for o in out]
        return [word(o) for o in out if o and o != "-" and not o.endswith("/")]
    found, options = operands(args, "OoaPeUtTwQAR", (
        "--output-document", "--output-file", "--append-output", "--directory-prefix",
        "--user-agent", "--tries", "--timeout", "--wait", "--quota", "--header",
        "--user", "--password", "--execute"))
    out = [options.get(k) or "" for k in ("-o", "--output-file", "-a", "--append-output")]
    document = options.get("-O") or options.get("--output-document")
    if document:
        out.append(document)
    else:  # each URL's last name (or its host's folder, -r), under -P
        into = options.get("-P") or options.get("--directory-prefix") or ""
        for u in (u.text for u in found if "://" in u.text):
            last = _last_name(u, host=bool(options.keys() & {
                "-r", "--recursive", "-m", "--mirror"})) or "index.html"
            out.append(posixpath.join(into, last))
    return [word(o) for o in out if o and o != "-"]


def _last_name(url: str, host: bool = False) -> str:
    """The last name of *url*'s path (*host*: its host), as a download names its file; a
    URL that does not parse (``http://[::1/x``), the text after its last ``/``."""
    from urllib.parse import urlsplit
    try:
        parts = urlsplit(url if "://" in url else "http://" + url)
        return parts.netloc if host else posixpath.basename(parts.path)
    except ValueError:
        return url.rpartition("/")[2]
