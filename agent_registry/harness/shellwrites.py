"""Which files a shell command writes, for the gate before an agent's shell tool.

The common write forms are read (harness/shellrules.py, harness/gitwrites.py):
redirections (``>``, ``>>``, ``>|``, ``&>``, ``2>``, ``<>``), ``tee``, ``sed -i``,
``perl -i``, ``cp``/``mv``/``install``/``ln`` (the destination; for ``mv`` the sources
too), ``rm``/``unlink``/``touch``/``truncate``, ``dd of=``, ``patch``, git's path and
whole-tree forms, through ``;``, ``&&``, ``||``, ``|``, newlines, here-documents,
subshells, ``cd``/``pushd DIR`` (later relative names are under DIR), ``bash -c``/``sh
-c``/``eval`` scripts, the commands inside ``$(…)``, backquotes and process substitution,
brace forms, and variables given a plain value earlier in the command (``f=a; echo >
$f``).  The root of the working tree (``git restore .`` at the top) is a target like any
folder; ``TOP`` (``:/``) is the whole tree wherever the command runs.

What it cannot follow inside a command that writes (a name the shell computes, names
xargs or ``find -exec`` hand a writer, a patch it cannot read, a command it cannot
tokenize) is returned as ``unfollowed``: the gate refuses such a command while a path
is held (fail closed), and the backstop (harness/backstop.py) checks what any command
really changed.  Standard library only; no shell is ever run.
"""
import os
import posixpath

from .shellreads import reads_only
from .shelltokens import (TOP, Op, Unparsable, Word, expand_braces, runuser_command,
                          shell_args, su_command, tokenize, unwrap)

__all__ = ["Targets", "read_writes", "write_targets", "tokenize", "TOP"]

MAX_COMMAND = 256 * 1024  # characters of a command the gate reads; a longer one is not
MAX_DEPTH = 8  # scripts inside scripts (sh -c, $(…)) read at most
_REDIRECTS = {">", ">>", ">|", "&>", "&>>", "<>", ">&", "<", "<&", "<<", "<<-", "<<<"}
_WRITING = {">", ">>", ">|", "&>", "&>>", "<>", ">&"}
_DEVICES = ("/dev/", "/proc/self/fd/")  # as written and normalised (/dev/../x is no device)
_CWD = "/proc/self/cwd/"  # the shell's own directory: a relative name
# compiled (and re imported) where first used: a command with no assignment nor variable
# (most) needs no re, which the gate of every shell call would import (issue 35)
_NAME_VALUE = r"(?s)([A-Za-z_][A-Za-z0-9_]*)(\+?)=(.*)"
# commands giving variables values not followed here: after one, no value known is kept
_BINDERS = {"for", "select", "read", "mapfile", "readarray", "getopts", "unset", "source", "."}
_VARIABLE = r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))"
# the commands harness/shellrules.py has a rule for (its RULES: tests/test_shellwrites.py);
# any other writes none of its operands, read without importing the rules (issue 35)
RULED = frozenset({"tee", "rm", "unlink", "shred", "touch", "truncate", "dd", "sed", "gsed",
                   "perl", "cp", "mv", "install", "ln", "patch", "xargs", "find", "git", "chmod",
                   "chown", "chgrp", "sort", "tar", "unzip", "parallel", *"gzip gunzip bzip2 "
                   "bunzip2 xz unxz zstd unzstd lzma unlzma black ruff prettier eslint gofmt "
                   "goimports clang-format rustfmt sponge go cargo curl wget ruby awk gawk ed red "
                   "rsync emacs vi vim nvim ex view vimdiff rvim rview gvim vim.tiny vim.basic "
                   "vim.nox".split()})
_SHELLS = {"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash"}
_SU = {"su", "runuser"}  # a shell as another user: its -c command
# what may run a cd in the shell itself (another wrapper runs the cd program, or a
# coprocess: the shell's folder stays)
_CD_BEFORE = {"cd", "pushd", "popd", "command", "builtin", "time", "!", "if", "elif",
              "then", "else", "while", "until", "do", "{"}
# an expansion that makes bash evaluate text as code: a prompt expansion (`${_@P}`), an
# indirection, an arithmetic one or an array subscript naming a value a reader set
_EVALUATING = ("@P", "${!", "$[", "$((")
_DECLARE = {"export", "local", "declare", "typeset", "readonly"}


def _evaluating(texts: list[str | None]) -> bool:
    """Does any of *texts* (words, a here-document's body) make bash evaluate a value as
    code (``_EVALUATING``, or an array subscript ``${a[…]}``)?"""
    return any(t and (any(e in t for e in _EVALUATING) or "${" in t and "[" in t)
               for t in texts)


