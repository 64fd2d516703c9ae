"""``named(name, fields)``: a tuple type with named fields, as ``collections.namedtuple``
makes one but without importing collections (with keyword, operator, reprlib and
itertools) or compiling a ``__new__`` from source: about 2 ms of a one-shot command that
holds three of them (tests/test_import_budget.py).  The fields read by name and by index,
unpack, compare and hash as the tuple they are."""
import sys


def named(name: str, fields: str, defaults: tuple = ()) -> type:
    names = tuple(fields.split())
    required = len(names) - len(defaults)

    def __new__(cls, *args, **kwargs):
        if len(args) > len(names):
            raise TypeError(f"{name}() takes {len(names)} arguments, {len(args)} given")
        values = list(args) + [kwargs.pop(n) if n in kwargs else
                               (defaults[i - required] if i >= required else _MISSING)
                               for i, n in enumerate(names) if i >= len(args)]
        if kwargs or any(v is _MISSING for v in values):
            raise TypeError(f"{name}() needs {', '.join(names)}; got {sorted(kwargs) or 'too few'}")
        return tuple.__new__(cls, values)

    def __repr__(self) -> str:
        return f"{name}(" + ", ".join(f"{n}={v!r}" for n, v in zip(names, self)) + ")"

    body = {"__slots__": (), "__new__": __new__, "__repr__": __repr__, "_fields": names,
            "__getnewargs__": lambda self: tuple(self),
            "__module__": sys._getframe(1).f_globals.get("__name__", "__main__")}  # pickle finds it
    for index, field in enumerate(names):
        body[field] = property(lambda self, i=index: tuple.__getitem__(self, i), doc=field)
    return type(name, (tuple,), body)


_MISSING = object()  # a field given no value and having no default
