"""What the backstop's checks of a working tree put back (harness/putback.py), kept for
the checks of calls running beside them: a call noted while another call's command had
written a held file noted that write, and is to compare the file with what the other
call's check put back, not with its own note."""
from __future__ import annotations

import os
import time

from ..store.jsontext import loads
from .after import LATE_KEPT, remove


class Restored:
    """What the checks of this working tree put back, a small file per path beside its
    notes' folder (``backstop-restored/<sha1 of the path>``: when, and the state put
    back), kept a day: a check of a call noted before another call's check put a file
    back compares the file with what was put back, not with its note."""

    def __init__(self, where: str) -> None:
        self.folder = os.path.join(where, "backstop-restored")

    def _path(self, rel: str) -> str:
        from hashlib import sha1
        return os.path.join(self.folder, sha1(os.fsencode(rel)).hexdigest())

    def since(self, rel: str, at: float) -> dict | None:
        """The state *rel* was put back to after *at*, if it was."""
        try:
            with open(self._path(rel), "rb") as f:
                record = loads(f.read())
        except (OSError, ValueError, RecursionError):
            return None
        if not isinstance(record, dict) or not isinstance(record.get("at"), (int, float)) \
                or record["at"] < at or record.get("path") != rel:
            return None
        return {key: record.get(key) for key in ("blob", "mode", "perm")}

    def record(self, rel: str, entry: dict) -> None:
        """Keep that *rel* was put back to *entry* now (written whole, renamed in); best
        effort: the file is back either way, and only a check of a call running beside
        this one would read it."""
        from ..store.jsontext import dumps
        path = self._path(rel)
        tmp = f"{path}.{os.getpid()}.tmp"
        try:
            os.makedirs(self.folder, exist_ok=True)
            with open(tmp, "w", encoding="utf-8", errors="surrogatepass") as f:
                f.write(dumps({"at": time.time(), "path": rel, **entry}))
            os.replace(tmp, path)
            old = time.time() - LATE_KEPT
            for e in os.scandir(self.folder):
                if e.stat().st_mtime < old:
                    remove(e.path)
        except OSError:  # the disk full, or a record removed by another check meanwhile
            remove(tmp)
