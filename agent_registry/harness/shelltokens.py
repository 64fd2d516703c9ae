"""A small shell tokenizer for harness/shellwrites.py: words and operators, quotes removed.

It reads what a gate needs to find the files a command writes: single, double and
ANSI-C (``$'…'``) quotes, backslashes, here-documents (a body is kept with its
delimiter word, never read as the commands around it),
comments, and expansions, which are kept as written and marked ``dynamic``.  The
commands inside an expansion, ``$(…)``, backquotes, and process substitution ``<(…)``
/ ``>(…)``, are kept in ``subs`` so the walker reads the writes they make too.  An
unquoted brace form (``src/{a,b}.py``) is marked for expansion.  No shell is ever run.

What precedes the command of a simple command is read here too (:func:`unwrap`:
assignments, reserved words, wrappers such as ``sudo``, ``env -C DIR``, ``timeout
--signal S N``, ``flock FILE -c CMD``, ``strace -o FILE`` with their options).  Over 400
lines for that: every gate of a shell call reads both, and a module of its own cost each
one its import (issue 35's hooks).
"""
import posixpath

from ..store.tuples import named

# longest first, so ">>" is not read as ">" ">"
_OPERATORS = sorted(["&&", "||", "|&", ";;", ";", "&", "|", "(", ")", "\n",
                     ">>", ">|", "&>>", "&>", "<>", ">&", "<&", "<<<", "<<-", "<<",
                     ">", "<"], key=len, reverse=True)
_SPECIAL = frozenset(";&|()<>\n")
_ANSI = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b",
         "f": "\f", "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?"}
# git's ``:/``, which stands for the whole working tree and so covers every held path
TOP = ":/"
MAX_BRACES = 256  # words one brace form may expand to before the walker gives up


class Unparsable(ValueError):
    """The command cannot be tokenized: no targets can be told."""


# (named tuples from store/tuples.py: typing's NamedTuple costs a hook call a few ms)
Word = named("Word", "text dynamic pattern subs brace process body",
             ((), False, False, None))
Word.__doc__ = """A shell word.  text: quotes removed, expansions kept as written; dynamic:
it contains an expansion the shell would make ($, backquote); pattern: an unquoted glob
character; subs: the scripts of its $(…), `…`, <(…) and >(…); brace: an unquoted {…} the
shell expands; process: the word is a process substitution, not a file name."""
Op = named("Op", "text")


def tokenize(text: str) -> list[Word | Op]:
    """Shell words and operators, quotes removed; a here-document's body is its
    delimiter word's ``body``, not read as commands."""
    tokens: list[Word | Op] = []
    # (delimiter, strip tabs, the index of its word, quoted) waiting for a newline
    heredocs: list[tuple[str, bool, int, bool]] = []
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
        elif c in "<>" and text.startswith("(", i + 1):
            end = _group_end(text, i + 1, "(", ")")
            tokens.append(Word(text[i:end], True, False, (text[i + 2:end - 1],),
                               process=True))
            i = end
        elif text.startswith("((", i) and (end := _arithmetic_end(text, i)):
            tokens.append(Word(text[i:end], True, False))  # (( … )): numbers, no file
            i = end
        elif c in _SPECIAL:
            op = next(o for o in _OPERATORS if text.startswith(o, i))
            i += len(op)
            tokens.append(Op(op))
            if op in ("<<", "<<-"):
                start = _skip_blanks(text, i)
                word, i = _word(text, start)
                # a quoted delimiter (any quote in it) leaves the body as written;
                # otherwise the shell expands it first
                quoted = any(c in text[start:i] for c in "'\"\\")
                heredocs.append((word.text, op == "<<-", len(tokens), quoted))
                tokens.append(word)
            elif op == "\n" and heredocs:
                i = _heredocs(text, i, heredocs, tokens)
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


def _heredocs(text: str, i: int, heredocs: list[tuple[str, bool, int, bool]],
              tokens: list[Word | Op]) -> int:
    """The index after the bodies of *heredocs*, which start at *i*; each body becomes
    its delimiter word's ``body`` (what a shell reading it runs: ``bash <<EOF``), as the
    reader gets it; the word ``dynamic`` when the shell expands the body first (an
    unquoted delimiter, and a ``$`` or a backquote in it)."""
    for delimiter, strip, at, quoted in heredocs:
        body, i = _body(text, i, delimiter, strip)
        computed = not quoted and ("$" in body or "`" in body)
        word = tokens[at]
        tokens[at] = Word(word.text, word.dynamic or computed, word.pattern,
                          word.subs + (_substitutions(body) if computed else ()),
                          word.brace, word.process,
                          body if quoted or "\\" not in body else _unescaped(body))
    return i


