"""Untrusted text made safe to show: nothing an agent wrote ever reaches the terminal as a control.

Everything in a request (commands, paths, file contents, URLs, session ids, even the provider name) is
written by a possibly prompt-injected model. It could carry terminal escapes that repaint the screen,
bidirectional overrides that make ``rm -rf ~`` read as something harmless, zero-width characters that
hide a difference, or Rich markup (``[link=…]``) if it were ever parsed. So untrusted text only reaches
widgets as ``rich.text.Text`` built here: invisible and control characters become visible ``\\u202e``
style escapes (highlighted, so a person notices them), very long lines are cut with a marker, and no
markup parser ever sees it.

The daemon's classifier has its own ``escape_for_display``; the TUI may not import the core, so it keeps
this small copy (the two agree on the character classes: Cc, Cf, Zl, Zp, bidi and zero-width).
"""

from __future__ import annotations

import unicodedata

from rich.style import Style
from rich.text import Text

ESCAPE_STYLE = "bold reverse red"
TRUNCATION_STYLE = "italic yellow"
MAX_LINE = 400  # characters shown per line before it is cut; long lines hide what follows them
MAX_LINES = 400  # lines shown per block

# Bidi embeddings/overrides/isolates and marks, and the zero-width family. Most are category Cf, but
# naming them keeps the intent explicit and catches them whatever Unicode version Python ships.
_ALWAYS_ESCAPE = frozenset(
    "\u061c\u200b\u200c\u200d\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
    "\u2060\u2061\u2062\u2063\u2064\u2066\u2067\u2068\u2069\u2028\u2029\ufeff\u180e\u00ad\u115f\u1160\u3164"
)
_ESCAPE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


def needs_escape(ch: str, *, multiline: bool = False) -> bool:
    """True for any character a terminal could interpret or a person could not see."""
    if multiline and ch in "\n\t":
        return False
    if ch in _ALWAYS_ESCAPE:
        return True
    if ch == " ":
        return False
    if ch.isspace() and ch != " ":  # other spaces (NBSP, ideographic...) look like a space but are not
        return ch not in "\u3000"  # the ideographic space is ordinary in CJK text
    return unicodedata.category(ch) in _ESCAPE_CATEGORIES


def _escape_char(ch: str) -> str:
    code = ord(ch)
    if ch == "\n":
        return "\\n"
    if ch == "\t":
        return "\\t"
    if ch == "\r":
        return "\\r"
    if ch == "\x1b":
        return "\\e"
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def has_hidden(text: str) -> bool:
    """Whether ``text`` holds anything that will be shown escaped (worth a warning line)."""
    return any(needs_escape(ch, multiline=True) for ch in text)


def escape_plain(text: str, *, limit: int | None = MAX_LINE) -> str:
    """A single-line, printable rendering for plain-string contexts (notifications, titles, table keys)."""
    out = "".join(_escape_char(ch) if needs_escape(ch) else ch for ch in text)
    if limit is not None and len(out) > limit:
        out = out[:limit] + f"… (+{len(out) - limit} chars)"
    return out


def safe_text(
    text: str,
    *,
    style: str | Style = "",
    multiline: bool = False,
    max_line: int = MAX_LINE,
    max_lines: int = MAX_LINES,
) -> Text:
    """Untrusted ``text`` as a ``Text`` whose every character is printable, escapes highlighted.

    Single-line mode escapes newlines too, so a value cannot fake extra rows in a table or header.
    """
    result = Text(style=style, no_wrap=False)
    lines = text.split("\n") if multiline else [text]
    for n, line in enumerate(lines):
        if n >= max_lines:
            result.append(f"\n… {len(lines) - max_lines} more lines not shown", TRUNCATION_STYLE)
            break
        if n:
            result.append("\n")
        run: list[str] = []
        for i, ch in enumerate(line):
            if i >= max_line:
                if run:
                    result.append("".join(run))
                    run = []
                result.append(f"… (+{len(line) - i} chars on this line)", TRUNCATION_STYLE)
                break
            if needs_escape(ch, multiline=multiline):
                if run:
                    result.append("".join(run))
                    run = []
                result.append(_escape_char(ch), ESCAPE_STYLE)
            else:
                run.append(ch)
        if run:
            result.append("".join(run))
    return result