class Targets(list):
    """The files a command writes, what it could not follow (``unfollowed``: why, each
    once), and whether it only runs programs that write no file (``reads_only``: the
    backstop need not note the held files around it)."""

    def __init__(self, paths=(), unfollowed=(), reads_only: bool = False) -> None:
        super().__init__(paths)
        self.unfollowed: list[str] = list(dict.fromkeys(unfollowed))
        self.reads_only = reads_only and not paths and not self.unfollowed


def write_targets(command: str | list[str], cwd: str | None = None) -> list[str]:
    """The files *command* (a shell string, or an argv list) would write, in order, once
    each.  Relative names are joined with *cwd* when given (and globs expanded there),
    else returned relative to where the command starts."""
    return list(read_writes(command, cwd))


def read_writes(command: str | list[str], cwd: str | None = None) -> Targets:
    """:func:`write_targets` and what the command writes that could not be followed."""
    walker = _Walker(cwd)
    try:
        if isinstance(command, (list, tuple)):
            words = [Word(str(a), False, False) for a in command]
            if sum(len(w.text) for w in words) > MAX_COMMAND:
                raise Unparsable("a command too long to read")
            found = walker.simple(words, ".")
        else:
            if len(str(command)) > MAX_COMMAND:
                raise Unparsable("a command too long to read")
            found = walker.script(str(command), ".")
    except (Unparsable, RecursionError) as exc:
        return Targets([], [f"{exc}" if isinstance(exc, Unparsable) else "too deeply nested"])
    return Targets(dict.fromkeys(p for p in found if p), walker.notes, not walker.runs_writer)