def _body(text: str, i: int, delimiter: str, strip: bool) -> tuple[str, int]:
    """The body of a here-document starting at *i* (``<<-``, *strip*: its lines' tabs
    stripped, as the shell does) and the index after its *delimiter* line."""
    lines = []
    while i < len(text):
        end = text.find("\n", i)
        line = text[i:] if end == -1 else text[i:end]
        i = len(text) if end == -1 else end + 1
        line = line.lstrip("\t") if strip else line
        if line == delimiter:
            break
        lines.append(line)
    return "\n".join(lines), i


def _skip_bodies(text: str, i: int, pending: list[tuple[str, bool]]) -> int:
    """The index after the bodies of the *pending* here-documents, which start at *i*."""
    for delimiter, strip in pending:
        i = _body(text, i, delimiter, strip)[1]
    return i


def _unescaped(body: str) -> str:
    """An unquoted here-document's *body* as its reader gets it: a backslash before
    ``$``, a backquote or itself is dropped, with a newline both go; any other stays."""
    out, i = [], 0
    while (k := body.find("\\", i)) != -1:
        after = body[k + 1:k + 2]
        out.append(body[i:k] + (after if after in ("$", "`", "\\") else
                                "" if after == "\n" else "\\" + after))
        i = k + 2
    return "".join(out) + body[i:]


def _substitutions(body: str) -> tuple[str, ...]:
    """The commands of the ``$(…)`` and backquotes in an unquoted here-document's body,
    which the shell runs as it expands the body, whatever command reads it."""
    subs, i = [], 0
    while True:  # from one backslash, $( or backquote to the next (a body may be long)
        i = min((k for k in (body.find("\\", i), body.find("$(", i), body.find("`", i))
                 if k != -1), default=-1)
        if i == -1:
            return tuple(subs)
        if body[i] == "\\":
            i += 2
        elif body[i] == "$":
            end = _group_end(body, i + 1, "(", ")")
            if _arithmetic(body, i, end):
                _inner_subs(body[i + 3:end - 2], subs)
            else:
                subs.append(body[i + 2:end - 1])
            i = end
        elif (end := body.find("`", i + 1)) != -1:
            subs.append(body[i + 1:end])
            i = end + 1
        else:
            return tuple(subs)


def _word(text: str, i: int) -> tuple[Word, int]:
    """The word starting at *i* and the index after it."""
    out: list[str] = []
    subs: list[str] = []
    dynamic = pattern = brace = False
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
        elif c == "$" and text.startswith("'", i + 1):
            literal, i = _ansi_c(text, i + 2)
            out.append(literal)
        elif c == '"' or (c == "$" and text.startswith('"', i + 1)):
            i += 1 if c == '"' else 2
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
                    i = _expansion(text, i, out, subs)
                else:
                    out.append(c)
                    i += 1
        elif c == "\\":
            if i + 1 < n:
                out.append(text[i + 1])
            i += 2
        elif c in "$`":
            dynamic = True
            i = _expansion(text, i, out, subs)
        else:
            if c in "*?[" or (c == "~" and not out):
                pattern = pattern or c != "~"
                dynamic = dynamic or c == "~"
            brace = brace or c == "{"
            out.append(c)
            i += 1
    return Word("".join(out), dynamic, pattern, tuple(subs), brace), i


def _expansion(text: str, i: int, out: list[str], subs: list[str]) -> int:
    """Keep the expansion at *i* as written (its commands to *subs*); the index after."""
    end = _expansion_end(text, i, subs)
    out.append(text[i:end])
    return end


_OCTAL = "01234567"


