"""The git processes of a one-shot command, started with ``os.posix_spawnp`` rather than
the subprocess module.

Importing subprocess (with locale, signal, threading, selectors, contextlib, warnings)
costs a `lock check` about as much as the rest of its imports together
(tests/test_import_budget.py).  What git.py needs is small: run a program to its end
with its output captured, and keep one running behind two pipes (``cat-file --batch``).
Where posix_spawn is missing (Windows) both fall back to subprocess.  A run may have a
timeout (the network commands): the child is killed when it passes, and TimedOut
raised, here and through subprocess alike.

As subprocess does: SIGPIPE and SIGXFSZ back to their default in the child, its stdin
inherited unless *input* is given, and only the three standard streams passed on
(Python opens every other file descriptor non-inheritable).
"""
from __future__ import annotations

import os

_SPAWN = getattr(os, "posix_spawnp", None)


class Completed:
    """What :func:`run` returns: the fields of subprocess.CompletedProcess it is used for."""

    __slots__ = ("args", "returncode", "stdout", "stderr")

    def __init__(self, args: list[str], returncode: int, stdout: bytes, stderr: bytes) -> None:
        self.args, self.returncode, self.stdout, self.stderr = args, returncode, stdout, stderr


class TimedOut(Exception):
    """A :func:`run` with a timeout whose child had not ended when it passed (killed)."""

    def __init__(self, argv: list[str], timeout: float) -> None:
        super().__init__(f"{' '.join(argv[:2]) or 'a child'} ran past {timeout:g} s")
        self.argv, self.timeout = argv, timeout


def _default_signals() -> tuple[int, ...]:
    import _signal  # built in, loaded at start-up: not the signal module's enums
    return tuple(getattr(_signal, name) for name in ("SIGPIPE", "SIGXFSZ") if hasattr(_signal, name))


def _start(argv: list[str], env: dict[str, str] | None, actions: list) -> int:
    return _SPAWN(argv[0], argv, os.environ if env is None else env, file_actions=actions,
                  setsigdef=_default_signals())


def run(argv: list[str], *, env: dict[str, str] | None = None, input: bytes | None = None,
        timeout: float | None = None, cwd: str | None = None) -> Completed:
    """Run *argv* to its end, stdout and stderr captured, *input* (if any) on stdin;
    TimedOut (the child killed) when it runs past *timeout* seconds.  In another
    directory (*cwd*), through subprocess: posix_spawn has no portable chdir."""
    if cwd is not None:
        import subprocess
        try:
            proc = subprocess.run(argv, env=env, input=input, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, timeout=timeout, cwd=cwd)
        except subprocess.TimeoutExpired:
            raise TimedOut(argv, timeout) from None
        return Completed(argv, proc.returncode, proc.stdout, proc.stderr)
    return Running(argv, env, input).finish(timeout)


class Running:
    """A child started with its stdout and stderr captured (and *input*, if any, for its
    stdin), finished by ``finish()``: the caller works while it runs (the pre-commit
    guard reads the glob locks while `git diff --cached` lists the staged paths)."""

    def __init__(self, argv: list[str], env: dict[str, str] | None = None,
                 input: bytes | None = None) -> None:
        self.argv, self.input, self._popen = argv, input, None
        if _SPAWN is None:
            import subprocess
            self._popen = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE,
                                           stderr=subprocess.PIPE, stdin=None if input is None
                                           else subprocess.PIPE)
            return
        self.out_r, out_w = os.pipe()
        self.err_r, err_w = os.pipe()
        in_r = self.in_w = None
        actions = [(os.POSIX_SPAWN_DUP2, out_w, 1), (os.POSIX_SPAWN_DUP2, err_w, 2)]
        if input is not None:
            in_r, self.in_w = os.pipe()
            actions.append((os.POSIX_SPAWN_DUP2, in_r, 0))
        try:
            self.pid = _start(argv, env, actions)
        except BaseException:
            for fd in (self.out_r, out_w, self.err_r, err_w, in_r, self.in_w):
                if fd is not None:
                    os.close(fd)
            raise
        for fd in (out_w, err_w, in_r):
            if fd is not None:
                os.close(fd)

    def finish(self, timeout: float | None = None) -> Completed:
        """Its output and exit code once it has ended; TimedOut (the child killed) when
        that takes more than *timeout* seconds."""
        if self._popen is not None:
            import subprocess
            try:
                out, err = self._popen.communicate(self.input, timeout=timeout)
            except subprocess.TimeoutExpired:
                self._popen.kill()
                self._popen.wait()
                raise TimedOut(self.argv, timeout) from None
            return Completed(self.argv, self._popen.returncode, out, err)
        try:
            chunks = _communicate(self.out_r, self.err_r, self.in_w, self.input or b"", timeout)
        except TimedOut:
            _kill(self.pid)
            os.waitpid(self.pid, 0)
            raise TimedOut(self.argv, timeout) from None
        except BaseException:  # interrupted: its pipes are closed (git ends on EOF or
            os.waitpid(self.pid, 0)   # SIGPIPE), and it is reaped, not left behind
            raise
        _, status = os.waitpid(self.pid, 0)
        return Completed(self.argv, os.waitstatus_to_exitcode(status),
                         b"".join(chunks[self.out_r]), b"".join(chunks[self.err_r]))


