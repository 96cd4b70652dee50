"""Merge ``nexus-hook codex`` into Codex CLI's ``config.toml``, keeping the user's comments and layout.

Codex reads inline hooks from ``[[hooks.PreToolUse]]`` / ``[[hooks.PermissionRequest]]`` in
``$CODEX_HOME/config.toml`` (default ``~/.codex``) or a trusted project's ``.codex/config.toml``. It
runs a hook that is not managed only once that exact definition is *trusted*: a
``[hooks.state."<config path>:<event>:<group>:<handler>"]`` table whose ``trusted_hash`` is the sha256 of
the definition (what ``/hooks`` writes when a person trusts it). An untrusted or changed hook is skipped
without a word, which for a gate means every call runs unasked; so install writes that trust entry
itself (the person running ``nexusctl install codex`` is the one who trusts it) and the end-to-end test
checks the real CLI runs the hook without ``--dangerously-bypass-hook-trust``.

Trust keys carry the group's position. Our groups are appended after the user's, so installing shifts
nobody's key; removing ours re-keys the trust entries of groups that came after them, so a person's
trusted hooks stay trusted.

tomlkit keeps comments, order and formatting; a file it cannot parse, or whose ``hooks`` has shapes we
do not expect, is never touched.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.items import AoT, Array, Table
from tomlkit.toml_document import TOMLDocument

EVENTS = {"PreToolUse": "pre_tool_use", "PermissionRequest": "permission_request"}
DEFAULT_TIMEOUT_S = 600  # Codex's default hook timeout, part of the hashed definition when unset
HOOK_MARK = "nexus-hook"


class CodexSettingsError(Exception):
    """A config.toml we must not touch."""


def config_path(project: Path | None, home: Path | None = None, env: dict[str, str] | None = None) -> Path:
    """``DIR/.codex/config.toml`` for a project, else ``$CODEX_HOME/config.toml`` (``~/.codex``)."""
    if project is not None:
        return project / ".codex" / "config.toml"
    codex_home = (os.environ if env is None else env).get("CODEX_HOME") if home is None else None
    if codex_home:
        return Path(codex_home) / "config.toml"
    return (home or Path.home()) / ".codex" / "config.toml"


# --------------------------------------------------------------------------- trust


def handler_hash(event: str, group: dict[str, Any], handler: dict[str, Any]) -> str:
    """Codex's ``trusted_hash`` of one command handler: sha256 over the canonical JSON (sorted keys, no
    spaces) of ``{event_name, matcher?, hooks: [normalised handler]}``; unset optional fields are left out,
    ``timeout`` defaults to 600 and ``async`` to false (Codex 0.169 ``hooks/src/engine/discovery.rs``)."""
    normalised: dict[str, Any] = {
        "type": "command",
        "command": handler["command"],
        "timeout": max(int(handler.get("timeout", DEFAULT_TIMEOUT_S)), 1),
        "async": bool(handler.get("async", False)),
    }
    if handler.get("statusMessage") is not None:
        normalised["statusMessage"] = handler["statusMessage"]
    identity: dict[str, Any] = {"event_name": EVENTS[event], "hooks": [normalised]}
    if group.get("matcher") is not None:
        identity["matcher"] = group["matcher"]
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def state_key(path: Path, event: str, group: int, handler: int) -> str:
    return f"{path}:{EVENTS[event]}:{group}:{handler}"


# --------------------------------------------------------------------------- reading the document


def parse(text: str, path: Path) -> TOMLDocument:
    try:
        return tomlkit.parse(text)
    except Exception as exc:  # tomlkit raises its own ParseError family, and ValueError on odd input
        raise CodexSettingsError(f"{path} is not valid TOML ({exc}); not touching it") from None


def _hooks(doc: TOMLDocument, *, create: bool) -> Table | None:
    hooks = doc.get("hooks")
    if hooks is None:
        if not create:
            return None
        doc["hooks"] = tomlkit.table(is_super_table=True)
        return doc["hooks"]
    if not isinstance(hooks, Table | dict):
        raise CodexSettingsError("'hooks' is not a table")
    return hooks  # type: ignore[return-value]


def _groups(hooks: Table, event: str) -> list[Any]:
    groups = hooks.get(event)
    if groups is None:
        return []
    if not isinstance(groups, AoT | Array | list):
        raise CodexSettingsError(f"'hooks.{event}' is not an array of tables")
    for group in groups:
        if not isinstance(group, dict) or not isinstance(group.get("hooks", []), list):
            raise CodexSettingsError(f"'hooks.{event}' holds an entry that is not a matcher group")
    return list(groups)


def _is_ours(handler: Any) -> bool:
    return isinstance(handler, dict) and isinstance(handler.get("command"), str) and HOOK_MARK in handler["command"]


def _state(hooks: Table, *, create: bool) -> Table | None:
    state = hooks.get("state")
    if state is None:
        if not create:
            return None
        hooks["state"] = tomlkit.table(is_super_table=True)
        return hooks["state"]
    if not isinstance(state, Table | dict):
        raise CodexSettingsError("'hooks.state' is not a table")
    return state  # type: ignore[return-value]


_KEY = re.compile(r"^(?P<source>.*):(?P<event>[a-z_]+):(?P<group>\d+):(?P<handler>\d+)$")


# --------------------------------------------------------------------------- transforms


def uninstall(doc: TOMLDocument, path: Path) -> TOMLDocument:
    """Remove our handlers (and their trust entries); re-key the trust of handlers that moved up."""
    hooks = _hooks(doc, create=False)
    if hooks is None:
        return doc
    state = _state(hooks, create=False)
    for event, label in EVENTS.items():
        groups = _groups(hooks, event)
        if not any(_is_ours(h) for g in groups for h in g.get("hooks", [])):
            continue
        moves: dict[tuple[int, int], tuple[int, int] | None] = {}
        kept: list[Any] = []
        for gi, group in enumerate(groups):
            handlers = list(group.get("hooks", []))
            rest = [h for h in handlers if not _is_ours(h)]
            new_gi = len(kept)
            hi_new = 0
            for hi, h in enumerate(handlers):
                if _is_ours(h) or not rest:
                    moves[(gi, hi)] = None
                else:
                    moves[(gi, hi)] = (new_gi, hi_new)
                    hi_new += 1
            if not rest:
                continue
            if len(rest) != len(handlers):
                group["hooks"] = rest
            kept.append(group)
        if kept:
            existing = hooks[event]
            for gi in reversed(range(len(groups))):
                if not any(h is g for h in kept for g in (groups[gi],)):
                    del existing[gi]  # in place: the user's groups keep their comments and layout
        else:
            del hooks[event]
        if state is not None:
            _rekey(state, path, label, moves)
    if state is not None and not state:
        del hooks["state"]
    if not hooks:
        del doc["hooks"]
    return doc


def _rekey(state: Table, path: Path, label: str, moves: dict[tuple[int, int], tuple[int, int] | None]) -> None:
    source = str(path)
    found: dict[tuple[int, int], tuple[str, Any]] = {}
    for key in list(state.keys()):
        m = _KEY.match(str(key))
        if m and m["source"] == source and m["event"] == label:
            found[(int(m["group"]), int(m["handler"]))] = (str(key), state[key])
    for _key, _value in found.values():
        del state[_key]
    for old, (_key, value) in sorted(found.items()):
        new = moves.get(old, old)
        if new is not None:
            state[f"{source}:{label}:{new[0]}:{new[1]}"] = value


def install(doc: TOMLDocument, path: Path, command: str, timeout: int) -> TOMLDocument:
    """Append our PreToolUse and PermissionRequest groups (after the user's) and trust them."""
    doc = uninstall(doc, path)
    hooks = _hooks(doc, create=True)
    assert hooks is not None
    entries: list[tuple[str, int, dict[str, Any], dict[str, Any]]] = []
    for event in EVENTS:
        groups = _groups(hooks, event)
        handler = {"type": "command", "command": command, "timeout": timeout}
        group: dict[str, Any] = {}
        entries.append((event, len(groups), group, handler))
        table = tomlkit.table()
        inner = tomlkit.aot()
        inner.append(tomlkit.item(handler))
        table["hooks"] = inner
        existing = hooks.get(event)
        if existing is None:
            aot = tomlkit.aot()
            aot.append(table)
            hooks[event] = aot
        elif isinstance(existing, AoT):
            existing.append(table)
        else:  # an inline array (`PreToolUse = [{…}]`): keep its style
            inline = tomlkit.inline_table()
            entry = tomlkit.inline_table()
            entry.update(handler)
            handlers = tomlkit.array()
            handlers.append(entry)
            inline["hooks"] = handlers
            existing.append(inline)
    state = _state(hooks, create=True)
    assert state is not None
    for event, gi, group, handler in entries:
        trusted = tomlkit.table()
        trusted["trusted_hash"] = handler_hash(event, group, handler)
        state[state_key(path, event, gi, 0)] = trusted
    return doc


# --------------------------------------------------------------------------- planning


def read(path: Path) -> tuple[TOMLDocument, str | None]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return tomlkit.document(), None
    return parse(text, path), text


def plan_text(
    path: Path, transform: Callable[[TOMLDocument], TOMLDocument], backups: list[Path], *, restore: bool
) -> tuple[str | None, str | None]:
    """(old text, new text) for ``transform``; None texts mean no file. With ``restore``, a result equal
    (as data) to a backup is that backup's exact text, and an empty result removes the file."""
    doc, old_text = read(path)
    before = doc.unwrap()
    try:
        new_doc = transform(doc)
        after = new_doc.unwrap()
    except CodexSettingsError:
        raise
    except Exception as exc:  # a shape tomlkit cannot edit in place (an inline `hooks = {…}` table …)
        raise CodexSettingsError(f"{path}: cannot merge into its [hooks] as written ({exc}); not touching it") from None
    if after == before:
        return old_text, old_text
    if restore:
        if not after:
            return old_text, None
        for backup in backups:
            try:
                text = backup.read_text(encoding="utf-8")
                if tomlkit.parse(text).unwrap() == after:
                    return old_text, text
            except Exception:  # an unreadable or unparsable backup is simply not the one
                continue
    text = tomlkit.dumps(new_doc)
    try:
        faithful = tomlkit.parse(text).unwrap() == after
    except Exception:
        faithful = False
    if not faithful:  # never write a file that would not read back as what we meant
        raise CodexSettingsError(f"{path}: the merged file would not read back as intended; not touching it")
    return old_text, text