def _ansi_c(text: str, i: int) -> tuple[str, int]:
    """The text of the ``$'…'`` string whose body starts at *i*, escapes decoded."""
    out: list[str] = []
    n = len(text)
    while i < n:
        c = text[i]
        if c == "'":
            return "".join(out), i + 1
        if c != "\\" or i + 1 >= n:
            out.append(c)
            i += 1
            continue
        e = text[i + 1]
        i += 2
        if e in _ANSI:
            out.append(_ANSI[e])
        elif e in "xuU" or e in _OCTAL:
            start = i - 1 if e in _OCTAL else i  # an octal escape's first digit is *e*
            width, digits = (3, _OCTAL) if e in _OCTAL else (
                {"x": 2, "u": 4, "U": 8}[e], "0123456789abcdefABCDEF")
            j = start
            while j < n and j - start < width and text[j] in digits:
                j += 1
            code = int(text[start:j], 8 if e in _OCTAL else 16) if j > start else None
            i = j
            if code == 0:  # bash ends the string at a NUL: `$'src/auth.py\0x'` is src/auth.py
                end = _ansi_c(text, i)[1]
                return "".join(out), end
            if code is not None and code > 0x10FFFF:  # no character: bash's own business
                raise Unparsable("a character escape out of range")
            out.append(chr(code) if code is not None else "")
        elif e == "c" and i < n:  # \cX: control-X
            out.append(chr(ord(text[i]) & 0x1F))
            i += 1
        else:
            out.append("\\" + e)
    raise Unparsable("unclosed $'")


def _arithmetic_end(text: str, i: int) -> int:
    """The index after the ``((…))`` arithmetic command at *i*, or 0 when it may be two
    nested subshells (``((cd a; rm f))``) or holds a command (``$(…)``): those are
    read as commands.  Its ``<<`` is a shift, not a here-document."""
    try:
        end = _group_end(text, i, "(", ")")
    except Unparsable:
        return 0
    inner = text[i + 2:end - 2]
    if text[end - 2:end] != "))" or any(c in inner for c in ";&|\n`") or "$(" in inner:
        return 0
    return end


def _group_end(text: str, i: int, opening: str, closing: str) -> int:
    """The index after the *closing* that matches the *opening* at *i* (quotes and
    here-document bodies skipped: `git commit -m "$(cat <<'EOF'` with an apostrophe in
    the message)."""
    depth, j, quote, n = 0, i, "", len(text)
    pending: list[tuple[str, bool]] = []  # here-documents whose bodies start at the newline
    while j < n:
        c = text[j]
        if quote:
            if c == "\\" and quote == '"':
                j += 1
            elif c == quote:
                quote = ""
        elif c == "\\":
            j += 1
        elif c in "'\"":
            quote = c
        elif c == "#" and opening == "(" and (j == i + 1 or text[j - 1] in " \t\n;&|("):
            end = text.find("\n", j)  # a comment, to the end of its line: `$(ls # )`
            j = n if end == -1 else end
            continue
        elif text.startswith("<<", j) and not text.startswith("<<<", j):
            strip = text.startswith("<<-", j)
            word, j = _word(text, _skip_blanks(text, j + 2 + strip))
            pending.append((word.text, strip))
            continue
        elif c == "\n" and pending:
            j = _skip_bodies(text, j + 1, pending)
            pending = []
            continue
        elif c == opening:
            depth += 1
        elif c == closing:
            depth -= 1
            if depth == 0:
                return j + 1
        j += 1
    raise Unparsable(f"unclosed {opening}")


def _expansion_end(text: str, i: int, subs: list[str]) -> int:
    """The index after the expansion at *i*: ``$(...)``, ``${...}``, ``$NAME``, or a
    backquoted command; the command of a ``$(...)`` or backquote goes to *subs*."""
    n = len(text)
    if text[i] == "`":
        end = text.find("`", i + 1)
        if end == -1:
            raise Unparsable("unclosed `")
        subs.append(text[i + 1:end])
        return end + 1
    if text.startswith("$(", i) or text.startswith("${", i):
        opening, closing = ("(", ")") if text[i + 1] == "(" else ("{", "}")
        end = _group_end(text, i + 1, opening, closing)
        if opening == "(" and not _arithmetic(text, i, end):
            subs.append(text[i + 2:end - 1])
        else:  # ${x:-$(cmd)}, $(( $(cmd) + 1 )): the commands inside run too
            _inner_subs(text[i + 2:end - 1], subs)
        return end
    j = i + 1
    if j < n and (text[j].isalnum() or text[j] == "_"):
        while j < n and (text[j].isalnum() or text[j] == "_"):
            j += 1
    elif j < n and text[j] in "@*#?$!-0123456789":
        j += 1
    return j


