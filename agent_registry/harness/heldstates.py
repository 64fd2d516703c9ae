"""The held files' states behind the backstop's notes (harness/backstop.py), remembered
per session between them: what a note at 1,000 held files can take from the last note
instead of reading, hashing and encoding again.

Kept per session (heldcache.Kept: ``backstop-cache/states-<session>``) as the lines a note holds (harness/after.py: the paths, their blobs and
modes, their stats), and the blobs' names, under the time the note was taken.  A file's
stat trusted then (git's racy rule counted from that time) is trusted now if it is the
same, whenever its blob was read: it was not changed since a second before that time.
"""
from __future__ import annotations

import os
import time

from ..store.jsontext import dumps, loads
from ..store.layout import RepoInfo, loose_object
from .after import noted_blobs, noted_paths, state_of, untrusted

KEPT = 3600.0  # seconds another session's remembered states are kept (then read again)


class States:
    """The held files' states for a note, remembered per session for the next
    (``<git dir>/agent-registry/backstop-states``: the note's last two lines, kept under
    the time they were taken).  A file whose stat is the one the last note found
    (after.untrusted, git's racy rule included) and whose blob is still a loose object
    keeps that blob, unread (a note at 1,000 held files does not hash them all again);
    any other is read, hashed and its blob written (the git module imported only then).
    When every file is as the last note found it, the remembered lines are the note's,
    copied as they were read, and nothing is written but the note."""

    def __init__(self, info: RepoInfo, sid: str) -> None:
        from .heldcache import Kept
        self.info, self.repo, self.sid = info, None, sid
        self.kept = Kept(info.git_dir, "states", KEPT)
        self.at = 0.0  # when the note was taken: after every file was read
        self.stored: dict[str, bool] = {}

    def note(self, line: bytes) -> tuple[bytes, bytes, bytes]:
        """The note's lines of the files *line* lists (a JSON list of paths, as encoded):
        the paths, their blobs and modes, their stats."""
        section = self.kept.read(self.sid)  # (under, when, count, body)
        lines = section[3].split(b"\n") if section is not None else []
        paths = None
        if len(lines) == 4 and lines[0] == line:
            # the same files as the last note: parsed, their stats and the blobs' names only
            try:
                paths, stats, stored = loads(line), loads(lines[2]), loads(lines[3])
            except (ValueError, RecursionError):
                stats = stored = None
            if isinstance(stats, list) and len(stats) == len(paths) and \
                    isinstance(stored, list) and \
                    self._as_found(paths, stats, section[1], lines[1]) and \
                    all(self._stored(blob) for blob in stored):
                self.at = time.time()
                return line, lines[1], lines[2]
        try:
            return self._noted(loads(line) if paths is None else paths, _remembered(section))
        finally:
            if self.repo is not None:
                self.repo.close()

    def _as_found(self, paths: list[str], stats: list, at: float, blobs_line: bytes) -> bool:
        """Is every file as the last note (at *at*) found it: its stat trusted, or absent
        then and now?"""
        moved = untrusted(self.info.toplevel, paths, stats, at)
        if not moved:
            return True
        kept = noted_blobs(blobs_line, len(paths))
        return kept is not None and all(
            self._absent(paths[i], kept[0][i], stats[i]) for i in moved)

    def _noted(self, paths: list[str], last) -> tuple[bytes, bytes, bytes]:
        """The note's lines, each file's blob the last note's where its stat says so,
        else read, hashed and written; remembered for the next note."""
        old = {rel: i for i, rel in enumerate(last[0])} if last is not None else {}
        blobs, modes, stats = [], [], []
        top = self.info.toplevel.rstrip(os.sep) + os.sep
        for rel in paths:
            j = old.get(rel)
            if j is not None and not untrusted(self.info.toplevel, [rel], [last[3][j]],
                                               last[4]) and self._stored(last[1][j]):
                # as the last note found it: the same blob, and as trusted now as then
                blobs.append(last[1][j])
                modes.append(last[2][j])
                stats.append(last[3][j])
                continue
            data, mode, key = state_of(top + rel)
            blobs.append(self._write(data) if data is not None else None)
            modes.append(mode if data is not None else None)
            stats.append(key)
        self.at = time.time()  # after every file was read: git's racy rule counts from here
        lines = (dumps(paths).encode("utf-8", "surrogatepass"),
                 dumps({"blobs": blobs, "modes": modes}).encode(), dumps(stats).encode())
        stored = dumps(sorted({blob for blob in blobs if blob})).encode()
        self.kept.write(self.sid, "", self.at, len(paths), b"\n".join((*lines, stored)))
        return lines

    def _absent(self, rel: str, blob: object, key: object) -> bool:
        """Is a file noted as absent (a held name not created yet) still absent?"""
        return blob is None and key is None and \
            not os.path.lexists(os.path.join(self.info.toplevel, rel))

    def _write(self, data: bytes) -> str:
        if self.repo is None:  # the git module: only for content to hash and write
            from ..store.git import Repo
            self.repo = Repo(self.info)
        return self.repo.write_object("blob", data)

    def _stored(self, blob: object) -> bool:
        """Is *blob* a loose object here (as the object writer checks: one pruned by a
        ``git gc`` since is written again)?"""
        if not isinstance(blob, str) or len(blob) not in (40, 64) or not blob.isalnum():
            return False
        if blob not in self.stored:
            self.stored[blob] = os.path.exists(loose_object(self.info.common_dir, blob))
        return self.stored[blob]


def _remembered(section) -> tuple[list, list, list, list, float] | None:
    """(paths, blobs, modes, stats, when they were taken) of a session's remembered
    states; None when there are none or they do not say that of each file."""
    if section is None:
        return None
    _, at, count, body = section
    lines = body.split(b"\n")
    found = noted_paths(lines[0], lines[2]) if len(lines) == 4 else None
    kept = noted_blobs(lines[1], count) if found is not None else None
    if found is None or kept is None or len(found[0]) != count:
        return None
    return found[0], kept[0], kept[1], found[1], at
