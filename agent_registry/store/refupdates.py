"""Ref compare-and-swaps through ``git update-ref --stdin`` processes kept running.

A long-lived process (the MCP server, the dashboard, a heartbeat thread) moves its refs
many times: one ``git update-ref`` process each is 2-3 ms of start-up, most of what a
claim costs there once its reads are warm.  ``update-ref --stdin`` takes transactions
one after another (``start`` / ``update REF NEW OLD`` / ``prepare`` / ``commit``, each
answered ``<command>: ok``), with git's own locking and reflog, so one process serves
them all.  Its reflog message is fixed when it starts: one process per reason
(``agent-registry: claim`` …), the few most recent kept.

From a process's second move on, the move is tried in the process first
(store/looseref.py: git's own steps, where git would do no more), with the identity
git wrote in the reflog line of the last move it made here; whatever that leaves to git
comes here.  From its first move on where an earlier process kept that identity: a
one-shot command then starts no git process to move its ref.

Only the plain success is handled here.  A transaction git refuses (the ref moved: the
lost compare-and-swap; a stale ``.lock``; a folder that cannot be written) ends the
process (git dies on a failed ``prepare``), and the caller runs the one-shot
``update-ref``, which says why and clears what is stale (store/git.py): this module
never decides that a swap was lost.
"""
from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # for annotations only, as in store/flock.py
    from collections.abc import Callable

    from . import spawn
    from .looseref import LooseRefs

KEPT = 4  # processes kept at once, one per reflog reason, the least recently used ended


class RefUpdates:
    """The ``update-ref --stdin`` processes of one repository, started on first need by
    *start* (store/git.py owns the command line, as it owns every git process)."""

    def __init__(self, start: Callable[[str], spawn.Piped],
                 here: Callable[[bool], LooseRefs | None] | None = None) -> None:
        self._start_one = start  # reason -> a new ``update-ref -m REASON --stdin`` (store/git.py)
        self._procs: dict[str, spawn.Piped] = {}  # reason -> its process, oldest first
        self._unsupported = False  # a git without transactions on stdin (before 2.27)
        # the in-process mover (None: never): asked for at the first move (it says None
        # there when no earlier process kept git's identity), made at the second
        self._make_here = here
        self._asked = False
        self._here: LooseRefs | None = None
        self._witnessed: tuple[str, str, str] | None = None  # (ref, old, new) git just moved

    def update(self, ref: str, new: str, old: str, reason: str) -> bool | None:
        """Move *ref* from *old* to *new* (*old* all zeros: it must not exist yet).
        True when it moved; False when it did not go through here (nothing changed: ask
        the one-shot update-ref); None when git died after it had locked the ref, so the
        caller must read where the ref is."""
        if self._here is None and self._make_here is not None and \
                (self._witnessed is not None or not self._asked):
            self._here = self._make_here(not self._asked)
            self._asked = True
        if self._witnessed is not None and self._here is not None:
            self._here.witnessed(*self._witnessed)
        self._witnessed = None
        if self._here is not None:
            moved = self._here.move(ref, new, old, reason)
            if moved is not None:
                return moved
        if self._unsupported:
            return False
        proc = self._procs.pop(reason, None)
        fresh = proc is None
        if proc is None:
            proc = self._start(reason)
        answers = []
        try:
            proc.stdin.write(f"start\nupdate {ref} {new} {old}\nprepare\ncommit\n".encode())
            proc.stdin.flush()
            for expected in (b"start: ok\n", b"prepare: ok\n", b"commit: ok\n"):
                line = proc.stdout.readline()
                if line != expected:
                    break
                answers.append(line)
        except (BrokenPipeError, OSError):
            pass
        if len(answers) == 3:
            self._procs[reason] = proc  # the most recently used last
            self._witnessed = (ref, old, new)  # its reflog line names git's identity
            return True
        self._end(proc)
        if not answers:  # a new one not taking "start": this git has no transactions
            self._unsupported = fresh
            return False
        return None if len(answers) == 2 else False

    def _start(self, reason: str) -> spawn.Piped:
        while len(self._procs) >= KEPT:
            self._end(self._procs.pop(next(iter(self._procs))))
        return self._start_one(reason)

    @staticmethod
    def _end(proc: spawn.Piped) -> None:
        try:
            proc.stdin.close()
        except OSError:
            pass  # it died: reaped all the same
        proc.wait()

    def close(self) -> None:
        while self._procs:
            self._end(self._procs.popitem()[1])