def _arithmetic(text: str, i: int, end: int) -> bool:
    """Is the ``$(…)`` at *i* (ending before *end*) a ``$((…))``?  Only when its second
    ``(`` closes just before its last ``)``: bash reads ``$((rm x) )`` as a command."""
    return text.startswith("$((", i) and _group_end(text, i + 2, "(", ")") == end - 1


def _inner_subs(text: str, subs: list[str]) -> None:
    """The commands of the expansions inside *text*, the inside of a ``${…}`` or a
    ``$((…))``, to *subs* (quotes there not read: a command too many is only read)."""
    j = 0
    while j < len(text):
        if text[j] == "\\":
            j += 2  # ${x//\`/}: an escaped character
        elif text[j] == "`" or text.startswith("$(", j) or text.startswith("${", j):
            j = _expansion_end(text, j, subs)
        elif text.startswith(("<(", ">("), j):  # ${x:+<(cmd)}
            end = _group_end(text, j + 1, "(", ")")
            subs.append(text[j + 2:end - 1])
            j = end
        else:
            j += 1


def expand_braces(text: str) -> list[str]:
    """*text* with its brace forms expanded as bash does (``a{b,c}`` -> ab ac,
    ``{1..3}`` -> 1 2 3); text without one is itself.  Unparsable beyond MAX_BRACES."""
    start = _brace_start(text)
    if start is None:
        return [text]
    end = _group_end(text, start, "{", "}")
    head, body, tail = text[:start], text[start + 1:end - 1], text[end:]
    parts = _brace_parts(body)
    out: list[str] = []
    for part in parts:
        out += expand_braces(head + part + tail)
        if len(out) > MAX_BRACES:
            raise Unparsable("a brace form too large to read")
    return out


def _brace_start(text: str) -> int | None:
    """Where the first brace form that expands (a comma or a ``..`` range inside) starts."""
    i = text.find("{")
    while i != -1:
        try:
            end = _group_end(text, i, "{", "}")
        except Unparsable:
            return None
        if len(_brace_parts(text[i + 1:end - 1])) > 1:
            return i
        i = text.find("{", i + 1)
    return None


def _brace_parts(body: str) -> list[str]:
    """The alternatives of one brace form's body (top-level commas, or a range)."""
    parts, depth, start = [], 0, 0
    for j, c in enumerate(body):
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(body[start:j])
            start = j + 1
    parts.append(body[start:])
    if len(parts) > 1:
        return parts
    low, dots, high = body.partition("..")
    if dots and low.lstrip("-").isdigit() and high.lstrip("-").isdigit():
        a, b = int(low), int(high)
        if abs(b - a) > MAX_BRACES:
            raise Unparsable("a brace range too large to read")
        step = 1 if b >= a else -1
        return [str(k) for k in range(a, b + step, step)]
    if dots and len(low) == 1 and len(high) == 1:
        step = 1 if high >= low else -1
        return [chr(k) for k in range(ord(low), ord(high) + step, step)]
    return [body]


