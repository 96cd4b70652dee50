"""JSON with comments, as Gemini CLI (and VS Code-style tools) read it, edited in place.

``loads`` accepts ``//`` and ``/* */`` comments and trailing commas. ``edit`` turns a file's text into text
holding a new value while changing only what differs: members and array items that did not change keep their
bytes (comments, indentation, key order, number spelling), new members are inserted in the file's own
indentation, removed ones are cut with their commas. A person's settings file stays as they wrote it apart from
our entries (issue 38: Gemini's commented settings were refused, Claude's were re-indented).
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from typing import Any


class JSONCError(ValueError):
    pass


@dataclass
class Node:
    start: int
    end: int  # exclusive
    value: Any
    kind: str  # "object" | "array" | "scalar"
    keys: list[str] = field(default_factory=list)  # object: member keys, in order
    key_starts: list[int] = field(default_factory=list)  # object: where each member (its key) starts
    children: list[Node] = field(default_factory=list)  # object: member values; array: items
    trailing_comma: int | None = None  # position of a comma after the last member/item


class _Parser:
    def __init__(self, text: str) -> None:
        self.s = text
        self.i = 0

    def fail(self, what: str) -> JSONCError:
        line = self.s.count("\n", 0, self.i) + 1
        col = self.i - (self.s.rfind("\n", 0, self.i) + 1) + 1
        return JSONCError(f"{what} at line {line} column {col}")

    def skip(self) -> None:
        s, n = self.s, len(self.s)
        while self.i < n:
            c = s[self.i]
            if c in " \t\r\n\ufeff":
                self.i += 1
            elif s.startswith("//", self.i):
                nl = s.find("\n", self.i)
                self.i = n if nl < 0 else nl + 1
            elif s.startswith("/*", self.i):
                close = s.find("*/", self.i + 2)
                if close < 0:
                    raise self.fail("unterminated comment")
                self.i = close + 2
            else:
                return

    def value(self) -> Node:
        self.skip()
        if self.i >= len(self.s):
            raise self.fail("unexpected end")
        c = self.s[self.i]
        if c == "{":
            return self.obj()
        if c == "[":
            return self.arr()
        start = self.i
        try:
            val, end = _SCALAR(self.s, self.i)
        except (json.JSONDecodeError, StopIteration):
            raise self.fail("not a JSON value") from None
        self.i = end
        return Node(start, end, val, "scalar")

    def obj(self) -> Node:
        node = Node(self.i, -1, {}, "object")
        self.i += 1
        while True:
            self.skip()
            if self.s.startswith("}", self.i):
                self.i += 1
                node.end = self.i
                return node
            if not self.s.startswith('"', self.i):
                raise self.fail("expected a quoted key")
            kstart = self.i
            try:
                key, self.i = _SCALAR(self.s, self.i)
            except (json.JSONDecodeError, StopIteration):
                raise self.fail("bad key") from None
            self.skip()
            if not self.s.startswith(":", self.i):
                raise self.fail("expected ':'")
            self.i += 1
            child = self.value()
            if key in node.value:
                raise self.fail(f"duplicate key {key!r}")
            node.value[key] = child.value
            node.keys.append(key)
            node.key_starts.append(kstart)
            node.children.append(child)
            self.skip()
            if self.s.startswith(",", self.i):
                comma = self.i
                self.i += 1
                self.skip()
                if self.s.startswith("}", self.i):
                    node.trailing_comma = comma
            elif not self.s.startswith("}", self.i):
                raise self.fail("expected ',' or '}'")

    def arr(self) -> Node:
        node = Node(self.i, -1, [], "array")
        self.i += 1
        while True:
            self.skip()
            if self.s.startswith("]", self.i):
                self.i += 1
                node.end = self.i
                return node
            child = self.value()
            node.value.append(child.value)
            node.children.append(child)
            self.skip()
            if self.s.startswith(",", self.i):
                comma = self.i
                self.i += 1
                self.skip()
                if self.s.startswith("]", self.i):
                    node.trailing_comma = comma
            elif not self.s.startswith("]", self.i):
                raise self.fail("expected ',' or ']'")


_SCALAR = json.JSONDecoder().raw_decode


def parse(text: str) -> Node:
    p = _Parser(text)
    node = p.value()
    p.skip()
    if p.i != len(text):
        raise p.fail("text after the value")
    return node


def loads(text: str) -> Any:
    """JSON with comments and trailing commas. Raises JSONCError (a ValueError) naming line and column."""
    return parse(text).value


# ------------------------------------------------------------------------------------------------ editing


def _line_indent(text: str, pos: int) -> str:
    start = text.rfind("\n", 0, pos) + 1
    prefix = text[start:pos]
    return prefix[: len(prefix) - len(prefix.lstrip(" \t"))]


def _unit(text: str, root: Node) -> str:
    """The file's indentation step (two spaces when nothing tells)."""
    for n in (root, *root.children):
        if n.kind == "object" and n.key_starts:
            inner, outer = _line_indent(text, n.key_starts[0]), _line_indent(text, n.start)
            if inner.startswith(outer) and len(inner) > len(outer):
                return inner[len(outer) :]
    return "  "


