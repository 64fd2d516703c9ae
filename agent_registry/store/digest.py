"""Hex digests for the one-shot commands: CPython's own ``_sha1`` and ``_sha256``, which
hash the same bytes as hashlib without loading OpenSSL (importing hashlib costs about as
much as the rest of a `lock check`'s own modules: tests/test_import_budget.py).  A Python
built without them gets hashlib."""
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

# algorithm -> its constructor, found once: `status` names 10,000 lock records, and an
# import statement on each cost it about as much as the hashing
_FOUND: "dict[str, Callable]" = {}


def hexdigest(algorithm: str, data: bytes) -> str:
    """The hex *algorithm* ("sha1" or "sha256"; any other name goes to hashlib) of *data*."""
    new = _FOUND.get(algorithm) or _constructor(algorithm)
    return new(data).hexdigest()


def _constructor(algorithm: str) -> "Callable":
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

        def new(data: bytes, name: str = algorithm):
            return hashlib.new(name, data)
    _FOUND[algorithm] = new
    return new