# words that only precede the command they run: the short options each takes the next
# word for, and its long options that take the next word when not given with "="
_WRAPPERS = {
    "sudo": ("ugCDhprTURact", ("--user", "--group", "--chdir", "--host", "--prompt", "--role",
                           "--type", "--close-from", "--other-user", "--command-timeout")),
    "env": ("uCS", ("--unset", "--chdir", "--split-string")), "nohup": ("", ()),
    "time": ("fo", ("--format", "--output")), "command": ("", ()), "exec": ("a", ()),
    "builtin": ("", ()), "nice": ("n", ("--adjustment",)),
    "timeout": ("sk", ("--signal", "--kill-after")),
    "stdbuf": ("ioe", ("--input", "--output", "--error")), "doas": ("uC", ()),
    "coproc": ("", ()), "setsid": ("", ()),
    "ionice": ("cnpPu", ("--class", "--classdata", "--pid", "--pgid", "--uid")),
    # a lock file, a CPU mask, a priority, a time or a group before the command
    # (_operands), or the command as one string run by a shell (flock -c, script -c,
    # watch, sg)
    "flock": ("wE", ("--wait", "--timeout", "--conflict-exit-code")),
    "taskset": ("", ()), "faketime": ("p", ("--date-prog",)), "sg": ("", ()),
    "chrt": ("TPD", ("--sched-runtime", "--sched-period", "--sched-deadline")),
    "numactl": ("ipmNCwPcSfoLMI", ("--interleave", "--preferred", "--membind",
                                   "--cpunodebind", "--physcpubind", "--weighted-interleave",
                                   "--preferred-many", "--cpubind", "--shm", "--file",
                                   "--offset", "--length", "--shmmode", "--shmid")),
    "unshare": ("SGRwl", ("--setuid", "--setgid", "--root", "--wd", "--propagation",
                          "--setgroups", "--map-user", "--map-group", "--map-users",
                          "--map-groups", "--load-interp", "--monotonic", "--boottime")),
    "script": ("cEIOBTmo", ("--command", "--echo", "--log-in", "--log-out", "--log-io",
                            "--log-timing", "--logging-format", "--output-limit")),
    "watch": ("nq", ("--interval", "--equexit")),
    "strace": ("abeEIoOpPsSuUX", ("--output", "--attach", "--trace", "--signal", "--status",
                                  "--user", "--env", "--string-limit", "--summary-sort-by",
                                  "--columns", "--trace-path", "--abbrev", "--verbose",
                                  "--raw", "--read", "--write", "--inject", "--fault",
                                  "--argv0", "--interruptible", "--detach-on",
                                  "--const-print-style", "--summary-columns",
                                  "--summary-syscall-overhead", "--decode-pids", "--kvm")),
    "ltrace": ("aAeFlnopsuwxD", ("--output", "--align", "--indent", "--library", "--config")),
    "valgrind": ("", ()), "eatmydata": ("", ()), "catchsegv": ("", ()), "unbuffer": ("", ()),
    "xvfb-run": ("efnpsw", ("--error-file", "--auth-file", "--server-num", "--xauth-protocol",
                            "--server-args", "--wait")),
    "dbus-run-session": ("", ("--config-file", "--dbus-daemon")),
    "fakeroot": ("lsibf", ("--lib", "--faked", "--fd-base")),
    "torsocks": ("upaP", ("--user", "--pass", "--address", "--port")),
    "proxychains": ("f", ()), "proxychains4": ("f", ()),
    **dict.fromkeys(("!", "then", "else", "do", "if", "elif", "while", "until", "{"), ("", ())),
}
RUNNER = "runner"  # unwrap's "more than itself" for a runner's tool: no environment set
# package runners, read by harness/shellrunners.py (its RUNNERS), and Python's -m: each
# with the first word of its subcommands that run a command (None: it runs one itself),
# so that `npm test` or `uv sync` costs no import
RUNNER_NAMES = {"npx": None, "bunx": None, "uvx": None, "npm": ("exec", "x"),
                "pnpm": ("dlx",), "yarn": ("dlx",), "bun": ("x",), "uv": ("run", "tool"),
                "poetry": ("run",), "pipx": ("run",), "pipenv": ("run",)}
_CHDIR = {"env": ("-C", "--chdir"), "sudo": ("-D", "--chdir"), "unshare": ("-w", "--wd")}
_OUTPUT = {"time": ("-o", "--output"),  # GNU time writes its report there; the traces,
           "strace": ("-o", "--output"), "ltrace": ("-o", "--output"),  # logs, a saved
           "valgrind": ("--log-file", "--xml-file", "--massif-out-file",  # state
                        "--callgrind-out-file", "--cachegrind-out-file", "--dhat-out-file"),
           "fakeroot": ("-s",), "numactl": ("-f", "--file", "-S", "--shm"),  # shared memory
           "xvfb-run": ("-e", "--error-file", "-f", "--auth-file"),
           "script": ("-I", "--log-in", "-O", "--log-out", "-B", "--log-io", "-T", "--log-timing")}
# with no command: a shell reading its input
_SHELL_WHEN_BARE = frozenset(("fakeroot", "unshare", "script", "sg"))
# options GNU getopt finds after the operands too (script FILE -c CMD); the operands are
# kept for _operands
_PERMUTED = frozenset(("script",))
# a wrapper whose options are these words only: any other word, a "-30d" too, is its first
# operand (faketime -f -30d make)
_ONLY = {"faketime": ("-m", "-f", "-p", "--exclude-monotonic", "--date-prog", "-h", "-v")}
# what makes a wrapper run its command with more than the command's own doing, as an
# assignment before it does (the backstop notes around it): an environment (strace -E),
# code it loads (fakeroot's faked and preloaded library); valgrind, always: its tools
# write files of their own (TOOL.out.<pid>), as may options in a .valgrindrc
_MORE = {"strace": ("-E", "--env"), "fakeroot": ("-f", "--faked", "-l", "--lib")}
_ASSIGNMENT = r"[A-Za-z_][A-Za-z0-9_]*(\[[^]]*\])?\+?="


