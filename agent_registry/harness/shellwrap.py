"""What precedes the command of a simple shell command, for harness/shellwrites.py:
assignments, reserved words and wrappers (``sudo``, ``env -C DIR``, ``timeout --signal
S N`` …) with their options (:func:`unwrap`).  On every gate's path: standard library
only, ``re`` imported where an assignment is read."""
import posixpath

from .shelltokens import Word, tokenize

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
    **dict.fromkeys(("!", "then", "else", "do", "if", "elif", "while", "until", "{"), ("", ())),
}
_CHDIR = {"env": ("-C", "--chdir"), "sudo": ("-D", "--chdir")}
_ASSIGNMENT = r"[A-Za-z_][A-Za-z0-9_]*(\[[^]]*\])?\+?="


def assignment(text: str) -> bool:
    """Does *text* (with a ``=``) start with an assignment, ``NAME=`` or ``NAME[I]+=`` …"""
    import re
    return re.match(_ASSIGNMENT, text) is not None


def unwrap(words: list[Word]) -> tuple[list[Word], Word | None]:
    """*words* without leading assignments, reserved words and wrappers (``sudo``,
    ``env``, ``nohup``, ``time`` …, also by path) and their options; and the folder the
    wrappers run the command in (``env -C DIR``, ``sudo -D DIR``, nested ones joined),
    if they do.  ``env -S STRING``'s string is read as words of the line."""
    i, chdir = 0, None
    while i < len(words):
        w = words[i]
        if "=" in w.text and assignment(w.text) and not w.text.startswith("="):
            i += 1
            continue
        name = w.text.rpartition("/")[2]
        if name not in _WRAPPERS or w.dynamic:
            break
        takes, long_takes = _WRAPPERS[name]
        i += 1
        while i < len(words) and words[i].text.startswith("-") and (
                words[i].text != "-" or name == "env"):  # env's "-" is its -i
            flag, value = words[i], None
            i += 1
            if flag.text == "--":
                break
            option, eq, given = flag.text.partition("=")
            if option.startswith("--") and (eq or option in long_takes):
                value, i = (Word(given, flag.dynamic, False), i) if eq else \
                    (words[i] if i < len(words) else None, i + 1)
            elif not option.startswith("--"):
                option = flag.text
                for j, letter in enumerate(option[1:], 1):  # a cluster: -iC DIR, -uU
                    if letter in takes:
                        value, i = (Word(option[j + 1:], flag.dynamic, False), i) \
                            if option[j + 1:] else (words[i] if i < len(words) else None, i + 1)
                        option = "-" + letter
                        break
            if value is not None and option in _CHDIR.get(name, ()):
                chdir = value if chdir is None or value.text.startswith("/") else Word(
                    posixpath.join(chdir.text, value.text), chdir.dynamic or value.dynamic, False)
            elif value is not None and name == "env" and option in ("-S", "--split-string"):
                split = [Word(t.text, t.dynamic or value.dynamic, t.pattern, t.subs)
                         for t in tokenize(value.text) if isinstance(t, Word)]
                words = words[:i] + split + words[i:]
        if name == "timeout" and i < len(words):
            i += 1  # the duration
        if name == "nice" and i < len(words) and words[i].text.lstrip("-+").isdigit():
            i += 1
    return words[i:], chdir
