"""Lock records known to hold no claim's reason, by blob id (issue 35).

``status`` shows why each lock of its sessions was claimed, and at 10,000 locks reading
every record costs it ~0.2 s of CPU, nearly all of it for records without a reason.  A
blob never changes, so a record found without a reason once is not read again by this
clone: its id is kept in the clone's local state folder (never committed), one per line.
A missing or damaged file only means reading the records again; a record claimed anew
(with a reason or not) is a new blob, read once.
"""
from __future__ import annotations

from .paths import record_name

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing on every command
if TYPE_CHECKING:
    from .view import View

FILE = "reasonless-records"
# Kept only once a process has met this many records: below it, reading them all again
# costs a few ms, and a status of a small registry leaves no file behind (it stays
# read-only on disk, as `status --repos` across a person's repositories should).
KEEP_FROM = 100

_known: dict[str, set[str]] = {}  # file -> the ids it held when read, and those found since
_met: dict[str, set[str]] = {}  # file -> of those, the ones this process met: what it writes


def known(repo) -> set[str]:
    """The ids of the lock records this clone found without a reason."""
    path = repo.state_path(FILE)
    if path not in _known:
        try:
            with open(path, "rb") as f:
                _known[path] = set(f.read().decode("ascii", "replace").split())
        except OSError:
            _known[path] = set()
        _met[path] = set()
    return _known[path]


def remember(repo, met: set[str], found: set[str]) -> None:
    """Note the ids of records met again (*met*) and just found without a reason
    (*found*); when there are new ones, write the file with the ids this process met, so
    the records of released locks leave it as the new ones come in.  A write that fails
    leaves it as it was (the records are read again next time)."""
    path = repo.state_path(FILE)
    before = known(repo)
    _met[path] |= met | found
    if found <= before or len(_met[path]) < KEEP_FROM:
        return
    before |= found
    from ..store.atomic import replace_file  # only when there is something new
    try:
        replace_file(path, "\n".join(sorted(_met[path])) + "\n", prefix=".reasonless.")
    except OSError:
        pass


def may_give(view: View, targets: list[str]) -> list[str]:
    """Those of *targets* whose lock record in *view* may hold a claim's reason, their
    records read in one batch but for those found without one before.  Exact without
    parsing: a record with no ``reason`` in its bytes and no backslash (no JSON escape
    could spell the key) has no holder with a reason; a record that cannot be parsed has
    none either (View._recover gives its holders no reason)."""
    names = [record_name(t) for t in targets]
    ids, before = record_ids(view, names), known(view.repo)
    unread = [n for n in names if ids.get(n) not in before]
    view.prefetch(unread)
    maybe, without = set(), set()
    for name in unread:
        if (raw := view.read(name)) is None:
            continue
        if b"reason" in raw or b"\\" in raw:
            maybe.add(name)
        elif ids.get(name):
            without.add(ids[name])
    remember(view.repo, {i for n in names if (i := ids.get(n)) in before}, without)
    return [t for t, name in zip(targets, names) if name in maybe]


def record_ids(view: View, names: list[str]) -> dict[str, str | None]:
    """The blob id of each record of *names* in *view*, from its folder's listing (one
    read per folder); None for one the view's operation writes."""
    listings: dict[str, dict[str, str | None]] = {}
    out: dict[str, str | None] = {}
    for name in names:  # one pass: `status` asks it of every held path
        folder, _, base = name.rpartition("/")
        listing = listings.get(folder)
        if listing is None:
            listing = listings[folder] = view.listing(folder)
        if base in listing:
            out[name] = listing[base]
    return out