def assignment(text: str) -> bool:
    """Does *text* (with a ``=``) start with an assignment, ``NAME=`` or ``NAME[I]+=`` …"""
    import re
    return re.match(_ASSIGNMENT, text) is not None


def joined(folder: Word | None, value: Word) -> Word:
    """The folder *value* names, from *folder* (nested wrappers' and runners' folders)."""
    if folder is None or value.text.startswith("/"):
        return value
    return Word(posixpath.join(folder.text, value.text), folder.dynamic or value.dynamic, False)


def python_like(name: str) -> bool:
    """Is *name* a Python interpreter's (``python``, ``python3.12``, ``py``)?"""
    return name in ("py", "python") or name.startswith("python") and \
        name[6:].replace(".", "").isdigit()


def unwrap(words: list[Word]) -> tuple[list[Word], Word | None, list[Word], bool | str]:
    """*words* without leading assignments, reserved words and wrappers (``sudo``,
    ``env``, ``nohup``, ``time`` …, also by path) and their options; the folder the
    wrappers run the command in (``env -C DIR``, ``sudo -D DIR``, nested ones joined),
    if they do; the files they write (``time -o FILE``); and whether something before
    the command makes it more than itself: an assignment setting its environment
    (``PAGER=… git log``, ``env X=… ls``), or a wrapper of _MORE (True), or a package
    runner (RUNNER: ``npx``, ``uv run`` …, read as the tool it runs,
    harness/shellrunners.py).
    ``env -S STRING``'s string is read as words of the line; ``sudo -s`` or ``-i`` with
    no command is a shell reading its input."""
    i, chdir, splits, shell, runners = 0, None, 0, False, 0
    outputs: list[Word] = []
    assigns: bool | str = False
    while i < len(words):
        w = words[i]
        if "=" in w.text and assignment(w.text) and not w.text.startswith("="):
            i += 1
            assigns = True
            continue
        name = w.text.rpartition("/")[2]
        python_m = python_like(name) and any(  # python -m, -Bm, -X dev -m
            x.text[:1] == "-" != x.text[1:2] and "m" in x.text for x in words[i + 1:i + 4])
        runs = name in RUNNER_NAMES and (RUNNER_NAMES[name] is None or any(
            x.text in RUNNER_NAMES[name] for x in words[i + 1:]))
        if not w.dynamic and (runs or python_m):
            from .shellrunners import run  # only for a runner, or python -m
            runners += 1
            if runners > 8:
                raise Unparsable("too many package runners")
            got = run(name, words, i + 1)
            if got is None:
                break  # not read: the runner is the program
            words, i, folder = got
            assigns = assigns or RUNNER  # what it fetches need not be the machine's
            if folder is not None:
                chdir = joined(chdir, folder)
            continue
        if name not in _WRAPPERS or w.dynamic:
            break
        takes, long_takes = _WRAPPERS[name]
        start, i = i, i + 1
        options: dict[str, Word | None] = {}  # those given, each with its value
        operands: list[Word] = []  # of a _PERMUTED wrapper, met between its options
        while i < len(words):
            flag, value = words[i], None
            if not flag.text.startswith("-") or flag.text == "-" and name != "env" or \
                    name in _ONLY and flag.text not in _ONLY[name]:
                if name not in _PERMUTED:  # (env's "-" is its -i)
                    break
                operands.append(flag)
                i += 1
                continue
            i += 1
            if flag.text == "--":
                break
            option, eq, given = flag.text.partition("=")
            if option.startswith("--"):  # a start of its name will do (getopt_long)
                option = gnu_long(option, long_takes)
            if name == "script" and option.startswith("--tim"):
                if given:  # --timing=FILE (else to stderr)
                    outputs.append(Word(given, flag.dynamic, False))
                continue
            if option.startswith("--") and (eq or option in long_takes):
                value, i = (Word(given, flag.dynamic, False), i) if eq else \
                    (words[i] if i < len(words) else None, i + 1)
            elif not option.startswith("--"):
                option = flag.text
                for j, letter in enumerate(option[1:], 1):  # a cluster: -iC DIR, -uU
                    options.setdefault(f"-{letter}", None)
                    if name == "script" and letter == "t":  # -t[FILE]: a value attached
                        if option[j + 1:]:
                            outputs.append(Word(option[j + 1:], flag.dynamic, False))
                        option = "-t"
                        break
                    if letter in takes:
                        value, i = (Word(option[j + 1:], flag.dynamic, False), i) \
                            if option[j + 1:] else (words[i] if i < len(words) else None, i + 1)
                        option = "-" + letter
                        break
            options[option] = value
            if value is not None and option in _OUTPUT.get(name, ()):
                if not value.text.startswith(("|", "!")):  # strace -o '|cmd': below
                    outputs.append(value)
            elif value is not None and option in _CHDIR.get(name, ()):
                chdir = joined(chdir, value)
            elif value is not None and name == "env" and option in ("-S", "--split-string"):
                splits += 1
                if splits > 8:
                    raise Unparsable("too many env -S")
                split = [Word(t.text, t.dynamic or value.dynamic, t.pattern, t.subs)
                         for t in tokenize(value.text) if isinstance(t, Word)]
                words = words[:i] + split + words[i:]
            elif name == "command" and option in ("-v", "-V"):
                return [], chdir, outputs, assigns  # it says what the name is, runs nothing
            elif name == "sudo" and (flag.text in ("--shell", "--login") or not
                                     flag.text.startswith("--") and set("si") & set(flag.text)):
                shell = True  # with no command: a shell reading its input
            elif option in _MORE.get(name, ()):
                assigns = True
            elif name == "torsocks" and option == "--shell":  # a shell reading its input,
                return [Word("sh", False, False)], chdir, outputs, assigns  # whatever follows
        if operands:
            words, i = operands + words[i:], 0
        if name == "timeout" and i < len(words):
            i += 1  # the duration
        if name == "nice" and i < len(words) and words[i].text.lstrip("-+").isdigit():
            i += 1
        assigns = assigns or name == "valgrind"
        if name == "unshare" and options.keys() & {"-R", "--root"} or any(
                v is not None and v.text.startswith(("|", "!")) and o in _OUTPUT.get(name, ())
                for o, v in options.items()):
            # another root (its command's paths are not ours), or a command the trace
            # is piped to (strace, ltrace): the wrapper is the program, which only the
            # backstop checks
            i = start
            break
        if name in _OPERANDS:
            at = _operands(name, words, i, options, outputs)
            if at is None:
                return [], chdir, outputs, assigns  # runs no command
            words, i = at
        if name in _SHELL_WHEN_BARE and i >= len(words):
            shell = True
    return words[i:] or ([Word("sh", False, False)] if shell else []), chdir, outputs, assigns


