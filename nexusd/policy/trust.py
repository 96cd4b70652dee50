"""Folder trust (``<state-dir>/trust.toml``), separate from per-call permission: trust says whether a
project's own settings may act in this workspace at all, permission whether one call may run.

A workspace (its git root, else the cwd) is trusted, distrusted, or unknown. Only in a trusted
workspace do the project's allow rules, hooks, classifier, modes and sandbox room apply; its deny and
ask rules always apply.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

import tomlkit
import tomlkit.exceptions

from nexusd.atomicfile import write_atomic

State = Literal["trusted", "untrusted", "unknown"]


class TrustStore:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._cache: tuple[float, dict[str, list[str]]] | None = None

    def _read(self) -> dict[str, list[str]]:
        try:
            mtime = self.path.stat().st_mtime_ns
        except FileNotFoundError:
            return {"trusted": [], "untrusted": []}
        if self._cache and self._cache[0] == mtime:
            return self._cache[1]
        doc = tomlkit.parse(self.path.read_text(encoding="utf-8")).unwrap()
        data = {k: [str(x) for x in doc.get(k, []) if isinstance(x, str)] for k in ("trusted", "untrusted")}
        self._cache = (mtime, data)
        return data

    def state(self, workspace: str) -> State:
        try:
            data = self._read()
        except Exception:  # an unreadable trust file trusts nothing
            return "untrusted"
        ws = os.path.normpath(workspace)
        if ws in data["untrusted"]:
            return "untrusted"
        if ws in data["trusted"]:
            return "trusted"
        return "unknown"

    def trusted(self) -> list[str]:
        return list(self._read()["trusted"])

    def set(self, workspace: str, state: State) -> None:
        ws = os.path.normpath(workspace)
        if not os.path.isabs(ws):
            raise ValueError(f"trust needs an absolute path, not {workspace!r}")
        try:
            doc = tomlkit.parse(self.path.read_text(encoding="utf-8")) if self.path.exists() else tomlkit.document()
        except (tomlkit.exceptions.ParseError, UnicodeDecodeError) as e:
            raise ValueError(f"{self.path} is not valid TOML ({e}); fix or remove it, nothing was changed") from e
        if not self.path.exists():
            doc.add(tomlkit.comment("Folder trust (nexusctl trust add|remove|list). Comments are kept."))
        for key in ("trusted", "untrusted"):
            arr = doc.get(key)
            if arr is None:
                arr = tomlkit.array()
                arr.multiline(True)
                doc[key] = arr
            for i in reversed(range(len(arr))):
                if arr[i] == ws:
                    del arr[i]
            if key == state:
                arr.append(ws)
        write_atomic(self.path, tomlkit.dumps(doc))
        self._cache = None
