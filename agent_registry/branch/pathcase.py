"""Paths as the filesystem sees them: the one place that knows a repository's names
compare without case (``core.ignorecase``) or in Unicode NFC (``core.precomposeunicode``).

git sets both itself where they hold (``git init`` probes the filesystem for case;
macOS's git writes ``precomposeunicode``), so the config, read once per command with
the registry's own settings (store/git.read_config), says how this clone's filesystem
names files.  Every comparison of a claimed target with a path (claims, ``lock
check``, the harness gate, MCP tools, the guard) goes through :meth:`Rule.overlaps`,
and every target a claim stores is spelled by :meth:`Rule.respell`: as the index has
it, else as a live claim of it does, else as the disk does.  Standard library only: the guard
imports this.
"""
import os
TYPE_CHECKING = False
if TYPE_CHECKING:  # for annotations only: collections costs a one-shot command 1 ms
    from collections.abc import Iterable

from .paths import LITERAL, is_glob, overlaps, plain

_TRUE = ("", "true", "yes", "on", "1")  # git's booleans ("" is a key with no value)


def nfc(text: str) -> str:
    """*text* in Unicode NFC (ASCII, the usual case, costs no import)."""
    if text.isascii():
        return text
    import unicodedata
    return unicodedata.normalize("NFC", text)


class Rule:
    """How one repository's filesystem compares names."""

    __slots__ = ("ignorecase", "precompose")

    def __init__(self, ignorecase: bool = False, precompose: bool = False) -> None:
        self.ignorecase, self.precompose = ignorecase, precompose

    @property
    def folds(self) -> bool:
        """Can two different spellings name one file here?"""
        return self.ignorecase or self.precompose

    def spelled(self, raw: str) -> str:
        """*raw* as git spells it here: NFC when names are precomposed (git's own
        ``precompose_argv``), else as given."""
        return nfc(raw) if self.precompose else raw

    def key(self, name: str) -> str:
        """What two spellings of one file have in common here: NFC (also where only
        case is ignored: the wider comparison is the safe one), then case-folded when
        case is ignored."""
        name = nfc(name) if self.precompose or self.ignorecase else name
        return name.casefold() if self.ignorecase else name

    def overlaps(self, a: str, b: str) -> bool:
        """paths.overlaps, spelled either way: as given (a ``[[:upper:]]`` glob keeps
        its meaning) or folded (``src/Auth.py`` is ``src/auth.py``).  Wider, never
        narrower, than the exact comparison: it fails closed."""
        return overlaps(a, b) or (self.folds and overlaps(self.key(a), self.key(b)))

    def respell(self, path: str, spellings: "Iterable[str]") -> str:
        """*path* with its leading components spelled as in *spellings* (file or
        directory names, the first that names the same thing wins, component by
        component): ``SRC/new.py`` with ``src/old.py`` known is ``src/new.py``."""
        if not self.folds or is_glob(path):
            return path
        magic = LITERAL if path.startswith(LITERAL) else ""
        parts = plain(path).split("/")
        keys = [self.key(p) for p in parts]
        best, best_len = parts, 0
        for known in spellings:
            if is_glob(known):
                continue
            theirs = plain(known).split("/")
            n = 0
            while n < min(len(parts), len(theirs)) and theirs[n] and \
                    self.key(theirs[n]) == keys[n]:
                n += 1
            if n > best_len:
                best, best_len = theirs[:n] + parts[n:], n
        return magic + "/".join(best)

    def on_disk(self, top: str | None, path: str) -> str:
        """*path* (repo-relative) spelled as the directories under *top* spell it, for
        each leading component that exists: what the filesystem keeps is the name the
        file was created with."""
        if not self.folds or not top or is_glob(path):
            return path
        parts, folder = path.split("/"), top
        for i, part in enumerate(parts):
            if not part:
                break
            try:
                names = [entry.name for entry in os.scandir(folder)]
            except OSError:
                break
            if part not in names:
                want = self.key(part)
                found = next((n for n in names if self.key(n) == want), None)
                if found is None:
                    break
                parts[i] = nfc(found) if self.precompose else found
            folder = os.path.join(folder, parts[i])
        return "/".join(parts)


SENSITIVE = Rule()  # names are bytes: Linux's filesystems, and a repo never configured


def rule_of(config: dict[str, str]) -> Rule:
    """The rule git's config gives this clone (read_config reads both keys)."""
    def flag(key: str) -> bool:
        value = config.get(key)
        return value is not None and value.strip().lower() in _TRUE
    ignorecase, precompose = flag("core.ignorecase"), flag("core.precomposeunicode")
    return Rule(ignorecase, precompose) if ignorecase or precompose else SENSITIVE
