"""Regular expressions compiled when first used, not when their module is imported.

Python compiles a pattern in Python code (re._parser, re._compiler): about a tenth of a
millisecond each, more for wide Unicode classes, and a one-shot command imports a few
dozen module-level patterns of which it uses a handful (tests/test_import_budget.py).
"""

ALNUM = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")


def spelled_with(text: str, first: frozenset[str], rest: frozenset[str], longest: int) -> bool:
    """``re.fullmatch("[first][rest]{0,longest-1}", text)`` for the names a one-shot
    command checks every time (a session id, the branch), with no pattern at all."""
    return 0 < len(text) <= longest and text[0] in first and all(c in rest for c in text[1:])


class LazyPattern:
    """Stands for ``re.compile(pattern, flags)``: its methods and attributes (match,
    fullmatch, search, sub, split, finditer, pattern ...) compile it on first use."""

    __slots__ = ("_args", "_compiled")

    def __init__(self, pattern, flags: int = 0) -> None:
        self._args = (pattern, flags)
        self._compiled = None

    def __getattr__(self, name: str):
        if self._compiled is None:
            import re
            self._compiled = re.compile(*self._args)
        return getattr(self._compiled, name)
