"""``undo.toml`` in the configuration directory: whether checkpoints are taken, what is skipped, how long
they are kept, and what a failed checkpoint does to the call.

A separate file (not a policy section) because it is the daemon's own housekeeping, read once at start:
no rule or mode depends on it. The configuration directory is a protected path, so agents cannot edit it.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

FILE_NAME = "undo.toml"
DEFAULT_EXCLUDE = (
    "node_modules/",
    ".venv/",
    "venv/",
    "__pycache__/",
    ".mypy_cache/",
    ".pytest_cache/",
    ".ruff_cache/",
    ".tox/",
    "target/",
    "dist/",
    "build/",
    ".next/",
    ".cache/",
)


@dataclass(frozen=True)
class UndoSettings:
    enabled: bool = True
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE  # gitignore patterns, on top of the workspace's .gitignore
    keep_calls: int = 2000  # checkpoints kept per workspace (older ones are dropped)
    keep_days: float = 14.0  # checkpoints older than this are dropped
    timeout: float = 10.0  # seconds a call's allow may wait for its checkpoint
    on_failure: Literal["allow", "deny"] = "allow"  # a checkpoint that failed or timed out
    watch: bool = True  # an inotify watcher per workspace feeds git the changed paths (Linux; else a full scan)
    watch_max_dirs: int = 10_000  # directories watched per workspace; more: full scans
    watch_workspaces: int = 16  # workspaces watched at once (the least recently checkpointed stop first)
    watch_rescan: float = 300.0  # seconds: a full scan at least this often (what inotify cannot see); 0 never
    errors: list[str] = field(default_factory=list)


def load(config_dir: Path) -> UndoSettings:
    """The settings, or the defaults with the errors said (a bad file never stops the daemon)."""
    path = config_dir / FILE_NAME
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return UndoSettings()
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        return UndoSettings(errors=[f"{path}: {e}; using the defaults"])
    return parse(doc.get("undo", doc), str(path))


def parse(doc: object, where: str = FILE_NAME) -> UndoSettings:
    base = UndoSettings()
    if not isinstance(doc, dict):
        return UndoSettings(errors=[f"{where}: [undo] must be a table"])
    errors: list[str] = []

    def get(key: str, kind: type | tuple[type, ...], default: object) -> object:
        value = doc.get(key, default)
        if isinstance(value, bool) and kind is not bool and bool not in (kind if isinstance(kind, tuple) else ()):
            errors.append(f"{where}: {key} must be a {kind}")
            return default
        if not isinstance(value, kind):
            errors.append(f"{where}: {key} has the wrong type")
            return default
        return value

    unknown = sorted(set(doc) - {f for f in UndoSettings.__dataclass_fields__ if f != "errors"} - {"extra_exclude"})
    errors += [f"{where}: unknown setting {k!r}" for k in unknown]
    exclude = get("exclude", list, list(base.exclude))
    extra = get("extra_exclude", list, [])
    patterns = tuple(str(x) for x in [*exclude, *extra] if isinstance(x, str) and x and "\n" not in x)  # type: ignore[misc]
    keep_calls = int(get("keep_calls", int, base.keep_calls))  # type: ignore[call-overload]
    keep_days = float(get("keep_days", (int, float), base.keep_days))  # type: ignore[arg-type]
    timeout = float(get("timeout", (int, float), base.timeout))  # type: ignore[arg-type]
    on_failure = get("on_failure", str, base.on_failure)
    if on_failure not in ("allow", "deny"):
        errors.append(f"{where}: on_failure must be allow or deny")
        on_failure = base.on_failure
    if not 1 <= keep_calls <= 1_000_000:
        errors.append(f"{where}: keep_calls must be 1..1000000")
        keep_calls = base.keep_calls
    watch_max_dirs = int(get("watch_max_dirs", int, base.watch_max_dirs))  # type: ignore[call-overload]
    watch_workspaces = int(get("watch_workspaces", int, base.watch_workspaces))  # type: ignore[call-overload]
    watch_rescan = float(get("watch_rescan", (int, float), base.watch_rescan))  # type: ignore[arg-type]
    if not 1 <= watch_max_dirs <= 1_000_000:
        errors.append(f"{where}: watch_max_dirs must be 1..1000000")
        watch_max_dirs = base.watch_max_dirs
    if not 0 <= watch_workspaces <= 1000:
        errors.append(f"{where}: watch_workspaces must be 0..1000")
        watch_workspaces = base.watch_workspaces
    if not 0 < timeout <= 600:
        errors.append(f"{where}: timeout must be more than 0 and at most 600 seconds")
        timeout = base.timeout
    return UndoSettings(
        enabled=bool(get("enabled", bool, True)),
        exclude=patterns,
        keep_calls=keep_calls,
        keep_days=max(0.0, keep_days),
        timeout=timeout,
        on_failure=on_failure,
        watch=bool(get("watch", bool, True)),
        watch_max_dirs=watch_max_dirs,
        watch_workspaces=watch_workspaces,
        watch_rescan=max(0.0, watch_rescan),
        errors=errors,
    )
