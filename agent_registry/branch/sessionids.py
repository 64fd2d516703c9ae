"""Session ids as people and agents type them: what looks like one, and which live ids an
unknown one was likely meant to be.  Standard library only (difflib is imported only
when an id is unknown), shared by the core's "unknown session" errors, the console's
reading of a lock command's trailing ``SID``, the MCP server and the harness hooks, so
every face names the same closest ids.
"""
TYPE_CHECKING = False
if TYPE_CHECKING:  # for annotations only: collections costs a one-shot command 1 ms
    from collections.abc import Iterable

# what `register` makes (cli/console.new_session_id: <provider>-<unix time>-<hex>), what
# the harness hooks make (<harness>-<native id>) and what the predecessor's users typed
# (kimi-1720000000): a lower-case word, a hyphen, more id characters; no dot, no slash,
# so a file name (README, setup.py, src/new_file) never looks like one
# ``[a-z0-9]+(?:-[A-Za-z0-9_:@+]+)+``, read without re: importing it cost `lock check A B`
# (whose last word may be the predecessor's SID) some 8 ms, half the command (issue 35)
WORD = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")
ID_CHARS = WORD | frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ_:@+")
SHOWN = 3  # ids an error names


def looks_like_session_id(text: str) -> bool:
    """Does *text* read as a session id `register` would make, rather than a file name?"""
    word, *rest = (text or "").split("-")
    return bool(word) and bool(rest) and WORD.issuperset(word) and \
        all(part and ID_CHARS.issuperset(part) for part in rest)


def closest(sid: str, live: "Iterable[str]", prefer: "Iterable[str]" = (),
            n: int = SHOWN) -> list[str]:
    """The live ids likeliest meant by *sid*, best first, by likeness (difflib's ratio,
    raised for the same leading word: ``kimi-typo`` means a ``kimi-…`` id), leaving out
    those too unlike to be meant; among equally like ids, *prefer*'s (an MCP server's
    own sessions) first.  Never the preferred one over a nearer id: ``cli-2`` typed
    beside a live ``cli-1`` means ``cli-1``, not the server's ``mcp-2``."""
    from difflib import SequenceMatcher
    live = list(dict.fromkeys(live))
    mine = set(prefer)

    def score(other: str) -> float:
        same_word = other.split("-", 1)[0].lower() == sid.split("-", 1)[0].lower()
        return SequenceMatcher(None, sid, other).ratio() + (0.25 if same_word else 0.0)

    scored = {s: score(s) for s in live}
    ranked = sorted((s for s in live if scored[s] >= 0.5),
                    key=lambda s: (scored[s], s in mine), reverse=True)
    # an id like none of them: the caller's own sessions are the likeliest meant
    return (ranked or [s for s in live if s in mine])[:n]


def suggestion(sid: str, live: "Iterable[str]", prefer: "Iterable[str]" = ()) -> str:
    """What to say after "unknown session SID": the closest live ids, else a few live
    ones, else that none is live."""
    live = list(dict.fromkeys(live))
    if not live:
        return "no session is live: register one first"
    near = closest(sid, live, prefer)
    if near:
        return f"did you mean {_or(near)}?"
    more = f" (and {len(live) - SHOWN} more)" if len(live) > SHOWN else ""
    return f"live sessions: {', '.join(live[:SHOWN])}{more}"


def unknown_text(sid: str, live: "Iterable[str]", prefer: "Iterable[str]" = ()) -> str:
    """``unknown session kimi-typo; did you mean kimi-1796160374-de95?``"""
    return f"unknown session {sid}; {suggestion(sid, live, prefer)}"


def _or(ids: list[str]) -> str:
    return ids[0] if len(ids) == 1 else f"{', '.join(ids[:-1])} or {ids[-1]}"
