"""A session's held list read in one parse (issue 35: `lock check` and claims judge a
holder by its session file, which at 1,000 held paths was read line by line).

branch/records.py reads a run of canonical ``- "..."`` lines as one JSON array only when
that reads exactly as the lines would one by one; every other file, hand edits and
damage included, reads as before.
"""
from __future__ import annotations

import pytest

from agent_registry.branch import records
from agent_registry.branch.records import Session, UnreadableRecord, dump_session, load_session
from agent_registry.store import jsontext

HELD = [f"src/pkg{i // 100:02d}/file{i:04d}.py" for i in range(1000)]


def test_a_long_held_list_is_read_in_one_parse(monkeypatch):
    raw = dump_session(Session("holder", status="OnWorking", pid=42, owner="given",
                               heartbeat_at="2026-12-06T09:00:00Z", locks=HELD))
    calls = []
    real = jsontext.loads
    monkeypatch.setattr(jsontext, "loads", lambda text: calls.append(1) or real(text))
    session = load_session(raw)
    assert session.locks == HELD and session.pid == 42 and session.vouched
    assert len(calls) < 40, f"{len(calls)} parses for {len(HELD)} held paths"


def line_by_line(text: str, monkeypatch) -> object:
    """What parse_yaml reads from *text* one line at a time (or the error it raises)."""
    with monkeypatch.context() as patch:
        patch.setattr(records, "QUOTED_BLOCK", 10 ** 9)
        return parsed(text)


def parsed(text: str) -> object:
    try:
        return records.parse_yaml(text)
    except UnreadableRecord as exc:
        return ("unreadable", str(exc))


ITEMS = [f'- "src/f{i:02d}.py"' for i in range(20)]


@pytest.mark.parametrize("odd", [
    None,                                      # all canonical
    '- "src/a.py"  \t',                        # spaces after the string
    '- "src/a.py" # a note',                   # a comment after it
    '- "src/a.py", "src/b.py"',                # two values on one line
    '- "src/a.py",',                           # a trailing comma
    '- "src/\\"quoted\\" \\\\ back.py"',       # escapes
    '- "src/ünïcode.py"',                      # raw non-ASCII, as dump_session writes it
    '- "src/a\u2028b.py"',                     # a line separator splitlines breaks on
    '- "src/unterminated.py',                  # damage
    '- "src/a.py" "src/b.py"',                 # two strings, no comma
    '- 12',                                    # not a string
    '- ["src/a.py"]',                          # a flow list
    '',                                        # a blank line inside the list
    '# a comment line',
])
@pytest.mark.parametrize("where", [0, 10, 19])
def test_a_held_list_reads_the_same_in_one_parse_as_line_by_line(odd, where, monkeypatch):
    items = list(ITEMS)
    if odd is not None:
        items[where] = odd
    text = 'id: "s1"\nstatus: "OnWorking"\nlocks:\n' + "\n".join(items) + '\ntags: []\n'
    assert parsed(text) == line_by_line(text, monkeypatch)
