"""Are the blobs the backstop's last note named still in the object store?  Its next note
keeps them unread when so (harness/backstop.py); this module answers it at the cost of
a stat per object folder, not one per blob."""
import os
import time

try:  # the C function, without functools.py's import (the hook imports it nowhere else)
    from _functools import partial
except ImportError:  # another Python than CPython
    from functools import partial

from ..store.jsontext import dumps, loads
from .after import attrgetter, eq

_STAMP = attrgetter("st_mtime_ns", "st_ctime_ns", "st_ino")  # a fan-out folder's stamp
RESTAMP = 32  # blobs looked up one by one in a note before the folders are stamped again


class StoredBlobs:
    """Are the blobs the last note named still loose objects here (as the object writer
    checks: one pruned by a ``git gc`` since is written again)?  Looking each up cost a
    note of 1,000 held files with as many contents ~10 ms, three times the rest of it.
    So a note keeps, with its blobs, the stamp (times and inode) of each fan-out folder
    they are in (``objects/xx``): git's prune and repack remove a loose object by
    unlinking it, which sets the folder's times, so a folder still as stamped has lost
    none of the blobs that were there when the stamp was taken, and only the blobs of
    the others are looked up.  Hence the order: a folder's stamp is taken before any of
    its blobs is trusted or looked up in this note, and kept only when the folder did
    not change in the two seconds before the note began (a file system's times may be
    whole seconds, or two, and a change in the tick of the stamp would not show); a
    folder this note wrote a blob into is then too new to keep (its next note looks
    that blob up).  A new object in a folder changes it too (each registry write makes
    a few), so once more than RESTAMP blobs were looked up the stamps are taken again.
    All by names relative to the object folder (two names for the kernel to walk, not
    the whole path)."""

    def __init__(self, common_dir: str) -> None:
        self.root = os.path.join(common_dir, "objects")
        self.fd: int | None = None
        self.since = time.time_ns()  # before any folder is looked at
        self.blobs: list | None = None  # the last note's, each once (None: unread)
        self.named: set = set()
        self.stamps: dict[str, object] = {}  # fan-out folder -> its stamp then
        self.taken: dict[str, list[int]] = {}  # fan-out folder -> its stamp now
        self.found: dict[str, bool] = {}  # blob -> stored, folder -> as stamped
        self.looked_up = 0

    def stamped(self, line: bytes) -> None:
        """Take the last note's blobs and folder stamps (its sixth *line*)."""
        try:
            kept = loads(line)
        except (ValueError, RecursionError):
            return
        if isinstance(kept, dict) and isinstance(kept.get("blobs"), list) and \
                isinstance(kept.get("folders"), dict):
            self.blobs, self.stamps = kept["blobs"], kept["folders"]
            self.named = {blob for blob in self.blobs if isinstance(blob, str)}

    def all_stored(self) -> bool:
        """Is every blob the last note named still stored (False when it named none as
        this version writes them: an earlier version's, or a damaged line)?  Each folder
        looked at once, and only the blobs of one not as stamped one by one."""
        blobs = self.blobs
        if blobs is None:
            return False
        try:  # names as this version writes them, checked by C code (1,000 a note; a
            # str's isalnum looks up each character's Unicode class: ten times slower)
            names = "".join(blobs)
            if blobs and not (names.isascii() and names.encode().isalnum()
                              and set(map(len, blobs)) <= {40, 64}):
                return False
        except TypeError:
            return False
        fans = {blob[:2] for blob in blobs}
        changed = {fan for fan in self._unlike_stamps(fans) if not self._as_stamped(fan)}
        return not changed or all(map(self.stored, [blob for blob in blobs
                                                    if blob[:2] in changed]))

    def _unlike_stamps(self, fans: set[str]) -> list[str]:
        """Those of *fans* not found as the last note stamped them (or not stamped then).
        The others are the usual case: their stats are taken and compared by C code
        (~250 folders at 1,000 held files, a Python call each cost as much again), and
        they are marked as found as stamped, the stamp taken now being the last one."""
        stamps = self.stamps
        known = [fan for fan in fans if fan in stamps]
        try:
            if self._open() < 0:
                return list(fans)
            same = list(map(eq, map(_STAMP, map(partial(os.stat, dir_fd=self.fd), known)),
                            map(tuple, map(stamps.__getitem__, known))))
        except (OSError, TypeError):  # a folder gone, a damaged stamp: folder by folder
            return list(fans)
        for fan, alike in zip(known, same):
            if alike:
                self.found[fan] = True
                self.taken[fan] = stamps[fan]
        return [fan for fan in fans if not self.found.get(fan)]

    def stored(self, blob: object) -> bool:
        """Is *blob*, one the last note named, a loose object here?"""
        if not isinstance(blob, str) or len(blob) not in (40, 64) or not blob.isalnum():
            return False
        found = self.found.get(blob)
        if found is None:
            same = self._as_stamped(blob[:2]) and blob in self.named
            if not same:
                self.looked_up += 1
            found = self.found[blob] = same or self._stamp(f"{blob[:2]}/{blob[2:]}") is not None
        return found

    def _as_stamped(self, fan: str) -> bool:
        """Is the fan-out folder *fan* as the last note stamped it?  (Its stamp now is
        taken here, before any of its blobs is trusted or looked up.)"""
        same = self.found.get(fan)
        if same is None:
            now = self._stamp(fan)
            if now is not None:
                self.taken[fan] = now
            same = self.found[fan] = now is not None and self.stamps.get(fan) == now
        return same

    def restamp_due(self) -> bool:
        """Were so many blobs looked up one by one that the folders are to be stamped
        again?"""
        return self.looked_up > RESTAMP

    def line(self, blobs: list) -> bytes:
        """A note's sixth line: *blobs* each once, and the stamps of their folders taken
        in this note before their blobs were looked at, those that had not changed in
        the two seconds before it began."""
        names = sorted({blob for blob in blobs if isinstance(blob, str) and blob})
        settled = self.since - 2_000_000_000
        folders = {}
        for fan in sorted({blob[:2] for blob in names}):
            stamp = self.taken.get(fan)
            if stamp is not None and max(stamp[0], stamp[1]) < settled:
                folders[fan] = stamp
        return dumps({"blobs": names, "folders": folders}).encode()

    def _stamp(self, name: str) -> list[int] | None:
        """[mtime, ctime, inode] of *name* in the object folder; None when it is not there."""
        try:
            st = os.stat(name, dir_fd=self.fd) if self._open() >= 0 else \
                os.stat(os.path.join(self.root, name))
        except OSError:
            return None
        return list(_STAMP(st))

    def _open(self) -> int:
        """The object folder's descriptor, opened once (-1 where stats cannot take one;
        raises OSError when it cannot be opened)."""
        if self.fd is None:
            self.fd = os.open(self.root, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)) \
                if os.stat in os.supports_dir_fd else -1
        return self.fd

    def close(self) -> None:
        if self.fd is not None and self.fd >= 0:
            os.close(self.fd)
        self.fd = None
