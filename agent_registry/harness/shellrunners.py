"""The shell gate's reading of package runners: programs that fetch or find another
program and run it with the words after it (``npx prettier --write F``, ``uvx ruff
format``, ``uv run black F``, ``poetry run``, ``pipx run``, ``pipenv run``, ``python -m
black``), so that the program's own rules (harness/shellrules.py, shelltools.py) read
what it writes.

A runner is read only as far as its options are known here, each by its whole name
(uv and poetry take no abbreviation): an option not in its table (it may take the next
word, or change where the command runs) leaves the runner the program, as before (the
backstop checks what it did).  What a runner runs is never "reads only": the program
it fetches by a name need not be the one of that name on the machine (``npx sed`` runs
the npm package ``sed``), so the backstop notes around it (shelltokens.RUNNER).  The
tokenizer imports this module only for a command that starts with a runner.
"""
from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .shelltokens import Word  # the tokenizer imports this module: no import back


def _spec(takes: tuple = (), flags: tuple = (), chdir: tuple = (), shell: tuple = (),
          joins: tuple = (), module: tuple = (), quirks: tuple = ()) -> dict:
    """A runner's options: those taking the next word as their value, those that do
    not, those naming the folder the command runs in (the last one given counts), those
    whose value is a command line a shell runs (npx -c), those that make the command and
    its words one line a shell runs (pnpm dlx -c), those naming a Python module to run
    (uv run -m); and its *quirks*: "npm" (its yes/no options may take ``true``/``false``;
    a ``--`` after the command ends npm's own options, which it takes from the words
    before it: npm exec), "dashdash" (the same of a ``--`` after the command: poetry),
    "expands" (it expands ``$VAR`` in the words itself: a name it computes), "spec" (the
    command may be a package spec)."""
    return {"takes": takes + chdir + shell, "flags": flags + joins + module, "chdir": chdir,
            "shell": shell, "joins": joins, "module": module, "quirks": frozenset(quirks)}


# npm's options that run the command in another folder (a workspace's): not read
_NPM_MOVES = frozenset(("-w", "--workspace", "--workspaces", "--prefix", "-C",
                        "--include-workspace-root"))
_NPM_TAKES = ("--cache", "--userconfig", "--registry", "--script-shell", "--loglevel")
_NPM_FLAGS = ("-y", "--yes", "--no-install", "-q", "--quiet", "--prefer-offline",
              "--prefer-online", "--offline", "--ignore-scripts", "--foreground-scripts")
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
_UV = _spec(_UV_TAKES, _UV_FLAGS, chdir=("--directory",), module=("-m", "--module"),
            quirks=("spec",))
_BUN = _spec(("-p", "--package"), ("--bun", "--no-install", "--verbose", "--silent"),
             quirks=("spec",))
# a runner's name -> (the words of its subcommand that runs a command, "" where the
# runner itself runs it; its options)
RUNNERS = {
    # npx reads -p as --package (npm-cli's own reading of npx's words; it puts a -- before
    # the command, so a later one is the command's); npm exec reads -p as --parseable
    "npx": ("", _spec(("-p", "--package", *_NPM_TAKES), _NPM_FLAGS, shell=("-c", "--call"),
                      quirks=("spec",))),
    "npm": (("exec", "x"), _spec(("--package", *_NPM_TAKES), _NPM_FLAGS,
                                 shell=("-c", "--call"), quirks=("npm", "spec"))),
    "pnpm": (("dlx",), _spec(("--package", "--allow-build"), ("--silent", "-s"),
                             joins=("-c", "--shell-mode"), quirks=("spec",))),
    "yarn": (("dlx",), _spec(("-p", "--package"), ("-q", "--quiet"), quirks=("spec",))),
    "bunx": ("", _BUN), "bun": (("x",), _BUN),
    "uvx": ("", _UV), "uv": (("run", "tool run"), _UV),
    "poetry": (("run",), _spec(("-P", "--project"), (
        "-q", "--quiet", "--ansi", "--no-ansi", "-n", "--no-interaction", "--no-plugins",
        "--no-cache", "-v", "-vv", "-vvv", "--verbose"), chdir=("-C", "--directory"),
        quirks=("dashdash",))),
    "pipx": (("run",), _spec(
        ("--python-args", "--with", "--spec", "--python", "--fetch-python", "--index-url",
         "--pip-args", "--cooldown", "--backend"),
        ("--quiet", "-q", "--verbose", "-v", "--skip-maintenance", "--global", "--no-cache",
         "--refresh", "--no-path-check", "--pypackages", "--fetch-missing-python",
         "--system-site-packages", "--editable", "-e"), quirks=("spec",))),
    "pipenv": (("run",), _spec((), ("--system",), quirks=("expands",))),
}
# Python's options that take the next word, and its one-letter flags
_PY_TAKES = frozenset("WX")
_PY_FLAGS = frozenset("bBdEhiIOPqsSuvx")
# modules run with -m whose command line is the program of that name (its rules apply)
MODULES = frozenset(("black", "ruff"))


