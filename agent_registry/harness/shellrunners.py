"""The shell gate's reading of package runners: programs that fetch or find another
program and run it with the words after it (``npx prettier --write F``, ``uvx ruff
format``, ``uv run black F``, ``poetry run``, ``pipx run``, ``pipenv run``, ``python -m
black``), so that the program's own rules (harness/shellrules.py, shelltools.py) read
what it writes.

A runner is read only as far as its options are known here, each by its whole name
(uv and poetry take no abbreviation): an option not in its table (it may take the next
word, or change where the command runs) leaves the runner the program, as before (the
backstop checks what it did).  What a runner runs is never
"reads only": the program it fetches by a name need not be the one of that name on the
machine (``npx sed`` runs the npm package ``sed``), so the backstop notes around it as
around a command with an assignment before it (shelltokens.unwrap).
"""
from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .shelltokens import Word  # the tokenizer imports this module: no import back

# options of a runner: (those taking the next word as their value, those that do not,
# those naming the folder the command runs in, those whose value is a command line a
# shell runs, those naming a Python module to run instead of a command)
_NPM = (("-p", "--package", "--cache", "--userconfig", "--registry", "--script-shell",
         "--shell", "--loglevel"),
        ("-y", "--yes", "--no", "--no-install", "-q", "--quiet", "--prefer-offline",
         "--prefer-online", "--offline", "--ignore-scripts", "--foreground-scripts"),
        (), ("-c", "--call"), ())
_UV_TAKES = ("--extra", "--no-extra", "--group", "--no-group", "--only-group",
             "--no-editable-package", "--env-file", "-w", "--with", "--with-editable",
             "--with-requirements", "--package", "--python-platform", "--index",
             "--default-index", "-i", "--index-url", "--extra-index-url", "-f",
             "--find-links", "--index-strategy", "--keyring-provider", "-P",
             "--upgrade-package", "--upgrade-group", "--resolution", "--prerelease",
             "--prerelease-package", "--fork-strategy", "--exclude-newer",
             "--exclude-newer-package", "--no-sources-package", "--reinstall-package",
             "--link-mode", "-C", "--config-setting", "--config-settings-package",
             "--no-build-isolation-package", "--no-build-package", "--no-binary-package",
             "--cache-dir", "--refresh-package", "-p", "--python", "--color",
             "--allow-insecure-host", "--project", "--config-file", "--from", "-c",
             "--constraints", "-b", "--build-constraints", "--overrides", "--torch-backend")
_UV_FLAGS = ("--all-extras", "--no-dev", "--only-dev", "--no-default-groups", "--all-groups",
             "--no-editable", "--exact", "--no-env-file", "--isolated", "--active",
             "--no-sync", "--locked", "--frozen", "--all-packages", "--no-project",
             "--no-index", "-U", "--upgrade", "--no-sources", "--reinstall",
             "--compile-bytecode", "--no-build-isolation", "--no-build", "--no-binary",
             "--require-build-hashes", "--no-require-build-hashes", "-n", "--no-cache",
             "--refresh", "--managed-python", "--no-managed-python",
             "--no-python-downloads", "-q", "--quiet", "-v", "--verbose", "--system-certs",
             "--offline", "--no-progress", "--no-config", "--lfs", "--native-tls")
_UV = (_UV_TAKES, _UV_FLAGS, ("--directory",), (), ("-m", "--module"))
_POETRY = (("-P", "--project"), ("-q", "--quiet", "--ansi", "--no-ansi", "-n",
                                 "--no-interaction", "--no-plugins", "--no-cache", "-v",
                                 "-vv", "-vvv", "--verbose"), ("-C", "--directory"), (), ())
_PIPX = (("--python-args", "--with", "--spec", "--python", "--fetch-python", "--index-url",
          "--pip-args", "--cooldown", "--backend"),
         ("--quiet", "-q", "--verbose", "-v", "--skip-maintenance", "--global", "--no-cache",
          "--refresh", "--no-path-check", "--path", "--pypackages", "--fetch-missing-python",
          "--system-site-packages", "--editable", "-e"), (), (), ())
_PIPENV = ((), ("--system",), (), (), ())
# a runner's name -> (the words of its subcommand that runs a command, its options);
# "" where the runner itself runs it
RUNNERS = {"npx": ("", _NPM), "bunx": ("", _NPM), "uvx": ("", _UV),
           "npm": (("exec", "x"), _NPM), "pnpm": (("dlx",), _NPM), "yarn": (("dlx",), _NPM),
           "bun": (("x",), _NPM), "uv": (("run", "tool run"), _UV),
           "poetry": (("run",), _POETRY), "pipx": (("run",), _PIPX),
           "pipenv": (("run",), _PIPENV)}
# Python's options that take the next word, and its one-letter flags
_PY_TAKES = frozenset("WX")
_PY_FLAGS = frozenset("bBdEhiIOPqsSuvx")
# modules run with -m whose command line is the program of that name (its rules apply)
MODULES = frozenset(("black", "ruff"))


