"""``kill``: a live session stopped, its vouched-for owner process signalled when it
runs on this host (the Registry API mixes :class:`KillCalls` in)."""
from __future__ import annotations

import os
import time

from ..branch import paths as P
from ..branch.records import Session
from ..errors import Refused
from ..store.procinfo import backend as procinfo_backend, protected_kind, same_process


class KillCalls:
    """The ``kill`` call of the Registry API."""

    def kill(self, sid: str, *, force: bool = False, grace: float = 5.0,
             by: str | None = None, reason: str | None = None) -> dict:
        """Terminate a live local session's process (SIGTERM, then SIGKILL after *grace*
        seconds; at once with *force*), only if its start time still matches; a session
        of another host is stopped logically.  Either way it ends as Killed.  *by* and
        *reason* (who killed it, and why) go in the commit."""
        for label, value in (("author", by or ""), ("reason", reason or "")):
            P.validate_text(label, value)
        P.validate_session_id(sid)
        self.catch_up()  # the session may be another clone's, registered after our fetch
        session = self.session(sid)
        if not session.live:
            raise Refused(f"session {sid} is not live ({session.status})")
        signalled, spared = None, self._unsignalable(session)
        if spared is None:
            try:
                signalled = _terminate(session.pid, session.pid_start, grace, force)
            except PermissionError:
                spared = f"not allowed to signal its process {session.pid} (another user's)"
        why = f"killed ({signalled or 'logical stop'})" + (f": {reason}" if reason else "")
        result = self.apply(self.new_op("finish", session=sid, status="Killed",
                                     by=by or self.host, reason=why))
        result["signal"], result["not_signalled"] = signalled, spared
        return result

    def _unsignalable(self, session: Session) -> str | None:
        """Why ``kill`` must not signal *session*'s process (it stops the session
        logically instead), or None when it is a vouched-for owner still running here."""
        if session.host != self.host:
            return f"it runs on another host ({session.host})"
        if not session.vouched:
            return ("its owner process was never vouched for (owner: "
                    f"{session.owner or 'not recorded'}), so no process is known to be the agent")
        same = same_process(session.pid, session.pid_start)
        if same is False:
            return f"its process {session.pid} is gone (or the pid now belongs to another process)"
        if same is None or session.pid_start is None:
            why = ("no process information here (neither /proc nor psutil)"
                   if not procinfo_backend().available else "no start time was recorded"
                   if session.pid_start is None else "its start time cannot be read")
            return f"its process {session.pid} cannot be told from a later one with its pid: {why}"
        kind = protected_kind(session.pid)
        return f"its process {session.pid} is {kind}, never signalled" if kind else None


def _terminate(pid: int, started: int, grace: float, force: bool) -> str:
    """Signal the vouched-for owner *pid* (started at *started*, checked by the caller):
    SIGTERM, then SIGKILL after *grace* seconds if the same process still runs.  Whether
    it runs is read (procinfo.same_process), never probed with a signal."""
    import signal  # here: its enums cost every other command's start
    if not force:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if same_process(pid, started) is False:
                return "SIGTERM"
            time.sleep(0.1)
    if same_process(pid, started):
        os.kill(pid, getattr(signal, "SIGKILL", signal.SIGTERM))  # Windows: TerminateProcess
        return "SIGKILL"
    return "SIGTERM"
