"""Rewinding a workspace to a snapshot, safely.

Every path is reached from an open descriptor of the workspace root, one component at a time, with
``O_NOFOLLOW``: a symlink planted in the workspace (``src -> /home/me/.ssh``) is never followed out of it,
it is removed as a file of its own or the path is refused. Files are written to a new temporary name
beside their target and renamed over it (a symlink at the target is replaced, not written through); their
bytes are streamed from git in chunks, so a large binary never sits in memory. Modes: the executable bit
is what a snapshot records (as git does); the other permission bits of a file that exists are kept.
"""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Callable
from dataclasses import dataclass, field

from nexusd.nofollow import DIR_FLAGS as _DIR_FLAGS
from nexusd.nofollow import UnsafePath, open_parent
from nexusd.undo.shadow import Entry, Shadow, display

GITLINK = "160000"


class RestoreError(Exception):
    """One path could not be restored; the message names it and why."""


@dataclass
class Plan:
    """What a rewind changes: paths written (created or replaced) and paths deleted."""

    writes: list[tuple[str, Entry]] = field(default_factory=list)
    deletes: list[str] = field(default_factory=list)

    def paths(self) -> list[str]:
        return sorted({*(p for p, _ in self.writes), *self.deletes})

    def describe(self, current: dict[str, Entry]) -> list[tuple[str, str]]:
        """(action, path) for people: create, restore, delete, mode."""
        out: list[tuple[str, str]] = [(_action(current.get(p), e), display(p)) for p, e in self.writes]
        out += [("delete", display(p)) for p in self.deletes]
        return sorted(out, key=lambda x: x[1])


def _action(old: Entry | None, new: Entry) -> str:
    if old is None:
        return "create"
    if old.sha == new.sha and old.mode != new.mode:
        return "mode"
    return "restore"


def selector(prefixes: list[str]) -> Callable[[str], bool] | None:
    """Paths equal to, or below, one of ``prefixes`` (workspace-relative); None: every path."""
    if not prefixes:
        return None
    clean = [p.strip("/") for p in prefixes]
    return lambda path: any(path == p or path.startswith(p + "/") or not p for p in clean)


def plan(current: dict[str, Entry], target: dict[str, Entry], only: Callable[[str], bool] | None = None) -> Plan:
    """The changes that turn ``current`` into ``target`` (restricted to ``only``); submodules are left alone."""
    result = Plan()
    for path, entry in target.items():
        if entry.mode == GITLINK or (only is not None and not only(path)):
            continue
        if current.get(path) != entry:
            result.writes.append((path, entry))
    for path, entry in current.items():
        if entry.mode == GITLINK or (only is not None and not only(path)):
            continue
        if path not in target:
            result.deletes.append(path)
    result.writes.sort()
    result.deletes.sort(key=lambda p: (-p.count("/"), p))
    return result


def _walk(root_fd: int, rel: str, create: bool) -> tuple[int, str]:
    """``nofollow.open_parent``, its refusals as this module's."""
    try:
        return open_parent(root_fd, rel, create=create)
    except UnsafePath as e:
        raise RestoreError(e.describe(str)) from None


def _mode_for(entry: Entry, old: os.stat_result | None) -> int:
    executable = entry.mode == "100755"
    if old is None or not stat.S_ISREG(old.st_mode):
        return 0o755 if executable else 0o644
    perm = stat.S_IMODE(old.st_mode) & 0o7777
    if executable:
        return perm | ((perm & 0o444) >> 2) | 0o100
    return perm & ~0o111


def _lstat(dfd: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _write(shadow: Shadow, root_fd: int, path: str, entry: Entry) -> None:
    dfd, name = _walk(root_fd, path, create=True)
    try:
        old = _lstat(dfd, name)
        if old is not None and stat.S_ISDIR(old.st_mode):
            try:
                os.rmdir(name, dir_fd=dfd)
            except OSError:
                raise RestoreError(f"{path}: a directory with other files is in the way") from None
        tmp = f".{name[:200]}.nexus-rewind-{secrets.token_hex(4)}"
        if entry.mode == "120000":
            os.symlink(os.fsdecode(shadow.blob(entry.sha)), tmp, dir_fd=dfd)
        else:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dfd)
            try:
                with os.fdopen(fd, "wb", closefd=True) as f:
                    for chunk in shadow.blob_chunks(entry.sha):
                        f.write(chunk)
                    f.flush()
                    os.fchmod(f.fileno(), _mode_for(entry, old))
            except BaseException:
                os.unlink(tmp, dir_fd=dfd)
                raise
        os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
    finally:
        os.close(dfd)


def _delete(root_fd: int, path: str) -> None:
    try:
        dfd, name = _walk(root_fd, path, create=False)
    except FileNotFoundError:
        return  # its directory is gone already
    try:
        st = _lstat(dfd, name)
        if st is None:
            return
        if stat.S_ISDIR(st.st_mode):
            raise RestoreError(f"{path}: now a directory; left alone")
        os.unlink(name, dir_fd=dfd)
    finally:
        os.close(dfd)


def _prune(root_fd: int, deleted: list[str], keep: set[str]) -> None:
    """Remove directories a deletion left empty, unless the target needs them (or they hold other files)."""
    dirs = sorted({p.rsplit("/", 1)[0] for p in deleted if "/" in p} - keep, key=lambda d: (-d.count("/"), d))
    seen: set[str] = set()
    for d in dirs:
        while d and d not in seen and d not in keep:
            seen.add(d)
            try:
                dfd, name = _walk(root_fd, d, create=False)
            except (OSError, RestoreError):
                break
            try:
                os.rmdir(name, dir_fd=dfd)
            except OSError:
                break
            finally:
                os.close(dfd)
            d = d.rsplit("/", 1)[0] if "/" in d else ""


def apply(shadow: Shadow, p: Plan, target: dict[str, Entry]) -> list[str]:
    """Carry the plan out; returns one message per path that could not be restored (the rest are)."""
    errors: list[str] = []
    root_fd = os.open(shadow.workspace, _DIR_FLAGS)
    try:
        for path in p.deletes:
            try:
                _delete(root_fd, path)
            except (OSError, RestoreError) as e:
                errors.append(display(str(e)) if isinstance(e, RestoreError) else f"{display(path)}: {e.strerror or e}")
        keep = {d for path in target for d in _parents(path)}
        _prune(root_fd, p.deletes, keep)
        for path, entry in p.writes:
            try:
                _write(shadow, root_fd, path, entry)
            except (OSError, RestoreError) as e:
                errors.append(display(str(e)) if isinstance(e, RestoreError) else f"{display(path)}: {e.strerror or e}")
    finally:
        os.close(root_fd)
    return errors


def _parents(path: str) -> list[str]:
    parts = path.split("/")[:-1]
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]
