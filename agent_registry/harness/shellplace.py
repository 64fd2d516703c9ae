"""What a command rule (harness/shellrules.py, gitwrites.py) may ask about the directory
its command runs in: the Place of harness/shellops.py, over the walker of
harness/shellwrites.py (its ``disk``, ``unfollowed``, ``env_set`` and ``git_runs``)."""
import os

from .shelltokens import Word

MAX_PATCH = 4 * 1024 * 1024  # bytes of a patch file read to find the files it names
GIT_RUNS, GIT_SECONDS = 8, 3.0  # git lookups of one command (aliases, rev-parse), each


class Here:
    """What a command rule may ask about the directory its command runs in."""

    def __init__(self, walker, here: str | None) -> None:
        self.walker, self.here = walker, here

    def is_dir(self, word: Word) -> bool:
        if word.text.endswith("/"):
            return True
        path = self.walker.disk(word, self.here)
        return path is not None and os.path.isdir(path)

    def exists(self, word: Word) -> bool:
        path = self.walker.disk(word, self.here)
        return path is not None and os.path.lexists(path)

    def read(self, word: Word) -> str | None:
        path = self.walker.disk(word, self.here)
        if path is None or path in ("-", "/dev/stdin"):
            return None
        try:
            with open(path, "rb") as f:
                return f.read(MAX_PATCH).decode("utf-8", "replace")
        except OSError:
            return None

    def unfollowed(self, why: str) -> None:
        self.walker.unfollowed(why)

    @property
    def env_set(self) -> bool:
        """Did the command assign a variable (``GIT_CONFIG_…=``, ``HOME=``) before?"""
        return self.walker.env_set

    def git(self, args: list[str], where: Word | None) -> tuple[int, str, str] | None:
        """(exit code, output, error output) of the read ``git ARGS`` (config,
        rev-parse) run where the command runs (``-C`` *where* below it); None, said
        unfollowed, when git cannot be run there, takes over GIT_SECONDS, or the command
        asked GIT_RUNS already (the gate answers before the harness's timeout)."""
        folder = self.walker.disk(where or Word(".", False, False), self.here)
        self.walker.git_runs += 1
        if folder is None or self.walker.git_runs > GIT_RUNS:
            self.unfollowed(f"git {args[0]} asked where we cannot follow" if folder is None
                            else f"more than {GIT_RUNS} git commands to look up")
            return None
        from ..store.git import run_git  # only for a command that needs it
        from ..store.spawn import TimedOut
        try:  # in the environment the agent's command inherits (GIT_WORK_TREE too)
            proc = run_git(["-C", folder, *args], check=False, timeout=GIT_SECONDS)
        except (OSError, TimedOut) as exc:
            self.walker.git_runs = GIT_RUNS  # one hung: the next would too (a FIFO config)
            why = getattr(exc, "strerror", None) or exc
            self.unfollowed(f"git {args[0]} cannot run ({why})")
            return None
        return (proc.returncode, proc.stdout.decode("utf-8", "replace"),
                proc.stderr.decode("utf-8", "replace"))