def _kill(pid: int) -> None:
    import _signal
    try:
        os.kill(pid, _signal.SIGKILL)
    except ProcessLookupError:
        pass


def _communicate(out_r: int, err_r: int, in_w: int | None, data: bytes,
                 timeout: float | None = None) -> dict[int, list[bytes]]:
    """Write *data* to *in_w* and read *out_r* and *err_r* to their ends, all at once (a
    child that fills one pipe while we wait on another would never finish); TimedOut
    when that takes more than *timeout* seconds."""
    import select
    import time
    deadline = None if timeout is None else time.monotonic() + timeout
    chunks: dict[int, list[bytes]] = {out_r: [], err_r: []}
    poller = select.poll()
    poller.register(out_r, select.POLLIN)
    poller.register(err_r, select.POLLIN)
    open_fds = {out_r, err_r}
    view = memoryview(data)
    if in_w is not None:
        if data:
            # never block on a write: a child that stops reading its stdin until we read
            # its full stdout would wait for us while we waited for it
            os.set_blocking(in_w, False)
            poller.register(in_w, select.POLLOUT)
            open_fds.add(in_w)
        else:
            os.close(in_w)
    try:
        while open_fds:
            # in whole milliseconds, rounded up: no busy polls in the deadline's last one
            wait = None if deadline is None else max(0, int((deadline - time.monotonic()) * 1000) + 1)
            ready = poller.poll(wait)
            if not ready and deadline is not None and time.monotonic() >= deadline:
                raise TimedOut([], timeout)  # run() names the command
            for fd, _event in ready:
                if fd == in_w:
                    try:
                        view = view[os.write(in_w, view[:65536]):]
                    except BlockingIOError:
                        continue
                    except BrokenPipeError:
                        view = view[:0]
                    if not view:
                        poller.unregister(in_w)
                        open_fds.discard(in_w)
                        os.close(in_w)
                    continue
                block = os.read(fd, 65536)
                if block:
                    chunks[fd].append(block)
                else:
                    poller.unregister(fd)
                    open_fds.discard(fd)
    finally:
        for fd in open_fds | {out_r, err_r}:
            try:
                os.close(fd)
            except OSError:
                pass
    return chunks


class Piped:
    """A child kept running behind two pipes (``git cat-file --batch``): ``stdin`` and
    ``stdout`` are buffered binary files, its stderr goes to the null device; ``wait()``
    reaps it.  The part of subprocess.Popen that git.py's ObjectReader uses."""

    def __init__(self, argv: list[str], env: dict[str, str] | None = None) -> None:
        self._popen = None
        if _SPAWN is None:
            import subprocess
            self._popen = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE,
                                           stdout=subprocess.PIPE,
                                           stderr=subprocess.DEVNULL)
            self.stdin, self.stdout = self._popen.stdin, self._popen.stdout
            return
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        actions = [(os.POSIX_SPAWN_DUP2, in_r, 0), (os.POSIX_SPAWN_DUP2, out_w, 1),
                   (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0)]
        try:
            self.pid = _start(argv, env, actions)
        except BaseException:
            for fd in (in_r, in_w, out_r, out_w):
                os.close(fd)
            raise
        os.close(in_r)
        os.close(out_w)
        self.stdin = open(in_w, "wb")
        self.stdout = open(out_r, "rb")

    def wait(self) -> int:
        if self._popen is not None:
            return self._popen.wait()
        self.stdout.close()
        _, status = os.waitpid(self.pid, 0)
        return os.waitstatus_to_exitcode(status)
