"""The programs that write no file, for harness/shellwrites.py: a shell command made of
these alone, with no redirection into a file, needs no note of the held files around
it (harness/hook.py; docs/hooks.md, "The backstop")."""
import posixpath

from .shelltokens import Word

# programs that write no file, whatever their options and operands (not those that can
# or run another program: sed's w, awk's print >, sort -o, tree -o, file -C, uniq's and
# xxd's second operand, less's !, xargs); by a bare name or from a system folder
READERS = frozenset("""ls cat head tail wc grep egrep fgrep pwd echo printf true false test
[ which type stat du df diff cmp basename dirname realpath readlink date uname whoami id
nl cut tr column jq sleep seq md5sum sha1sum sha256sum sha512sum od hexdump printenv
nproc""".split())
_SYSTEM_BIN = ("/bin", "/usr/bin", "/usr/local/bin")
_GIT_READS = frozenset("status log diff show ls-files rev-parse blame grep shortlog describe "
                       "ls-tree cat-file".split())
_FIND_WRITES = ("-exec", "-ok", "-fprint", "-fls", "-delete")


def reads_only(program: Word, args: list[Word]) -> bool:
    """Does *program* with *args* read files only?  git's reads without an option that
    writes a file (``--output``) or runs a program (``--ext-diff``, ``grep -O`` or
    ``--open-files-in-pager``, each also by a start of its name, as git reads them), nor
    git's own options before them but ``--no-pager``; ``find`` without an action that writes or runs; ``rg``
    without ``--pre``."""
    text = program.text
    if program.dynamic or "/" in text and \
            posixpath.dirname(posixpath.normpath(text)) not in _SYSTEM_BIN:
        return False  # ./ls is a script of the project's
    name = posixpath.basename(text)
    if name in READERS:
        return True
    if name == "git":
        while args and args[0].text in ("--no-pager", "-P"):  # `git --no-pager log`
            args = args[1:]
        return bool(args) and args[0].text in _GIT_READS and not any(
            a.text.startswith(("--ou", "--op", "--ext")) or a.text.startswith("-") and
            not a.text.startswith("--") and "O" in a.text for a in args)
    if name == "find":
        return not any(a.text.startswith(_FIND_WRITES) for a in args)
    return name == "rg" and not any(a.text.startswith("--pre") for a in args)