def run(name: str, words: list[Word], i: int
        ) -> tuple[list[Word], int, Word | None] | None:
    """After the runner *name* at ``words[i - 1]``: (the words, where the command it runs
    starts in them, the folder it runs it in or None), or None when it is not read
    here (another subcommand, an option not known, a value the shell computes, no
    command)."""
    if name not in RUNNERS:  # python -m (shelltokens.python_like)
        return _python(words, i)
    subcommands, spec = RUNNERS[name]
    if "expands" in spec["quirks"]:  # pipenv expands $VAR in its words: names computed
        words = words[:i] + [_word(w, w.text, True) if "$" in w.text else w
                             for w in words[i:]]
    folder: Word | None = None
    found, shell, joins, dashed = not subcommands, None, False, False
    while i < len(words) and (not found or words[i].text.startswith("-")):
        w = words[i]
        if w.dynamic:
            return None
        if found and w.text == "--":
            i, dashed = i + 1, True  # the runner's own: the words after are the command's
            break
        sub = next((sub for sub in subcommands if [x.text for x in words[i:i + len(
            sub.split())]] == sub.split()), None) if not found else None
        if sub is not None:
            found, i = True, i + len(sub.split())
            continue
        got = _option(words, i, spec)
        if got is None:
            return None
        option, value, i = got
        if option in spec["chdir"]:
            folder = value  # the last one counts, from where the runner started
        elif option in spec["shell"]:
            shell = value
        elif option in spec["joins"]:
            joins = True
        elif option in spec["module"]:  # uv run -m MODULE ARGS
            if i >= len(words) or words[i].dynamic or words[i].text not in MODULES:
                return None
            return words, i, folder
    if not found:
        return None
    if shell is not None:  # npx -c 'CMD …': a shell runs it
        return [_word(shell, "sh"), _word(shell, "-c"), shell], 0, folder
    if i >= len(words) or words[i].dynamic:
        return None
    rest = words[i + 1:]
    texts = [w.text for w in rest]
    if not dashed and ("npm" in spec["quirks"] or "dashdash" in spec["quirks"] and "--" in texts):
        # npm exec takes its options from the words after the command too, up to a --;
        # poetry those before a later --; both drop that --
        cut = texts.index("--") if "--" in texts else len(rest)
        before, j = [], 0
        while j < cut:
            if not rest[j].text.startswith("-"):
                before.append(rest[j])
                j += 1
                continue
            got = _option(rest, j, spec)
            if got is None and "dashdash" in spec["quirks"] and not _runners(rest[j].text, spec):
                before.append(rest[j])  # not poetry's: the command's
                j += 1
                continue
            if got is None and ("dashdash" in spec["quirks"] or rest[j].text.partition(
                    "=")[0] in _NPM_MOVES or rest[j].dynamic):
                return None  # poetry's by a start or in a cluster; npm's workspaces
            option, value, j = got if got is not None else ("", None, j + 1)
            if option in spec["chdir"]:
                folder = value
        rest = before + rest[cut + 1:]
    if joins:  # pnpm dlx -c: the command and its words, one line a shell runs
        line = " ".join(w.text for w in [words[i], *rest])
        return [_word(words[i], "sh"), _word(words[i], "-c"), _word(words[i], line)], 0, folder
    program = _program(words[i].text) if "spec" in spec["quirks"] else words[i].text
    if program is None:
        return None
    return words[:i] + [_word(words[i], program)] + rest, i, folder


def _runners(text: str, spec: dict) -> bool:
    """Might *text* be one of the runner's options, as poetry reads them (a long one also
    by its start, short ones in a cluster; -h and -V too)?"""
    names = (*spec["takes"], *spec["flags"], "--help", "--version", "-h", "-V")
    if text.startswith("--"):
        return any(name.startswith(text.partition("=")[0]) for name in names)
    return any(len(name) == 2 and name[1] == text[1:2] for name in names)


def _option(words: list[Word], i: int, spec: dict) -> tuple[str, Word | None, int] | None:
    """(the option at *i*, its value, the index after them); None when it is not one of
    the runner's, or its value is one the shell computes."""
    text = words[i].text
    if not text.startswith("-"):
        return None
    option, eq, given = text.partition("=")
    takes, flags = spec["takes"], spec["flags"]
    if option in takes:
        if eq:
            value = _word(words[i], given, words[i].dynamic)
        elif i + 1 < len(words):
            value, i = words[i + 1], i + 1
        else:
            return None
        return (option, value, i + 1) if not value.dynamic else None
    if option in flags and not eq:
        if "npm" in spec["quirks"] and i + 1 < len(words) and \
                words[i + 1].text in ("true", "false"):
            i += 1  # npm reads a yes/no option's next word true or false as its value
        return option, None, i + 1
    if len(text) == 2 or text.startswith("--") or "-" + text[1:2] not in takes:
        return None
    return "-" + text[1:2], _word(words[i], text[2:], words[i].dynamic), i + 1  # -pVALUE


def _word(like: Word, text: str, dynamic: bool = False) -> Word:
    """A word of *text*, made as *like* was (the tokenizer's type)."""
    return type(like)(text, dynamic, False)


def _program(spec: str) -> str | None:
    """The program a package spec runs: its name without a version, extras or scope
    (``prettier@3`` -> ``prettier``, ``@biomejs/biome`` -> ``biome``, ``black==24.1``);
    None for a spec that is a URL, a git remote, a file or a path (any program)."""
    name = spec[1:].partition("/")[2] if spec.startswith("@") else spec
    if ":" in name or "/" in name or name.startswith("."):
        return None
    for mark in ("@", "==", ">=", "<=", "~=", "[", "!="):
        name = name.partition(mark)[0]
    return name or None


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
