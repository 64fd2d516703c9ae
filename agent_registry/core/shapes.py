"""The fields each operation carries, checked before it is applied: when a command makes
it and when sync replays one read back from a commit's ``Registry-Data`` trailer (a
hand-edited or damaged trailer is refused in one line, never half-applied or a crash in
a handler).  Operations defined above the core give their shape to ``operation()``."""
from __future__ import annotations

from ..errors import BadInput

TYPE_CHECKING = False
if TYPE_CHECKING:  # for annotations only: collections costs a one-shot command 1 ms
    from collections.abc import Callable
    Check = tuple[Callable[[object], bool], str]  # (accepts the value?, what it must be)

TEXT: Check = (lambda v: isinstance(v, str), "a string")
NUMBER: Check = (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool), "a number")
COUNT: Check = (lambda v: isinstance(v, int) and not isinstance(v, bool) and v > 0,
                "a positive integer")
AMOUNT: Check = (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0,
                 "a whole number, 0 or more")
FLAG: Check = (lambda v: isinstance(v, bool), "true or false")
MAPPING: Check = (lambda v: isinstance(v, dict), "a mapping")
TEXTS: Check = (lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
                "a list of strings")
SOME_TEXTS: Check = (lambda v: TEXTS[0](v) and len(v) > 0, "a non-empty list of strings")


def one_of(*values: str) -> Check:
    return (lambda v: v in values, "one of " + ", ".join(values))


# every operation: its name and time; "id", "by", "reason" are checked when present
COMMON: dict[str, Check] = {"op": TEXT, "at": NUMBER}
OPTIONAL: dict[str, Check] = {"id": TEXT, "by": TEXT, "reason": TEXT, "session": TEXT}

# name -> fields (optional ones after "?"), filled by operation() as operations register
SHAPES: dict[str, dict[str, Check]] = {}


def check(op: object) -> None:
    """Raise BadInput naming the first field of *op* that is missing or of the wrong kind
    (an operation without a shape is checked for the common fields only)."""
    if not isinstance(op, dict):
        raise BadInput("an operation must be a mapping")
    shape = {**COMMON, **SHAPES.get(op.get("op"), {})}  # type: ignore[arg-type]
    for name, (accepts, what) in {**OPTIONAL, **shape}.items():
        key, optional = (name[1:], True) if name.startswith("?") else (name, name in OPTIONAL
                                                                        and name not in shape)
        if key not in op:
            if optional:
                continue
            raise BadInput(f"operation {op.get('op')!r}: field {key!r} is missing")
        if not accepts(op[key]):
            raise BadInput(f"operation {op.get('op')!r}: field {key!r} must be {what}")