class _Walker:
    """Walks a script's simple commands, keeping the directory each starts in and the
    plain values its variables were given."""

    def __init__(self, cwd: str | None) -> None:
        self.cwd = cwd
        self.depth = 0
        self.vars: dict[str, str | None] = {}  # None: set to something we cannot tell
        self.dirs: list[str | None] = []  # pushd's stack
        self.notes: list[str] = []
        self.runs_writer = False  # a program not known to write no file was seen
        self.env_set = False  # an assignment seen: what git's config says may differ
        self.git_runs = 0  # git processes asked (shellplace.Here.git, at most GIT_RUNS)

    def unfollowed(self, why: str) -> None:
        self.notes.append(why)

    def script(self, text: str, here: str | None) -> list[str]:
        """Targets of *text*, whose commands start in *here* (relative to the start;
        None when a ``cd`` went somewhere we cannot tell)."""
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise Unparsable("too deeply nested")
        found: list[str] = []
        words: list[Word] = []
        stack: list[str | None] = []
        stdin: Word | None = None
        tokens = tokenize(text)
        i = 0
        while i < len(tokens):
            tok = tokens[i]
            if isinstance(tok, Op) and tok.text in _REDIRECTS:
                if i + 1 >= len(tokens) or not isinstance(tokens[i + 1], Word):
                    raise Unparsable(f"{tok.text} without a file")
                target = tokens[i + 1]
                found += self.inner(target, here)
                if tok.text in _WRITING and not (tok.text == ">&" and
                                                  (target.text.isdigit() or target.text == "-")):
                    # bash calls a brace form here ambiguous, zsh writes each name,
                    # dash the name as written: all of them
                    for name in self.expanded([target]) + ([target] if target.brace else []):
                        found += self.place(name, here)
                elif tok.text in ("<", "<>", "<<", "<<-"):
                    stdin = target  # a here-document: its body, which a shell reads
                elif tok.text == "<<<":
                    stdin = Word(target.text, target.dynamic, False, body=target.text)
                i += 2
                continue
            if isinstance(tok, Op):
                if words:
                    here = self.run(words, here, found, stdin)
                    words, stdin = [], None
                if tok.text == "(":
                    stack.append((here, dict(self.vars)))
                elif tok.text == ")" and stack:
                    here, self.vars = stack.pop()  # a subshell's cd and values end with it
            else:
                words.append(tok)
            i += 1
        if words:
            self.run(words, here, found, stdin)
        self.depth -= 1
        return found

    def inner(self, word: Word, here: str | None) -> list[str]:
        """The targets of the commands inside *word*'s expansions (each a subshell)."""
        return [p for sub in word.subs for p in self.apart(sub, here)]

    def apart(self, text: str, here: str | None) -> list[str]:
        """:meth:`script` of *text* run by another shell or a subshell."""
        kept = dict(self.vars)  # (a script it cannot read ends the whole reading)
        found, self.vars = self.script(text, here), kept
        return found

    def run(self, words: list[Word], here: str | None, found: list[str],
            stdin: Word | None = None) -> str | None:
        """Add the targets of one simple command; the directory after it (``cd``)."""
        for w in words:
            found += self.inner(w, here)
        words = self.expanded(words)
        self.forget(words)
        if self.assigned(words):  # a value the commands after it may take (PAGER=…)
            self.runs_writer = self.env_set = True
            return here
        bare = unwrap(words)[0]
        if not bare:  # what the wrappers write all the same (strace -o F -p PID)
            found += self.simple(words, here, stdin)
            return here
        if not self.runs_writer and _evaluating(
                [w.text for w in words if w.dynamic] + [stdin.body if stdin else None]):
            self.runs_writer = True  # `echo '$(cmd)'; echo ${_@P}`: code from a value
        name = posixpath.basename(bare[0].text)
        if name in ("cd", "pushd", "popd") and not bare[0].dynamic:
            at = next((k for k, w in enumerate(words) if w is bare[0]), None)
            if at is not None and all(posixpath.basename(w.text) in _CD_BEFORE or "=" in
                                      w.text for w in words[:at]):
                return self.moved(name, bare[1:], here)
            return here  # `nohup cd src`, `coproc cd src`: not the shell's folder
        found += self.simple(words, here, stdin)
        return here

    def moved(self, name: str, args: list[Word], here: str | None) -> str | None:
        """Where ``cd``/``pushd``/``popd`` leave the commands after them."""
        if name == "popd":
            return self.dirs.pop() if self.dirs else None
        args = [w for w in args if w.text != "--"]
        if len(args) != 1 or args[0].dynamic or args[0].text.startswith(("-", "+")) \
                or here is None:
            return None  # home, the previous directory, or an expansion: unknown
        if name == "pushd":
            self.dirs.append(here)
        return args[0].text if posixpath.isabs(args[0].text) else \
            posixpath.normpath(posixpath.join(here, args[0].text))

    def forget(self, words: list[Word]) -> None:
        """Forget every value known when *words* may give a variable one not followed here
        (``${NAME:=…}``, a loop, ``read``, ``printf -v``, ``declare -n`` …)."""
        texts = [w.text for w in words] if self.vars else []  # usually none is known
        if any(t in _BINDERS or ("${" in t and "=" in t) for t in texts) or \
                ("printf" in texts and any(t.startswith("-v") for t in texts)) or \
                (texts and texts[0] in _DECLARE and any(t.startswith("-") for t in texts)):
            self.vars = dict.fromkeys(self.vars)

    def assigned(self, words: list[Word]) -> bool:
        """Remember ``NAME=VALUE`` and ``NAME+=VALUE`` (alone, or after export, local …);
        whether *words* were only that."""
        rest = words[1:] if words and words[0].text in _DECLARE else words
        named = [w for w in rest if not w.text.startswith("-")]
        if not named or not all("=" in w.text for w in named):
            return False
        import re
        pairs = [re.fullmatch(_NAME_VALUE, w.text) for w in named]
        if not all(pairs):
            return False
        typed = len(named) < len(rest)  # declare -n (a nameref), -a, -i …: not a plain value
        for match, w in zip(pairs, named):
            name, append, raw = match.groups()
            value = None if typed else self.resolved(Word(raw, w.dynamic, w.pattern))
            before = self.vars.get(name) if append else ""  # +=: known only if both are
            self.vars[name] = before + value.text if value is not None and before is not None \
                else None
        return True

    def resolved(self, word: Word) -> Word | None:
        """*word* with its variables replaced by the plain values they were given; None
        when it depends on anything else ($(…), $1, a variable we cannot tell)."""
        if not word.dynamic:
            return word
        if word.text.startswith("~"):
            return Word(os.path.expanduser(word.text), False, word.pattern)
        unknown = []

        def value(match) -> str:  # an re.Match
            found = self.vars.get(match.group(1) or match.group(2))
            if found is None or any(c in found for c in " \t\n"):
                unknown.append(match.group(0))  # unknown, or split into words unquoted
            return found or ""
        import re
        text = re.sub(_VARIABLE, value, word.text)
        if unknown or "$" in text or "`" in text or word.process:
            return None
        return Word(text, False, word.pattern)

    def expanded(self, words: list[Word]) -> list[Word]:
        """*words* with their brace forms expanded, as the shell does first."""
        out: list[Word] = []
        for w in words:
            if w.brace and not w.process:
                out += [Word(t, w.dynamic, w.pattern, w.subs) for t in expand_braces(w.text)]
            else:
                out.append(w)
        return out

    def simple(self, words: list[Word], here: str | None, stdin: Word | None = None
               ) -> list[str]:
        words, chdir, outputs, assigns = unwrap(words)
        written = [p for w in outputs for p in self.place(w, here)]  # `time -o FILE`
        if assigns and words:  # `PAGER=… git log`, `LD_PRELOAD=… ls`: not just a reader;
            self.runs_writer = True  # nor what `npx NAME` fetches (no environment set)
            self.env_set = self.env_set or assigns is True
        if not words:
            return written
        if chdir is not None:  # `env -C DIR`, `sudo -D DIR`: the command runs there
            here = self.moved("cd", [chdir], here)
        return written + self._command(words, here, stdin)

    def _command(self, words: list[Word], here: str | None, stdin: Word | None
                 ) -> list[str]:
        """:meth:`simple` of *words* without their wrappers."""
        first = self.resolved(words[0])
        if first is None:
            self.runs_writer = True
            return []  # a command the shell computes: the backstop checks what it did
        name = posixpath.basename(first.text)
        args = words[1:]
        if not self.runs_writer and not reads_only(first, args):
            self.runs_writer = True
        if name == "busybox" and args:  # `busybox rm f`, `busybox sh -c …`: the applet
            return self._command(args, here, stdin)
        command = runuser_command(args) if name == "runuser" else None
        if command is not None:
            return self._command(command, here, stdin) if command else []
        if name in _SHELLS or name in _SU or name == "eval":
            if name == "eval":
                script: Word | None = Word(" ".join(w.text for w in args),
                                           any(w.dynamic for w in args), False)
            else:  # -c SCRIPT; else its input (<<EOF, <<<, a pipe), or a script file
                script, operand, reads = shell_args(args) if name in _SHELLS else \
                    su_command(args)
                if script is None and reads and stdin is not None and stdin.body is not None:
                    script = stdin
                elif script is None:
                    if reads and stdin is None and not {"--version", "--help"} & {
                            a.text for a in args}:  # `curl … | sh`
                        self.unfollowed(f"a script {name} reads from its input")
                    elif operand is not None and operand.process:  # `bash <(curl …)`
                        self.unfollowed(f"a script {name} reads from a command")
                    return []  # a script file: the backstop checks what it did
            if script is None:
                return []
            script = Word(script.body, script.dynamic, False) if script.body else script
            if script.dynamic and self.resolved(script) is None:
                self.unfollowed(f"a script the shell computes ({name})")
                return []
            return (self.script if name == "eval" else self.apart)(script.text, here)
        if name not in RULED:
            return []
        from .shellplace import Here
        from .shellrules import targets_of
        files = targets_of(name, args, Here(self, here), stdin)
        return [p for w in files for p in self.place(w, here)]

    def place(self, word: Word, here: str | None, *, quiet: bool = False) -> list[str]:
        """Where the file *word* names is, as this walker reports paths."""
        if word.process:
            return []  # >(…): its commands were read; it is no file
        plain = self.resolved(word)
        if plain is None:
            if not quiet:
                self.unfollowed(f"a name the shell computes ({word.text})")
            return []
        path = posixpath.normpath(plain.text) if plain.text.startswith("/") else plain.text
        path = path[len(_CWD):].lstrip("/") or "." if (path + "/").startswith(_CWD) else path
        if not path or path.startswith(_DEVICES) or path in ("-", "/dev/null"):
            return []
        if path.startswith(TOP):
            return [TOP + posixpath.normpath(path[len(TOP):]).lstrip("./") if
                    path != TOP else TOP]
        if not posixpath.isabs(path):
            if here is None:
                if not quiet:
                    self.unfollowed(f"{path} after a cd we cannot follow")
                return []
            path = posixpath.normpath(posixpath.join(here, path))
            if self.cwd:
                path = posixpath.join(self.cwd, path) if path != "." else self.cwd
        if plain.pattern:
            if not self.cwd and not posixpath.isabs(path):
                return []  # nowhere to expand it
            import glob
            return sorted(glob.glob(path))
        return [path]

    def disk(self, word: Word, here: str | None) -> str | None:
        """The path on disk *word* names (None when unknown)."""
        placed = self.place(word, here, quiet=True)
        if len(placed) != 1 or placed[0].startswith(TOP):
            return None
        return placed[0]
