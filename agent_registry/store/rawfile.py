"""Small files read and created with bare system calls.

A one-shot command reads a hundred small files (loose objects, refs) and writes a few
objects: Python's ``open`` adds an ``fstat``, an ``ioctl`` and a buffer to each, about
a quarter of a loose object's reading time.  These do only what the file needs.
"""
import os

_CHUNK = 1 << 16
_BINARY = getattr(os, "O_BINARY", 0)  # Windows: no newline translation


def read_bytes(path: str) -> bytes:
    """The whole of the file at *path* (OSError as ``open`` raises it)."""
    fd = os.open(path, os.O_RDONLY | _BINARY)
    try:
        chunk = os.read(fd, _CHUNK)
        if len(chunk) < _CHUNK:  # a regular file reads short only at its end
            return chunk
        chunks = [chunk]
        while chunk:
            chunk = os.read(fd, _CHUNK)
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def create_read_only(path: str, data: bytes) -> None:
    """A new file at *path* holding *data*, read-only from birth (FileExistsError if
    the name is taken)."""
    fd = create_read_only_fd(path)
    try:
        write_all(fd, data)
    finally:
        os.close(fd)


def create_read_only_fd(path: str) -> int:
    """A new empty file at *path*, read-only from birth, open for writing (its
    descriptor; FileExistsError if the name is taken)."""
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _BINARY, 0o444)


def write_all(fd: int, data: bytes) -> None:
    """All of *data* into the file open as *fd* (a write may take part of it)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
