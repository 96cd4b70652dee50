"""``<state-dir>/learned.toml``: rules people answered with "always" / "never".

Written with tomlkit so comments a person added survive, through a temporary file that is fsynced
and renamed over the old one (and the directory fsynced), so a crash at any instant leaves either the
old file or the new one, never a torn one.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import tomlkit
import tomlkit.exceptions
from tomlkit.items import Array, Table

from nexusd.atomicfile import write_atomic

HEADER = (
    "Rules learned from answers with scope always / never (nexusd writes this file).\n"
    "Edit freely: comments are kept. Remove a rule with `nexusctl rules remove`."
)


# write_atomic's temporary files: ``.<name>.<8 characters of mkstemp>.tmp``
_TEMP = re.compile(r"^\..+\.[a-z0-9_]{8}\.tmp$")


def clean_stale_temps(state_dir: Path) -> list[Path]:
    """Remove the temporary files that a kill -9 in the middle of a write left in the state directory (and
    its ``lastgood/``): learned rules, trust, grants, the audit checkpoint all write through ``write_atomic``.
    Called once at the daemon's start, when nothing of ours is writing there (the lock is ours)."""
    removed: list[Path] = []
    for d in (state_dir, state_dir / "lastgood"):
        try:
            names = os.listdir(d)
        except OSError:
            continue
        for name in names:
            if not _TEMP.match(name):
                continue
            path = d / name
            try:
                if path.is_symlink() or not path.is_file():
                    continue  # only the regular files write_atomic makes
                path.unlink()
            except OSError:
                continue
            removed.append(path)
    return removed


def _load(path: Path) -> tomlkit.TOMLDocument:
    if path.exists():
        try:
            return tomlkit.parse(path.read_text(encoding="utf-8"))
        except (tomlkit.exceptions.ParseError, UnicodeDecodeError) as e:
            # Never rewrite a file we cannot read: a person's edits would be lost. Say which file.
            raise ValueError(f"{path} is not valid TOML ({e}); fix or remove it, nothing was changed") from e
    doc = tomlkit.document()
    for line in HEADER.splitlines():
        doc.add(tomlkit.comment(line))
    return doc


def _array(doc: tomlkit.TOMLDocument, kind: str) -> Array:
    perms = doc.get("permissions")
    if perms is None:
        perms = tomlkit.table()
        doc["permissions"] = perms
    if not isinstance(perms, Table | dict):
        raise ValueError("learned.toml: [permissions] is not a table")
    arr = perms.get(kind)
    if arr is None:
        arr = tomlkit.array()
        arr.multiline(True)
        perms[kind] = arr
    if not isinstance(arr, Array | list):
        raise ValueError(f"learned.toml: permissions.{kind} is not an array")
    return arr  # type: ignore[return-value]


def _text_of(item: object) -> str | None:
    if isinstance(item, str):
        return str(item)
    if isinstance(item, dict):
        r = item.get("rule")
        return str(r) if isinstance(r, str) else None
    return None


def add_rules(path: Path, kind: str, rules: list[str]) -> list[str]:
    """Append rules not yet present; returns the ones added."""
    doc = _load(path)
    arr = _array(doc, kind)
    present = {_text_of(x) for x in arr}
    added = [r for r in dict.fromkeys(rules) if r not in present]
    for r in added:
        arr.append(r)
    if added:
        write_atomic(path, tomlkit.dumps(doc))
    return added


def remove_rule(path: Path, kind: str, rule: str) -> bool:
    if not path.exists():
        return False
    doc = _load(path)
    arr = _array(doc, kind)
    for i, x in enumerate(list(arr)):
        if _text_of(x) == rule:
            del arr[i]
            write_atomic(path, tomlkit.dumps(doc))
            return True
    return False
