"""Hex digests for the one-shot commands: CPython's own ``_sha1`` and ``_sha256``, which
hash the same bytes as hashlib without loading OpenSSL (importing hashlib costs about as
much as the rest of a `lock check`'s own modules: tests/test_import_budget.py).  A Python
built without them gets hashlib."""
from __future__ import annotations


def hexdigest(algorithm: str, data: bytes) -> str:
    """The hex *algorithm* ("sha1" or "sha256"; any other name goes to hashlib) of *data*."""
    try:
        if algorithm == "sha1":
            from _sha1 import sha1 as new
        elif algorithm == "sha256":
            try:
                from _sha2 import sha256 as new  # Python 3.12 and later
            except ImportError:
                from _sha256 import sha256 as new
        else:
            raise ImportError(algorithm)
    except ImportError:
        import hashlib
        return hashlib.new(algorithm, data).hexdigest()
    return new(data).hexdigest()
