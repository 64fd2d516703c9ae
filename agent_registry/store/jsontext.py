"""JSON for the one-shot commands without the ``json`` package: CPython's own ``_json``
scanner and string encoders, the C code ``json`` itself runs.  Importing ``json`` brings
``re`` and ``enum`` and compiles six patterns, about 5 ms of a 20 ms ``lock check``
(tests/test_import_budget.py); the records on the branch are a few hundred bytes, which
this module writes in Python, byte for byte as ``json.dumps`` does (tests/test_jsontext.py).
A Python without ``_json``, or a value of a type JSON does not know, gets ``json``."""
try:
    from _json import encode_basestring, encode_basestring_ascii, make_encoder, make_scanner
except ImportError:  # not CPython: the json package does all of it
    make_scanner = make_encoder = None

_SPACE = " \t\n\r"


class _Unusual(Exception):
    """A value this module leaves to ``json`` (floats that are not finite, keys that are
    not strings, other types)."""


class _Context:
    """What ``_json.make_scanner`` reads off a ``json.JSONDecoder``: the defaults."""
    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int

    @staticmethod
    def parse_constant(name: str) -> float:
        return {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}[name]


_scan = make_scanner(_Context()) if make_scanner is not None else None


def loads(text: str | bytes):
    """``json.loads(text)``: a ValueError (a ``json.JSONDecodeError`` where the scanner
    raises one) when *text* is not one JSON value."""
    if isinstance(text, (bytes, bytearray)):
        # json's own reading of bytes, for UTF-8 without a BOM (what the branch holds)
        if _scan is not None and not text.startswith(b"\xef\xbb\xbf") and b"\x00" not in text[:4]:
            text = text.decode("utf-8", "surrogatepass")
    if _scan is None or not isinstance(text, str):
        import json
        return json.loads(text)
    value, end = raw_decode(text, len(text) - len(text.lstrip(_SPACE)))
    if text[end:].strip(_SPACE):
        raise ValueError(f"Extra data: char {end}")
    return value


def raw_decode(text: str, start: int = 0) -> tuple[object, int]:
    """``json.JSONDecoder().raw_decode(text, start)``: the JSON value at *start* (no
    space before it) and where it ends."""
    if _scan is not None:
        try:
            return _scan(text, start)
        except StopIteration as stop:
            raise ValueError(f"Expecting value: char {stop.value}") from None
        except SystemError:  # the scanner raises json.decoder's JSONDecodeError, found only
            pass             # where json was imported: json says what is wrong instead
    import json
    return json.JSONDecoder().raw_decode(text, start)


def dumps(value, *, indent: int | None = None, ensure_ascii: bool = True,
          sort_keys: bool = False, default=None) -> str:
    """``json.dumps`` with these arguments (and the default separators); *default* is
    used the way json uses it, by json (a value only it can write)."""
    if _scan is not None:  # _json is here
        string = encode_basestring_ascii if ensure_ascii else encode_basestring
        if indent is None:  # json's own C encoder, as json.dumps runs it: a note of
            try:            # 1,000 files (harness/backstop.py) is written in ~1 ms, not 10
                return "".join(make_encoder({}, _unknown, string, None, ": ", ", ",
                                            sort_keys, False, False)(value, 0))
            except (TypeError, ValueError):  # a type, or a float, only json writes
                pass
        else:
            out: list[str] = []
            try:
                _encode(value, out, indent, 0, string, sort_keys)
                return "".join(out)
            except _Unusual:
                pass
    import json
    return json.dumps(value, indent=indent, ensure_ascii=ensure_ascii, sort_keys=sort_keys,
                      default=default)


def _unknown(value):
    raise TypeError(type(value).__name__)  # json.dumps writes it, with its *default*


def _encode(value, out: list[str], indent: int | None, level: int, string, sort_keys: bool) -> None:
    if isinstance(value, str):
        out.append(string(value))
    elif value is None or value is True or value is False:
        out.append("null" if value is None else "true" if value else "false")
    elif isinstance(value, int) and not isinstance(value, bool):
        out.append(int.__repr__(value))
    elif isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise _Unusual
        out.append(float.__repr__(value))
    elif isinstance(value, (dict, list, tuple)):
        is_dict = isinstance(value, dict)
        if not value:
            out.append("{}" if is_dict else "[]")
            return
        if indent is None:
            pad, close, comma = "", "", ", "
        else:
            pad = "\n" + " " * (indent * (level + 1))
            close, comma = "\n" + " " * (indent * level), ","
        out.append("{" if is_dict else "[")
        if is_dict:
            items = value.items()
            if any(not isinstance(key, str) for key in value):
                raise _Unusual
            for number, (key, item) in enumerate(sorted(items) if sort_keys else items):
                out.append((comma if number else "") + pad + string(key) + ": ")
                _encode(item, out, indent, level + 1, string, sort_keys)
        else:
            for number, item in enumerate(value):
                out.append((comma if number else "") + pad)
                _encode(item, out, indent, level + 1, string, sort_keys)
        out.append(close + ("}" if is_dict else "]"))
    else:
        raise _Unusual
