"""Untrusted text never reaches the terminal as a control: every attack character comes out visible."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from nexus_clients.tui.escaping import ESCAPE_STYLE, escape_plain, has_hidden, needs_escape, safe_text

ATTACKS = {
    "ansi clear screen": ("ls\x1b[2J\x1b[H", "\\e"),
    "osc title": ("x\x1b]0;pwned\x07", "\\x07"),
    "carriage return overwrite": ("rm -rf ~\rls -la   ", "\\r"),
    "backspace": ("curl evil\x08\x08\x08\x08safe", "\\x08"),
    "bidi override": ("echo \u202egnp.exe", "\\u202e"),
    "bidi isolate": ("a\u2066b\u2069", "\\u2066"),
    "zero width space": ("git\u200bpush", "\\u200b"),
    "zero width joiner": ("a\u200db", "\\u200d"),
    "bom": ("\ufeffls", "\\ufeff"),
    "line separator": ("ok\u2028rm -rf ~", "\\u2028"),
    "nbsp looks like space": ("rm\u00a0-rf", "\\xa0"),
    "c1 csi": ("x\x9b31m", "\\x9b"),
    "nul": ("a\x00b", "\\x00"),
    "soft hyphen": ("pass\u00adwd", "\\xad"),
}


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_attack_characters_are_shown_escaped(name: str) -> None:
    raw, marker = ATTACKS[name]
    text = safe_text(raw)
    assert marker in text.plain
    assert not any(needs_escape(ch) for ch in text.plain)
    assert any(span.style == ESCAPE_STYLE for span in text.spans), "escapes must be highlighted"
    assert has_hidden(raw)
    assert marker in escape_plain(raw)


def test_newline_is_escaped_on_one_line_but_kept_in_blocks() -> None:
    assert safe_text("a\nb").plain == "a\\nb"
    assert safe_text("a\nb", multiline=True).plain == "a\nb"
    assert safe_text("a\r\nb", multiline=True).plain == "a\\r\nb"


def test_markup_is_never_parsed() -> None:
    raw = "[bold red]fake[/] [link=file:///etc/passwd]x[/link] [@click=app.quit]q[/]"
    text = safe_text(raw)
    assert text.plain == raw
    assert not text.spans


def test_long_lines_are_cut_with_a_marker() -> None:
    raw = "echo ok" + " " * 1000 + "; rm -rf ~"
    text = safe_text(raw, max_line=100)
    assert "more" not in raw
    assert "(+" in text.plain and "chars on this line" in text.plain
    assert len(text.plain) < 200


def test_many_lines_are_cut_with_a_marker() -> None:
    text = safe_text("x\n" * 1000, multiline=True, max_lines=10)
    assert text.plain.count("\n") == 10
    assert "more lines not shown" in text.plain


def test_ordinary_unicode_is_left_alone() -> None:
    for raw in ("naïve café", "日本語のテキスト", "emoji 🎉", "Ελληνικά", "tab\tin block"):
        assert safe_text(raw, multiline=True).plain == raw


@given(st.text())
def test_nothing_unsafe_survives(raw: str) -> None:
    out = safe_text(raw, multiline=True, max_line=10_000, max_lines=10_000).plain
    assert not any(needs_escape(ch, multiline=True) for ch in out)
    assert not any(needs_escape(ch) for ch in escape_plain(raw, limit=None))
