"""store/jsontext.py writes what json.dumps writes and reads what json.loads reads, without
importing json: compared with the json package over thousands of random values."""
from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest

from agent_registry.store import jsontext

ALPHABET = "az09 _-./:\"\\'\n\t\r\x00\x1f\x7f\u00e9\u2028\u2029\ufeff\u4e2d\U0001f600\ud800"


def text(rng: random.Random) -> str:
    return "".join(rng.choice(ALPHABET) for _ in range(rng.randrange(12)))


def value(rng: random.Random, depth: int = 0):
    kind = rng.randrange(10 if depth < 4 else 6)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice([True, False])
    if kind == 2:
        return rng.choice([0, -1, 7, 2**70, -(2**40)])
    if kind == 3:
        return rng.choice([0.0, -0.0, 1.5, 1e300, -2.5e-308, 0.1 + 0.2, 1e16])
    if kind in (4, 5):
        return text(rng)
    if kind in (6, 7):
        return [value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {text(rng): value(rng, depth + 1) for _ in range(rng.randrange(4))}


@pytest.mark.parametrize("indent", [None, 1, 2])
@pytest.mark.parametrize("ensure_ascii", [True, False])
@pytest.mark.parametrize("sort_keys", [True, False])
def test_dumps_writes_what_json_writes(indent, ensure_ascii, sort_keys):
    rng = random.Random(f"{indent}{ensure_ascii}{sort_keys}")
    for _ in range(1500):
        data = value(rng)
        expected = json.dumps(data, indent=indent, ensure_ascii=ensure_ascii, sort_keys=sort_keys)
        assert jsontext.dumps(data, indent=indent, ensure_ascii=ensure_ascii,
                              sort_keys=sort_keys) == expected


def test_dumps_leaves_what_it_does_not_know_to_json():
    for data in ({1: "a"}, [float("nan")], {"a": float("inf")}, (1, 2), {"k": (None,)}):
        assert jsontext.dumps(data) == json.dumps(data)
    with pytest.raises(TypeError):
        jsontext.dumps({"a": object()})


def test_loads_reads_what_json_reads():
    rng = random.Random(3)
    for _ in range(3000):
        encoded = json.dumps(value(rng), indent=rng.choice([None, 1]),
                             ensure_ascii=rng.choice([True, False]))
        padded = rng.choice(["", " ", "\n\t"]) + encoded + rng.choice(["", "\n", " \r\n"])
        assert jsontext.loads(padded) == json.loads(padded)
        assert jsontext.loads(padded.encode("utf-8", "surrogatepass")) == \
            json.loads(padded.encode("utf-8", "surrogatepass"))


@pytest.mark.parametrize("bad", ["", " ", "{", "[1,]", '{"a" 1}', "1 2", '"\x01"', "nul",
                                 "\ufeff{}", "[1] x", "'a'", "{'a': 1}", '"abc'])
def test_loads_refuses_what_json_refuses(bad):
    with pytest.raises(ValueError):
        json.loads(bad)
    with pytest.raises(ValueError):
        jsontext.loads(bad)


def test_a_process_that_never_imported_json_is_told_what_is_wrong():
    """The C scanner names its errors with json.decoder.JSONDecodeError, which it looks up
    in sys.modules: where json was never imported, that was a SystemError."""
    code = ("import sys; from agent_registry.store import jsontext\n"
            "for bad in ['{not json', '[1,', '{\"a\" 1}', '\"abc', '[1] x', '']:\n"
            "    try:\n        jsontext.loads(bad)\n    except ValueError as exc:\n"
            "        print(isinstance(exc, ValueError) and not isinstance(exc, SystemError))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True"] * 6


def test_loads_reads_the_constants_json_reads():
    values = jsontext.loads('[NaN, Infinity, -Infinity, 1E400]')
    assert [str(v) for v in values] == ["nan", "inf", "-inf", "inf"]


def test_it_does_not_import_json():
    code = ("import sys; from agent_registry.store import jsontext; "
            "jsontext.dumps(jsontext.loads('{\"a\": [1, 2.5, null]}'), indent=1); "
            "print(sorted(m for m in ('json', 're', 'enum') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
