"""Strict JSON for the per-call hook without importing ``json`` (which imports ``re``: ~40 % of the hook's
import time).

The hook starts once per tool call of every agent, so its imports are most of its cost. ``json``'s own
work is done by its C accelerator ``_json``; ``json/__init__``, ``json.decoder`` and ``json.encoder`` add
regular expressions and pure-Python glue the hook never needs. This module drives ``_json``'s scanner
and encoder directly, with the settings the hook has always used: UTF-8 text, no NaN/Infinity, no
duplicate handling beyond ``json``'s (the last key wins), ASCII output.

Where ``_json`` is missing or its interface differs (another Python implementation), everything falls
back to ``json`` itself; ``tests/clients/test_leanjson.py`` holds both paths equal to ``json`` over
generated documents. Errors: ``JSONError`` (a ValueError) for anything that is not one strict JSON
document; for a precise message, the rare failure path re-reads the text with ``json``.
"""

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

_WS = " \t\n\r"


class JSONError(ValueError):
    """Not one strict JSON document (what, and where when known)."""


class _ScanContext:
    """The attributes ``_json.make_scanner`` reads from its context (``json.JSONDecoder``'s names)."""

    __slots__ = ("memo", "object_hook", "object_pairs_hook", "parse_constant", "parse_float", "parse_int", "strict")

    def __init__(self, parse_constant: "Callable[[str], Any]", parse_float: "Callable[[str], Any]") -> None:
        self.strict = True
        self.object_hook = None
        self.object_pairs_hook = None
        self.parse_float = parse_float
        self.parse_int = int
        self.parse_constant = parse_constant
        self.memo: dict[str, str] = {}


def _refuse_constant(name: str) -> "Any":
    raise ValueError(f"{name} is not JSON")


def _refuse_default(obj: "Any") -> "Any":
    raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")


def _finite(text: str) -> float:
    value = float(text)
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError("number out of range")
    return value


try:
    import _json

    _SCAN = _json.make_scanner(_ScanContext(_refuse_constant, _finite))  # type: ignore[arg-type]
    _ENCODE_ASCII = _json.make_encoder(
        None, _refuse_default, _json.encode_basestring_ascii, None, ":", ",", False, False, False
    )
    _ENCODE_UTF8 = _json.make_encoder(
        None, _refuse_default, _json.encode_basestring, None, ":", ",", False, False, False
    )
    ACCELERATED = True
except (ImportError, AttributeError, TypeError):  # not CPython's accelerator: plain json
    ACCELERATED = False


def _slow_loads(text: str) -> "Any":
    import json

    return json.loads(text, parse_constant=_refuse_constant, parse_float=_finite)


def loads(text: str) -> "Any":
    """One strict JSON document (surrounding whitespace allowed); JSONError otherwise."""
    try:
        return _loads(text)
    except JSONError:
        raise
    except (ValueError, RecursionError) as exc:
        raise JSONError(str(exc) if isinstance(exc, ValueError) else "JSON nested too deeply") from None


def _loads(text: str) -> "Any":
    if not ACCELERATED:
        return _slow_loads(text)
    start = len(text) - len(text.lstrip(_WS))
    try:
        obj, end = _SCAN(text, start)
    except (StopIteration, SystemError, ValueError) as exc:
        # Without json.decoder imported the accelerator cannot build its error (SystemError): json says
        # where and why. A ValueError of our own (a constant, a number out of range) is kept as it is.
        if isinstance(exc, ValueError) and type(exc).__name__ != "JSONDecodeError":
            raise
        _slow_loads(text)
        raise JSONError("not JSON") from None  # json accepted what the scanner did not: refuse anyway
    if text[end:].strip(_WS):
        _slow_loads(text)
        raise JSONError("extra data after the JSON document") from None
    return obj


def dumps(obj: "Any") -> str:
    """Compact ASCII JSON (non-ASCII and lone surrogates escaped); ValueError for NaN/Infinity."""
    if not ACCELERATED:
        import json

        return json.dumps(obj, separators=(",", ":"), allow_nan=False)
    return "".join(_ENCODE_ASCII(obj, 0))


def utf8_checked(obj: "Any") -> None:
    """UnicodeEncodeError if any string in ``obj`` holds a lone surrogate (msgspec refuses those)."""
    if not ACCELERATED:
        import json

        json.dumps(obj, ensure_ascii=False).encode("utf-8")
        return
    "".join(_ENCODE_UTF8(obj, 0)).encode("utf-8")
