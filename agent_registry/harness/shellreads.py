"""The programs that write no file, for harness/shellwrites.py: a shell command made of
these alone, with no redirection into a file, needs no note of the held files around
it (harness/hook.py; docs/hooks.md, "The backstop")."""
import posixpath

from .shelltokens import Word

# programs that write no file, whatever their options and operands (not those that can
# or run another program: sed's w, awk's print >, sort -o, tree -o, file -C, uniq's and
# xxd's second operand, less's !, xargs); by a bare name or from a system folder
READERS = frozenset("""ls cat head tail wc grep egrep fgrep pwd echo true false which type
stat du df diff cmp basename dirname realpath readlink date uname whoami id nl cut tr
column jq sleep seq md5sum sha1sum sha256sum sha512sum od hexdump printenv nproc
""".split())
_SYSTEM_BIN = ("/bin", "/usr/bin", "/usr/local/bin")
_GIT_READS = frozenset("status log diff show ls-files rev-parse blame grep shortlog describe "
                       "ls-tree cat-file".split())
_FIND_WRITES = ("-exec", "-ok", "-fprint", "-fls", "-delete")
# bash's own: found before PATH is looked at
_BUILTINS = frozenset(("echo", "printf", "true", "false", "pwd", "test", "[", "type"))
# readers whose options make bash evaluate an array subscript, which runs $(…) in it
_EVALUATES = {"test": ("-v", "-R"), "[": ("-v", "-R"), "printf": ("-v",)}


def _on_path(name: str) -> str:
    """Where the shell finds the program *name* on PATH (``/usr/bin/ls``); "" when
    nowhere."""
    import os
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        path = posixpath.join(folder or ".", name)
        if os.access(path, os.X_OK) and not os.path.isdir(path):
            return path
    return ""


def reads_only(program: Word, args: list[Word]) -> bool:
    """Does *program* with *args* read files only?  A shell builtin, or a program of
    READERS the shell finds in a system folder; git's reads without an option that
    writes a file (``--output``) or runs a program (``--ext-diff``, ``grep -O`` or
    ``--open-files-in-pager``, each also by a start of its name, as git reads them), nor
    git's own options before them but ``--no-pager``; ``find`` without an action that
    writes or runs; ``rg`` without ``--pre``; none of these with an argument the shell
    computes (an option it may turn out to be)."""
    text = program.text
    if program.dynamic or text not in _BUILTINS and posixpath.dirname(
            posixpath.normpath(text) if "/" in text else _on_path(text)) not in _SYSTEM_BIN:
        return False  # ./ls, or an ls in .venv/bin, is a program of the project's
    name = posixpath.basename(text)
    if name in _EVALUATES:  # test -v 'a[$(cmd)]', printf -v 'a[$(cmd)]': bash runs cmd
        return not any(a.dynamic or a.text.startswith(_EVALUATES[name]) for a in args)
    if name in READERS:
        return True
    if any(a.dynamic for a in args):  # an option the shell computes: any of them
        return False
    if name == "git":
        while args and args[0].text in ("--no-pager", "-P"):  # `git --no-pager log`
            args = args[1:]
        return bool(args) and args[0].text in _GIT_READS and not any(
            a.text.startswith(("--ou", "--op", "--ext")) or a.text.startswith("-") and
            not a.text.startswith("--") and "O" in a.text for a in args)
    if name == "find":
        return not any(a.text.startswith(_FIND_WRITES) for a in args)
    return name == "rg" and not any(a.text.startswith("--pre") for a in args)