def run(name: str, words: list[Word], i: int
        ) -> tuple[list[Word], int, Word | None] | None:
    """After the runner *name* at ``words[i - 1]``: (the words, where the command it runs
    starts in them, the folder it runs it in or None), or None when it is not read
    here (another subcommand, an option not known, no command)."""
    if name not in RUNNERS:  # python -m (shelltokens.python_like)
        return _python(words, i)
    subcommands, (takes, flags, chdir, shell, module) = RUNNERS[name]
    takes, flags = takes + chdir + shell, flags + module
    folder: Word | None = None
    if subcommands:  # the runner's own options, then the subcommand
        found = None
        while i < len(words) and found is None:
            if words[i].dynamic:
                return None
            for sub in subcommands:
                parts = sub.split()
                if [w.text for w in words[i:i + len(parts)]] == parts:
                    found, i = sub, i + len(parts)
                    break
            else:
                got = _option(words, i, takes, flags)
                if got is None or got[0] in chdir and got[1].dynamic:
                    return None  # not known here; a folder the shell computes
                option, value, i = got
                if option in chdir:
                    folder = joined(folder, value)
        if found is None:
            return None
    while i < len(words):
        w = words[i]
        if w.dynamic:
            return None
        if w.text == "--":
            i += 1
            break
        if not w.text.startswith("-") or w.text == "-":
            break
        got = _option(words, i, takes, flags)
        if got is None or got[0] in chdir and got[1].dynamic:
            return None
        option, value, i = got
        if option in chdir:
            folder = joined(folder, value)
        elif option in shell and value is not None:  # npx -c 'CMD …': a shell runs it
            return [_word(w, "sh"), _word(w, "-c"), value], 0, folder
        elif option in module:  # uv run -m MODULE ARGS
            if i >= len(words) or words[i].dynamic or words[i].text not in MODULES:
                return None
            return words, i, folder
    if i >= len(words) or words[i].dynamic:
        return None
    return words[:i] + [_word(words[i], _program(words[i].text))] + words[i + 1:], i, folder


def _option(words: list[Word], i: int, takes: tuple[str, ...], flags: tuple[str, ...]
            ) -> tuple[str, Word | None, int] | None:
    """(the option at *i*, its value, the index after them); None when it is not one of
    *takes* or *flags*."""
    text = words[i].text
    option, eq, given = text.partition("=")
    if option in takes:
        if eq:
            return option, _word(words[i], given, words[i].dynamic), i + 1
        return (option, words[i + 1], i + 2) if i + 1 < len(words) else None
    if option in flags and not eq:
        return option, None, i + 1
    if len(text) == 2 or text.startswith("--"):
        return None
    short = "-" + text[1:2]  # -pVALUE, a value attached to a short option
    if short in takes:
        return short, _word(words[i], text[2:], words[i].dynamic), i + 1
    return None


def joined(folder: Word | None, value: Word) -> Word:
    """The folder *value* names, from *folder* (nested runners' folders joined)."""
    if folder is None or value.text.startswith("/"):
        return value
    import posixpath
    return _word(value, posixpath.join(folder.text, value.text), folder.dynamic or value.dynamic)


def _word(like: Word, text: str, dynamic: bool = False) -> Word:
    """A word of *text*, made as *like* was (the tokenizer's type)."""
    return type(like)(text, dynamic, False)


def _program(spec: str) -> str:
    """The program a package spec runs: its name without a version, extras or scope
    (``prettier@3`` -> ``prettier``, ``@biomejs/biome`` -> ``biome``, ``black==24.1``)."""
    name = spec[1:].partition("/")[2] if spec.startswith("@") else spec
    for mark in ("@", "==", ">=", "<=", "~=", "[", "!="):
        name = name.partition(mark)[0]
    return name or spec


def _python(words: list[Word], i: int) -> tuple[list[Word], int, None] | None:
    """``python [OPTIONS] -m MODULE ARGS`` of a module in MODULES: (the words, where the
    module's name stands); None for anything else (a script, ``-c CODE``)."""
    while i < len(words):
        w = words[i]
        if w.dynamic or not w.text.startswith("-") or w.text in ("-", "--"):
            return None
        letters = w.text[1:]
        for j, letter in enumerate(letters):
            if letter == "m":
                rest = letters[j + 1:]
                name, at = (rest, i + 1) if rest else (
                    words[i + 1].text if i + 1 < len(words) and not words[i + 1].dynamic
                    else "", i + 2)
                if name not in MODULES:
                    return None
                return words[:at - 1] + [_word(w, name)] + words[at:], at - 1, None
            if letter in _PY_TAKES:
                i += 0 if letters[j + 1:] else 1
                break
            if letter not in _PY_FLAGS:
                return None
        i += 1
    return None
