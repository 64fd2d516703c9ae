"""The patterns a one-shot command used to compile are now checked by hand (no re on the
hot path: tests/test_import_budget.py); each hand-written check agrees with its pattern
over random texts built from the characters that matter to it."""
from __future__ import annotations

import random
import re

import pytest

from agent_registry.branch import render
from agent_registry.branch.paths import is_session_id
from agent_registry.branch.records import _key_line, plain_scalar
from agent_registry.branch.view import _held_block
from agent_registry.store.lazyre import ALNUM, spelled_with


def texts(alphabet: str, longest: int, count: int = 40_000, seed: int = 1):
    rng = random.Random(seed)
    for _ in range(count):
        yield "".join(rng.choice(alphabet) for _ in range(rng.randrange(longest)))


def test_key_lines_read_as_the_pattern_read_them():
    pattern = re.compile(r"([A-Za-z_][\w-]*):(?:\s+(.*))?$")
    for line in texts("aZ_-9: \t\u00e9\u00a0\u2003#x\"\u0661", 9):
        found = pattern.match(line)
        assert _key_line(line) == (found.groups() if found else None), repr(line)


def test_integers_read_as_the_pattern_read_them():
    for text in texts("-0123456789 +x\u0661\u00b2", 5):
        if text.strip() != text or not text or text[0] in "\"'[{|>&*!" or " #" in text:
            continue
        expected = int(text) if re.fullmatch(r"-?\d+", text) else None
        value = plain_scalar(text)
        assert (value if isinstance(value, int) and not isinstance(value, bool) else None) \
            == expected, repr(text)


def test_held_lists_are_found_as_the_pattern_found_them():
    pattern = re.compile(rb"(?m)^locks:\n((?:- [^\n]*\n)*)")
    rng = random.Random(2)
    parts = [b"locks:\n", b"- a\n", b"- b", b"x: 1\n", b"\n", b"locks: []\n", b"- \n",
             b"-x\n", b" locks:\n", b"\nlocks:\n"]
    for _ in range(40_000):
        raw = b"".join(rng.choice(parts) for _ in range(rng.randrange(7)))
        found = pattern.search(raw)
        assert _held_block(raw) == ((found.start(), found.end()) if found else None), raw


@pytest.mark.parametrize("check,pattern", [
    (is_session_id, r"[A-Za-z0-9][A-Za-z0-9._:@+-]{0,127}"),
    (lambda text: spelled_with(text, ALNUM | {"_"}, ALNUM | frozenset("_./-"), 201),
     r"[A-Za-z0-9_][A-Za-z0-9._/-]{0,200}"),
])
def test_names_are_spelled_as_the_pattern_spelled_them(check, pattern):
    compiled = re.compile(pattern)
    for text in list(texts("aZ09._:@+-/ \u00e9\n", 6)) + ["a" * 128, "a" * 129, "a" * 201, "a" * 202]:
        assert check(text) == bool(compiled.fullmatch(text)), repr(text)


def test_templates_fill_as_the_pattern_filled_them(monkeypatch):
    values = {"a": "<A>", "ab": "<AB>", "b_c": "<BC>"}
    placeholder = re.compile(r"\$(\$|[a-z_]+)")
    for template in texts("ab_c$ X-", 10):
        monkeypatch.setattr(render, "read_text", lambda *_args, t=template: t)
        try:
            expected = placeholder.sub(lambda m: "$" if m.group(1) == "$" else values[m.group(1)],
                                       template)
        except KeyError:
            with pytest.raises(KeyError):
                render.fill("x", **values)
            continue
        assert render.fill("x", **values) == expected, repr(template)