_OPERANDS = frozenset(("flock", "taskset", "chrt", "faketime", "sg", "script", "watch"))


def _operands(name: str, words: list[Word], i: int, options: dict[str, Word | None],
              outputs: list[Word]) -> tuple[list[Word], int] | None:
    """After the options of a wrapper of _OPERANDS at *i* of *words*: (the words, and
    where its command starts in them), a shell's ``sh -c SCRIPT`` where it runs one;
    None when it runs no command (``flock FD``, ``taskset -p``, ``chrt -p``).  The
    files it writes are added to *outputs* (script's typescript)."""
    def shell(script: list[Word]) -> tuple[list[Word], int]:
        text = " ".join(w.text for w in script)
        return [Word("sh", False, False), Word("-c", False, False),
                Word(text, any(w.dynamic for w in script), False)], 0
    rest = words[i:]
    if name in ("taskset", "chrt") and options.keys() & {"-p", "--pid", "-m", "--max"}:
        return None  # another process's setting, or the priorities' range
    if name == "flock":  # its lock file is opened, made empty when missing, never changed
        if len(rest) <= 1:
            return None  # a descriptor the shell opened (flock 9): it runs nothing
        if rest[1].text in ("-c", "--command"):
            return shell(rest[2:3])
        return words, i + 1
    if name == "chrt":  # its priority, when given
        return words, i + 1 if rest and rest[0].text.isdigit() else i
    if name in ("taskset", "faketime"):  # the CPU mask, the time
        return words, i + 1
    if name == "sg":  # sg [-] GROUP [-c] COMMAND: the one word run by /bin/sh -c
        rest = rest[1:] if rest[:1] and rest[0].text == "-" else rest
        rest = rest[1:]
        rest = rest[1:] if rest[:1] and rest[0].text == "-c" else rest
        return shell(rest[:1]) if rest else (words, len(words))
    if name == "script":  # script [FILE]: its typescript, ./typescript by default
        outputs.append(rest[0] if rest else Word("typescript", False, False))
        command = options.get("-c") or options.get("--command")
        return shell([command]) if command is not None else (words, len(words))
    # watch: the command's words joined and run by `sh -c`, unless -x
    return (words, i) if options.keys() & {"-x", "--exec"} else shell(rest)


