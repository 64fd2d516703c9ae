"""git wildmatch (``WM_PATHNAME``), the glob syntax of lock targets, as a compiled regex.

Every member of a bracket expression is escaped, so nothing in a pattern reaches the
regex syntax; a pattern that cannot be compiled is a BadPattern (BadInput: exit 2 for a
new claim; a stored one fails closed in branch/paths.py).  Standard library only, ``re``
imported when a pattern is first compiled: the guard imports this.
"""
from __future__ import annotations

from ..errors import BadInput


class BadPattern(BadInput):
    """A glob that cannot be compiled (``[z-a]``, an unclosed ``[``, a trailing backslash)."""


_CLASSES = {"alnum": r"a-zA-Z0-9", "alpha": r"a-zA-Z", "blank": r" \t", "cntrl": r"\x00-\x1f\x7f",
            "digit": r"0-9", "graph": r"!-~", "lower": r"a-z", "print": r" -~",
            "punct": r"!-/:-@\[-`{-~", "space": r" \t\n\r\f\v", "upper": r"A-Z",
            "xdigit": r"0-9A-Fa-f"}


def _bracket(pattern: str, i: int) -> tuple[str, int]:
    """The regex of the bracket expression that opens at *i*, and the index after it.
    Every member is escaped, so nothing in a pattern can reach the regex syntax; in git
    wildmatch a bracket never matches ``/``."""
    import re  # globs only: a one-shot command on plain paths never compiles a pattern
    j, n = i + 1, len(pattern)
    negated = j < n and pattern[j] in "!^"
    j += negated
    items: list[str] = []
    first = True
    while j < n and (first or pattern[j] != "]"):
        first = False
        if pattern.startswith("[:", j):
            end = pattern.find(":]", j + 2)
            name = pattern[j + 2:end] if end != -1 else None
            if name not in _CLASSES:
                raise BadPattern(f"unknown character class [:{name or '...'}:]")
            items.append(_CLASSES[name])
            j = end + 2
            continue
        lo, j = _bracket_char(pattern, j)
        if j + 1 < n and pattern[j] == "-" and pattern[j + 1] != "]":
            hi, j = _bracket_char(pattern, j + 1)
            if hi < lo:
                raise BadPattern(f"bad character range {lo}-{hi}")
            items.append(re.escape(lo) + "-" + re.escape(hi))
        else:
            items.append(re.escape(lo))
    if j >= n:
        raise BadPattern("unclosed [")
    return "(?!/)[" + ("^" if negated else "") + "".join(items) + "]", j + 1


def _bracket_char(pattern: str, j: int) -> tuple[str, int]:
    if pattern[j] == "\\":
        if j + 1 >= len(pattern):
            raise BadPattern("ends with a backslash")
        return pattern[j + 1], j + 2
    return pattern[j], j + 1


_WILDMATCH: dict[str, object] = {}  # pattern -> compiled (functools.lru_cache: an import)


def _wildmatch_regex(pattern: str):
    """git wildmatch (WM_PATHNAME) as a compiled regex, kept for the next call; raises
    BadPattern when it cannot be compiled."""
    if pattern not in _WILDMATCH:
        if len(_WILDMATCH) >= 256:
            _WILDMATCH.clear()
        _WILDMATCH[pattern] = _compile_wildmatch(pattern)
    return _WILDMATCH[pattern]


def _compile_wildmatch(pattern: str):
    import re
    out, i, n = [], 0, len(pattern)
    while i < n:
        c = pattern[i]
        if pattern.startswith("**/", i) and (i == 0 or pattern[i - 1] == "/"):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("/**", i) and i + 3 == n:
            out.append("/.*")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")  # git: a plain "*"; crossing directories is the safe reading
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            regex, i = _bracket(pattern, i)
            out.append(regex)
        elif c == "\\":
            char, i = _bracket_char(pattern, i)
            out.append(re.escape(char))
        else:
            out.append(re.escape(c))
            i += 1
    try:
        return re.compile("".join(out) + r"\Z", re.S)
    except re.error as exc:  # not expected after the checks above: still the pattern's fault
        raise BadPattern(str(exc)) from None


def glob_error(pattern: str) -> str | None:
    """Why *pattern* cannot be used as a glob, or None."""
    try:
        _wildmatch_regex(pattern)
    except BadPattern as exc:
        return exc.message
    return None


def wildmatch(pattern: str, path: str) -> bool:
    """git wildmatch with WM_PATHNAME: ``*`` stays within a directory, ``**`` crosses.
    Raises BadPattern for a pattern that cannot be compiled."""
    return _wildmatch_regex(pattern).match(path) is not None