def _dump(value: Any, indent: str, unit: str) -> str:
    """``value`` as JSON for a place whose line is indented by ``indent``."""
    text = json.dumps(value, indent=unit, ensure_ascii=False)
    return text.replace("\n", "\n" + indent)


Edit = tuple[int, int, str]


def _edit(text: str, node: Node, new: Any, unit: str, out: list[Edit]) -> None:
    if node.value == new and type(node.value) is type(new):
        return
    if node.kind == "object" and isinstance(new, dict) and node.keys and new:
        _edit_object(text, node, new, unit, out)
        return
    if (
        node.kind == "array"
        and isinstance(new, list)
        and node.children
        and new
        and _edit_array(text, node, new, unit, out)
    ):
        return
    out.append((node.start, node.end, _dump(new, _line_indent(text, node.start), unit)))


def _edit_object(text: str, node: Node, new: dict[str, Any], unit: str, out: list[Edit]) -> None:
    keep = [k in new for k in node.keys]
    if not any(keep):
        out.append((node.start, node.end, _dump(new, _line_indent(text, node.start), unit)))
        return
    if list(new)[: sum(keep)] != [k for k in node.keys if k in new]:
        # keys kept in a different order: not something we do; fall back to rewriting this object
        out.append((node.start, node.end, _dump(new, _line_indent(text, node.start), unit)))
        return
    n = len(node.keys)
    i = 0
    while i < n:
        if keep[i]:
            _edit(text, node.children[i], new[node.keys[i]], unit, out)
            i += 1
            continue
        j = i
        while j + 1 < n and not keep[j + 1]:
            j += 1
        if i > 0:  # from the end of the kept member before: its comma goes with the removed run
            out.append((node.children[i - 1].end, node.children[j].end, ""))
        else:  # a leading run: up to where the next kept member starts
            out.append((node.key_starts[0], node.key_starts[j + 1], ""))
        i = j + 1
    added = [k for k in new if k not in node.value]
    if added:
        last = max(x for x in range(n) if keep[x])
        indent = _line_indent(text, node.key_starts[last])
        body = "".join(f",\n{indent}{json.dumps(k, ensure_ascii=False)}: {_dump(new[k], indent, unit)}" for k in added)
        out.append((node.children[last].end, node.children[last].end, body))


def _edit_array(text: str, node: Node, new: list[Any], unit: str, out: list[Edit]) -> bool:
    """Per-item edits when the change is items changed in place, removed, or appended; False otherwise."""
    old = [json.dumps(v, sort_keys=True) for v in node.value]
    cur = [json.dumps(v, sort_keys=True) for v in new]
    ops = difflib.SequenceMatcher(a=old, b=cur, autojunk=False).get_opcodes()
    edits: list[Edit] = []
    kept = [False] * len(old)
    for tag, i1, i2, j1, j2 in ops:
        if tag == "equal":
            kept[i1:i2] = [True] * (i2 - i1)
        elif tag == "replace" and i2 - i1 == j2 - j1:
            for k in range(i2 - i1):
                _edit(text, node.children[i1 + k], new[j1 + k], unit, edits)
                kept[i1 + k] = True
        elif tag == "insert" and i1 == len(old):
            continue  # appended: below
        elif tag != "delete":
            return False
    if not any(kept):
        return False
    i, n = 0, len(old)
    while i < n:
        if kept[i]:
            i += 1
            continue
        j = i
        while j + 1 < n and not kept[j + 1]:
            j += 1
        if i > 0:
            edits.append((node.children[i - 1].end, node.children[j].end, ""))
        else:
            edits.append((node.children[0].start, node.children[j + 1].start, ""))
        i = j + 1
    appended = [new[j] for tag, i1, _i2, j1, j2 in ops if tag == "insert" and i1 == n for j in range(j1, j2)]
    if appended:
        last = max(x for x in range(n) if kept[x])
        indent = _line_indent(text, node.children[last].start)
        multiline = "\n" in text[node.start : node.end]
        sep = f",\n{indent}" if multiline else ", "
        edits.append(
            (node.children[last].end, node.children[last].end, "".join(sep + _dump(v, indent, unit) for v in appended))
        )
    out.extend(edits)
    return True


def edit(text: str, new: Any) -> str:
    """``text`` (JSON or JSONC holding an object) changed to hold ``new``, touching only what differs.
    Raises JSONCError when ``text`` does not parse; the result always parses back to ``new``."""
    root = parse(text)
    unit = _unit(text, root)
    edits: list[Edit] = []
    _edit(text, root, new, unit, edits)
    result = text
    for start, end, repl in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        result = result[:start] + repl + result[end:]
    if loads(result) != new:  # never hand back text that does not say what we meant
        indent = _line_indent(text, root.start)
        result = text[: root.start] + _dump(new, indent, unit) + text[root.end :]
    return result