def shell_args(args: list[Word]) -> tuple[Word | None, Word | None, bool]:
    """(the script of ``sh -c SCRIPT``; else the first operand, its script file; whether
    it reads its script from its input: no operand, ``-s``, or ``/dev/stdin``).  Options
    may be grouped: ``-lc``, ``-ec``; ``-o NAME`` and ``-O NAME`` take a name, grouped
    too: ``-eo pipefail -c``, ``-euxo pipefail``."""
    i, script, reads = 0, False, False
    while i < len(args):
        text = args[i].text
        i += 1
        if text in ("--", "-"):
            break
        if (text.startswith("-") or text.startswith("+")) and not text.startswith("--"):
            letters = text[1:]
            i += sum(letters.count(c) for c in "oO")  # each o/O takes the next word
            script, reads = script or "c" in letters, reads or "s" in letters
        elif text in ("--rcfile", "--init-file"):
            i += 1
        elif not text.startswith("--"):
            i -= 1
            break  # the first operand
    operand = args[i] if i < len(args) else None
    if script:
        return operand, None, False
    return None, operand, reads or operand is None or operand.text in ("/dev/stdin", "-")


def gnu_long(name: str, names: tuple[str, ...]) -> str:
    """The long option *name* is, as GNU's getopt_long reads it: one of *names* (all of
    the command's), or the one of them it is the start of when no other starts so
    (`--in` for `--in-place`), else itself."""
    starting = [n for n in names if n.startswith(name)] if name not in names else [name]
    return starting[0] if len(starting) == 1 else name


_SU_LONG = ("--command", "--session-command", "--fast", "--group", "--supp-group",
            "--login", "--nohup", "--preserve-environment", "--pty", "--shell",
            "--whitelist-environment", "--user", "--help", "--version")


def su_command(args: list[Word]) -> tuple[Word | None, None, bool]:
    """:func:`shell_args` of ``su``/``runuser``: the command of ``-c CMD`` (grouped too:
    ``-lc CMD``; ``--command``, ``--session-command``), else a shell reading its input."""
    i = 0
    while i < len(args):
        word = args[i]
        i += 1
        name, eq, value = word.text.partition("=")
        if name.startswith("--") and gnu_long(name, _SU_LONG) in ("--command",
                                                                  "--session-command"):
            given = Word(value, word.dynamic, False) if eq else \
                (args[i] if i < len(args) else None)
            return given, None, given is None
        if word.text.startswith("-") and not word.text.startswith("--"):
            for j, letter in enumerate(word.text[1:], 1):
                if letter == "c":
                    rest = word.text[j + 1:]
                    given = Word(rest, word.dynamic, False) if rest else \
                        (args[i] if i < len(args) else None)
                    return given, None, given is None
                if letter in "gGsw":  # takes a value: the rest, or the next word
                    i += 1 if j == len(word.text) - 1 else 0
                    break
    return None, None, True


def runuser_command(args: list[Word]) -> list[Word] | None:
    """The command ``runuser -u USER [--] CMD …`` runs as it is (no shell); None for the
    other form, ``su``'s (:func:`su_command`)."""
    texts = [w.text for w in args]
    if not any(t in ("-u", "--user") or t.startswith("--user=") for t in texts):
        return None
    i = 0
    while i < len(args) and texts[i].startswith("-"):
        if texts[i] == "--":
            return args[i + 1:]
        i += 2 if texts[i] in ("-u", "-g", "-G", "-s", "-w", "--user", "--group",
                                "--supp-group", "--shell", "--whitelist-environment") else 1
    return args[i:]
