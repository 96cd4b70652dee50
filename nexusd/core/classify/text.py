"""Text hygiene: characters that hide what a command or path really says.

Bidirectional controls reorder what a person sees (Trojan Source); zero-width characters make two
different strings look the same; raw control characters can rewrite a terminal. Such input is never
auto-allowed and is always shown escaped.
"""

from __future__ import annotations

import re

# bidi embeddings/overrides/isolates and marks; zero-width and invisible formatting characters
_HIDDEN = (
    "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"  # bidi
    "\u00ad\u034f\u115f\u1160\u17b4\u17b5\u180e\u200b-\u200d\u2060-\u2064\u206a-\u206f\u3164\ufeff\uffa0"
    "\ufe00-\ufe0f\U000e0000-\U000e007f\U000e0100-\U000e01ef"  # variation selectors, tags
    "\u2028\u2029\u0085"  # line separators a terminal may not show
)
HIDDEN_RE = re.compile(f"[{_HIDDEN}]")
# what escape_for_display rewrites: the hidden set plus C0/C1 controls except tab and newline
_DISPLAY_RE = re.compile(f"[{_HIDDEN}\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f]")
_CONTROL_RE = re.compile("[\\x00-\\x08\\x0b\\x0c\\x0e-\\x1f\\x7f-\\x9f]")

MAX_DISPLAY_LINE = 400
MAX_DISPLAY_LINES = 200


_ANY_HIDDEN_RE = re.compile(f"[{_HIDDEN}\\x00-\\x08\\x0b\\x0c\\x0e-\\x1f\\x7f-\\x9f]")


def hidden_chars(text: str) -> list[str]:
    """The hidden characters in ``text`` as U+XXXX labels (bidi, zero-width, raw controls but CR/LF/TAB)."""
    if (text.isascii() and text.isprintable()) or _ANY_HIDDEN_RE.search(text) is None:
        return []  # the common case: one C-level pass, no lists built
    found = HIDDEN_RE.findall(text) + _CONTROL_RE.findall(text)
    seen: list[str] = []
    for ch in found:
        label = f"U+{ord(ch):04X}"
        if label not in seen:
            seen.append(label)
    return seen


def _escape_char(m: re.Match[str]) -> str:
    ch = m.group(0)
    code = ord(ch)
    if code < 0x100:
        return {"\r": "\\r", "\x1b": "\\e", "\x00": "\\0"}.get(ch, f"\\x{code:02x}")
    return f"\\u{{{code:04x}}}"


def all_displayable(*texts: str) -> bool:
    """Whether ``escape_for_display`` would return every one of ``texts`` unchanged, proven cheaply: printable
    ASCII (no control, bidi, zero-width or newline character can be in it) and no line to cut. False only
    means "escape each one": the caller then does."""
    joined = "".join(texts)
    return joined.isascii() and joined.isprintable() and max(map(len, texts)) <= MAX_DISPLAY_LINE


def escape_for_display(text: str, max_line: int = MAX_DISPLAY_LINE, max_lines: int = MAX_DISPLAY_LINES) -> str:
    """Make ``text`` safe to show a person: escape controls, bidi and zero-width chars; cut long lines."""
    if max_lines > 0 and len(text) <= max_line and "\n" not in text and _DISPLAY_RE.search(text) is None:
        return text  # nearly every word of a call: one scan, nothing to escape or cut
    escaped = _DISPLAY_RE.sub(_escape_char, text)
    lines = escaped.split("\n")
    out = []
    for line in lines[:max_lines]:
        if len(line) > max_line:
            line = f"{line[:max_line]}… [+{len(line) - max_line} chars]"
        out.append(line)
    if len(lines) > max_lines:
        out.append(f"… [+{len(lines) - max_lines} lines]")
    return "\n".join(out)
