"""Replacing a small local file whole: a reader (or a kill -9) sees the old file or the
new one, never half of one, and a failed write (a full disk) leaves no temporary file
behind.  Standard library only, and no ``tempfile`` (its import costs a one-shot command
several ms)."""
from __future__ import annotations

import os


def replace_file(path: str, text: str, *, prefix: str, durable: bool = False) -> None:
    """Write *text* to *path* through a temporary file named *prefix*… beside it, then
    rename it over *path*; *durable*: fsync first.  On any failure the temporary file is
    removed and the error raised, *path* untouched."""
    folder = os.path.dirname(path) or "."
    os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, f"{prefix}{os.getpid()}.{os.urandom(4).hex()}")
    try:
        with open(tmp, "x", encoding="utf-8") as out:
            out.write(text)
            if durable:
                out.flush()
                os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
